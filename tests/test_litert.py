"""export_saved_model.py --litert: the export's serve_ids as a .tflite, run by ai-edge-litert's interpreter.

float32 answers as the SavedModel's serve_ids (float32 rounding); int8 (dynamic-range quantized
weights) agrees with it on the predicted class; bad values and unconvertible kinds are one-line
errors raised before anything is written.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import litert
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.tasks import TASKS
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint

from conftest import SAMPLE_DIR

VOCAB = str(SAMPLE_DIR / "vocab.txt")
needs_litert = pytest.mark.skipif(
    importlib.util.find_spec("ai_edge_litert") is None,
    reason="ai-edge-litert (the litert extra) is not installed",
)
# The kinds that convert, each with TaskInfo settings (the others: litert.UNCONVERTIBLE).
KINDS = {
    "encoder": dict(),
    "classifier": dict(labels=["neg", "pos", "mixed"]),
    "classifier_windows": dict(
        labels=["neg", "pos"], doc_stride=8, window_combination="weighted_mean"
    ),
    "squad": dict(version_2_with_negative=True, doc_stride=8, max_query_length=8),
    "multiple_choice": dict(),
}
TEXTS = [
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home.",
    "",
    "The real evils, indeed, of Emma's situation were the power of having rather too much.",
]


def _export(kind, folder, seed=0, hidden_dropout=None):
    config = BertConfig.from_json_file(str(SAMPLE_DIR / "bert_config_tiny.json"))
    model_type = "classifier" if kind == "classifier_windows" else kind
    info = TaskInfo(model_type=model_type, bert_config=config, max_seq_length=24, **KINDS[kind])
    keras.utils.set_random_seed(seed)
    spec = TASKS[model_type]
    model = spec.build_model(config, info)
    model(model.dummy_inputs())
    return spec.export_model(model, info, VOCAB, str(folder))


def _ids(path, kind):
    """The export's own preprocess outputs for TEXTS: the ids serve_ids takes."""
    signatures = tf.saved_model.load(path).signatures
    if kind == "squad":
        features = signatures["preprocess"](question=tf.constant(["Who?"] * 3), context=TEXTS)
        features.pop("example_index")
    elif kind == "multiple_choice":
        choices = tf.constant([["She smiled.", "He left."]] * 3)
        features = signatures["preprocess"](context=tf.constant(TEXTS), choices=choices)
    else:
        features = signatures["preprocess"](text_a=tf.constant(TEXTS))
    ids = {name: value.numpy() for name, value in features.items()}
    return ids, signatures["serve_ids"]


@needs_litert
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_float32_tflite_answers_as_serve_ids(kind, tmp_path):
    path = _export(kind, tmp_path)
    tflite = litert.write_tflite(path, "float32")
    assert tflite == str(tmp_path / "1_serve_ids_float32.tflite")
    assert sorted(os.listdir(tmp_path)) == ["1", "1_serve_ids_float32.tflite"]
    ids, serve_ids = _ids(path, kind)
    expected = {name: value.numpy() for name, value in serve_ids(**ids).items()}
    actual = litert.signature_runner(tflite)(**ids)
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        assert actual[name].shape == value.shape, name
        if value.dtype.kind == "f":  # measured: at most 5e-7 (outputs up to 3)
            np.testing.assert_allclose(actual[name], value, rtol=0, atol=1e-4, err_msg=name)
        else:
            np.testing.assert_array_equal(actual[name], value, err_msg=name)


@needs_litert
def test_the_int8_tflite_predicts_the_answer_span_serve_ids_predicts(tmp_path):
    """SQuAD's predicted start and end positions (argmax over 16 positions, varied across windows):
    int8 weights move the logits by a fraction of their spread, so nearly every prediction stays;
    a broken quantization (weights, scales, the wrong signature) agrees by chance (~1/16)."""
    path = _export("squad", tmp_path, seed=2)
    tflite = litert.write_tflite(path, "int8")
    assert os.path.getsize(tflite) < 0.4 * os.path.getsize(litert.write_tflite(path, "float32"))
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 100, size=(200, 16)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 2, 3
    feed = dict(input_ids=ids, input_mask=np.ones_like(ids), segment_ids=np.zeros_like(ids))
    feed["segment_ids"][:, 6:] = 1
    expected = tf.saved_model.load(path).signatures["serve_ids"](**feed)
    actual = litert.signature_runner(tflite)(**feed)
    for name in ("start_logits", "end_logits"):
        want, got = expected[name].numpy().argmax(-1), actual[name].argmax(-1)
        counts = np.bincount(want, minlength=16)
        print(f"int8 {name} agreement {np.mean(got == want):.3f}, positions {counts}")
        assert counts.max() <= 0.5 * len(ids)  # predictions vary: agreement is not given
        assert np.mean(got == want) >= 0.9, name
        assert np.abs(actual[name] - expected[name].numpy()).max() > 0  # quantized, not a copy


def test_a_bad_litert_value_and_an_unconvertible_kind_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match=r"^--litert must be one of float32, int8, got 'fp16'$"):
        litert.check_litert("fp16")
    with pytest.raises(InputError, match=r"^--litert: a tagger export does not convert") as error:
        litert.check_litert("int8", "tagger")
    assert "\n" not in str(error.value)
    with pytest.raises(InputError, match=r"^--litert: .*window_combination=max.*SegmentMax"):
        litert.check_litert("float32", "classifier", "max")
    config = ExportSettings(
        init_checkpoint=str(tmp_path / "missing"), export_dir=str(tmp_path / "out"),
        vocab_file=VOCAB, litert="int4",
    )  # fmt: skip
    with pytest.raises(InputError, match="--litert must be one of"):
        export_checkpoint(config)  # before the checkpoint is even looked for
    assert not (tmp_path / "out").exists()


def test_without_the_extra_litert_names_the_flag_and_the_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "ai_edge_litert" else real_find_spec(name, *args),
    )
    with pytest.raises(
        InputError, match=r"^--litert needs ai-edge-litert.*pip install -e .\.\[litert\]. *$"
    ):
        litert.check_litert("float32")
