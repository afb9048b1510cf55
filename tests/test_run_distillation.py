"""run_distillation.py end to end: a tiny 2-layer teacher from run_classifier.py distilled into 1 layer.

The data is test_run_classifier.py's kind of task: a sentence of filler words holds one word of a
positive or a negative set, and its label says which. The loss is checked against float64 numpy;
the run's folder against what from_preset, an export served in a TensorFlow-only process and the
teacher itself give; resume against an uninterrupted run, bit for bit.
"""

import dataclasses
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.models import distillation
from bert_tf.tasks import run_script
from bert_tf.tasks.classification.task import SPEC as CLASSIFIER
from bert_tf.tasks.distillation import run as distillation_run
from bert_tf.tasks.distillation import teacher
from bert_tf.tasks.task_settings import ClassifierSettings, DistillationSettings, MultiLabelSettings
from bert_tf.training.checkpoint_state import CheckpointState

from conftest import (
    PROBABILITY_ATOL,
    REPO_DIR,
    SAMPLE_DIR,
    SUBPROCESS_ENV,
    final_checkpoint_state,
)

POSITIVE = "happy glad joyful cheerful delighted merry".split()
NEGATIVE = "sad gloomy miserable unhappy wretched dismal".split()
FILLER = "the lady walked to the house and said that she was very much in".split()
TINY_CONFIG = str(SAMPLE_DIR / "bert_config_tiny.json")  # 2 layers
VOCAB = str(SAMPLE_DIR / "vocab.txt")
SIZES = (("train", 192), ("dev", 48), ("test", 12))
COMMON = dict(
    task_name="tsv", text_a_column="0", label_column="1", max_seq_length=32,
    train_batch_size=16, eval_batch_size=8, predict_batch_size=8, learning_rate=1e-3,
    iterations_per_loop=8, log_steps=8, save_checkpoints_steps=8, seed=7,
)  # fmt: skip


def _sentence(rng, words):
    sentence = rng.sample(FILLER, 7) + [rng.choice(words)]
    rng.shuffle(sentence)
    return " ".join(sentence)


def write_data(folder, seed=0):
    """train/dev/test.tsv (test without labels) and transfer.txt (unlabelled); the test texts."""
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    texts = {}
    for split, size in (*SIZES, ("transfer", 64)):
        labels = [rng.choice(["pos", "neg"]) for _ in range(size)]
        texts[split] = [_sentence(rng, POSITIVE if y == "pos" else NEGATIVE) for y in labels]
        if split in ("train", "dev"):
            lines = [f"{text}\t{label}" for text, label in zip(texts[split], labels, strict=True)]
        else:
            lines = texts[split]
        name = "transfer.txt" if split == "transfer" else f"{split}.tsv"
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return texts["test"]


def distil_config(root, output_dir, **overrides):
    values = dict(
        teacher_dir=str(root / "teacher"), student_layers=1, data_dir=str(root / "data"),
        transfer_file=str(root / "data" / "transfer.txt"), output_dir=str(output_dir),
        do_train=True, num_train_epochs=2.0, **COMMON,
    )  # fmt: skip
    values.update(overrides)
    return DistillationSettings(**values)


def distil(config):
    """What run_distillation.py does with `config`."""
    return distillation_run.make_run(config).run()


@pytest.fixture(scope="module")
def distilled(tmp_path_factory):
    """A trained tiny teacher and one train + eval + predict + export distillation of it."""
    root = tmp_path_factory.mktemp("distillation")
    test_texts = write_data(root / "data")
    teacher_config = ClassifierSettings(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, data_dir=str(root / "data"),
        output_dir=str(root / "teacher"), do_train=True, do_eval=True, num_train_epochs=3.0,
        **COMMON,
    )  # fmt: skip
    run_script(CLASSIFIER, teacher_config)
    config = distil_config(
        root, root / "student", do_eval=True, do_predict=True, export_dir=str(root / "export")
    )
    outcome = distil(config)
    return {
        "root": root, "outcome": outcome, "test_texts": test_texts, "teacher_config": teacher_config,
    }  # fmt: skip


def _results(path):
    return dict(line.split(" = ") for line in open(path).read().splitlines())


def _test_results(folder):
    rows = (folder / "test_results.tsv").read_text().splitlines()
    return np.array([[float(p) for p in row.split("\t")] for row in rows])


# ------------------------------------------------------------------------------------ the loss


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _reference_loss(student_logits, teacher_logits, labels, hard, kind, t, weight):
    """The loss in float64 numpy, written from its definition."""
    s, te = np.asarray(student_logits, np.float64), np.asarray(teacher_logits, np.float64)
    if kind == "regression":
        soft = (s[:, 0] - te[:, 0]) ** 2
        hard_part = (s[:, 0] - labels) ** 2
    elif kind == "multi_label":
        p = 1 / (1 + np.exp(-te / t))
        soft = t * t * -(p * _log_sigmoid(s / t) + (1 - p) * _log_sigmoid(-s / t)).mean(-1)
        hard_part = -(labels * _log_sigmoid(s) + (1 - labels) * _log_sigmoid(-s)).mean(-1)
    else:
        p = np.exp(_log_softmax(te / t))
        soft = t * t * -(p * _log_softmax(s / t)).sum(-1)
        hard_part = -_log_softmax(s)[np.arange(len(labels)), labels]
    return float((soft + weight * hard * hard_part).sum() / len(s))


@pytest.mark.parametrize("kind", distillation.KINDS)
@pytest.mark.parametrize("temperature, weight", [(1.0, 0.0), (3.0, 0.5), (0.5, 2.0)])
def test_the_loss_is_hinton_s_soft_cross_entropy_plus_the_weighted_labels(
    kind, temperature, weight
):
    rng = np.random.default_rng(0)
    num_labels = 1 if kind == "regression" else 4
    student_logits = rng.normal(0, 3, (6, num_labels)).astype(np.float32)
    teacher_logits = rng.normal(0, 3, (6, num_labels)).astype(np.float32)
    hard = np.array([1, 1, 0, 1, 0, 1], np.float32)  # two transfer texts
    if kind == "regression":
        labels = rng.normal(0, 2, 6).astype(np.float32)
    elif kind == "multi_label":
        labels = (rng.random((6, num_labels)) > 0.5).astype(np.float32)
    else:
        labels = rng.integers(0, num_labels, 6)
    got = distillation.distillation_loss(
        student_logits, teacher_logits, labels, hard, 6.0,
        kind=kind, temperature=temperature, hard_label_weight=weight,
    )  # fmt: skip
    expected = _reference_loss(
        student_logits, teacher_logits, labels, hard, kind, temperature, weight
    )
    assert float(got) == pytest.approx(expected, rel=1e-5)


def test_the_soft_loss_is_lowest_at_the_teacher_s_logits():
    teacher_logits = np.array([[2.0, -1.0, 0.5]], np.float32)
    at_teacher = distillation.soft_loss(teacher_logits, teacher_logits, "single_label", 2.0)
    moved = distillation.soft_loss(
        teacher_logits + [[0.3, 0, 0]], teacher_logits, "single_label", 2.0
    )
    # The cross-entropy at the teacher is the entropy of its softened probabilities, times T^2.
    p = np.exp(_log_softmax(teacher_logits.astype(np.float64) / 2.0))
    assert float(at_teacher[0]) == pytest.approx(4.0 * -(p * np.log(p)).sum(), rel=1e-5)
    assert float(moved[0]) > float(at_teacher[0])


# ------------------------------------------------------------------------------- the student


def test_the_student_s_layers_are_spread_evenly_or_mapped():
    assert distillation.spread_layers(12, 2) == [5, 11]
    assert distillation.spread_layers(12, 6) == [1, 3, 5, 7, 9, 11]
    assert distillation.spread_layers(6, 3) == [1, 3, 5]
    assert distillation.choose_layers(2, 1) == [1]
    assert distillation.choose_layers(4, None, "0,3") == [0, 3]
    assert distillation.choose_layers(4, 2, "0,3") == [0, 3]


@pytest.mark.parametrize(
    "layers, layer_map, message",
    [
        (3, None, r"--student_layers=3: the teacher has 2 layers"),
        (None, "0,2", r"--student_layer_map=0,2: layer 2 is out of range"),
        (None, "1,0", r"must increase"),
        (1, "0,1", r"names 2 layers, --student_layers=1"),
        (None, "a", r"give layer indexes"),
    ],
)
def test_a_student_the_teacher_cannot_give_is_one_line_naming_the_flag(layers, layer_map, message):
    with pytest.raises(InputError, match=message):
        distillation.choose_layers(2, layers, layer_map)


def test_the_student_starts_from_the_teacher_s_embeddings_chosen_layers_pooler_and_head(distilled):
    root = distilled["root"]
    initial = tf.train.load_checkpoint(str(root / "student" / "student_init" / "bert_model.ckpt"))
    names = dict(
        tf.train.list_variables(str(root / "student" / "student_init" / "bert_model.ckpt"))
    )
    assert not [name for name in names if "layer_1/" in name]  # one layer: the teacher's layer 1
    teacher_prefix = tf.train.latest_checkpoint(str(root / "teacher"))
    from bert_tf.checkpoints import google_variable_names

    teacher_of_run = teacher.read_teacher(str(root / "teacher"))
    assert teacher_of_run.checkpoint == teacher_prefix
    teacher_weights = google_variable_names(teacher_of_run.model())
    pairs = {
        "bert/encoder/layer_0/attention/self/query/kernel": (
            "bert/encoder/layer_1/attention/self/query/kernel"
        ),
        "bert/embeddings/word_embeddings": "bert/embeddings/word_embeddings",
        "bert/pooler/dense/kernel": "bert/pooler/dense/kernel",
        "output_weights": "output_weights",
    }
    for student_name, teacher_name in pairs.items():
        np.testing.assert_array_equal(
            initial.get_tensor(student_name), teacher_weights[teacher_name].numpy(), student_name
        )
    np.testing.assert_raises(
        AssertionError,
        np.testing.assert_array_equal,
        initial.get_tensor("bert/encoder/layer_0/attention/self/query/kernel"),
        teacher_weights["bert/encoder/layer_0/attention/self/query/kernel"].numpy(),
    )


# ------------------------------------------------------------------------------- the run folder


def test_the_student_learns_and_its_folder_is_a_classifier_run(distilled):
    out = distilled["root"] / "student"
    results = _results(out / "eval_results.txt")
    teacher_results = _results(distilled["root"] / "teacher" / "eval_results.txt")
    assert float(teacher_results["eval_accuracy"]) >= 0.85  # chance is 0.5 on 48 dev sentences
    assert float(results["eval_accuracy"]) >= 0.85
    # int((192 labelled + 64 transfer texts) / 16 * 2.0)
    assert int(results["global_step"]) == 32
    task = json.loads((out / "task.json").read_text())
    assert task["model_type"] == "classifier"
    assert task["bert_config"]["num_hidden_layers"] == 1
    assert task["bert_config"]["hidden_size"] == 64
    assert task["labels"] == ["neg", "pos"]
    assert (out / "labels.txt").read_text() == "neg\npos\n"
    assert (out / "vocab.txt").read_text() == open(VOCAB).read()
    assert _test_results(out).shape == (12, 2)
    assert distilled["outcome"]["student"] == {
        "teacher_layers": [1], "num_hidden_layers": 1, "transfer_texts": 64,
    }  # fmt: skip
    assert not [name for name in os.listdir(out) if ".tmp" in name]


def test_from_preset_of_the_student_s_folder_predicts_its_test_results(distilled):
    from bert_tf.models import BertTextClassifier

    out = distilled["root"] / "student"
    classifier = BertTextClassifier.from_preset(str(out))
    logits = np.asarray(classifier.predict(distilled["test_texts"]), np.float64)
    probabilities = np.exp(_log_softmax(logits))
    np.testing.assert_allclose(probabilities, _test_results(out), rtol=0, atol=PROBABILITY_ATOL)


_SERVE = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    out = model.signatures["serving_default"](text_a=tf.constant(json.loads(sys.argv[2])))
    print(json.dumps(out["probabilities"].numpy().tolist()))
    """
)


def test_the_student_s_export_served_by_tensorflow_alone_equals_its_test_results(distilled):
    export_path = distilled["outcome"]["export"]
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, export_path, json.dumps(distilled["test_texts"])],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    served = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
    expected = _test_results(distilled["root"] / "student")
    # test_results.tsv prints 6 decimals (5e-7) of float32 probabilities: within 1e-5.
    np.testing.assert_allclose(served, expected, rtol=0, atol=1e-5)


def test_export_saved_model_script_takes_the_student_s_folder(distilled, tmp_path):
    from bert_tf.tasks.exporting import ExportSettings, export_checkpoint

    out = distilled["root"] / "student"
    path = export_checkpoint(
        ExportSettings(init_checkpoint=str(out), export_dir=str(tmp_path), vocab_file=VOCAB)
    )
    served = tf.saved_model.load(path).signatures["serving_default"](
        text_a=tf.constant(distilled["test_texts"])
    )
    np.testing.assert_allclose(
        served["probabilities"].numpy(), _test_results(out), rtol=0, atol=PROBABILITY_ATOL
    )


def test_convert_checkpoint_takes_the_student_s_folder_to_hugging_face(distilled, tmp_path):
    from safetensors.numpy import load_file

    from bert_tf.checkpoints import google_variable_names
    from bert_tf.formats.convert import ConvertSettings, run
    from bert_tf.models import BertTextClassifier

    out = distilled["root"] / "student"
    run(ConvertSettings(init_checkpoint=str(out), output_dir=str(tmp_path / "hf")))
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["num_hidden_layers"] == 1
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    weights = google_variable_names(BertTextClassifier.from_preset(str(out)).task_model)
    query = weights["bert/encoder/layer_0/attention/self/query/kernel"].numpy()
    # Hugging Face's Linear keeps [out, in]: Google's kernel transposed.
    np.testing.assert_array_equal(
        tensors["bert.encoder.layer.0.attention.self.query.weight"], query.T
    )
    assert "bert.encoder.layer.1.attention.self.query.weight" not in tensors


# ------------------------------------------------------------------------ the teacher's logits


def test_the_cached_teacher_logits_are_the_teacher_s_own(distilled):
    from bert_tf.models import BertTextClassifier

    root = distilled["root"]
    the_teacher = teacher.read_teacher(str(root / "teacher"))
    folder = root / "student" / "teacher_logits" / the_teacher.key()
    cached = teacher.read_cache(str(folder))
    texts = (root / "data" / "transfer.txt").read_text().splitlines()
    assert len(cached) == 192 + 64  # every training and transfer text (all distinct)
    from bert_tf.tasks.classification.data.processor import InputExample

    keys = [teacher.text_key(InputExample("t", text)) for text in texts]
    from_cache = np.stack([cached[key] for key in keys])
    # The teacher as a Keras model of raw strings (tensorflow-text's tokenizer, its own batches).
    reference = BertTextClassifier.from_preset(str(root / "teacher")).predict(texts)
    np.testing.assert_allclose(from_cache, reference, rtol=0, atol=1e-4)


def test_the_teacher_logits_are_computed_once_and_a_changed_teacher_recomputes_them(
    distilled, tmp_path, monkeypatch, caplog
):
    root = distilled["root"]
    out = tmp_path / "out"
    computed = []
    logits_of = teacher._logits_of

    def counting(model_fn, tokenizer, info, examples, on_batch):
        computed.append(len(examples))
        return logits_of(model_fn, tokenizer, info, examples, on_batch)

    monkeypatch.setattr(teacher, "_logits_of", counting)
    monkeypatch.setattr(teacher, "SHARD_TEXTS", 100)  # 3 shards, each written when done
    monkeypatch.setattr(teacher, "PROGRESS_SECONDS", 0.0)
    config = distil_config(root, out, num_train_epochs=0.5)
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        distil(config)
    assert computed == [100, 100, 56]
    assert len(os.listdir(next((out / "teacher_logits").iterdir()))) == 3
    progress = [r.getMessage() for r in caplog.records if "teacher logits: " in r.getMessage()]
    assert progress and "of 256 texts" in progress[0] and "s left" in progress[0]
    # Another run in the folder (features made again: another transfer file) computes only the new.
    extra = tmp_path / "more.txt"
    extra.write_text((root / "data" / "transfer.txt").read_text() + "a new merry text\n")
    computed.clear()
    distil(dataclasses.replace(config, transfer_file=str(extra), output_dir=str(tmp_path / "o2")))
    assert computed == [100, 100, 57]  # the second output_dir has a cache of its own
    distil(dataclasses.replace(config, transfer_file=str(extra)))  # resumes: features made anew
    assert computed == [100, 100, 57, 1]
    # A teacher trained on (another checkpoint) is another teacher: everything again.
    changed = tmp_path / "teacher"
    shutil.copytree(root / "teacher", changed)
    trained_on = dict(output_dir=str(changed), num_train_epochs=3.5, do_eval=False)
    run_script(CLASSIFIER, dataclasses.replace(distilled["teacher_config"], **trained_on))
    distil(dataclasses.replace(config, teacher_dir=str(changed)))
    assert computed == [100, 100, 57, 1, 100, 100, 56]
    # The other teacher's logits are gone: one teacher's folder in the cache.
    assert len(os.listdir(out / "teacher_logits")) == 1
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]


def test_another_bert_starts_the_student_with_its_encoder_and_a_new_head(
    distilled, tmp_path, google_ckpt_dir, w_vocab_file, caplog
):
    # Turc et al.'s recipe: a small pretrained BERT (here the fixture checkpoint, its own vocab).
    config = distil_config(
        distilled["root"], tmp_path / "out", student_layers=None, num_train_epochs=0.25,
        student_config=str(google_ckpt_dir / "bert_config.json"),
        student_init_checkpoint=str(google_ckpt_dir / "bert_model.ckpt"), vocab_file=w_vocab_file,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        outcome = distil(config)
    restored = [r.getMessage() for r in caplog.records if "Initialized from" in r.getMessage()]
    assert any(
        "bert_model.ckpt: restored the encoder; starts new: the classifier head" in line
        for line in restored
    ), restored
    task = json.loads((tmp_path / "out" / "task.json").read_text())
    assert task["bert_config"] == json.loads((google_ckpt_dir / "bert_config.json").read_text())
    assert (tmp_path / "out" / "vocab.txt").read_text() == open(w_vocab_file).read()
    assert not (tmp_path / "out" / "student_init").exists()
    assert outcome["student"]["teacher_layers"] is None


# ---------------------------------------------------------------------------- the Keras way


def test_keras_distillation_loss_is_the_float64_reference_on_keras_targets():
    from bert_tf.models.distillation import DistillationLoss

    rng = np.random.default_rng(1)
    student_logits = rng.normal(0, 3, (5, 3)).astype(np.float32)
    teacher_logits = rng.normal(0, 3, (5, 3)).astype(np.float32)
    labels, hard = rng.integers(0, 3, 5), np.array([1, 0, 1, 1, 0], np.float32)
    targets = np.concatenate([teacher_logits, labels[:, None], hard[:, None]], 1).astype(np.float32)
    loss = DistillationLoss("single_label", 3, temperature=2.5, hard_label_weight=0.7)
    expected = _reference_loss(
        student_logits, teacher_logits, labels, hard, "single_label", 2.5, 0.7
    )
    assert float(loss(targets, student_logits)) == pytest.approx(expected, rel=1e-5)


def test_keras_distil_makes_a_student_that_learns_the_teacher_from_unlabelled_texts(distilled):
    from bert_tf.models import BertTextClassifier
    from bert_tf.models.distillation import distil as keras_distil

    root = distilled["root"]
    the_teacher = BertTextClassifier.from_preset(str(root / "teacher"))
    student_model = keras_distil(the_teacher, student_layers=1, temperature=2.0)
    assert student_model.task_model.config.num_hidden_layers == 1
    # The teacher is not part of the student: fit trains, and save writes, the student's alone.
    assert len(student_model.trainable_variables) == len(
        student_model.task_model.trainable_variables
    )
    from bert_tf.checkpoints import google_variable_names

    teacher_weights = google_variable_names(the_teacher.task_model)
    student_weights = google_variable_names(student_model.task_model)
    for name in ("attention/output/dense/kernel", "output/LayerNorm/gamma"):
        np.testing.assert_array_equal(
            student_weights[f"bert/encoder/layer_0/{name}"].numpy(),
            teacher_weights[f"bert/encoder/layer_1/{name}"].numpy(),
        )
    np.testing.assert_array_equal(
        student_weights["output_weights"].numpy(), teacher_weights["output_weights"].numpy()
    )
    texts = (root / "data" / "transfer.txt").read_text().splitlines()
    dev = [line.split("\t") for line in (root / "data" / "dev.tsv").read_text().splitlines()]
    dev_texts, dev_labels = [t for t, _ in dev], [["neg", "pos"].index(y) for _, y in dev]
    # The head turned around: every dev text wrong. Only the teacher can say which way is right.
    output_weights = student_weights["output_weights"]
    output_weights.assign(-output_weights)
    targets = student_model.distillation_targets(texts)  # the teacher's logits, no label
    np.testing.assert_array_equal(targets[:, :2], the_teacher.predict(texts, verbose=0))
    np.testing.assert_array_equal(targets[:, 2:], 0.0)
    lowest = float(student_model.loss(targets, targets[:, :2]))  # at the teacher's own logits

    def excess_loss():
        return float(student_model.loss(targets, student_model.predict(texts, verbose=0))) - lowest

    def dev_accuracy():
        return student_model.evaluate(dev_texts, dev_labels, return_dict=True)["accuracy"]

    before, accuracy_before = excess_loss(), dev_accuracy()
    assert accuracy_before < 0.15
    student_model.compile(learning_rate=2e-3)
    student_model.fit(x=texts, batch_size=16, epochs=10, verbose=0)  # no labels
    assert excess_loss() < 0.5 * before
    assert dev_accuracy() > accuracy_before + 0.25
    with pytest.raises(ValueError, match=r"^student_layers=3: the teacher has 2 layers"):
        keras_distil(the_teacher, student_layers=3)


# ----------------------------------------------------------- multi-label and regression teachers


def _write_multi_label(folder, rng):
    """train/dev/test.tsv of texts with a positive word, a negative one or both (labels pos,neg),
    and transfer.txt; the test texts."""
    os.makedirs(folder, exist_ok=True)
    texts = {}
    for split, size in (("train", 48), ("dev", 16), ("test", 6), ("transfer", 16)):
        rows = []
        for _ in range(size):
            labels = rng.choice([("pos",), ("neg",), ("neg", "pos")])
            words = rng.sample(FILLER, 6) + [
                rng.choice(POSITIVE if label == "pos" else NEGATIVE) for label in labels
            ]
            rows.append((" ".join(words), ",".join(labels)))
        texts[split] = [text for text, _ in rows]
        lines = [f"{t}\t{y}" for t, y in rows] if split in ("train", "dev") else texts[split]
        name = "transfer.txt" if split == "transfer" else f"{split}.tsv"
        (folder / name).write_text("\n".join(lines) + "\n")
    return texts["test"]


def _write_stsb(folder, rng):
    """A tiny STS-B layout (header, 10 columns; score 5 when both sentences share their word) and
    a transfer file of pairs; the test pairs."""
    header = (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    )
    os.makedirs(folder, exist_ok=True)
    pairs = {}
    for split, size in (("train", 48), ("dev", 16), ("test", 6), ("transfer", 16)):
        pairs[split] = []
        lines = [header if split in ("train", "dev") else header.rsplit("\t", 1)[0]]
        for i in range(size):
            a, b = rng.choice(POSITIVE), rng.choice(POSITIVE + NEGATIVE)
            pairs[split].append((f"she was {a}", f"he was {b}"))
            row = f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\tshe was {a}\the was {b}"
            lines.append(f"{row}\t{5.0 if a == b else 0.0}" if split in ("train", "dev") else row)
        if split == "transfer":
            lines = [f"{x}\t{y}" for x, y in pairs[split]]
        (folder / ("transfer.txt" if split == "transfer" else f"{split}.tsv")).write_text(
            "\n".join(lines) + "\n"
        )
    return pairs["test"]


@pytest.mark.parametrize("kind", ["multi_label", "regression"])
def test_a_multi_label_or_regression_teacher_makes_a_student_of_its_kind(tmp_path, kind):
    from bert_tf.models import BertTextClassifier

    rng = random.Random(3)
    small = dict(COMMON, num_train_epochs=1.0, iterations_per_loop=4, save_checkpoints_steps=4)
    if kind == "multi_label":
        inputs = _write_multi_label(tmp_path / "data", rng)
        settings_class, task = MultiLabelSettings, dict(multi_label=True)
    else:
        inputs = _write_stsb(tmp_path / "data", rng)
        settings_class = ClassifierSettings
        small.update(task_name="sts-b", text_a_column=None, label_column=None)
        task = {}
    teacher_config = settings_class(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, data_dir=str(tmp_path / "data"),
        output_dir=str(tmp_path / "teacher"), do_train=True, **task, **small,
    )  # fmt: skip
    run_script(CLASSIFIER, teacher_config)
    config = distil_config(
        tmp_path, tmp_path / "student", do_eval=True, do_predict=True,
        **{**small, "num_train_epochs": 2.0},
    )  # fmt: skip
    outcome = distil(config)
    task_json = json.loads((tmp_path / "student" / "task.json").read_text())
    assert task_json["bert_config"]["num_hidden_layers"] == 1
    assert outcome["student"]["transfer_texts"] == 16
    rows = (tmp_path / "student" / "test_results.tsv").read_text().splitlines()
    classifier = BertTextClassifier.from_preset(str(tmp_path / "student"))
    if kind == "multi_label":
        assert task_json["model_type"] == "multi_label"
        assert rows[0] == "neg\tpos"  # the header of labels
        expected = np.array([[float(p) for p in row.split("\t")] for row in rows[1:]])
        predicted = 1 / (1 + np.exp(-np.asarray(classifier.predict(inputs), np.float64)))
        assert "eval_micro_f1" in outcome["eval"]
    else:
        assert task_json["model_type"] == "classifier"
        assert task_json["classifier"]["is_regression"] and task_json["classifier"]["is_pair"]
        expected = np.array([[float(row)] for row in rows])
        columns = ([a for a, _ in inputs], [b for _, b in inputs])
        predicted = np.asarray(classifier.predict(columns), np.float64)
        assert "eval_pearson" in outcome["eval"]
    np.testing.assert_allclose(predicted, expected, rtol=0, atol=PROBABILITY_ATOL)


# ------------------------------------------------------------------------------------ resume


class _Killed(BaseException):
    """Ends a run the way a kill does: no later step, save or clean-up runs."""


def test_a_killed_distillation_resumes_to_the_uninterrupted_run_s_weights_bit_for_bit(
    distilled, tmp_path, monkeypatch
):
    root = distilled["root"]
    config = distil_config(root, tmp_path / "killed")
    save = CheckpointState.save

    def save_then_die_at_step_16(state, step, iterator=None):
        save(state, step, iterator)
        if step == 16:
            raise _Killed

    with monkeypatch.context() as patch:
        patch.setattr(CheckpointState, "save", save_then_die_at_step_16)
        with pytest.raises(_Killed):
            distil(config)
    assert tf.train.latest_checkpoint(str(tmp_path / "killed")).endswith("ckpt-16")
    computed = []
    logits_of = teacher._logits_of
    monkeypatch.setattr(teacher, "_logits_of", lambda *a: computed.append(1) or logits_of(*a))
    distil(config)
    assert not computed  # the features (the teacher's logits in them) were kept
    distil(dataclasses.replace(config, output_dir=str(tmp_path / "whole")))
    name, state = final_checkpoint_state(tmp_path / "killed")
    reference_name, reference = final_checkpoint_state(tmp_path / "whole")
    assert name == reference_name == "model.ckpt-32"
    assert sorted(state) == sorted(reference)
    for key, value in reference.items():
        np.testing.assert_array_equal(state[key], value, err_msg=key)


# ------------------------------------------------------------------------------- bad input


def _bad_transfer(tmp_path, content):
    path = tmp_path / "transfer.txt"
    path.write_bytes(content)
    return str(path)


@pytest.mark.parametrize(
    "case, message",
    [
        (
            "no_task_json",
            r"--teacher_dir=.*is not a run_classifier.py output_dir: it has no task.json",
        ),
        ("tagger_teacher", r"--teacher_dir=.* is a tagger run \(task.json\), not a classifier's"),
        ("too_many_layers", r"--student_layers=3: the teacher has 2 layers"),
        ("map_out_of_range", r"--student_layer_map=0,5: layer 5 is out of range"),
        ("empty_transfer", r"--transfer_file=.*transfer.txt holds no text"),
        ("blank_transfer", r"--transfer_file=.*transfer.txt holds no text"),
        ("not_utf8_transfer", r"--transfer_file: .*transfer.txt:2: not valid UTF-8"),
    ],
)
def test_bad_input_is_one_line_before_any_step(distilled, tmp_path, case, message):
    root = distilled["root"]
    changes = {}
    if case == "no_task_json":
        (tmp_path / "empty").mkdir()
        changes["teacher_dir"] = str(tmp_path / "empty")
    elif case == "tagger_teacher":
        shutil.copytree(root / "teacher", tmp_path / "tagger")
        task = json.loads((tmp_path / "tagger" / "task.json").read_text())
        task["model_type"] = "tagger"
        task.pop("classifier")
        (tmp_path / "tagger" / "task.json").write_text(json.dumps(task))
        changes["teacher_dir"] = str(tmp_path / "tagger")
    elif case == "too_many_layers":
        changes["student_layers"] = 3
    elif case == "map_out_of_range":
        changes.update(student_layers=None, student_layer_map="0,5")
    elif case == "empty_transfer":
        changes["transfer_file"] = _bad_transfer(tmp_path, b"")
    elif case == "blank_transfer":
        changes["transfer_file"] = _bad_transfer(tmp_path, b"\n  \n")
    else:
        changes["transfer_file"] = _bad_transfer(tmp_path, b"a merry text\nbad \xff text\n")
    config = distil_config(root, tmp_path / "out", **changes)
    with pytest.raises(InputError, match=message) as raised:
        distil(config)
    assert "\n" not in str(raised.value)
    written = os.listdir(tmp_path / "out") if (tmp_path / "out").exists() else []
    assert not [name for name in written if "tf_record" in name or "ckpt" in name], written


def test_the_script_ends_a_bad_teacher_with_one_error_line(tmp_path):
    (tmp_path / "data").mkdir()
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "run_distillation.py"),
            f"--teacher_dir={tmp_path}", "--student_layers=2", "--task_name=tsv",
            f"--data_dir={tmp_path / 'data'}", f"--output_dir={tmp_path / 'out'}", "--do_train=true",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --teacher_dir={tmp_path} is not a run_classifier.py output_dir: it has no task.json"
    )
