"""Inference over a data set, the one evaluation design: the model's outputs brought to the host, where
the metrics are computed in numpy (fine-tuning: every real example once, in input order, for whole-set
metrics and prediction files; pretraining: each batch's loss and metric sums, bert_tf/training/evaluation.py).
"""

import numpy as np
import tensorflow as tf

from bert_tf.progress_log import ProgressLog

# Features by which the predictor drops padding and restores the input order, when the input has them.
REAL_EXAMPLE_KEY = "is_real_example"  # 0 on the fake examples that pad the last batch
EXAMPLE_INDEX_KEY = "example_index"  # the position in the input file, when batching reordered it


class Predictor:
    """Runs a model (training=False) over a data set of global batches and gathers the outputs on the host.

    Under one device or mirrored replicas each global batch is split over the replicas in order and
    put back together in order; under multi-worker every worker predicts everything by itself (no
    collectives in inference), and the chief writes the files.

    `outputs_fn` ((outputs, features) -> {name: tensor [n, ...]}, run in the graph on each replica's
    part of a batch) replaces the model's outputs by what it returns: what the host needs of outputs
    too large to bring there (pretraining's [B, P, V] log-probabilities: their sums).

    A progress line (`<what> batch <n>/<total>  <examples>/s  ETA`) comes after the first batch,
    then every `log_every` batches or 30 s.

    Example:
    ```python
    result = Predictor(model, strategy).predict(dataset, ["logits"], feature_keys=["unique_ids"])
    result["logits"]  # [N, num_labels] over the N real examples, in input order
    ```
    """

    def __init__(self, model, strategy, outputs_fn=None, what="predict", log_every=100):
        self.model, self.strategy, self.outputs_fn = model, strategy, outputs_fn
        self.what, self.log_every = what, log_every
        self._step_fn = None

    def predict(self, dataset, output_keys=None, feature_keys=()):
        """The model's outputs for every real example of `dataset`, in input order.

        Rows whose "is_real_example" feature is 0 (the padding of a last batch) are dropped, and when
        the input has an "example_index" feature the rows are put back in its order; either feature
        is then returned too.

        Args:
          dataset: a tf.data.Dataset of GLOBAL batches of feature dicts (all replicas), batch size a
            multiple of the number of replicas (sequence lengths may vary from batch to batch).
          output_keys: the model outputs to keep (default: every tensor output).
          feature_keys: input features to return beside them (e.g. "unique_ids").

        Returns:
          {name: np.ndarray}, each [N, ...] over the N real examples. Outputs whose trailing axis is
          the sequence are zero-padded to the longest batch.

        Raises:
          KeyError: an output or feature key the model or input lacks.
        """
        keys = list(feature_keys)
        keys += [key for key in (REAL_EXAMPLE_KEY, EXAMPLE_INDEX_KEY) if _has(dataset, key)]
        result = self.predict_batches(dataset, output_keys, list(dict.fromkeys(keys)))
        if EXAMPLE_INDEX_KEY in result:
            order = np.argsort(result[EXAMPLE_INDEX_KEY], kind="stable")
            result = {name: value[order] for name, value in result.items()}
        if REAL_EXAMPLE_KEY in result:
            real = result[REAL_EXAMPLE_KEY].astype(bool)
            result = {name: value[real] for name, value in result.items()}
        return result

    def predict_batches(self, dataset, output_keys=None, feature_keys=(), max_batches=None):
        """Every row of every batch of `dataset` (of its first `max_batches`), in the dataset's order,
        padding included."""
        if self._step_fn is None:
            self._step_fn = self._make_step()
        if max_batches is not None:
            dataset = dataset.take(max_batches)
        total = int(dataset.cardinality())
        progress = ProgressLog(
            f"{self.what} batch", total if total > 0 else None, self.log_every, "examples"
        )
        chunks = {}
        for outputs, passed in self._run(dataset):
            for name, value in {
                **_select(outputs, output_keys),
                **_select(passed, feature_keys),
            }.items():
                chunks.setdefault(name, []).append(value.numpy())
            progress.add(1, units=int(tf.nest.flatten(passed)[0].shape[0]))
        progress.finish()
        return {name: _concat_padded(values) for name, values in chunks.items()}

    def _run(self, dataset):
        """Yields (outputs, features) of each global batch, on the host."""
        strategy = self.strategy
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            for features in dataset:
                yield self._step_fn(features)
            return
        for features in strategy.experimental_distribute_dataset(dataset):
            per_replica = strategy.run(self._step_fn, args=(features,))
            yield tf.nest.map_structure(
                lambda x: tf.concat(strategy.experimental_local_results(x), axis=0), per_replica
            )

    def _make_step(self):
        @tf.function(reduce_retracing=True)
        def predict_step(features):
            outputs = self.model(features, training=False)
            if self.outputs_fn is not None:
                outputs = self.outputs_fn(outputs, features)
            tensors = {
                name: tf.cast(value, tf.float32) if value.dtype.is_floating else value
                for name, value in outputs.items()
                if isinstance(value, tf.Tensor)  # not e.g. BertModel's encoder_outputs list
            }
            return tensors, features

        return predict_step


def _has(dataset, key):
    spec = dataset.element_spec
    return isinstance(spec, dict) and key in spec


def _select(tensors, keys):
    if keys is None:
        return tensors
    missing = [key for key in keys if key not in tensors]
    if missing:
        raise KeyError(f"no {missing} among {sorted(tensors)}")
    return {key: tensors[key] for key in keys}


def _concat_padded(arrays):
    """Concatenates [n_i, ...] arrays on axis 0, zero-padding the other axes to their largest size."""
    shape = np.max([a.shape for a in arrays], axis=0)
    padded = [
        np.pad(
            a,
            [(0, 0)] + [(0, int(size - n)) for size, n in zip(shape[1:], a.shape[1:], strict=True)],
        )
        for a in arrays
    ]
    return np.concatenate(padded, axis=0)
