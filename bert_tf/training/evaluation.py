"""A task's loss and metrics over its eval input, through the Predictor (the one evaluation design):
each batch's sums reduced in the graph, added up and divided on the host; and eval_results.txt."""

import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.training.predictor import Predictor

_EMPTY = "the eval input is empty: no batch of eval_batch_size could be read"


def evaluate(trainable, model, strategy, batch_size, max_steps=None, log_every=100):
    """The task's loss and metrics of `model` on at most max_steps global batches of its eval input.

    A progress line comes after the first batch, then every `log_every` batches or 30 s.

    The input is `trainable.dataset_fn` (is_training False) in global batches of `batch_size`; under
    multi-worker every worker evaluates all of it (as the Predictor predicts), so no worker waits.

    Returns:
      dict: "loss" (mean over batches of the global-batch loss, as the original Estimator reports
      it) and every metric of metric_fn (sum(values * weights) / sum(weights) over all batches).

    Raises:
      ValueError: no batch could be read.
    """
    dataset = trainable.dataset_fn(tf.distribute.InputContext(), batch_size, False)
    predictor = Predictor(
        model, strategy, outputs_fn=batch_sums(trainable), what="eval", log_every=log_every
    )
    rows = predictor.predict_batches(dataset, max_batches=max_steps)
    if not rows:
        raise ValueError(_EMPTY)
    total = {name: _added(values) for name, values in rows.items()}
    results = {
        name: total[f"{name}/sum"] / max(total[f"{name}/weight"], 1e-12)
        for name in sorted({key.rsplit("/", 1)[0] for key in total if "/" in key})
    }
    results["loss"] = total["loss"] / total["batches"]
    return results


def _added(values):
    """The float64 sum of float32 rows, added in order (Python 3.12's sum() would compensate)."""
    total = 0.0
    for value in values.tolist():
        total += value
    return total


def batch_sums(task):
    """A Predictor's outputs_fn: a replica's part of its global batch's loss and metric sums.

    Returns:
      (outputs, features) -> {name: float32 [1]}: "loss" (loss_fn with the global batch's
      normalizers, as training computes it), "<metric>/sum" and "<metric>/weight" for every metric of
      metric_fn, and "batches": 1 on a batch's first replica, 0 on the others.
    """

    def outputs_fn(outputs, features):
        context = tf.distribute.get_replica_context()
        normalizers = task.normalizer_fn(features)
        first = True
        if context is not None and context.num_replicas_in_sync > 1:
            normalizers = context.all_reduce(tf.distribute.ReduceOp.SUM, normalizers)
            first = tf.equal(context.replica_id_in_sync_group, 0)
        loss = task.loss_fn(outputs, features, normalizers)["loss"]
        sums = {"loss": tf.cast(loss, tf.float32), "batches": tf.cast(first, tf.float32)}
        for name, (values, weights) in task.metric_fn(outputs, features).items():
            values, weights = tf.cast(values, tf.float32), tf.cast(weights, tf.float32)
            weights = tf.broadcast_to(weights, tf.shape(values))
            sums[f"{name}/sum"] = tf.reduce_sum(values * weights)
            sums[f"{name}/weight"] = tf.reduce_sum(weights)
        return {name: value[None] for name, value in sums.items()}  # a row per replica and batch

    return outputs_fn


def write_eval_results(path, results):
    """Writes `key = value` lines (sorted, the original's eval_results.txt format), atomically."""
    lines = [f"{key} = {results[key]}" for key in sorted(results)]
    file_io.write_text(path, "\n".join(lines) + "\n")
    for line in lines:
        logging.info("  %s", line)
