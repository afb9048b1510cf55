"""BertTextClassifier and BertPreprocessor: raw strings through from_preset, fit, predict, save and export.

References: the original FullTokenizer (ids), run_classifier.py's own predictions (test_results.tsv of a
script run), export_saved_model.py's export of the same weights, and a process that imports only
tensorflow and tensorflow_text.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_run_classifier import run, tsv_config, write_sentiment_tsv

from bert_tf import BertPreprocessor, BertTextClassifier, BertTokenClassifier, preprocessing
from bert_tf.checkpoints import save_google_checkpoint
from bert_tf.models.networks import classifier_network
from bert_tf.models.networks.task_info import read_task_info, write_task_info
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint
from bert_tf.tokenization import FullTokenizer

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

VOCAB = str(SAMPLE_DIR / "vocab.txt")
TEXTS = ["The lady was happy.", "She said that she was very sad!", "Ünïcode ɑnd ASCII", ""]
PAIRS = (["Is it?", "no", "a b c"], ["Yes.", "", "d e f g h i j"])


@pytest.fixture(scope="module")
def script_run(tmp_path_factory):
    """A tiny run_classifier.py run: train, predict (test_results.tsv); its output_dir and test texts."""
    root = tmp_path_factory.mktemp("script")
    sizes = (("train", 48), ("dev", 8), ("test", 8))
    test_texts = write_sentiment_tsv(root / "data", sizes=sizes)
    config = tsv_config(
        root / "data", root / "out", do_train=True, do_predict=True, num_train_epochs=1.0
    )
    run(config)
    return root / "out", test_texts


@pytest.fixture(scope="module")
def classifier(script_run):
    # The run keeps its --vocab_file as output_dir/vocab.txt: the folder alone is the preset.
    assert (script_run[0] / "vocab.txt").read_bytes() == (SAMPLE_DIR / "vocab.txt").read_bytes()
    return BertTextClassifier.from_preset(script_run[0])


def test_preprocessor_gives_full_tokenizer_ids_packed_as_the_original(tmp_path):
    preprocessor = BertPreprocessor(VOCAB, do_lower_case=True, max_seq_length=12)
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    features = preprocessor(tf.constant(TEXTS))
    for row, text in enumerate(TEXTS):
        tokens = ["[CLS]", *tokenizer.tokenize(text)[:10], "[SEP]"]
        ids = tokenizer.convert_tokens_to_ids(tokens)
        assert features["input_ids"][row, : len(ids)].numpy().tolist() == ids
        assert features["input_mask"][row].numpy().sum() == len(ids)
    pair = preprocessor(tf.constant(PAIRS[0][:1]), tf.constant(PAIRS[1][:1]))
    tokens = ["[CLS]", "is", "it", "?", "[SEP]", "yes", ".", "[SEP]"]
    assert pair["input_ids"][0].numpy().tolist() == tokenizer.convert_tokens_to_ids(tokens)
    assert pair["segment_ids"][0].numpy().tolist() == [0] * 5 + [1] * 3
    # The vocabulary travels in the layer's config: the copy tokenizes the same without the file.
    copy = BertPreprocessor.from_config(preprocessor.get_config())
    np.testing.assert_array_equal(copy(tf.constant(TEXTS))["input_ids"], features["input_ids"])


def test_from_preset_of_a_script_run_predicts_its_test_results(classifier, script_run):
    output_dir, test_texts = script_run
    assert classifier.labels == ["neg", "pos"] and classifier.text_pairs is False
    expected = np.loadtxt(output_dir / "test_results.tsv")
    probabilities = tf.nn.softmax(classifier.predict(test_texts, batch_size=3, verbose=0))
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-5)


def test_save_and_load_model_give_the_same_logits_under_safe_mode(classifier, tmp_path):
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    loaded = keras.saving.load_model(path)  # safe_mode=True by default
    assert isinstance(loaded, BertTextClassifier) and loaded.labels == classifier.labels
    np.testing.assert_allclose(
        loaded.predict(TEXTS, verbose=0), classifier.predict(TEXTS, verbose=0), rtol=0, atol=1e-5
    )


def test_export_is_export_saved_model_s_and_serves_in_a_tensorflow_only_process(
    classifier, script_run, tmp_path
):
    path = classifier.export(str(tmp_path / "models" / "classifier" / "1"))
    assert path == str(tmp_path / "models" / "classifier" / "1")
    assert sorted(os.listdir(tmp_path / "models" / "classifier")) == ["1"]  # nothing left beside
    # The same weights and task.json through export_saved_model.py's library.
    save_google_checkpoint(classifier.task_model, str(tmp_path / "ckpt" / "bert_model.ckpt"))
    write_task_info(str(tmp_path / "ckpt"), classifier.task_info())
    reference = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(tmp_path / "ckpt" / "bert_model.ckpt"),
            export_dir=str(tmp_path / "reference"),
            vocab_file=VOCAB,
        )
    )
    ours, theirs = tf.saved_model.load(path), tf.saved_model.load(reference)
    assert sorted(ours.signatures) == sorted(theirs.signatures)
    # The task.json a run of this model would write is the script run's own.
    script_info = read_task_info(str(script_run[0])).to_json()
    assert classifier.task_info().to_json() == script_info
    texts = tf.constant(TEXTS)
    np.testing.assert_allclose(
        ours.signatures["serving_default"](text_a=texts)["probabilities"],
        theirs.signatures["serving_default"](text_a=texts)["probabilities"],
        rtol=0,
        atol=1e-6,
    )
    script = textwrap.dedent(f"""
        import json, sys
        import tensorflow as tf, tensorflow_text  # noqa: F401
        served = tf.saved_model.load({path!r})
        outputs = served.signatures["serving_default"](text_a=tf.constant({TEXTS!r}))
        print(json.dumps({{"probabilities": outputs["probabilities"].numpy().tolist(),
                          "label": [x.decode() for x in outputs["label"].numpy()],
                          "modules": sorted(m for m in sys.modules if m.startswith("bert_tf"))}}))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=SUBPROCESS_ENV,
        cwd=tmp_path, timeout=300, check=True,
    )  # fmt: skip
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["modules"] == []
    logits = classifier.predict(TEXTS, verbose=0)
    expected = tf.nn.softmax(logits).numpy()
    np.testing.assert_allclose(served["probabilities"], expected, rtol=0, atol=1e-5)
    assert served["label"] == [classifier.labels[i] for i in expected.argmax(-1)]


def test_fit_on_python_lists_learns_and_sizes_the_paper_schedule(tmp_path):
    keras.utils.set_random_seed(3)
    texts = [f"the lady was {word}" for word in ("happy", "sad", "glad", "gloomy")] * 8
    labels = np.array([1, 0, 1, 0] * 8)
    model = BertTextClassifier(
        BertPreprocessor(VOCAB, max_seq_length=16), _tiny_config(), num_classes=2
    )
    model.compile(learning_rate=1e-3)  # the recipe, at a random-init tiny model's rate
    history = model.fit(texts, labels, batch_size=8, epochs=5, verbose=0)
    schedule = model.optimizer.get_config()["learning_rate"]["config"]
    # 32 texts / 8 per batch * 5 epochs = 20 steps, the first 10% of them warming up.
    assert schedule == {"init_lr": 1e-3, "num_train_steps": 20, "num_warmup_steps": 2}
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert model.evaluate(texts, labels, verbose=0, return_dict=True)["accuracy"] == 1.0


def _tiny_config():
    return json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())


# ---------------------------------------------------------------------------------- the variants


def _fitted(texts, targets, **settings):
    keras.utils.set_random_seed(5)
    model = BertTextClassifier(
        BertPreprocessor(VOCAB, max_seq_length=16), _tiny_config(), **settings
    )
    model.fit(texts, targets, batch_size=4, epochs=1, verbose=0)
    return model


def _serve(model, path, **texts):
    served = tf.saved_model.load(model.export(str(path)))
    return served.signatures["serving_default"](**{k: tf.constant(v) for k, v in texts.items()})


def test_text_pairs_fit_and_export_a_two_text_signature(tmp_path):
    model = _fitted(PAIRS, [0, 1, 1], num_classes=2)
    assert model.text_pairs is True  # the first fit's data decides
    with pytest.raises(ValueError, match=r"^x: single texts, but this model reads text pairs"):
        model.predict(TEXTS)
    outputs = _serve(model, tmp_path / "1", text_a=PAIRS[0], text_b=PAIRS[1])
    expected = tf.nn.softmax(model.predict(PAIRS, verbose=0))
    np.testing.assert_allclose(outputs["probabilities"], expected, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_multi_label_fits_zero_one_targets_and_exports_sigmoids(tmp_path):
    targets = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0], [1, 1, 1]])
    model = _fitted(TEXTS, targets, num_classes=3, multi_label=True, labels=["a", "b", "c"])
    logits = model.predict(TEXTS, verbose=0)
    outputs = _serve(model, tmp_path / "1", text_a=TEXTS)
    np.testing.assert_allclose(outputs["probabilities"], tf.sigmoid(logits), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"^y: multi-label targets must be 0 or 1"):
        model.fit(TEXTS, targets * 2)


@pytest.mark.slow
def test_regression_fits_scores_and_exports_predictions(tmp_path):
    model = _fitted(TEXTS, [0.5, 4.0, 2.5, 1.0], regression=True)
    scores = model.predict(TEXTS, verbose=0)
    assert scores.shape == (4, 1)
    outputs = _serve(model, tmp_path / "1", text_a=TEXTS)
    np.testing.assert_allclose(outputs["predictions"], scores[:, 0], rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------- bad input


def _no_model_is_built(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("a model was built before the input was checked")

    monkeypatch.setattr(classifier_network.BertClassifier, "__init__", fail)
    monkeypatch.setattr(preprocessing.GraphPreprocessor, "__init__", fail)
    monkeypatch.setattr(keras.Model, "fit", fail)


def test_a_folder_without_a_checkpoint_or_a_vocabulary_is_one_line_naming_it(
    tmp_path, google_ckpt_dir, w_vocab_file, monkeypatch
):
    _no_model_is_built(monkeypatch)
    no_checkpoint = tmp_path / "no_checkpoint"
    no_checkpoint.mkdir()
    shutil.copy(SAMPLE_DIR / "bert_config_tiny.json", no_checkpoint / "bert_config.json")
    shutil.copy(VOCAB, no_checkpoint / "vocab.txt")
    with pytest.raises(ValueError, match=rf"^preset folder {no_checkpoint}: .*no.*checkpoint"):
        BertTextClassifier.from_preset(no_checkpoint, num_classes=2)
    with pytest.raises(ValueError, match=rf"^preset folder {google_ckpt_dir}: no vocabulary"):
        BertTextClassifier.from_preset(google_ckpt_dir, num_classes=2)
    with pytest.raises(ValueError, match=r"^preset folder .*/missing does not exist"):
        BertTextClassifier.from_preset(tmp_path / "missing", num_classes=2)
    with pytest.raises(ValueError, match=r"^num_classes is required \(or regression=True\)"):
        BertTextClassifier.from_preset(google_ckpt_dir, vocabulary=w_vocab_file)


def test_num_classes_disagreeing_with_the_run_s_labels_is_refused(script_run, monkeypatch):
    _no_model_is_built(monkeypatch)
    with pytest.raises(ValueError, match=r"^num_classes=3, but the run in .* has num_classes=2"):
        BertTextClassifier.from_preset(script_run[0], num_classes=3, vocabulary=VOCAB)


def test_pairs_for_a_single_text_model_and_labels_out_of_range_are_refused(classifier, monkeypatch):
    _no_model_is_built(monkeypatch)
    with pytest.raises(ValueError, match=r"^x: text pairs \(texts_a, texts_b\), but this model"):
        classifier.fit(PAIRS, [0, 1, 1])
    with pytest.raises(ValueError, match=r"^y\[1\] = 7 is out of range for num_classes=2"):
        classifier.fit(TEXTS, [0, 7, 1, 0])
    with pytest.raises(ValueError, match=r"^y: 3 labels for 4 texts"):
        classifier.fit(TEXTS, [0, 1, 1])


# ---------------------------------------------------------------------------------- distribution

_MIRRORED_FIT = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from bert_tf import BertPreprocessor, BertTextClassifier

vocab, config = sys.argv[1], json.loads(sys.argv[2])
texts = [f"the lady was {word}" for word in ("happy", "sad", "glad", "gloomy", "merry")] * 4
labels = np.array([1, 0, 1, 0, 1] * 4)

def model():
    classifier = BertTextClassifier(BertPreprocessor(vocab, max_seq_length=16), config, num_classes=2)
    classifier.compile(learning_rate=1e-3)
    return classifier

keras.utils.set_random_seed(1)
one_device = model()
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    mirrored = model()
mirrored.set_weights(one_device.get_weights())
for classifier in (one_device, mirrored):
    classifier.fit(texts, labels, batch_size=8, epochs=2, shuffle=False, verbose=0)
print(json.dumps({
    "replicas": mirrored.distribute_strategy.num_replicas_in_sync,
    "steps": int(mirrored.optimizer.iterations.numpy()),
    "one_device": one_device.predict(texts, verbose=0).tolist(),
    "mirrored": mirrored.predict(texts, verbose=0).tolist(),
}))
"""


@pytest.mark.slow
def test_fit_under_a_mirrored_strategy_takes_the_one_device_steps():
    # No dropout: the two replicas' halves of each batch then give the one-device gradient.
    config = {**_tiny_config(), "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    result = subprocess.run(
        [sys.executable, "-c", _MIRRORED_FIT, VOCAB, json.dumps(config)],
        capture_output=True, text=True, env=SUBPROCESS_ENV, cwd=REPO_DIR, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["replicas"] == 2 and outcome["steps"] == 6  # 20 texts / 8 = 3 steps, 2 epochs
    one_device = np.array(outcome["one_device"])
    assert np.abs(one_device - np.array(outcome["one_device"]).mean()).max() > 1e-3  # it learned
    np.testing.assert_allclose(outcome["mirrored"], one_device, rtol=0, atol=1e-4)


def test_long_texts_in_windows_predict_what_the_export_combines(tmp_path):
    long_texts = [" ".join(["the lady was happy"] * 5), "sad", " ".join(["so sad"] * 9), "w"]
    keras.utils.set_random_seed(5)
    # Large initial weights: the windows of a text then get clearly different logits.
    config = {**_tiny_config(), "initializer_range": 0.5}
    model = BertTextClassifier(
        BertPreprocessor(VOCAB, max_seq_length=8), config, num_classes=2, doc_stride=3
    )
    model.fit(long_texts, [1, 0, 0, 1], batch_size=2, epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"^x: text pairs \(texts_a, texts_b\), but this model"):
        model.predict(PAIRS)
    logits = model.predict(long_texts, batch_size=3, verbose=0)  # one row per text
    assert logits.shape == (4, 2)
    # The export combines each text's windows in its graph (window_signatures), not by
    # combine_windows' numpy.
    outputs = _serve(model, tmp_path / "1", text_a=long_texts)
    np.testing.assert_allclose(outputs["probabilities"], tf.nn.softmax(logits), rtol=0, atol=1e-5)
    evaluation = model.evaluate(long_texts, [1, 0, 0, 1], return_dict=True)
    assert evaluation["accuracy"] == np.mean(logits.argmax(-1) == [1, 0, 0, 1])


@pytest.mark.parametrize("doc_stride", [0, -2, True, 2.5, "4"])
def test_a_doc_stride_that_is_not_a_positive_integer_is_one_line_in_both_window_readers(doc_stride):
    preprocessor = BertPreprocessor(VOCAB, max_seq_length=16)
    message = rf"^doc_stride must be a positive integer, got {re.escape(repr(doc_stride))}$"
    with pytest.raises(ValueError, match=message):
        BertTextClassifier(preprocessor, _tiny_config(), num_classes=2, doc_stride=doc_stride)
    with pytest.raises(ValueError, match=message):
        BertTokenClassifier(preprocessor, _tiny_config(), labels=["O", "X"], doc_stride=doc_stride)
