"""Masked-LM + next-sentence pretraining: the Task that run_pretraining.py trains.

B = batch, P = max_predictions_per_seq, V = vocabulary size.
"""

import tensorflow as tf

from bert_tf.data.pretraining.reader import make_pretraining_dataset
from bert_tf.modeling import BertPretrainingModel, pretraining_loss
from bert_tf.training import Task


def pretraining_task(bert_config, input_file, max_seq_length, max_predictions_per_seq, seed=None):
    """The masked-LM + next-sentence Task for bert_tf.training, reading create_pretraining_data TFRecords."""

    def loss_fn(outputs, features, normalizers):
        return pretraining_loss(
            outputs,
            features,
            mlm_denominator=normalizers["masked_lm_weight"] + 1e-5,
            nsp_denominator=normalizers["examples"],
        )

    def normalizer_fn(features):
        return {
            "masked_lm_weight": tf.reduce_sum(features["masked_lm_weights"]),
            "examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32),
        }

    def dataset_fn(input_context, batch_size, is_training):
        # Eval repeats too, as in the original: it always runs --max_eval_steps batches, even over
        # fewer records than that.
        return make_pretraining_dataset(
            input_file, batch_size, max_seq_length, max_predictions_per_seq, is_training,
            input_context=input_context, seed=seed, repeat=True,
        )  # fmt: skip

    return Task(
        build_model=lambda: BertPretrainingModel(bert_config),
        loss_fn=loss_fn,
        normalizer_fn=normalizer_fn,
        metric_fn=pretraining_metrics,
        dataset_fn=dataset_fn,
    )


def pretraining_metrics(outputs, features):
    """The original metric_fn: {name: (values, weights)} for masked-LM and next-sentence accuracy and loss."""
    masked_lm_ids = features["masked_lm_ids"]  # [B, P]
    log_probs = outputs["masked_lm_log_probs"]  # [B, P, V]
    masked_lm_nll = -tf.reduce_sum(
        log_probs * tf.one_hot(masked_lm_ids, tf.shape(log_probs)[-1]), -1
    )
    masked_lm_correct = tf.equal(tf.argmax(log_probs, -1, output_type=tf.int32), masked_lm_ids)
    labels = tf.reshape(features["next_sentence_labels"], [-1])  # [B]
    nsp_log_probs = outputs["next_sentence_log_probs"]  # [B, 2]
    nsp_nll = -tf.reduce_sum(nsp_log_probs * tf.one_hot(labels, 2), -1)
    nsp_correct = tf.equal(tf.argmax(nsp_log_probs, -1, output_type=tf.int32), labels)
    weights = features["masked_lm_weights"]
    ones = tf.ones_like(nsp_nll)
    return {
        "masked_lm_accuracy": (tf.cast(masked_lm_correct, tf.float32), weights),
        "masked_lm_loss": (masked_lm_nll, weights),
        "next_sentence_accuracy": (tf.cast(nsp_correct, tf.float32), ones),
        "next_sentence_loss": (nsp_nll, ones),
    }
