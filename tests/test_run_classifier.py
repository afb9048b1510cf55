"""run_classifier.py end to end: learning, the original's output files, the raw-text export, reuse, resume, bad input.

The data is a small learnable task written here: a sentence of filler words holds one word of a positive
or a negative set, and its label says which (chance is 50%).
"""

import dataclasses
import functools
import json
import logging
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.tasks import run_script
from bert_tf.tasks.classification.task import (
    SPEC,
    ClassifierRun,
    ClassifierSettings,
    ClassifierTask,
)
from bert_tf.tokenization import FullTokenizer
from bert_tf.training.checkpoint_state import CheckpointState

from conftest import PROBABILITY_ATOL, REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

POSITIVE = "happy glad joyful cheerful delighted merry".split()
NEGATIVE = "sad gloomy miserable unhappy wretched dismal".split()
FILLER = "the lady walked to the house and said that she was very much in".split()
TINY_CONFIG = str(SAMPLE_DIR / "bert_config_tiny.json")
VOCAB = str(SAMPLE_DIR / "vocab.txt")

run = functools.partial(run_script, SPEC)  # run_classifier.py's work


def _sentence(rng, label):
    words = rng.sample(FILLER, 7) + [rng.choice(POSITIVE if label == "pos" else NEGATIVE)]
    rng.shuffle(words)
    return " ".join(words)


def write_sentiment_tsv(data_dir, sizes=(("train", 256), ("dev", 64), ("test", 12)), seed=0):
    """train/dev/test.tsv: `sentence<TAB>label` lines (test without labels); returns the test sentences."""
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    test_sentences = []
    for split, size in sizes:
        lines = []
        for _ in range(size):
            label = rng.choice(["pos", "neg"])
            sentence = _sentence(rng, label)
            if split == "test":
                test_sentences.append(sentence)
                lines.append(sentence)
            else:
                lines.append(f"{sentence}\t{label}")
        with open(os.path.join(data_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return test_sentences


def tsv_config(data_dir, output_dir, **overrides):
    values = dict(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, output_dir=str(output_dir),
        task_name="tsv", data_dir=str(data_dir), text_a_column="0", label_column="1",
        max_seq_length=32, train_batch_size=16, eval_batch_size=8, predict_batch_size=8,
        learning_rate=1e-3, num_train_epochs=3.0, iterations_per_loop=16, log_steps=16,
        save_checkpoints_steps=32, seed=7,
    )  # fmt: skip
    values.update(overrides)
    return ClassifierSettings(**values)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One train + eval + predict + export run, shared by the tests that read its outputs."""
    root = tmp_path_factory.mktemp("classifier")
    test_sentences = write_sentiment_tsv(root / "data")
    config = tsv_config(
        root / "data", root / "out", do_train=True, do_eval=True, do_predict=True,
        export_dir=str(root / "export"),
    )  # fmt: skip
    outcome = run(config)
    return {"root": root, "config": config, "outcome": outcome, "test_sentences": test_sentences}


def _read_results(path):
    return dict(line.split(" = ") for line in open(path).read().splitlines())


def test_fine_tuning_learns_the_task_and_writes_the_original_outputs(trained):
    out = trained["root"] / "out"
    results = _read_results(out / "eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_loss", "global_step", "loss"}
    assert float(results["eval_accuracy"]) >= 0.85  # chance is 0.5 on 64 dev sentences
    assert int(results["global_step"]) == 48  # int(256 / 16 * 3.0), as the original counts steps
    rows = [line.split("\t") for line in (out / "test_results.tsv").read_text().splitlines()]
    assert len(rows) == 12 and all(len(row) == 2 for row in rows)  # one per test line, no padding
    np.testing.assert_allclose([sum(map(float, row)) for row in rows], 1.0, atol=1e-5)
    assert (out / "labels.txt").read_text() == "neg\npos\n"
    task = json.loads((out / "task.json").read_text())
    # Shared fields flat, the classifier's own under its name.
    assert (task["model_type"], task["labels"], task["classifier"]["is_pair"]) == (
        "classifier",
        ["neg", "pos"],
        False,
    )
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record"):
        assert (out / name).exists() and (out / f"{name}.settings.json").exists()
    assert not [name for name in os.listdir(out) if ".tmp" in name]


def test_predicting_from_the_fine_tuned_checkpoint_in_a_new_output_dir_gives_the_run_s_results(
    trained, tmp_path
):
    # The original README's "Prediction from classifier": --init_checkpoint=$TRAINED_CLASSIFIER
    # names the training dir's model.ckpt-<step>, and the new output dir holds nothing yet.
    out = trained["root"] / "out"
    checkpoint = tf.train.latest_checkpoint(str(out))
    assert os.path.basename(checkpoint) == "model.ckpt-48"
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "run_classifier.py"), "--task_name=tsv",
            "--do_predict=true", f"--data_dir={trained['root'] / 'data'}", f"--vocab_file={VOCAB}",
            f"--bert_config_file={TINY_CONFIG}", f"--init_checkpoint={checkpoint}",
            "--max_seq_length=32", "--text_a_column=0", "--label_column=1",
            f"--output_dir={tmp_path / 'predicted'}",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "restored the encoder and the classifier head" in result.stderr

    def probabilities(folder):
        rows = (folder / "test_results.tsv").read_text().splitlines()
        return np.array([[float(p) for p in row.split("\t")] for row in rows])

    # Probabilities printed to 6 decimals; an untrained head is off by 0.01 to 0.5.
    np.testing.assert_allclose(probabilities(tmp_path / "predicted"), probabilities(out), atol=1e-5)


def test_training_batches_are_the_original_s_cut_to_their_longest_input_but_on_a_tpu(trained):
    # By default training reads the original's batches (shuffled examples) cut to their longest
    # input; --nocut_batches_to_longest pads them to max_seq_length, as the original does, and so
    # does a TPU. --length_bucketing=true cuts batches of similar lengths. Prediction cuts the
    # padding whatever the flags, but on a TPU (the export test below checks its outputs against
    # unpadded requests).
    out = trained["root"] / "out"
    assert trained["config"].length_bucketing is False  # the default
    assert trained["config"].cut_batches_to_longest is True  # the default
    for strategy, bucketing, cut, train_width, predict_width in (
        ("one_device", False, False, 32, 16),
        ("one_device", False, True, 16, 16),
        ("one_device", True, False, 16, 16),
        ("tpu", False, True, 32, 32),
    ):
        classifier = ClassifierRun(trained["config"])
        classifier.settings = dataclasses.replace(
            trained["config"], length_bucketing=bucketing, cut_batches_to_longest=cut,
            distribution_strategy=strategy,
        )  # fmt: skip
        train = next(iter(classifier.dataset(str(out / "train.tf_record"), 16, True)))
        assert train["input_ids"].shape == (16, train_width)
        predict = classifier.dataset(str(out / "predict.tf_record"), 8, False, num_records=12)
        widths = [batch["input_ids"].shape[1] for batch in predict]
        assert widths == [predict_width] * 2  # 12 short rows filled to two batches of 8


def test_feature_files_have_the_original_names_and_padding(trained):
    out = trained["root"] / "out"
    example = tf.train.Example.FromString(
        next(iter(tf.data.TFRecordDataset(str(out / "eval.tf_record")))).numpy()
    )
    features = example.features.feature
    assert set(features) == {
        "input_ids",
        "input_mask",
        "segment_ids",
        "label_ids",
        "is_real_example",
    }
    assert len(features["input_ids"].int64_list.value) == 32
    assert features["input_ids"].int64_list.value[0] == 101  # [CLS]


_LOAD_EXPORT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    sentences = json.loads(sys.argv[2])
    default = model.signatures["serving_default"]
    out = default(text_a=tf.constant(sentences))
    # TF Serving's REST bodies, mapped to the signature as the server maps them:
    # "instances": one object per example (row format); "inputs": one list per input (columnar).
    instances = {"instances": [{"text_a": s} for s in sentences[:2]]}
    rows = default(text_a=tf.constant([row["text_a"] for row in instances["instances"]]))
    columnar = {"inputs": {"text_a": sentences[:2]}}
    columns = default(**{k: tf.constant(v) for k, v in columnar["inputs"].items()})
    ids = model.signatures["preprocess"](text_a=tf.constant(sentences[:2]))
    by_ids = model.signatures["serve_ids"](**ids)
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "probabilities": out["probabilities"].numpy().tolist(),
        "labels": [x.decode() for x in out["label"].numpy()],
        "rows": rows["probabilities"].numpy().tolist(),
        "columns": columns["probabilities"].numpy().tolist(),
        "by_ids": by_ids["probabilities"].numpy().tolist(),
        "ids_dtype": ids["input_ids"].dtype.name,
    }))
    """
)


def test_export_serves_raw_text_in_a_tensorflow_only_process_like_test_results(trained):
    export_path = trained["outcome"]["export"]
    assert export_path == str(trained["root"] / "export" / "1")
    assert (trained["root"] / "export" / "1" / "assets" / "vocab.txt").exists()
    assert (trained["root"] / "export" / "1" / "assets" / "labels.txt").read_text() == "neg\npos\n"
    sentences = trained["test_sentences"] + ["", "x " * 500]  # an empty and an over-long text
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_EXPORT, export_path, json.dumps(sentences)],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["signatures"] == ["preprocess", "preprocess_pair", "serve_ids", "serving_default"]
    assert served["ids_dtype"] == "int32"
    rows = (trained["root"] / "out" / "test_results.tsv").read_text().splitlines()
    expected = np.array([[float(p) for p in row.split("\t")] for row in rows])
    probabilities = np.array(served["probabilities"])
    # test_results.tsv rounds to 6 decimals and pads batches to 8 (float32 rounding of probabilities
    # in [0, 1]); a wrong token, mask or label order changes them by 1e-2 or more.
    np.testing.assert_allclose(probabilities[: len(rows)], expected, rtol=0, atol=PROBABILITY_ATOL)
    labels = ["neg", "pos"]
    assert served["labels"][: len(rows)] == [labels[i] for i in expected.argmax(-1)]
    assert len(served["labels"]) == len(sentences)  # the empty and the 500-word text are answered
    for name in ("rows", "columns", "by_ids"):
        np.testing.assert_allclose(served[name], probabilities[:2], rtol=0, atol=PROBABILITY_ATOL)


# saved_model_cli, with tensorflow_text's ops registered first (the TF Serving binary links them in).
_SAVED_MODEL_CLI = (
    "import sys, tensorflow_text\n"
    "from tensorflow.python.tools import saved_model_cli\n"
    "sys.argv = ['saved_model_cli', *sys.argv[1:]]\n"
    "saved_model_cli.main()\n"
)


def test_saved_model_cli_runs_the_export_as_tf_serving_loads_it(trained):
    export_path = trained["outcome"]["export"]
    # `run` loads the export as TF Serving's C++ loader does (a TF1 session restoring the variables).
    sentence = trained["test_sentences"][0]
    ran = subprocess.run(
        [
            sys.executable, "-c", _SAVED_MODEL_CLI, "run", "--dir", export_path, "--tag_set", "serve",
            "--signature_def", "serving_default", "--input_exprs", f"text_a={json.dumps([sentence])}",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    first = (trained["root"] / "out" / "test_results.tsv").read_text().splitlines()[0].split("\t")
    assert "Result for output key probabilities" in ran.stdout
    printed = ran.stdout.split("Result for output key probabilities:")[1].split("Result")[0]
    values = [float(x) for x in printed.replace("[", " ").replace("]", " ").split()]
    np.testing.assert_allclose(values, [float(p) for p in first], rtol=0, atol=PROBABILITY_ATOL)


def test_export_saved_model_script_rebuilds_the_classifier_from_the_run(trained, tmp_path):
    from bert_tf.tasks.exporting import ExportSettings, export_checkpoint

    out = str(trained["root"] / "out")
    path = export_checkpoint(
        ExportSettings(init_checkpoint=out, export_dir=str(tmp_path), vocab_file=VOCAB)
    )
    assert path == str(tmp_path / "1")
    loaded = tf.saved_model.load(path)
    original = tf.saved_model.load(trained["outcome"]["export"])
    text = tf.constant(trained["test_sentences"][:3])
    np.testing.assert_allclose(
        loaded.signatures["serving_default"](text_a=text)["probabilities"].numpy(),
        original.signatures["serving_default"](text_a=text)["probabilities"].numpy(),
        rtol=0, atol=PROBABILITY_ATOL,
    )  # fmt: skip


def test_features_are_reused_while_the_settings_match_and_rebuilt_when_not(trained, tmp_path):
    data = trained["root"] / "data"
    out = tmp_path / "out"
    run(tsv_config(data, out, do_eval=True, init_checkpoint=str(trained["root"] / "out")))
    eval_file = out / "eval.tf_record"
    written = eval_file.stat().st_mtime_ns
    fine_tuned = str(trained["root"] / "out")
    run(tsv_config(data, out, do_eval=True, init_checkpoint=fine_tuned))
    assert eval_file.stat().st_mtime_ns == written
    results = run(
        tsv_config(data, out, do_eval=True, max_seq_length=24, init_checkpoint=fine_tuned)
    )
    results = results["eval"]
    assert eval_file.stat().st_mtime_ns != written
    saved = json.loads((out / "eval.tf_record.settings.json").read_text())
    assert saved["settings"]["max_seq_length"] == 24
    assert results["eval_accuracy"] >= 0.85  # the fine-tuned weights, on the rebuilt features


def _write_stsb(data_dir, rng):
    """A tiny STS-B layout (header, 10 columns): the score is 5 when both sentences share their word."""
    header = (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    )
    os.makedirs(data_dir, exist_ok=True)
    for split, size in (("train", 32), ("dev", 16), ("test", 4)):
        lines = [header if split != "test" else header.rsplit("\t", 1)[0]]
        for i in range(size):
            a, b = rng.choice(POSITIVE), rng.choice(POSITIVE + NEGATIVE)
            score = 5.0 if a == b else 0.0
            s1, s2 = f"she was {a}", f"he was {b}"
            row = f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{s1}\t{s2}"
            lines.append(row if split == "test" else f"{row}\t{score}")
        (data_dir / f"{split}.tsv").write_text("\n".join(lines) + "\n")


def test_regression_pair_task_reports_correlations_and_exports_scores(tmp_path, monkeypatch):
    _write_stsb(tmp_path / "data", random.Random(1))
    # The dev scores the run's eval step computed, kept as it computes them (no dev predictions file).
    dev_outputs = []
    text_logits = ClassifierTask.text_logits

    def spy(self, path, info, batch_size, feature_keys=()):
        result = text_logits(self, path, info, batch_size, feature_keys)
        if "label_ids" in feature_keys:
            dev_outputs.append(result)
        return result

    monkeypatch.setattr(ClassifierTask, "text_logits", spy)
    config = ClassifierSettings(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, output_dir=str(tmp_path / "out"),
        task_name="sts-b", data_dir=str(tmp_path / "data"), max_seq_length=16, train_batch_size=16,
        num_train_epochs=1.0, do_train=True, do_eval=True, do_predict=True,
        export_dir=str(tmp_path / "export"), seed=3,
    )  # fmt: skip
    outcome = run(config)
    assert set(outcome["eval"]) == {
        "eval_loss", "eval_pearson", "eval_spearman", "eval_corr", "loss", "global_step",
    }  # fmt: skip
    rows = (tmp_path / "out" / "test_results.tsv").read_text().splitlines()
    assert len(rows) == 4 and all("\t" not in row for row in rows)  # one score per line
    loaded = tf.saved_model.load(outcome["export"])
    served = loaded.signatures["serving_default"](
        text_a=tf.constant(["she was happy"]), text_b=tf.constant(["he was happy"])
    )
    assert served["predictions"].shape == (1,)
    assert set(loaded.signatures["serving_default"].structured_input_signature[1]) == {
        "text_a",
        "text_b",
    }
    # eval_results.txt against scipy on those scores and dev.tsv's labels (ties among both).
    (dev,) = dev_outputs
    rows = (tmp_path / "data" / "dev.tsv").read_text().splitlines()[1:]
    labels = np.array([float(row.split("\t")[9]) for row in rows])
    np.testing.assert_array_equal(np.reshape(dev["label_ids"], -1), labels)  # in dev.tsv's order
    predictions = np.asarray(dev["logits"], np.float64)[:, 0]
    assert np.ptp(predictions) > 0 and len(set(labels)) < len(labels)
    reported = {
        key: float(value)
        for key, value in _read_results(tmp_path / "out" / "eval_results.txt").items()
    }
    pearson = scipy.stats.pearsonr(predictions, labels).statistic
    spearman = scipy.stats.spearmanr(predictions, labels).statistic
    # The same float64 numbers through two implementations: equal to float64 rounding.
    assert reported["eval_pearson"] == pytest.approx(pearson, rel=1e-9, abs=1e-12)
    assert reported["eval_spearman"] == pytest.approx(spearman, rel=1e-9, abs=1e-12)
    assert reported["eval_corr"] == pytest.approx((pearson + spearman) / 2, rel=1e-9, abs=1e-12)
    mse = np.mean((predictions - labels) ** 2)
    assert reported["eval_loss"] == pytest.approx(mse, rel=1e-9)


class _Killed(BaseException):
    """Ends a run the way a kill does: no later step, save or clean-up runs."""


def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path, monkeypatch, caplog):
    write_sentiment_tsv(tmp_path / "data", sizes=(("train", 128), ("dev", 8), ("test", 4)))
    config = tsv_config(
        tmp_path / "data", tmp_path / "out", do_train=True, num_train_epochs=2.0,
        save_checkpoints_steps=4, iterations_per_loop=4, log_steps=4,
    )  # fmt: skip
    save = CheckpointState.save

    def save_then_die_at_step_8(state, step, iterator=None):
        save(state, step, iterator)
        if step == 8:
            raise _Killed

    with monkeypatch.context() as patch:
        patch.setattr(CheckpointState, "save", save_then_die_at_step_8)
        with pytest.raises(_Killed):
            run(config)
    assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("ckpt-8")
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        outcome = run(config)
    assert any(
        "at global step 8" in r.getMessage() for r in caplog.records if "Resumed" in r.getMessage()
    )
    assert outcome["train"]["global_step"] == 16  # int(128 / 16 * 2.0)
    assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("ckpt-16")


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing_column", r"train\.tsv:2"),
        ("unknown_dev_label", r"dev\.tsv:1: label 'maybe'"),
        ("empty_train", r"train\.tsv"),
        ("invalid_utf8", r"train\.tsv:2"),
    ],
)
def test_bad_input_names_the_file_and_line_and_writes_no_features(tmp_path, case, message):
    write_sentiment_tsv(tmp_path / "data", sizes=(("train", 8), ("dev", 4), ("test", 2)))
    train, dev = tmp_path / "data" / "train.tsv", tmp_path / "data" / "dev.tsv"
    if case == "missing_column":
        lines = train.read_text().splitlines()
        lines[1] = lines[1].split("\t")[0]
        train.write_text("\n".join(lines) + "\n")
    elif case == "unknown_dev_label":
        dev.write_text("a fine sentence\tmaybe\n")
    elif case == "empty_train":
        train.write_text("")
    else:
        train.write_bytes(b"good line\tpos\nbad \xff line\tneg\n")
    config = tsv_config(tmp_path / "data", tmp_path / "out", do_train=True, do_eval=True)
    with pytest.raises(InputError, match=message):
        run(config)
    written = sorted(os.listdir(tmp_path / "out"))
    bad_split = "eval" if case == "unknown_dev_label" else "train"
    # The bad file's features are not written at all; nothing is left half-written.
    assert f"{bad_split}.tf_record" not in written
    assert not [name for name in written if ".tmp" in name]


# Texts of 48 and 24 pieces: as a pair and alone, both overflow max_seq_length=32.
_LONG_A = "Emma Woodhouse, handsome, clever, and rich, with a comfortable home. " * 3
_LONG_B = "She had lived nearly twenty-one years in the world. " * 2


def _truncated_pair_ids(tokenizer, text_a, text_b, max_seq_length):
    """The original's packing, written out: pop from the longer text (b on a tie) until the pair
    fits max_seq_length - 3, then [CLS] a [SEP] b [SEP]; a single text is cut to max_seq_length - 2."""
    tokens_a, tokens_b = tokenizer.tokenize(text_a), tokenizer.tokenize(text_b)
    if tokens_b:
        while len(tokens_a) + len(tokens_b) > max_seq_length - 3:
            (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
        tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
        segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    else:
        tokens = ["[CLS]", *tokens_a[: max_seq_length - 2], "[SEP]"]
        segments = [0] * len(tokens)
    padding = [0] * (max_seq_length - len(tokens))
    return {
        "input_ids": tokenizer.convert_tokens_to_ids(tokens) + padding,
        "input_mask": [1] * len(tokens) + padding,
        "segment_ids": segments + padding,
    }


def test_over_long_texts_are_cut_not_refused(tmp_path):
    rng = random.Random(5)
    data = tmp_path / "data"
    data.mkdir()
    rows = {
        split: [
            (_sentence(rng, label), _sentence(rng, label), label) for label in ["pos", "neg"] * n
        ]
        for split, n in (("train", 8), ("dev", 2))
    }
    # The pair is cut longest-first to 15 + 14 pieces; the text without text_b to 30 pieces.
    rows["dev"] += [(_LONG_A, _LONG_B, "pos"), (_LONG_A, "", "pos")]
    for split, split_rows in (*rows.items(), ("test", [row[:2] for row in rows["dev"]])):
        lines = ["\t".join(row) + "\n" for row in split_rows]
        (data / f"{split}.tsv").write_text("".join(lines))
    out = tmp_path / "out"
    outcome = run(
        tsv_config(
            data, out, text_b_column="1", label_column="2", do_train=True, do_eval=True,
            do_predict=True, num_train_epochs=1.0,
        )
    )  # fmt: skip
    assert outcome["eval"]["global_step"] == 1
    tokenizer = FullTokenizer(VOCAB)
    dev = rows["dev"]
    assert [len(tokenizer.tokenize(text)) for text in (_LONG_A, _LONG_B)] == [48, 24]
    records = [
        tf.train.Example.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(str(out / "eval.tf_record"))
    ]
    assert len(records) == len(dev)  # one feature per dev row, the over-long ones included
    for row, (record, (text_a, text_b, _)) in enumerate(zip(records, dev, strict=True)):
        expected = _truncated_pair_ids(tokenizer, text_a, text_b, 32)
        for name, values in expected.items():
            assert list(record.features.feature[name].int64_list.value) == values, (row, name)
    pair, alone = (records[i].features.feature for i in (-2, -1))
    assert (
        sum(pair["input_mask"].int64_list.value) == sum(alone["input_mask"].int64_list.value) == 32
    )
    assert sum(pair["segment_ids"].int64_list.value) == 15  # b's 14 pieces kept and its [SEP]
    # test.tsv holds the dev texts: one probability row per input, and the eval results are those
    # of all of them (the over-long rows counted).
    predicted = np.array(
        [
            [float(p) for p in line.split("\t")]
            for line in (out / "test_results.tsv").read_text().splitlines()
        ]
    )
    assert predicted.shape == (len(dev), 2)
    labels = np.array([["neg", "pos"].index(row[2]) for row in dev])
    nll = -np.log(predicted[np.arange(len(dev)), labels])
    # Probabilities are printed to 6 decimals (~1e-6 in each NLL of ~0.7). A model after one step
    # tells the labels apart (NLL ~0.55 against ~0.87), not the texts: as both long rows are "pos",
    # leaving them out would move the mean by ~0.05.
    assert outcome["eval"]["eval_loss"] == pytest.approx(nll.mean(), abs=1e-5)
    assert abs(nll[:-1].mean() - nll.mean()) > 1e-4 and abs(nll[:-2].mean() - nll.mean()) > 1e-4
    accuracy = np.mean(predicted.argmax(axis=1) == labels)
    assert outcome["eval"]["eval_accuracy"] == pytest.approx(accuracy)


def test_a_corrupt_cached_feature_file_is_one_line_naming_it(trained, tmp_path):
    data = trained["root"] / "data"
    run(
        tsv_config(
            data, tmp_path / "out", do_eval=True, init_checkpoint=str(trained["root"] / "out")
        )
    )
    eval_file = tmp_path / "out" / "eval.tf_record"
    eval_file.write_bytes(eval_file.read_bytes()[:-30])  # truncated, settings unchanged: reused
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "run_classifier.py"), "--task_name=tsv",
            f"--data_dir={data}", "--text_a_column=0", "--label_column=1", "--max_seq_length=32",
            f"--bert_config_file={TINY_CONFIG}", f"--vocab_file={VOCAB}",
            f"--output_dir={tmp_path / 'out'}", "--do_eval",
            f"--init_checkpoint={trained['root'] / 'out'}",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "eval.tf_record: corrupt or truncated TFRecord" in last
    assert "Traceback" not in result.stderr


def _write_labelled_test(data_dir, size, seed):
    """test.tsv with `sentence<TAB>label` lines, as train.tsv; returns the labels."""
    rng = random.Random(seed)
    labels = [rng.choice(["pos", "neg"]) for _ in range(size)]
    lines = [f"{_sentence(rng, label)}\t{label}\n" for label in labels]
    (data_dir / "test.tsv").write_text("".join(lines), encoding="utf-8")
    return labels


def test_a_labelled_test_file_is_scored_in_test_results_txt_like_dev(trained, tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text((trained["root"] / "data" / "train.tsv").read_text())
    gold = _write_labelled_test(data, 20, seed=3)
    config = tsv_config(
        data, tmp_path / "out", do_predict=True, init_checkpoint=str(trained["root"] / "out")
    )
    with caplog.at_level(logging.INFO, logger="absl"):
        run(config)
    out = tmp_path / "out"
    results = _read_results(out / "test_results.txt")
    assert set(results) == set(_read_results(trained["root"] / "out" / "eval_results.txt"))
    # The reference: test_results.tsv's argmax in labels.txt's column order, against test.tsv.
    columns = (out / "labels.txt").read_text().split()
    rows = [line.split("\t") for line in (out / "test_results.tsv").read_text().splitlines()]
    probabilities = np.array(rows, dtype=np.float64)
    predicted = [columns[i] for i in probabilities.argmax(axis=1)]
    accuracy = np.mean([p == g for p, g in zip(predicted, gold, strict=True)])
    assert float(results["eval_accuracy"]) == pytest.approx(accuracy, abs=1e-9)
    gold_probabilities = probabilities[np.arange(len(gold)), [columns.index(g) for g in gold]]
    # test_results.tsv's probabilities have 6 decimals: their log is within 1e-3 of the model's.
    loss = -np.mean(np.log(gold_probabilities))
    assert float(results["eval_loss"]) == pytest.approx(loss, abs=1e-3)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.strip() == f"eval_accuracy = {results['eval_accuracy']}" for m in messages)


def test_a_test_file_without_labels_writes_no_test_results_and_says_so(trained, tmp_path, caplog):
    config = tsv_config(
        trained["root"] / "data", tmp_path / "out", do_predict=True,
        init_checkpoint=str(trained["root"] / "out"),
    )  # fmt: skip
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "test_results.txt").write_text("eval_accuracy = 0.5\n")  # of other data
    with caplog.at_level(logging.INFO, logger="absl"):
        run(config)
    assert (tmp_path / "out" / "test_results.tsv").exists()
    assert not (tmp_path / "out" / "test_results.txt").exists()
    assert not (trained["root"] / "out" / "test_results.txt").exists()
    said = [r.getMessage() for r in caplog.records if "holds no labels" in r.getMessage()]
    assert len(said) == 1 and "test.tsv" in said[0], said


def test_a_test_label_outside_the_training_labels_is_one_line_before_any_step(tmp_path):
    write_sentiment_tsv(tmp_path / "data", sizes=(("train", 8), ("dev", 4), ("test", 2)))
    (tmp_path / "data" / "test.tsv").write_text("a fine sentence\tpos\nanother one\tmaybe\n")
    config = tsv_config(tmp_path / "data", tmp_path / "out", do_train=True, do_predict=True)
    with pytest.raises(InputError, match=r"test\.tsv:2: label 'maybe' is not one of") as error:
        run(config)
    assert "\n" not in str(error.value)
    assert not [name for name in os.listdir(tmp_path / "out") if name.endswith(".tf_record")]


@pytest.mark.parametrize("labels", [None, "neg,pos"])
def test_a_wrong_data_dir_is_one_line_naming_the_folder_with_or_without_labels(tmp_path, labels):
    missing = tmp_path / "no_such_data"
    config = tsv_config(missing, tmp_path / "out", do_train=True, labels=labels)
    with pytest.raises(InputError) as error:
        run(config)
    assert str(error.value) == (
        f"--data_dir={missing}: no such folder; pass the folder that holds the task's train, dev "
        "and test files"
    )
