"""--init_checkpoint restores every part of the model the checkpoint holds, and only the right parts.

The reference for a fine-tuned checkpoint in the original's format is its own arithmetic: the original
run_classifier.py computes probabilities = softmax(pooled_output @ output_weights^T + output_bias).
"""

import json
import logging
import random

import numpy as np
import pytest
import tensorflow as tf
from test_modeling import _np_bert

from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig, BertModel
from bert_tf.models.networks import classifier_network, squad_network
from bert_tf.tasks import run_script
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.data.features import classifier_feature_spec

from conftest import FLOAT32_EPS
from conftest import W_WORDS as WORDS


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """train/dev/test.tsv of random w-words labelled a or b (the labels do not matter here)."""
    folder = tmp_path_factory.mktemp("data")
    rng = random.Random(0)
    for split, size in (("train", 16), ("dev", 8), ("test", 11)):
        lines = []
        for _ in range(size):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
            lines.append(text if split == "test" else f"{text}\t{rng.choice('ab')}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return folder


def write_fine_tuned_google_checkpoint(ckpt_prefix, path, num_labels, seed=1):
    """The fixture's Google checkpoint plus an original run_classifier.py head of random values.

    Written with the original's names (output_weights [L, H], output_bias [L]) and, as an Estimator's
    checkpoint holds them, Adam slots and global_step beside them. Returns (weights, bias).
    """
    reader = tf.train.load_checkpoint(ckpt_prefix)
    tensors = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    hidden_size = tensors["bert/pooler/dense/bias"].shape[0]
    rng = np.random.default_rng(seed)
    weights = rng.normal(0, 0.5, [num_labels, hidden_size]).astype(np.float32)
    bias = rng.normal(0, 0.5, [num_labels]).astype(np.float32)
    tensors.update(output_weights=weights, output_bias=bias)
    tensors["output_weights/adam_m"] = np.zeros_like(weights)
    tensors["global_step"] = np.array(120, np.int64)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=path,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[name]) for name in names],
    )
    return weights, bias


def config(google_ckpt_dir, w_vocab_file, data_dir, output_dir, **overrides):
    values = dict(
        bert_config_file=str(google_ckpt_dir / "bert_config.json"), vocab_file=w_vocab_file,
        output_dir=str(output_dir), task_name="tsv", data_dir=str(data_dir),
        text_a_column="0", label_column="1", max_seq_length=16, predict_batch_size=4,
        train_batch_size=4, num_train_epochs=1.0, seed=3,
    )  # fmt: skip
    values.update(overrides)
    return classification.ClassifierSettings(**values)


def test_an_original_fine_tuned_classifier_predicts_with_its_own_head(
    google_ckpt_dir, ckpt_prefix, w_vocab_file, data_dir, tmp_path
):
    prefix = str(tmp_path / "trained" / "model.ckpt-120")
    weights, bias = write_fine_tuned_google_checkpoint(ckpt_prefix, prefix, num_labels=2)
    out = tmp_path / "predicted"
    run_script(
        classification.SPEC,
        config(
            google_ckpt_dir, w_vocab_file, data_dir, out, do_predict=True, init_checkpoint=prefix
        ),
    )
    rows = (out / "test_results.tsv").read_text().splitlines()
    predicted = np.array([[float(p) for p in row.split("\t")] for row in rows])

    # The reference: the original's arithmetic, in float64 numpy from the checkpoint's raw arrays
    # (test_modeling's forward pass), on the features it predicted.
    spec = classifier_feature_spec(16)
    features = [
        tf.io.parse_single_example(record, spec)
        for record in tf.data.TFRecordDataset(str(out / "predict.tf_record"))
    ]
    inputs = {
        name: np.stack([f[name].numpy() for f in features])
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    inputs["masked_lm_positions"] = np.zeros([len(features), 1], np.int64)  # unused here
    bert_config = BertConfig.from_json_file(str(google_ckpt_dir / "bert_config.json"))
    pooled = _np_bert(ckpt_prefix, bert_config, "gelu", inputs)["pooled_output"]
    logits = pooled @ weights.T.astype(np.float64) + bias
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    assert len(predicted) == 11
    # Probabilities (at most 1) from a float32 forward pass, printed to 6 decimals: the print costs
    # 5e-7, float32 kernels (which differ by CPU: 2.5e-6 on AMX) up to 256 rounding steps of 1 (3e-5,
    # conftest's margin). A fresh head (the bug this guards) is off by 0.1 or more.
    np.testing.assert_allclose(predicted, expected, rtol=0, atol=5e-7 + 256 * FLOAT32_EPS)
    assert np.abs(expected - 0.5).max() > 0.1  # the head is far from a uniform one


def test_a_head_of_another_shape_is_one_error_naming_both_shapes_and_the_way_out(
    google_ckpt_dir, ckpt_prefix, w_vocab_file, data_dir, tmp_path
):
    mnli = str(tmp_path / "mnli" / "model.ckpt-120")
    write_fine_tuned_google_checkpoint(ckpt_prefix, mnli, num_labels=3)
    out = tmp_path / "out"
    with pytest.raises(InputError) as error:
        run_script(
            classification.SPEC,
            config(
                google_ckpt_dir, w_vocab_file, data_dir, out, do_train=True, init_checkpoint=mnli
            ),
        )
    message = str(error.value)
    assert "\n" not in message and message.startswith("--init_checkpoint")
    assert "output_weights" in message and "[3, 48]" in message and "[2, 48]" in message
    assert "--restore_head=false" in message
    assert not (out / "train.tf_record").exists()  # found before any work
    # --restore_head=false: the encoder comes from the checkpoint, the head starts new.
    outcome = run_script(classification.SPEC,
        config(
            google_ckpt_dir, w_vocab_file, data_dir, out, do_train=True, init_checkpoint=mnli,
            restore_head=False,
        )
    )  # fmt: skip
    assert outcome["train"]["global_step"] == 4


def test_a_pretraining_checkpoint_gives_the_encoder_but_never_a_head(
    google_ckpt_dir, ckpt_prefix, w_vocab_file, data_dir, tmp_path, caplog
):
    # cls/seq_relationship/output_weights is [2, H], the shape of a 2-label head: it is not one.
    model = classifier_network.BertClassifier(
        BertConfig.from_json_file(str(google_ckpt_dir / "bert_config.json")), num_labels=2
    )
    model(model.dummy_inputs())
    before = model.head.output_weights.numpy()
    with caplog.at_level(logging.INFO, logger="absl"):
        report = restore_init_checkpoint(model, ckpt_prefix)
    assert report.restored == ["encoder"]
    assert report.new == ["classifier head (the checkpoint has no output_weights)"]
    np.testing.assert_array_equal(model.head.output_weights.numpy(), before)
    (line,) = [r.getMessage() for r in caplog.records if "Initialized from" in r.getMessage()]
    assert line.endswith(
        "restored the encoder; starts new: the classifier head (the checkpoint has no output_weights)"
    )
    # Predicting alone from it would use an untrained head: refused before any work.
    out = tmp_path / "out"
    with pytest.raises(InputError, match="has no trained classifier head"):
        run_script(classification.SPEC,
            config(
                google_ckpt_dir, w_vocab_file, data_dir, out, do_predict=True,
                init_checkpoint=ckpt_prefix,
            )
        )  # fmt: skip
    assert not (out / "predict.tf_record").exists()


def _ours(folder, model, task=None):
    """A training checkpoint of ours holding `model` (its object graph), with a task.json."""
    folder.mkdir(parents=True, exist_ok=True)
    model(model.dummy_inputs())
    prefix = tf.train.Checkpoint(model=model).save(str(folder / "model.ckpt"))
    if task:
        (folder / "task.json").write_text(json.dumps({"model_type": task}))
    return prefix


def test_a_head_is_taken_only_from_a_checkpoint_of_the_same_task(tmp_path):
    config = BertConfig.from_preset("bert_tiny", vocab_size=100)
    classifier = classifier_network.BertClassifier(config, num_labels=2)  # head [2, 128]
    prefix = _ours(tmp_path / "classifier", classifier, task="classifier")
    # SQuAD's head is [2, 128] too: a classifier's is not one.
    report = restore_init_checkpoint(squad_network.BertSquad(config), prefix)
    assert report.restored == ["encoder"]
    assert report.new == ["squad head (the checkpoint is a classifier model)"]
    # Without a task.json nothing says which task the head is for: it starts new.
    bare = _ours(tmp_path / "bare", classifier)
    report = restore_init_checkpoint(classifier_network.BertClassifier(config, 2), bare)
    assert report.new == [
        "classifier head (no task.json beside it says which task its head is for)"
    ]
    # The same task: restored, exactly.
    again = classifier_network.BertClassifier(config, num_labels=2)
    assert restore_init_checkpoint(again, prefix).restored == ["encoder", "classifier head"]
    np.testing.assert_array_equal(
        again.head.output_weights.numpy(), classifier.head.output_weights.numpy()
    )


def test_checkpoints_written_before_the_head_layer_stay_readable(tmp_path):
    # Before BertHead, a task model held output_weights / output_bias itself: model/output_weights,
    # and its files were named ckpt-<step>.
    config = BertConfig.from_preset("bert_tiny", vocab_size=100)
    encoder = BertModel(config)
    encoder(encoder.dummy_inputs())
    weights = tf.Variable(np.random.default_rng(0).normal(size=[3, 128]).astype(np.float32))
    bias = tf.Variable(np.float32([0.5, -1.0, 2.0]))
    legacy = tf.train.Checkpoint(bert=encoder, output_weights=weights, output_bias=bias)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=legacy), str(tmp_path), 1)
    prefix = manager.save(checkpoint_number=30)
    assert prefix.endswith("/ckpt-30")
    (tmp_path / "task.json").write_text(json.dumps({"model_type": "classifier"}))
    model = classifier_network.BertClassifier(config, num_labels=3)
    report = restore_init_checkpoint(model, str(tmp_path))
    assert report.restored == ["encoder", "classifier head"]
    np.testing.assert_array_equal(model.head.output_weights.numpy(), weights.numpy())
    np.testing.assert_array_equal(model.head.output_bias.numpy(), bias.numpy())
    inputs = {"input_ids": tf.constant([[2, 17, 3]])}
    np.testing.assert_array_equal(
        model.bert(inputs, training=False)["pooled_output"],
        encoder(inputs, training=False)["pooled_output"],
    )
