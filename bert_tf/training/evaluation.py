"""A task's loss and metrics over its eval input, through the Predictor (the one evaluation design):
each batch's sums reduced in the graph, added up and divided on the host; and eval_results.txt."""

import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.training.predictor import Predictor
from bert_tf.training.preemption import peer_errors

_EMPTY = "the eval input is empty: no batch of eval_batch_size could be read"


def evaluate(task, model, strategy, batch_size, max_steps=None):
    """The task's loss and metrics of `model` on at most max_steps global batches of its eval input.

    The input is `task.dataset_fn` (is_training False) in global batches of `batch_size`; under
    multi-worker every worker evaluates all of it (as the Predictor predicts), so no worker waits.

    Returns:
      dict: "loss" (mean over batches of the global-batch loss, as the original Estimator reports
      it) and every metric of metric_fn (sum(values * weights) / sum(weights) over all batches).

    Raises:
      ValueError: no batch could be read.
    """
    dataset = task.dataset_fn(tf.distribute.InputContext(), batch_size, False)
    predictor = Predictor(model, strategy, outputs_fn=batch_sums(task))
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


class Evaluator:
    """The task's loss and metrics of a model over a distributed input (Trainer.evaluate's): the same
    sums as `evaluate`, all-reduced across the replicas and workers in the graph.

    Example:
    ```python
    results = Evaluator(task, model, strategy).evaluate(distributed_dataset, max_steps=100)
    ```
    """

    def __init__(self, task, model, strategy):
        self.task, self.model, self.strategy = task, model, strategy
        self._step_fn = None

    def _replica_step(self, features):
        """The global batch's loss and metric sums, the same on every replica."""
        context = tf.distribute.get_replica_context()
        normalizers = context.all_reduce(
            tf.distribute.ReduceOp.SUM, self.task.normalizer_fn(features)
        )
        outputs = self.model(features, training=False)
        loss = tf.cast(self.task.loss_fn(outputs, features, normalizers)["loss"], tf.float32)
        sums = {}
        for name, (values, weights) in self.task.metric_fn(outputs, features).items():
            values, weights = tf.cast(values, tf.float32), tf.cast(weights, tf.float32)
            weights = tf.broadcast_to(weights, tf.shape(values))
            sums[name] = (tf.reduce_sum(values * weights), tf.reduce_sum(weights))
        return context.all_reduce(tf.distribute.ReduceOp.SUM, (loss, sums))

    def _make_step(self):
        @tf.function
        def eval_step(features):
            per_replica = self.strategy.run(self._replica_step, args=(features,))
            # Summed in the replicas (strategy.reduce of a nested structure fails across workers).
            return self.strategy.experimental_local_results(per_replica)[0]

        return eval_step

    def evaluate(self, batches, max_steps=None):
        """Evaluates on at most max_steps global batches of `batches` (a distributed dataset).

        Returns:
          dict: "loss" (mean over batches of the global-batch loss, as the original Estimator reports
          it) and every metric of metric_fn (sum(values * weights) / sum(weights) over all batches).

        Raises:
          ValueError: no batch could be read.
        """
        if self._step_fn is None:
            self._step_fn = self._make_step()
        loss_sum, num_batches, metric_sums = 0.0, 0, {}
        for features in batches:
            if max_steps is not None and num_batches >= max_steps:
                break
            with peer_errors(self.strategy):
                loss, sums = self._step_fn(features)
            loss_sum += float(loss)
            num_batches += 1
            for name, (total, weight) in sums.items():
                previous = metric_sums.get(name, (0.0, 0.0))
                metric_sums[name] = (previous[0] + float(total), previous[1] + float(weight))
        if num_batches == 0:
            raise ValueError("the eval input is empty: no batch of eval_batch_size could be read")
        results = {
            name: total / max(weight, 1e-12) for name, (total, weight) in metric_sums.items()
        }
        results["loss"] = loss_sum / num_batches
        return results


def write_eval_results(path, results):
    """Writes `key = value` lines (sorted, the original's eval_results.txt format), atomically."""
    lines = [f"{key} = {results[key]}" for key in sorted(results)]
    file_io.write_text(path, "\n".join(lines) + "\n")
    for line in lines:
        logging.info("  %s", line)
