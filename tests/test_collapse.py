"""A run that learned nothing says so: one WARNING when every dev prediction is the same, and a sweep
marks such runs in sweep_results.tsv.

The collapse is made, not hoped for: the fixture's Google checkpoint with an original run_classifier.py
head whose bias outweighs anything the encoder can add (output_weights 0, output_bias [30, -30]) predicts
label "a" for every text; the same checkpoint with a head that reads the encoder predicts both labels.
"""

import logging
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks import run_script
from bert_tf.tasks.classification import task as classification

from conftest import W_WORDS as WORDS


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """train/dev.tsv of random w-words labelled a or b; test.tsv holds dev's texts, unlabelled, so
    test_results.tsv shows what the model predicts on dev."""
    folder = tmp_path_factory.mktemp("data")
    rng = random.Random(0)
    rows = {
        split: [
            (" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))), rng.choice("ab"))
            for _ in range(size)
        ]
        for split, size in (("train", 8), ("dev", 16))
    }
    for split, examples in rows.items():
        (folder / f"{split}.tsv").write_text("".join(f"{t}\t{label}\n" for t, label in examples))
    (folder / "test.tsv").write_text("".join(f"{t}\n" for t, _ in rows["dev"]))
    return folder


def write_head(ckpt_prefix, path, weights, bias):
    """The fixture checkpoint plus an original run_classifier.py head (output_weights [2, H])."""
    reader = tf.train.load_checkpoint(ckpt_prefix)
    tensors = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    tensors.update(output_weights=np.float32(weights), output_bias=np.float32(bias))
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=path, tensor_names=names, shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[name]) for name in names],
    )  # fmt: skip
    return path


def classifier_config(google_ckpt_dir, w_vocab_file, data_dir, output_dir, **overrides):
    values = dict(
        bert_config_file=str(google_ckpt_dir / "bert_config.json"), vocab_file=w_vocab_file,
        output_dir=str(output_dir), task_name="tsv", data_dir=str(data_dir), text_a_column="0",
        label_column="1", max_seq_length=16, train_batch_size=4, eval_batch_size=4,
        predict_batch_size=4, num_train_epochs=1.0, seed=3, learning_rate=2e-5,
    )  # fmt: skip
    values.update(overrides)
    return classification.ClassifierSettings(**values)


def _collapse_warnings(caplog):
    return [
        r.getMessage() for r in caplog.records
        if r.levelno == logging.WARNING and "learned nothing" in r.getMessage()
    ]  # fmt: skip


def _predicted_labels(output_dir):
    rows = (output_dir / "test_results.tsv").read_text().splitlines()
    return {"ab"[int(np.argmax([float(p) for p in row.split("\t")]))] for row in rows}


def test_a_head_forced_to_one_label_is_reported_in_one_warning_line(
    google_ckpt_dir, ckpt_prefix, w_vocab_file, data_dir, tmp_path, caplog
):
    hidden = 48
    head = write_head(
        ckpt_prefix, str(tmp_path / "forced" / "model.ckpt-1"), np.zeros([2, hidden]), [30, -30]
    )
    out = tmp_path / "out"
    config = classifier_config(
        google_ckpt_dir, w_vocab_file, data_dir, out, do_eval=True, do_predict=True,
        init_checkpoint=head, learning_rate=1e-4,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="absl"), caplog.at_level(logging.WARNING):
        run_script(classification.SPEC, config)
    assert _predicted_labels(out) == {"a"}  # the premise: one label for every dev text
    (warning,) = _collapse_warnings(caplog)
    assert "every dev label is 'a' (all 16)" in warning
    assert "--learning_rate=0.0001" in warning and "lower --learning_rate" in warning
    assert "\n" not in warning


def test_a_head_that_reads_the_text_gives_no_warning(
    google_ckpt_dir, ckpt_prefix, w_vocab_file, data_dir, tmp_path, caplog
):
    rng = np.random.default_rng(5)
    head = write_head(
        ckpt_prefix, str(tmp_path / "head" / "model.ckpt-1"), rng.normal(0, 2, [2, 48]), [0, 0]
    )
    out = tmp_path / "out"
    config = classifier_config(
        google_ckpt_dir, w_vocab_file, data_dir, out, do_eval=True, do_predict=True,
        init_checkpoint=head,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="absl"), caplog.at_level(logging.WARNING):
        run_script(classification.SPEC, config)
    assert _predicted_labels(out) == {"a", "b"}  # the premise: both labels predicted
    assert _collapse_warnings(caplog) == []


def test_a_sweep_marks_the_seeds_whose_run_collapsed(
    google_ckpt_dir, ckpt_prefix, w_vocab_file, data_dir, tmp_path
):
    # A learning rate too small to move a bias of 30: every seed's run stays collapsed.
    head = write_head(
        ckpt_prefix, str(tmp_path / "forced" / "model.ckpt-1"), np.zeros([2, 48]), [30, -30]
    )
    out = tmp_path / "sweep"
    config = classifier_config(
        google_ckpt_dir, w_vocab_file, data_dir, out, do_train=True, do_eval=True,
        init_checkpoint=head, learning_rate=(1e-9,), seed=(1, 2),
    )  # fmt: skip
    run_script(classification.SPEC, config)
    header, row = [
        line.split("\t") for line in (out / "sweep_results.tsv").read_text().splitlines()
    ]
    assert header[-1] == "collapsed_seeds" and row[-1] == "1,2"
