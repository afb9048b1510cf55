"""The training loop's progress: when it stops to log and save, its log line and TensorBoard scalars.

`Trainer` (bert_tf/training.py) runs its steps in tf.function calls of up to `steps_per_loop` steps,
each ending at the next log line, checkpoint or the end (`steps_to_next_boundary`), and stops with
one line when the loss of a call is not finite (`check_finite_loss`); after each log interval `log_progress` writes the progress line (steps/s, examples/s, loss, learning rate, ETA) and
the same values as TensorBoard scalars.
"""

import math

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_tf.errors import Diverged


def steps_to_next_boundary(step, config):
    """Steps the next loop call runs: up to steps_per_loop, stopping at a log, checkpoint or the end."""
    boundaries = [config.num_train_steps]
    for every in (config.log_steps, config.save_checkpoints_steps):
        boundaries.append((step // every + 1) * every)
    return int(min(config.steps_per_loop, min(boundaries) - step))


def check_finite_loss(loss_sum, optimizer, steps, config, last_checkpoint):
    """Raises Diverged when the loss summed over the last loop call's steps is NaN or infinite.

    Args:
      loss_sum: the variable summing the training loss since the last log line (checked after each
        loop call, so a NaN comes from the call just run).
      optimizer: the run's optimizer (its learning rate goes into the message).
      steps: (the global step before the call, the global step after it).
      config: the TrainConfig (mixed_precision).
      last_checkpoint: the newest checkpoint kept, or None.
    """
    loss_sum = float(loss_sum.read_value())
    if np.isfinite(loss_sum):
        return
    # Under mixed_float16 the loss-scale optimizer skips every step whose gradients are not finite,
    # so the global step stands still: without this check such a run would never end.
    precision = (
        ""
        if config.mixed_precision == "float32"
        else f", --mixed_precision={config.mixed_precision}"
    )
    where = (
        f"in the steps after global step {steps[0]}, up to {steps[1]}"
        if steps[1] > steps[0]
        else f"after global step {steps[0]}, and every step since was skipped (gradients not finite)"
    )
    raise Diverged(
        f"training diverged: the loss is {loss_sum} {where} (learning rate {float(optimizer.learning_rate):.3g}{precision}); the last checkpoint kept is "
        f"{last_checkpoint or 'none'}. Lower --learning_rate, check the inputs"
        f"{', or use --mixed_precision=float32' if precision else ''}"
    )


def log_progress(config, means, learning_rate, step, interval_start, start, now, writer):
    """Logs one progress line and writes its scalars; returns them.

    Args:
      config: the TrainConfig (num_train_steps, train_batch_size).
      means: {loss name: its mean over the interval}.
      learning_rate: the optimizer's current rate.
      step: the global step now.
      interval_start, start: (global step, time.time()) at the interval's start and the run's.
      now: time.time() now.
      writer: the tf.summary writer of the training scalars.

    Returns:
      {**means, "global_step", "learning_rate", "examples_per_second"}.
    """
    steps = step - interval_start[0]
    examples_per_sec = steps * config.train_batch_size / max(now - interval_start[1], 1e-9)
    steps_per_sec = (step - start[0]) / max(now - start[1], 1e-9)
    eta = (config.num_train_steps - step) / max(steps_per_sec, 1e-9)
    logging.info(
        "step %d/%d  loss %.4f  lr %.3g  %.1f examples/s  ETA %s",
        step,
        config.num_train_steps,
        means.get("loss", math.nan),
        learning_rate,
        examples_per_sec,
        format_seconds(eta),
    )
    with writer.as_default(step=step):
        for key, value in means.items():
            write_scalar(key, value)
        write_scalar("learning_rate", learning_rate)
        write_scalar("examples_per_second", examples_per_sec)
    return {
        **means,
        "global_step": step,
        "learning_rate": learning_rate,
        "examples_per_second": examples_per_sec,
    }


def write_scalar(name, value):
    """tf.summary.scalar without the tensorboard package: the same event, tagged for the scalars plugin."""
    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata.SerializeToString())


def format_seconds(seconds):
    """H:MM:SS of a duration; "?" when it is not finite."""
    if not np.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
