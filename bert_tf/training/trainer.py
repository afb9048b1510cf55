"""The Trainer: a Trainable's model and optimizer built under the strategy, and the parts that train them.

Its parts, each in its own module: the checkpoint state (bert_tf.training.checkpoint_state), the training
input (inputs), the step (steps), the loop (loop), evaluation (evaluation) and prediction (predictor).
"""

import functools
import os

import tensorflow as tf

from bert_tf.distribute import input_context, is_chief
from bert_tf.precision import SyncedLossScaleOptimizer, build_with_policy
from bert_tf.training.checkpoint_state import CheckpointState
from bert_tf.training.evaluation import evaluate
from bert_tf.training.inputs import TrainInput, saveable
from bert_tf.training.loop import TrainLoop
from bert_tf.training.predictor import Predictor
from bert_tf.training.preemption import StopSignal, any_worker_stopping, peer_errors
from bert_tf.training.steps import TrainStep, make_steps_fn
from bert_tf.training.train_settings import check_learning_rate


class Trainer:
    """Builds the model and optimizer under the strategy, then trains, evaluates and checkpoints.

    Example:
    ```python
    trainer = Trainer(trainable, strategy, lambda: create_optimizer(1e-4, 1000, 100), TrainSettings("/tmp/run"))
    trainer.train()
    print(trainer.evaluate(max_steps=100))
    ```
    """

    def __init__(self, trainable, strategy, optimizer_fn, settings, init_fn=None, resume_fn=None):
        """Builds everything and restores the latest checkpoint in settings.model_dir, if any.

        Checkpoints are settings.model_dir/model.ckpt-<step>, as the original's Estimator names them.

        Args:
          trainable: a Trainable.
          strategy: a tf.distribute.Strategy.
          optimizer_fn: () -> keras optimizer (called in the strategy scope).
          settings: a TrainSettings, whose batch sizes the caller checked with check_batch_sizes (a
            run does, before any work: the batch sizes are checked once).
          init_fn: (model) -> None, loads initial weights (e.g. --init_checkpoint); skipped when resuming.
          resume_fn: (model, checkpoint prefix) -> None, restores the model's weights when resuming
            (bert_tf.checkpoints reads them by path, checkpoints of earlier layouts included); by
            default every object of the model must match the checkpoint.

        Raises:
          InputError: an unknown mixed_precision policy, a step count that is not positive, or a
            learning rate that is not positive and finite (naming --learning_rate).
        """
        self.trainable, self.strategy, self.settings = trainable, strategy, settings
        settings.check()
        self._chief = is_chief(strategy)
        with strategy.scope():
            self.model, self.optimizer = _build(trainable, optimizer_fn, settings)
            # Global batches taken from the training input (more than the optimizer's steps when
            # mixed_float16 skips one); a checkpoint without the input's state reads through as many.
            self._input_steps = tf.Variable(-1, dtype=tf.int64, trainable=False, name="input_steps")
        self._stop = StopSignal()
        context = input_context(strategy)
        self.state = CheckpointState(
            self.model, self.optimizer, self._input_steps, settings, self._chief, context
        )
        self.state.restore_or_init(init_fn, resume_fn)
        self.manager = self.state.manager  # remade when a damaged checkpoint was skipped
        self._input = TrainInput(trainable, strategy, settings.train_batch_size, context)
        self.predictor = Predictor(self.model, strategy, log_every=settings.log_steps)
        self._loop = self._train_loop_fn = None
        self._train_iterator = None

    @property
    def global_step(self):
        return int(self.optimizer.iterations.numpy())

    def train(self, until=None):
        """Trains until settings.num_train_steps, checkpointing, logging and writing summaries on the way.

        Args:
          until: stop at this global step instead (checkpointed there); a later call goes on with
            the same input stream.

        Returns:
          dict: the mean training losses of the last logged interval, its "learning_rate" and
          "examples_per_second", and "global_step".
        """
        settings = self.settings
        end = settings.num_train_steps if until is None else min(until, settings.num_train_steps)
        self._stop.flag.assign(False)
        writer = self._summary_writer("train")
        with self._stop.watching(), peer_errors(self.strategy):
            if self._train_iterator is None:
                skip = int(self._input_steps.numpy())
                self._train_iterator = self._input.iterator(skip, self.state.restore_input)
            if self._loop is None:
                self._loop = self._make_loop()
            last = self._loop.run(end, writer)
        writer.flush()
        return last

    def _make_loop(self):
        settings = self.settings
        step = TrainStep(
            self.trainable,
            self.model,
            self.optimizer,
            self.strategy,
            settings.num_accumulation_steps,
            settings.jit_compile,
        )
        # The tf.function of up to steps_per_loop steps (test_cut_batches counts its tracings).
        self._train_loop_fn = make_steps_fn(
            self.strategy, step, self._input.next_batch, self._input_steps, self._stop.flag
        )
        return TrainLoop(
            settings,
            # The tf.function itself, its iterator bound: the loop calls it with no frame between.
            run_steps=functools.partial(self._train_loop_fn, self._train_iterator),
            optimizer=self.optimizer,
            loss_sums=step.loss_sums,
            save=lambda at: self.state.save(at, saveable(self._train_iterator)),
            latest_checkpoint=lambda: self.manager.latest_checkpoint,
            stopping=lambda: any_worker_stopping(self.strategy, self._stop),
        )

    def _summary_writer(self, name):
        if not self._chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(os.path.join(self.settings.model_dir, name))

    def evaluate(self, max_steps=None):
        """Evaluates on the eval input (is_training=False) for at most max_steps global batches.

        Returns:
          dict: "loss" (mean over batches of the global-batch loss, as the original Estimator reports it),
          every metric of metric_fn, and "global_step".
        """
        settings = self.settings
        results = evaluate(
            self.trainable,
            self.model,
            self.strategy,
            settings.eval_batch_size,
            max_steps,
            settings.log_steps,
        )
        results["global_step"] = self.global_step
        return results

    def predict(self, dataset, output_keys=None, feature_keys=()):
        """The model's outputs for every real example of `dataset`, in input order (Predictor.predict)."""
        return self.predictor.predict(dataset, output_keys, feature_keys)


def _build(trainable, optimizer_fn, settings):
    """The model under the dtype policy and its optimizer (loss-scaled under mixed_float16), with every
    variable created, so that checkpoints restore at once and steps create none. In strategy scope.

    The optimizer comes first: its learning rate is checked before the model is built."""
    policy = settings.mixed_precision
    optimizer = optimizer_fn()
    check_learning_rate(optimizer, settings.num_train_steps)
    model = build_with_policy(trainable.build_model, policy)
    if policy == "mixed_float16":
        optimizer = SyncedLossScaleOptimizer(optimizer)
    model(trainable.dummy_batch(), training=False)
    optimizer.build(model.trainable_variables)
    return model, optimizer
