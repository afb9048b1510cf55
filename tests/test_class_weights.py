"""--class_weights for single-label classification: the weights a run uses and the loss it trains on,
against hand computations."""

import logging

import numpy as np
import pytest
from test_run_classifier import tsv_config

from bert_tf.errors import InputError
from bert_tf.tasks import run_script
from bert_tf.tasks.classification import task as classification

# Three labels, 3 / 2 / 1 training examples: "auto" gives n / (L * n_label) = 6 / 9, 6 / 6, 6 / 3.
TRAIN = [
    "good day\tpos",
    "fine day\tpos",
    "nice day\tpos",
    "bad day\tneg",
    "sad day\tneg",
    "a day\tmid",
]
AUTO = [6 / (3 * 1), 6 / (3 * 2), 6 / (3 * 3)]  # labels in sorted order: mid, neg, pos


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    (folder / "train.tsv").write_text("\n".join(TRAIN) + "\n")
    (folder / "dev.tsv").write_text("good day\tpos\nbad day\tneg\n")
    return folder


def weighted_run(data_dir, tmp_path, class_weights, **overrides):
    config = tsv_config(
        data_dir, tmp_path / "out", do_train=True, class_weights=class_weights,
        train_batch_size=2, num_train_epochs=1.0, **overrides,
    )  # fmt: skip
    return classification.ClassifierRun(config)


def test_auto_weights_are_the_inverse_label_frequencies(data_dir, tmp_path, caplog):
    # absl's logger: another test's flags may have set its level above INFO.
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        run = weighted_run(data_dir, tmp_path, "auto")
    assert run.labels == ["mid", "neg", "pos"]
    assert run.task.class_weights == pytest.approx(AUTO, rel=1e-12)
    assert "class weights (--class_weights=auto): mid=2, neg=1, pos=0.6667" in caplog.text


def test_the_training_loss_weights_each_example_by_its_label(data_dir, tmp_path):
    run = weighted_run(data_dir, tmp_path, "0.5,2,4")
    assert run.task.class_weights == [0.5, 2.0, 4.0]
    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 0.3], [-3.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    labels = np.array([0, 1, 2, 2])
    loss = run.task.loss(
        {"logits": logits.astype(np.float32)}, {"label_ids": labels}, {"examples": 4.0}
    )
    # By hand: cross-entropy of each row, times its label's weight, over the 4 examples.
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    cross_entropy = -log_probs[np.arange(4), labels]
    expected = np.sum(np.array([0.5, 2.0, 4.0])[labels] * cross_entropy) / 4
    assert float(loss["loss"]) == pytest.approx(expected, rel=1e-6)
    unweighted = weighted_run(data_dir, tmp_path, "none")
    assert unweighted.task.class_weights is None
    plain = unweighted.task.loss(
        {"logits": logits.astype(np.float32)}, {"label_ids": labels}, {"examples": 4.0}
    )
    assert float(plain["loss"]) == pytest.approx(np.mean(cross_entropy), rel=1e-6)


@pytest.mark.slow
def test_a_weighted_run_trains(data_dir, tmp_path):
    outcome = run_script(classification.SPEC, weighted_run(data_dir, tmp_path, "auto").settings)
    assert outcome["train"]["global_step"] == 3


@pytest.mark.parametrize(
    "value, message",
    [
        ("1,2", "--class_weights=1,2: needs 3 positive numbers"),
        ("1,0,2", "--class_weights=1,0,2: needs 3 positive numbers"),
        ("heavy", "--class_weights=heavy: auto, none or 3 comma-separated numbers"),
    ],
)
def test_bad_weights_are_one_line_naming_the_flag(data_dir, tmp_path, value, message):
    with pytest.raises(InputError, match=message):
        weighted_run(data_dir, tmp_path, value)


def test_auto_needs_every_label_in_the_training_data(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.tsv").write_text("good day\tpos\n")
    with pytest.raises(InputError, match="label 'neg' has no training example"):
        weighted_run(tmp_path / "data", tmp_path, "auto", labels="neg,pos")
