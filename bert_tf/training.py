"""THE training loop, shared by every run_*.py: strategy scope, distributed input, train/eval steps, resume.

A task hands the loop a `Task`: how to build its model, its loss, its eval metrics and its input. The loop knows
nothing else about it. Losses are normalized by GLOBAL counts (summed over replicas and accumulation
micro-batches) that the task names in `normalizer_fn`, so the gradient summed over replicas and micro-batches
equals the one-device gradient of the whole global batch; the optimizer then sums over replicas and clips.

B = per-replica batch, k = num_accumulation_steps.
"""

import dataclasses
import os
import time
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import io
from bert_tf.checkpoint_state import CheckpointState
from bert_tf.distribute import input_context, is_chief
from bert_tf.errors import InputError
from bert_tf.precision import (
    MIXED_PRECISION_POLICIES,
    SyncedLossScaleOptimizer,
    build_with_policy,
)
from bert_tf.preemption import Preempted, StopSignal, any_worker_stopping, peer_errors
from bert_tf.progress import check_finite_loss, log_progress, steps_to_next_boundary


@dataclasses.dataclass
class Task:
    """What the loop needs from a task.

    build_model: () -> keras.Model, called inside the strategy scope.
    loss_fn: (outputs, features, normalizers) -> dict of scalar float32 losses with key "loss" (minimized).
      Divide by the given global normalizers, never by local counts.
    normalizer_fn: (features) -> dict of local scalar counts (e.g. examples, masked-LM weights); the loop
      sums them over replicas and micro-batches before passing them to loss_fn.
    metric_fn: (outputs, features) -> {name: (values, weights)}; eval reports sum(values*weights)/sum(weights).
    dataset_fn: (input_context, per_replica_batch_size, is_training) -> tf.data.Dataset of feature dicts.
    dummy_batch_fn: () -> a feature dict of one example ([1, ...] tensors), used to create the weights;
      default: the first element's shapes of dataset_fn's eval input, filled with zeros.
    """

    build_model: Callable
    loss_fn: Callable
    normalizer_fn: Callable
    metric_fn: Callable
    dataset_fn: Callable
    dummy_batch_fn: Callable | None = None

    def dummy_batch(self):
        if self.dummy_batch_fn is not None:
            return self.dummy_batch_fn()
        dataset = self.dataset_fn(tf.distribute.InputContext(), 1, False)
        return tf.nest.map_structure(
            lambda spec: tf.zeros([1, *spec.shape[1:]], spec.dtype), dataset.element_spec
        )


@dataclasses.dataclass
class TrainConfig:
    """Loop settings; batch sizes are global (all replicas, all accumulation micro-batches of one update)."""

    model_dir: str
    train_batch_size: int = 32
    eval_batch_size: int = 8
    num_train_steps: int = 100000
    steps_per_loop: int = 1000
    save_checkpoints_steps: int = 1000
    log_steps: int = 100
    num_accumulation_steps: int = 1
    mixed_precision: str = "float32"
    jit_compile: bool = False
    max_checkpoints_to_keep: int = 5


class Trainer:
    """Builds the model and optimizer under the strategy, then trains, evaluates and checkpoints.

    Example:
    ```python
    trainer = Trainer(task, strategy, lambda: create_optimizer(1e-4, 1000, 100), TrainConfig("/tmp/run"))
    trainer.train()
    print(trainer.evaluate(max_steps=100))
    ```
    """

    def __init__(self, task, strategy, optimizer_fn, config, init_fn=None, resume_fn=None):
        """Builds everything and restores the latest checkpoint in config.model_dir, if any.

        Checkpoints are config.model_dir/model.ckpt-<step>, as the original's Estimator names them.

        Args:
          task: a Task.
          strategy: a tf.distribute.Strategy.
          optimizer_fn: () -> keras optimizer (called in the strategy scope).
          config: a TrainConfig.
          init_fn: (model) -> None, loads initial weights (e.g. --init_checkpoint); skipped when resuming.
          resume_fn: (model, checkpoint prefix) -> None, restores the model's weights when resuming
            (bert_tf.checkpoints reads them by path, checkpoints of earlier layouts included); by
            default every object of the model must match the checkpoint.

        Raises:
          ValueError: on batch sizes that the replicas and accumulation steps do not divide, or an unknown
            mixed_precision policy.
        """
        self.task, self.strategy, self.config = task, strategy, config
        self._check_config()
        self._chief = is_chief(strategy)
        with strategy.scope():
            self.model = build_with_policy(task.build_model, config.mixed_precision)
            optimizer = optimizer_fn()
            if config.mixed_precision == "mixed_float16":
                optimizer = SyncedLossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self._build(self.model, self.optimizer)
            # Per-replica sums of the training losses since the last log line.
            self._loss_sums = {}
            # Global batches taken from the training input (more than the optimizer's steps when
            # mixed_float16 skips one); a checkpoint without the input's state reads through as many.
            self._input_steps = tf.Variable(-1, dtype=tf.int64, trainable=False, name="input_steps")
        self._stop = StopSignal()
        # This worker's input pipeline: which one, of how many, feeding how many replicas.
        self._input_context = input_context(strategy)
        self.state = CheckpointState(
            self.model, self.optimizer, self._input_steps, config, self._chief, self._input_context
        )
        self.manager = self.state.manager
        self.state.restore_or_init(init_fn, resume_fn)
        self._train_loop_fn = None
        self._train_iterator = None
        self._eval_step_fn = None
        self._predict_step_fn = None

    # ------------------------------------------------------------------ set-up

    def _check_config(self):
        config, replicas = self.config, self.strategy.num_replicas_in_sync
        if config.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise ValueError(
                f"--mixed_precision must be one of {MIXED_PRECISION_POLICIES}, got {config.mixed_precision!r}"
            )
        check_batch_sizes(
            replicas,
            config.train_batch_size,
            config.num_accumulation_steps,
            eval_batch_size=config.eval_batch_size,
        )
        for name in ("num_train_steps", "steps_per_loop", "save_checkpoints_steps", "log_steps"):
            if getattr(config, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(config, name)}")

    def _build(self, model, optimizer):
        """Creates every variable eagerly so checkpoints restore at once and steps create none."""
        model(self.task.dummy_batch(), training=False)
        optimizer.build(model.trainable_variables)

    @property
    def global_step(self):
        return int(self.optimizer.iterations.numpy())

    # ------------------------------------------------------------------ training

    def _replica_train_step(self, features):
        """One optimizer update on this replica's B examples, split into k micro-batches."""
        k = self.config.num_accumulation_steps
        context = tf.distribute.get_replica_context()
        normalizers = context.all_reduce(
            tf.distribute.ReduceOp.SUM, self.task.normalizer_fn(features)
        )
        variables = self.model.trainable_variables
        if k == 1:
            grads, losses = self._grad_fn(features, normalizers)
        else:
            # [B, ...] -> [k, B/k, ...]
            micro_batches = tf.nest.map_structure(
                lambda x: tf.reshape(x, [k, -1, *x.shape[1:]]), features
            )

            missing = set()  # variables without a gradient, found while tracing the body

            def body(i, grad_sums, loss_sums):
                micro = tf.nest.map_structure(lambda x: x[i], micro_batches)
                grads, losses = self._grad_fn(micro, normalizers)
                missing.update(j for j, g in enumerate(grads) if g is None)
                grads = [
                    tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                    for g, v in zip(grads, variables, strict=True)
                ]
                grad_sums = [s + g for s, g in zip(grad_sums, grads, strict=True)]
                loss_sums = {key: loss_sums[key] + losses[key] for key in loss_sums}
                return i + 1, grad_sums, loss_sums

            zero_losses = {key: tf.zeros([], tf.float32) for key in self._loss_keys}
            _, grads, losses = tf.while_loop(
                lambda i, *_: i < k,
                body,
                (tf.constant(0), [tf.zeros_like(v) for v in variables], zero_losses),
            )
            grads = [None if j in missing else g for j, g in enumerate(grads)]
        self.optimizer.apply(grads, variables)
        for key, value in losses.items():
            self._loss_sums[key].assign_add(value)

    def _compute_grads(self, features, normalizers):
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            losses = self.task.loss_fn(outputs, features, normalizers)
            loss = losses["loss"]
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, self.model.trainable_variables)
        return grads, {key: tf.cast(value, tf.float32) for key, value in losses.items()}

    def _make_train_loop(self):
        self._grad_fn = (
            tf.function(self._compute_grads, jit_compile=True)
            if self.config.jit_compile
            else self._compute_grads
        )
        self._loss_keys = self._find_loss_keys()
        with self.strategy.scope():
            for key in self._loss_keys:
                self._loss_sums[key] = tf.Variable(
                    0.0,
                    trainable=False,
                    synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.SUM,
                )

        # One process stops before its next step on SIGTERM; several workers must agree (collectives)
        # and stop together at the end of the loop call.
        stoppable = not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)

        @tf.function
        def train_loop(iterator, num_steps):
            for _ in tf.range(num_steps):
                if stoppable and self._stop.flag:
                    break
                self.strategy.run(self._replica_train_step, args=(self._next_batch(iterator),))
                self._input_steps.assign_add(1)

        return train_loop

    def _train_input(self):
        """This worker's training input as an iterator at the run's position (resumed or new).

        A worker reads one tf.data pipeline (the dataset_fn of its InputContext) and hands its
        replicas consecutive batches, as tf.distribute's own per-worker input does; unlike that
        input's iterator, a plain tf.data iterator can be checkpointed (CheckpointState).
        """
        skip = int(self._input_steps.numpy())
        if isinstance(self.strategy, tf.distribute.TPUStrategy):
            # A TPU takes its input from a distributed dataset, whose iterator no checkpoint keeps.
            return iter(self._distribute(self.config.train_batch_size, True, skip=skip))
        per_replica = self.config.train_batch_size // self.strategy.num_replicas_in_sync
        iterator = iter(self.task.dataset_fn(self._input_context, per_replica, True))
        if skip and not self.state.restore_input(iterator):
            _advance(iterator, skip * self._local_replicas)
        return iterator

    @property
    def _local_replicas(self):
        context = self._input_context
        return context.num_replicas_in_sync // context.num_input_pipelines

    def _next_batch(self, iterator):
        """The next global batch for strategy.run: one batch per replica of this worker, in order."""
        if isinstance(iterator, tf.data.Iterator):
            batches = [next(iterator) for _ in range(self._local_replicas)]
            return self.strategy.experimental_distribute_values_from_function(
                lambda context: batches[context.replica_id_in_sync_group % len(batches)]
            )
        return next(iterator)

    def _find_loss_keys(self):
        features = self.task.dummy_batch()
        normalizers = self.task.normalizer_fn(features)
        outputs = self.model(features, training=False)
        return sorted(self.task.loss_fn(outputs, features, normalizers))

    def _distribute(self, batch_size, is_training, skip=0):
        per_replica = batch_size // self.strategy.num_replicas_in_sync
        if skip:  # TPU: read on where the run stopped by skipping the batches trained on
            logging.info("Skipping the %d global batches of the input trained on before", skip)

        def dataset_fn(input_context):
            dataset = self.task.dataset_fn(input_context, per_replica, is_training)
            # Each step takes one batch per replica; a pipeline feeds the replicas of its worker.
            per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
            return dataset.skip(skip * per_pipeline) if skip else dataset

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def train(self, until=None):
        """Trains until config.num_train_steps, checkpointing, logging and writing summaries on the way.

        Args:
          until: stop at this global step instead (checkpointed there); a later call goes on with
            the same input stream.

        Returns:
          dict: the mean training losses of the last logged interval, its "learning_rate" and
          "examples_per_second", and "global_step".
        """
        config = self.config
        end = config.num_train_steps if until is None else min(until, config.num_train_steps)
        if self._train_loop_fn is None:
            self._train_loop_fn = self._make_train_loop()
        self._stop.flag.assign(False)
        writer = self._summary_writer("train")
        with self._stop.watching(), peer_errors(self.strategy):
            if self._train_iterator is None:
                self._train_iterator = self._train_input()
            last = self._train_until(end, writer)
        writer.flush()
        return last

    def _train_until(self, end, writer):
        config, iterator = self.config, self._train_iterator
        step, last = self.global_step, {"global_step": self.global_step}
        start = interval_start = (step, time.time())
        while step < end:
            num_steps = min(steps_to_next_boundary(step, config), end - step)
            self._train_loop_fn(iterator, tf.constant(num_steps, tf.int32))
            before, step = step, self.global_step
            losses, latest = self._loss_sums["loss"], self.manager.latest_checkpoint
            check_finite_loss(losses, self.optimizer, (before, step), config, latest)
            if any_worker_stopping(self.strategy, self._stop):
                self.state.save(step, self._saved_input())
                raise Preempted(
                    f"SIGTERM: stopped at global step {step}, saved in {config.model_dir}; "
                    "the same command resumes from there"
                )
            if step % config.log_steps == 0 or step in (config.num_train_steps, end):
                now = time.time()
                last = self._log_progress(step, interval_start, start, now, writer)
                interval_start = (step, now)
            if step % config.save_checkpoints_steps == 0 or step in (config.num_train_steps, end):
                self.state.save(step, self._saved_input())
        return last

    def _log_progress(self, step, interval_start, start, now, writer):
        steps = step - interval_start[0]
        means = {
            key: float(var.read_value()) / max(steps, 1) for key, var in self._loss_sums.items()
        }
        for var in self._loss_sums.values():
            var.assign(tf.zeros_like(var))
        learning_rate = float(self.optimizer.learning_rate)
        return log_progress(
            self.config, means, learning_rate, step, interval_start, start, now, writer
        )

    def _saved_input(self):
        iterator = self._train_iterator
        return iterator if isinstance(iterator, tf.data.Iterator) else None

    def _summary_writer(self, name):
        if not self._chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(os.path.join(self.config.model_dir, name))

    # ------------------------------------------------------------------ evaluation

    def _replica_eval_step(self, features):
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

    def evaluate(self, max_steps=None):
        """Evaluates on the eval input (is_training=False) for at most max_steps global batches.

        Returns:
          dict: "loss" (mean over batches of the global-batch loss, as the original Estimator reports it),
          every metric of metric_fn, and "global_step".
        """
        if self._eval_step_fn is None:

            @tf.function
            def eval_step(features):
                per_replica = self.strategy.run(self._replica_eval_step, args=(features,))
                # Summed in the replicas (strategy.reduce of a nested structure fails across workers).
                return self.strategy.experimental_local_results(per_replica)[0]

            self._eval_step_fn = eval_step
        loss_sum, num_batches, metric_sums = 0.0, 0, {}
        for features in self._distribute(self.config.eval_batch_size, is_training=False):
            if max_steps is not None and num_batches >= max_steps:
                break
            with peer_errors(self.strategy):
                loss, sums = self._eval_step_fn(features)
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
        results["global_step"] = self.global_step
        return results

    # ------------------------------------------------------------------ prediction

    def predict(self, dataset, output_keys=None, feature_keys=()):
        """Runs the model (training=False) once over `dataset` and gathers the outputs on the host, in order.

        This is the one inference path for whole-set metrics and prediction files: the task pads its
        last batch with fake examples (is_real_example = 0) and drops them from the result itself.

        Args:
          dataset: a tf.data.Dataset of GLOBAL batches of feature dicts (all replicas), batch size a
            multiple of the number of replicas (sequence lengths may vary from batch to batch).
          output_keys: the model outputs to keep (default: every tensor output).
          feature_keys: input features to return beside them (e.g. "unique_ids", "is_real_example").

        Returns:
          {name: np.ndarray}, each [N, ...] over all N examples of `dataset` in its order. Outputs whose
          trailing axis is the sequence are padded with zeros to the longest batch.
        """
        if self._predict_step_fn is None:
            self._predict_step_fn = self._make_predict_step()
        strategy = self.strategy
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            # Every worker predicts everything by itself (no collectives in inference); the chief writes.
            batches = iter(dataset)
            run = self._predict_step_fn
        else:
            # Each global batch is split over the replicas in order, and put back together in order.
            batches = iter(strategy.experimental_distribute_dataset(dataset))

            def run(features):
                per_replica = strategy.run(self._predict_step_fn, args=(features,))
                return tf.nest.map_structure(
                    lambda x: tf.concat(strategy.experimental_local_results(x), axis=0),
                    per_replica,
                )

        chunks = {}
        for features in batches:
            outputs, passed = run(features)
            for name, value in {
                **_select(outputs, output_keys),
                **_select(passed, feature_keys),
            }.items():
                chunks.setdefault(name, []).append(value.numpy())
        return {name: _concat_padded(values) for name, values in chunks.items()}

    def _make_predict_step(self):
        @tf.function(reduce_retracing=True)
        def predict_step(features):
            outputs = self.model(features, training=False)
            tensors = {
                name: tf.cast(value, tf.float32) if value.dtype.is_floating else value
                for name, value in outputs.items()
                if isinstance(value, tf.Tensor)  # not e.g. BertModel's encoder_outputs list
            }
            return tensors, features

        return predict_step


def check_batch_sizes(replicas, train_batch_size, num_accumulation_steps=1, **batch_sizes):
    """Each global batch must split evenly over the replicas (and the accumulation micro-batches).

    Args:
      replicas: the strategy's num_replicas_in_sync.
      train_batch_size, num_accumulation_steps: the training batch and its micro-batches.
      **batch_sizes: other global batches by flag name (eval_batch_size, predict_batch_size).

    Raises:
      InputError: naming the flag.
    """
    if num_accumulation_steps < 1:
        raise InputError(f"--num_accumulation_steps must be >= 1, got {num_accumulation_steps}")
    if train_batch_size % (replicas * num_accumulation_steps):
        raise InputError(
            f"--train_batch_size={train_batch_size} must be divisible by the number of replicas "
            f"({replicas}) times --num_accumulation_steps ({num_accumulation_steps})"
        )
    for name, value in batch_sizes.items():
        if value % replicas:
            raise InputError(
                f"--{name}={value} must be divisible by the number of replicas ({replicas})"
            )


def write_eval_results(path, results):
    """Writes `key = value` lines (sorted, the original's eval_results.txt format), atomically."""
    lines = [f"{key} = {results[key]}" for key in sorted(results)]
    io.write_text(path, "\n".join(lines) + "\n")
    for line in lines:
        logging.info("  %s", line)


@tf.function
def _advance(iterator, num_batches):
    """Reads num_batches from iterator (a resume from a checkpoint that kept no input position)."""
    for _ in tf.range(num_batches):
        next(iterator)


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
