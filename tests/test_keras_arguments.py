"""The Keras models' arguments: each public constructor and from_preset argument checked by name before
any work, label names in fit, and a saved config bert_tf did not write refused in one line.

References: the arguments' own names and values (each message names them), a model fitted on label ids
(the same seed: the same weights), and Keras' load_model on a .keras file changed by hand.
"""

import json
import re
import zipfile

import keras
import numpy as np
import pytest

from bert_tf import (
    BertMaskedLM,
    BertMultipleChoice,
    BertPreprocessor,
    BertQuestionAnswerer,
    BertTextClassifier,
    BertTextEmbedder,
    BertTokenClassifier,
    preprocessing,
)
from bert_tf.modeling import BertModel
from bert_tf.models import presets

from conftest import SAMPLE_DIR

VOCAB = str(SAMPLE_DIR / "vocab.txt")
TEXTS = ["the lady was happy", "it rained all day", "she was glad", "so gloomy"] * 2


def _tiny_config():
    return json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor(VOCAB, max_seq_length=16)


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if a folder is read, a tokenizer built or an encoder built."""

    def fail(*args, **kwargs):
        raise AssertionError("work began before the arguments were checked")

    monkeypatch.setattr(presets, "folder_kind", fail)
    monkeypatch.setattr(preprocessing.GraphPreprocessor, "__init__", fail)
    monkeypatch.setattr(BertModel, "__init__", fail)


def _raises_naming(name, value, call):
    """call() raises one ValueError line that starts with the argument and shows its value."""
    with pytest.raises(ValueError) as raised:
        call()
    message = str(raised.value)
    assert message.startswith(name) and "\n" not in message, message
    shown = [repr(item) for item in value] if isinstance(value, list) else [repr(value)[:40]]
    assert any(text in message for text in shown), message  # a list: the item at fault
    return message


# --------------------------------------------------------------------------------- from_preset

FROM_PRESET = [BertTextClassifier, BertTokenClassifier, BertQuestionAnswerer, BertMultipleChoice,
               BertTextEmbedder, BertMaskedLM, BertPreprocessor]  # fmt: skip
COMMON_CASES = [
    ("max_seq_length", "abc"),
    ("max_seq_length", 3.5),
    ("max_seq_length", True),
    ("max_seq_length", 1),
    ("do_lower_case", "no"),
    ("vocabulary", 5),
]


@pytest.mark.parametrize("name, value", COMMON_CASES)
@pytest.mark.parametrize("cls", FROM_PRESET, ids=lambda cls: cls.__name__)
def test_from_preset_checks_the_preprocessing_arguments_before_reading_the_folder(
    cls, name, value, google_ckpt_dir, no_work
):
    _raises_naming(name, value, lambda: cls.from_preset(google_ckpt_dir, **{name: value}))


@pytest.mark.parametrize("value", ["abc", 3.5])
def test_the_classifier_s_max_seq_length_must_be_an_integer(value, google_ckpt_dir, no_work):
    message = _raises_naming(
        "max_seq_length",
        value,
        lambda: BertTextClassifier.from_preset(
            google_ckpt_dir, num_classes=2, max_seq_length=value
        ),
    )
    assert message == f"max_seq_length must be an integer of at least 2, got {value!r}"
    assert "invalid literal" not in message


@pytest.mark.parametrize(
    "cls, name, value",
    [
        (BertTextClassifier, "num_classes", True),
        (BertTextClassifier, "num_classes", 2.0),
        (BertTextClassifier, "num_classes", "2"),
        (BertTextClassifier, "multi_label", "yes"),
        (BertTextClassifier, "regression", 1),
        (BertTextClassifier, "text_pairs", "no"),
        (BertTextClassifier, "doc_stride", 2.5),
        (BertTextClassifier, "window_combination", "median"),
        (BertTextClassifier, "labels", "neg,pos"),
        (BertTokenClassifier, "labels", ["O"]),
        (BertTokenClassifier, "doc_stride", True),
        (BertQuestionAnswerer, "doc_stride", 2.5),
        (BertQuestionAnswerer, "max_query_length", True),
        (BertQuestionAnswerer, "n_best_size", "20"),
        (BertQuestionAnswerer, "max_answer_length", 0),
        (BertTextEmbedder, "pooling", "sum"),
        (BertTextEmbedder, "normalize", "yes"),
        (BertTextEmbedder, "similarity_scale", -1.0),
        (BertMaskedLM, "masked_lm_prob", 1.5),
        (BertMaskedLM, "max_predictions_per_seq", True),
    ],
)
def test_from_preset_checks_each_task_argument_before_reading_the_folder(
    cls, name, value, google_ckpt_dir, no_work
):
    given = {"num_classes": 2} if cls is BertTextClassifier else {}
    given[name] = value
    _raises_naming(name, value, lambda: cls.from_preset(google_ckpt_dir, **given))


def test_a_folder_that_is_no_path_and_an_unknown_setting_are_named(google_ckpt_dir, no_work):
    _raises_naming("folder", 5, lambda: BertTextClassifier.from_preset(5, num_classes=2))
    with pytest.raises(ValueError, match=r"^BertQuestionAnswerer.from_preset: unknown argument "):
        BertQuestionAnswerer.from_preset(google_ckpt_dir, doc_strid=64)
    with pytest.raises(ValueError, match=r"^BertMaskedLM.from_preset: unknown argument 'seed'"):
        BertMaskedLM.from_preset(google_ckpt_dir, seed=3)


def test_a_doc_stride_over_the_window_is_named_with_its_bound(google_ckpt_dir, w_vocab_file):
    with pytest.raises(ValueError, match=r"^doc_stride=127 must be at most max_seq_length - 2"):
        BertTextClassifier.from_preset(
            google_ckpt_dir, num_classes=2, vocabulary=w_vocab_file, doc_stride=127
        )


# --------------------------------------------------------------------------------- constructors


def _constructors(preprocessor):
    """{class name: a function of keyword arguments that builds it, with working defaults}."""
    defaults = {
        BertTextClassifier: {"num_classes": 2},
        BertTokenClassifier: {"labels": ["O", "B-PER"]},
        BertQuestionAnswerer: {},
        BertMultipleChoice: {},
        BertTextEmbedder: {},
        BertMaskedLM: {},
    }

    def constructor(cls):
        base = {"preprocessor": preprocessor, "bert_config": _tiny_config(), **defaults[cls]}
        return lambda **given: cls(**{**base, **given})

    return {cls.__name__: constructor(cls) for cls in defaults}


@pytest.mark.parametrize(
    "model, name, value",
    [
        ("BertTextClassifier", "num_classes", 2.5),
        ("BertTextClassifier", "num_classes", True),
        ("BertTextClassifier", "multi_label", "no"),
        ("BertTextClassifier", "regression", None),
        ("BertTextClassifier", "labels", ["neg", "neg"]),
        ("BertTextClassifier", "labels", ["neg", 1]),
        ("BertTextClassifier", "text_pairs", 0),
        ("BertTextClassifier", "doc_stride", "4"),
        ("BertTextClassifier", "doc_stride", 15),
        ("BertTextClassifier", "window_combination", "median"),
        ("BertTextClassifier", "bert_config", [64]),
        ("BertTokenClassifier", "labels", "OX"),
        ("BertTokenClassifier", "doc_stride", 15),
        ("BertQuestionAnswerer", "doc_stride", 2.5),
        ("BertQuestionAnswerer", "n_best_size", False),
        ("BertMultipleChoice", "preprocessor", "vocab.txt"),
        ("BertTextEmbedder", "pooling", "sum"),
        ("BertTextEmbedder", "normalize", 1),
        ("BertTextEmbedder", "similarity_scale", True),
        ("BertTextEmbedder", "similarity_scale", "20"),
        ("BertMaskedLM", "max_predictions_per_seq", 2.0),
        ("BertMaskedLM", "masked_lm_prob", 0),
        ("BertMaskedLM", "do_whole_word_mask", "yes"),
        ("BertMaskedLM", "masking_seed", 1.5),
    ],
)
def test_each_constructor_argument_is_checked_before_the_encoder_is_built(
    model, name, value, preprocessor, monkeypatch
):
    def fail(*args, **kwargs):
        raise AssertionError("an encoder was built before the arguments were checked")

    monkeypatch.setattr(BertModel, "__init__", fail)
    constructor = _constructors(preprocessor)[model]
    message = _raises_naming(name, value, lambda: constructor(**{name: value}))
    if name == "doc_stride" and value == 15:  # max_seq_length 16: windows of 14 pieces
        assert "must be at most max_seq_length - 2" in message and "= 14" in message


@pytest.mark.parametrize(
    "name, value", [("vocabulary", 5), ("do_lower_case", "yes"), ("max_seq_length", 3.5)]
)
def test_the_preprocessor_s_arguments_are_checked(name, value, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("a tokenizer was built before the arguments were checked")

    monkeypatch.setattr(preprocessing.GraphPreprocessor, "__init__", fail)
    given = {"vocabulary": VOCAB, name: value}
    _raises_naming(name, value, lambda: BertPreprocessor(**given))


# ---------------------------------------------------------------------------------- label names


def _classifier(labels=None, multi_label=False, seed=7):
    keras.utils.set_random_seed(seed)
    model = BertTextClassifier(
        BertPreprocessor(VOCAB, max_seq_length=16),
        _tiny_config(),
        num_classes=2,
        multi_label=multi_label,
        labels=labels,
    )
    model.compile(learning_rate=1e-3)
    return model


def test_fit_with_label_names_trains_as_with_their_ids_in_labels_order():
    # labels= not in sorted order: "pos" is id 0.
    names = ["pos", "neg", "pos", "neg"] * 2
    ids = [0, 1, 0, 1] * 2
    by_name, by_id = _classifier(["pos", "neg"]), _classifier(["pos", "neg"])
    before = [w.copy() for w in by_name.get_weights()]
    by_name.fit(TEXTS, names, batch_size=4, epochs=2, shuffle=False, verbose=0)
    by_id.fit(TEXTS, ids, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert (
        max(np.abs(a - b).max() for a, b in zip(by_name.get_weights(), before, strict=True)) > 1e-4
    )
    for named, numbered in zip(by_name.get_weights(), by_id.get_weights(), strict=True):
        np.testing.assert_allclose(named, numbered, rtol=0, atol=1e-6)
    evaluated = by_name.evaluate(TEXTS, np.array(names), return_dict=True, verbose=0)
    assert evaluated == by_name.evaluate(TEXTS, ids, return_dict=True, verbose=0)


def test_multi_label_rows_of_names_are_their_zero_one_targets():
    model = _classifier(["pos", "neg"], multi_label=True)
    rows = [["pos"], [], ["neg", "pos"], ["neg"]]
    np.testing.assert_array_equal(
        model.check_labels(rows, 4), np.array([[1, 0], [0, 0], [1, 1], [0, 1]], np.float32)
    )


def test_label_names_without_labels_or_outside_them_are_one_line_naming_them(monkeypatch):
    named, unnamed = _classifier(["neg", "pos"]), _classifier()
    monkeypatch.setattr(keras.Model, "fit", lambda *a, **k: pytest.fail("fit began"))
    with pytest.raises(
        ValueError, match=r"^y\[0\] = 'pos' is a label name, .*pass labels=\[\.\.\.\]"
    ):
        unnamed.fit(TEXTS[:2], ["pos", "neg"])
    with pytest.raises(
        ValueError, match=r"^y\[1\] = 'maybe' is not one of labels=\['neg', 'pos'\]$"
    ):
        named.fit(TEXTS[:2], ["pos", "maybe"])
    with pytest.raises(ValueError, match=r"^y\[1\] = 1: give every label as a name of labels="):
        named.fit(TEXTS[:2], ["pos", 1])
    regression = BertTextClassifier(named.preprocessor, _tiny_config(), regression=True)
    with pytest.raises(ValueError, match=r"^y: labels must be numbers here, got str values"):
        regression.fit(TEXTS[:2], ["high", "low"])


# ----------------------------------------------------------------------------- tampered files


def _tampered(path, tmp_path, change):
    """A copy of the .keras file at `path` with change(config) applied to its config.json."""
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    change(config)
    copy = tmp_path / f"tampered_{len(list(tmp_path.iterdir()))}.keras"
    with zipfile.ZipFile(copy, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, json.dumps(config) if name == "config.json" else data)
    return copy


def _set(keys, value):
    def change(config):
        for key in keys[:-1]:
            config = config[key]
        config[keys[-1]] = value

    return change


FUNCTION = {"module": "builtins", "class_name": "function", "config": "relu"}
LAMBDA = {"class_name": "__lambda__", "config": {"value": "4wEAAAAAAAAA"}}
SYSTEM = {"module": "os", "class_name": "function", "config": "system"}


@pytest.mark.parametrize(
    "keys, value, cause",
    [
        (("config", "preprocessor"), FUNCTION, "preprocessor must be a BertPreprocessor"),
        (("config", "preprocessor"), LAMBDA, "deserialization of a Python lambda"),
        (("config", "preprocessor"), SYSTEM, "Could not locate function 'system'"),
        (("config", "preprocessor", "config", "vocabulary"), "/etc/hostname", "vocabulary"),
        (("config", "num_classes"), "2", "num_classes must be"),
        (("config", "bert_config"), [1], "bert_config must be"),
        (("config", "command"), "rm -rf", "Unrecognized keyword arguments"),
    ],
)
def test_a_changed_keras_file_is_refused_in_one_line_saying_so(tmp_path, keys, value, cause):
    path = tmp_path / "classifier.keras"
    BertTextClassifier(BertPreprocessor(VOCAB, max_seq_length=16), _tiny_config(), 2).save(path)
    tampered = _tampered(path, tmp_path, _set(keys, value))
    with pytest.raises(ValueError) as raised:
        keras.saving.load_model(tampered)  # safe_mode=True
    message = str(raised.value)
    assert re.match(r"^Bert\w+: the saved model's config was refused \(safe_mode", message), message
    assert cause in message and "\n" not in message and len(message) < 600, message
