"""The training loop: calls of up to steps_per_loop steps, stopping at every log line, checkpoint and
the end; a saved stop on SIGTERM; one line when the loss is not finite; a progress line after the first
step, then every log_steps steps or LOG_SECONDS seconds, whichever comes first."""

import time

import tensorflow as tf

from bert_tf.progress_log import LOG_SECONDS
from bert_tf.training.preemption import Preempted
from bert_tf.training.progress import Mark, Progress, check_finite_loss, steps_to_next_boundary


class TrainLoop:
    """Drives the steps from the current global step to an end, saving and logging on the way.

    Args:
      settings: the TrainSettings (num_train_steps, steps_per_loop, log_steps, save_checkpoints_steps,
        mixed_precision).
      run_steps: (num_steps, an int32 scalar tensor: one tracing for every count) -> None, runs up
        to num_steps updates (fewer once SIGTERM came).
      optimizer: the run's optimizer: its `iterations` is the global step, its learning rate goes
        into the progress line.
      loss_sums: the training losses summed since the last log line (steps.LossSums: `total(key)`,
        `take()`).
      save: (step) -> None, writes the checkpoint of `step`.
      latest_checkpoint: () -> the newest checkpoint kept, or None (named when the loss diverges).
      stopping: () -> whether SIGTERM reached any worker (all workers agree).
    """

    def __init__(
        self, settings, *, run_steps, optimizer, loss_sums, save, latest_checkpoint, stopping
    ):
        self.settings, self.run_steps, self.optimizer = settings, run_steps, optimizer
        self.loss_sums, self.save = loss_sums, save
        self.latest_checkpoint, self.stopping = latest_checkpoint, stopping

    @property
    def global_step(self):
        return int(self.optimizer.iterations.numpy())

    def run(self, end, writer):
        """Trains from the global step up to `end`, checkpointing there and at every checkpoint step.

        Args:
          end: the global step to stop at (at most settings.num_train_steps).
          writer: the tf.summary writer of the training scalars.

        Returns:
          the last progress line's values (Progress.log), or {"global_step"} when no step ran.

        Raises:
          Preempted: SIGTERM came; the checkpoint of the step reached is saved.
          Diverged: the loss of the last call is not finite; nothing of that call is saved.
        """
        settings = self.settings
        step = self.global_step
        last = {"global_step": step}
        progress = Progress(settings, writer, Mark(step, time.time()))
        first_step, pace = step + 1, None
        while step < end:
            began = time.time()
            self.run_steps(tf.constant(self._next_call(step, end, first_step, progress, pace)))
            before, step = step, self.global_step
            pace = (time.time() - began) / max(step - before, 1)
            check_finite_loss(
                self.loss_sums.total("loss"),
                (before, step),
                float(self.optimizer.learning_rate),
                settings.mixed_precision,
                self.latest_checkpoint(),
            )
            if self.stopping():
                self.save(step)
                raise Preempted(
                    f"SIGTERM: stopped at global step {step}, saved in {settings.model_dir}; "
                    "the same command resumes from there"
                )
            at_end = step in (settings.num_train_steps, end)
            now = Mark(step, time.time())
            timed = now.time - progress.since.time >= LOG_SECONDS
            if step % settings.log_steps == 0 or at_end or step == first_step or timed:
                last = progress.log(now, self.loss_sums.take(), float(self.optimizer.learning_rate))
            if step % settings.save_checkpoints_steps == 0 or at_end:
                self.save(step)
        return last

    def _next_call(self, step, end, first_step, progress, pace):
        """The steps of the next call: to the next boundary, and no further than the steps that fit
        before the next timed progress line at the last call's pace (seconds per step)."""
        within = None
        if pace:
            within = int((progress.since.time + LOG_SECONDS - time.time()) / pace)
        return min(
            steps_to_next_boundary(self.global_step, self.settings, first_step, within), end - step
        )
