"""What the loop is given: a `Trainable` and the loop's `TrainSettings`, the one batch-size check and the
one learning-rate check."""

import dataclasses
import math
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.precision import MIXED_PRECISION_POLICIES


@dataclasses.dataclass
class Trainable:
    """What the loop trains: how to build the model, its loss, metrics and input (a fine-tuning
    run's, FineTuningRun.trainable(), or pretraining's, tasks/pretraining.py).

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
class TrainSettings:
    """Loop settings; batch sizes are global (all replicas, all accumulation micro-batches of one update).

    The batch sizes are checked once, by `check_batch_sizes`, which a run calls before any work (it
    knows every batch of the run, the prediction batch included); `check` checks the rest.
    """

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

    def check(self):
        """Raises InputError naming the setting: an unknown precision or a count that is not positive."""
        if self.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise InputError(
                f"--mixed_precision must be one of {MIXED_PRECISION_POLICIES}, "
                f"got {self.mixed_precision!r}"
            )
        for name in ("num_train_steps", "steps_per_loop", "save_checkpoints_steps", "log_steps"):
            if getattr(self, name) <= 0:
                raise InputError(f"{name} must be positive, got {getattr(self, name)}")


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


# The keys under which a learning-rate schedule's config names its peak rate (the flag's value):
# bert_tf.optimization's WarmupLinearDecay, then Keras' own schedules.
_PEAK_RATE_KEYS = ("init_lr", "initial_learning_rate", "learning_rate")


def check_learning_rate(optimizer, num_train_steps):
    """The optimizer's learning rate must be positive and finite, before any step.

    A schedule whose config names its peak rate (`init_lr`, `initial_learning_rate`) has that
    checked; another is read at 21 steps spread over [0, num_train_steps]: a rate that is negative
    or not finite at one of them, or 0 at all, is an error.

    Args:
      optimizer: a Keras optimizer, not yet wrapped (e.g. by a loss-scale optimizer).
      num_train_steps: the run's training steps.

    Raises:
      InputError: naming --learning_rate and its value.
    """
    rate = optimizer._learning_rate  # the schedule or variable as given; .learning_rate is step 0's
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        schedule = rate.get_config()
        peak = [
            schedule[key] for key in _PEAK_RATE_KEYS if isinstance(schedule.get(key), int | float)
        ]
        steps = np.unique(np.linspace(0, num_train_steps, 21).astype(np.int64))
        rates = peak[:1] or [float(rate(int(step))) for step in steps]
    else:
        rates = [float(keras.ops.convert_to_numpy(rate))]
    bad = [r for r in rates if not math.isfinite(r) or r < 0] or (rates if max(rates) == 0 else [])
    if bad:
        check_learning_rate_value(bad[0])


def check_learning_rate_value(learning_rate):
    """Raises InputError naming --learning_rate unless it is a positive, finite number."""
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise InputError(
            f"--learning_rate must be a positive, finite number, got {learning_rate:g}: a run with "
            "it would not learn (0), climb the loss (negative) or diverge at once (nan, inf)"
        )
