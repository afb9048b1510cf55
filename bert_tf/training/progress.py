"""The training loop's progress: when it stops to log and save, its log line and TensorBoard scalars.

The loop (bert_tf/training/loop.py) runs its steps in tf.function calls of up to `steps_per_loop`
steps, each ending at the next log line, checkpoint or the end (`steps_to_next_boundary`): the first
step, every `log_steps` and, at the latest, 30 s after the last line. It stops
with one line when the loss of a call is not finite (`check_finite_loss`); after each log interval
`Progress.log` writes the progress line (examples/s, loss, learning rate, ETA) and the same values
as TensorBoard scalars.
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_tf.errors import Diverged
from bert_tf.progress_log import format_seconds

__all__ = ["Mark", "Progress", "check_finite_loss", "format_seconds", "steps_to_next_boundary"]


def steps_to_next_boundary(step, settings, first_step=None, within=None):
    """Steps the next loop call runs: up to steps_per_loop, stopping at a log, checkpoint or the end.

    Args:
      step: the global step now.
      settings: the TrainSettings.
      first_step: a step to stop at too (the loop's first step, whose progress line comes at once).
      within: at most this many steps (the steps that fit before the next timed progress line).
    """
    boundaries = [settings.num_train_steps]
    for every in (settings.log_steps, settings.save_checkpoints_steps):
        boundaries.append((step // every + 1) * every)
    if first_step is not None and first_step > step:
        boundaries.append(first_step)
    steps = min(settings.steps_per_loop, min(boundaries) - step)
    return int(steps if within is None else max(1, min(steps, within)))


def check_finite_loss(loss_sum, steps, learning_rate, mixed_precision, last_checkpoint):
    """Raises Diverged when the loss summed over the last loop call's steps is NaN or infinite.

    Args:
      loss_sum: the training loss summed since the last log line (checked after each loop call, so
        a NaN comes from the call just run).
      steps: (the global step before the call, the global step after it).
      learning_rate: the optimizer's current rate (for the message).
      mixed_precision: the TrainSettings's policy name.
      last_checkpoint: the newest checkpoint kept, or None.
    """
    if np.isfinite(loss_sum):
        return
    # Under mixed_float16 the loss-scale optimizer skips every step whose gradients are not finite,
    # so the global step stands still: without this check such a run would never end.
    precision = "" if mixed_precision == "float32" else f", --mixed_precision={mixed_precision}"
    where = (
        f"in the steps after global step {steps[0]}, up to {steps[1]}"
        if steps[1] > steps[0]
        else f"after global step {steps[0]}, and every step since was skipped (gradients not finite)"
    )
    raise Diverged(
        f"training diverged: the loss is {loss_sum} {where} (learning rate {learning_rate:.3g}"
        f"{precision}); the last checkpoint kept is {last_checkpoint or 'none'}. Lower "
        f"--learning_rate, check the inputs{', or use --mixed_precision=float32' if precision else ''}"
    )


@dataclasses.dataclass(frozen=True)
class Mark:
    """A point of the run: its global step and its time.time()."""

    step: int
    time: float


class Progress:
    """The progress line and TensorBoard scalars of each log interval.

    Args:
      settings: the TrainSettings (num_train_steps, train_batch_size).
      writer: the tf.summary writer of the training scalars.
      start: the Mark where this call of the loop started (the ETA's rate counts from there).
    """

    def __init__(self, settings, writer, start):
        self.settings, self.writer = settings, writer
        self.start = self.since = start

    def log(self, now, loss_sums, learning_rate):
        """Logs the line of the interval ending at `now` (a Mark), writes its scalars, returns them.

        Args:
          now: the Mark at the interval's end.
          loss_sums: {loss name: its sum over the interval's steps}.
          learning_rate: the optimizer's current rate.

        Returns:
          {loss name: mean per step, "global_step", "learning_rate", "examples_per_second"}.
        """
        settings, since, start = self.settings, self.since, self.start
        steps = now.step - since.step
        means = {key: total / max(steps, 1) for key, total in loss_sums.items()}
        examples_per_sec = steps * settings.train_batch_size / max(now.time - since.time, 1e-9)
        steps_per_sec = (now.step - start.step) / max(now.time - start.time, 1e-9)
        eta = (settings.num_train_steps - now.step) / max(steps_per_sec, 1e-9)
        logging.info(
            "step %d/%d  loss %.4f  lr %.3g  %.1f examples/s  ETA %s",
            now.step,
            settings.num_train_steps,
            means.get("loss", math.nan),
            learning_rate,
            examples_per_sec,
            format_seconds(eta),
        )
        with self.writer.as_default(step=now.step):
            for key, value in means.items():
                write_scalar(key, value)
            write_scalar("learning_rate", learning_rate)
            write_scalar("examples_per_second", examples_per_sec)
        self.since = now
        return {
            **means,
            "global_step": now.step,
            "learning_rate": learning_rate,
            "examples_per_second": examples_per_sec,
        }


def write_scalar(name, value):
    """tf.summary.scalar without the tensorboard package: the same event, tagged for the scalars plugin."""
    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata.SerializeToString())
