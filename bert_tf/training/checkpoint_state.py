"""What a training checkpoint keeps, so that a resumed run trains exactly as the uninterrupted one.

`<model_dir>/model.ckpt-<step>` (the chief's) holds, beside the model and the optimizer:
- `input_steps`: the global batches taken from the training input (more than the steps when
  mixed_float16 skips one);
- `dropout`: the state of every dropout layer's random stream. Keras keeps it in a SeedGenerator
  variable that a model does not put in a tf.train.Checkpoint by itself; without it a resumed run
  draws the masks of step 1 again.

Each worker also writes the position of its own training input, the state of its tf.data iterator
(shuffle and prefetch buffers included), to `<model_dir>/input_state/worker<i>of<n>-<step>` just
before model.ckpt-<step> (n: the number of workers, whose shards of the input differ with n). A
resumed run restores it and reads no batch it trained on, so a restart costs the same at step 900k
as at step 10. Its size is that of the input's buffers, whatever the step.

Checkpoints written before these existed still resume: without an input state the run skips
`input_steps` batches (the old way: reading them), without dropout states the streams start anew;
each says so in one log line.
"""

import os
import re
import shutil
import tempfile

import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoint_reading import verify_checkpoint
from bert_tf.errors import DamagedCheckpoint, InputError
from bert_tf.training.preemption import error_reason

# What killed saves leave in model_dir, by their writers' exact names: TensorFlow's temporary
# `checkpoint` file (`checkpoint.tmp<uuid hex>`) and a save's `<prefix>_temp` folder, and the hidden
# `.<name>.tmp-<12 hex>` files and folders of bert_tf.file_io.temporary_name.
_LEFTOVERS = re.compile(
    r"^(checkpoint\.tmp[0-9a-f]{32}|model\.ckpt-\d+_temp|\..+\.tmp-[0-9a-f]{12})$"
)

# Checkpoints are <model_dir>/model.ckpt-<step>, as the original's (users' scripts name them so).
CHECKPOINT_NAME = "model.ckpt"
INPUT_STATE_DIR = "input_state"
_INPUT_STEPS_KEY = "input_steps/.ATTRIBUTES/VARIABLE_VALUE"
_DROPOUT_KEY = "dropout/0/.ATTRIBUTES/VARIABLE_VALUE"


def dropout_states(model):
    """The model's random-stream variables (Keras SeedGenerator states), in the model's own order."""
    return [v for v in model.non_trainable_variables if v.name == "seed_generator_state"]


class CheckpointState:
    """Saves and restores model.ckpt-<step> and this worker's input position.

    Every worker calls `save` (saving mirrored variables is a collective); only the chief's
    model.ckpt-<step> is kept, and every worker keeps its own input state.
    """

    def __init__(self, model, optimizer, input_steps, settings, chief, worker):
        """
        Args:
          model, optimizer: the Trainer's, built.
          input_steps: the int64 variable counting the global batches taken from the input.
          settings: the TrainSettings (model_dir, max_checkpoints_to_keep).
          chief: whether this process keeps model.ckpt-<step>.
          worker: this worker's tf.distribute.InputContext (its input pipeline and their number).
        """
        self.model, self.optimizer, self.input_steps = model, optimizer, input_steps
        self.model_dir, self.chief = settings.model_dir, chief
        self.keep = settings.max_checkpoints_to_keep
        self.dropout = dropout_states(model)
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, input_steps=input_steps, dropout=self.dropout
        )
        self.manager = self._make_manager()
        name = f"worker{worker.input_pipeline_id}of{worker.num_input_pipelines}-"
        self._input_prefix = os.path.join(self.model_dir, INPUT_STATE_DIR, name)
        remove_leftovers(self.model_dir if chief else None, self._input_prefix)
        self.resumed_from = None
        self._input_saveable = True

    def _make_manager(self):
        """The CheckpointManager of model_dir (the chief's) or of a folder of its own (another worker's)."""
        return tf.train.CheckpointManager(
            self.checkpoint,
            self.model_dir if self.chief else tempfile.mkdtemp(prefix="worker_ckpt_"),
            max_to_keep=self.keep,
            step_counter=self.optimizer.iterations,
            checkpoint_name=CHECKPOINT_NAME,
        )

    @property
    def global_step(self):
        return int(self.optimizer.iterations.numpy())

    def newest_intact_checkpoint(self):
        """The newest checkpoint of model_dir whose files read whole, or None when it has none.

        A damaged newer one (truncated, altered) is skipped with one warning line naming it, and
        dropped from the folder's `checkpoint` list (the chief's), so that the run saves that step
        anew; the manager is remade over the list.

        Raises:
          DamagedCheckpoint: every checkpoint of the list is damaged (the newest is named).
        """
        state = tf.train.get_checkpoint_state(self.model_dir)
        if state is None or not state.model_checkpoint_path:
            return None
        paths = [p for p in state.all_model_checkpoint_paths if p != state.model_checkpoint_path]
        paths.append(state.model_checkpoint_path)
        damaged = []
        for path in reversed(paths):
            try:
                verify_checkpoint(path)
            except DamagedCheckpoint as damage:
                logging.warning("%s - skipped: resuming from the newest intact checkpoint", damage)
                damaged.append(path)
                continue
            if damaged and self.chief:
                self._write_checkpoint_list(path, [p for p in paths if p not in damaged])
                self.manager = self._make_manager()
            return path
        raise DamagedCheckpoint(
            f"every checkpoint in {self.model_dir} is damaged, the newest {damaged[0]}: move them "
            "away to train afresh (or set --init_checkpoint)"
        )

    def _write_checkpoint_list(self, latest, kept):
        """Rewrites model_dir/checkpoint (the manager's list, a text proto of names relative to the
        folder, as the manager writes it), atomically."""
        lines = [f'model_checkpoint_path: "{os.path.basename(latest)}"']
        lines += [f'all_model_checkpoint_paths: "{os.path.basename(path)}"' for path in kept]
        file_io.write_text(os.path.join(self.model_dir, "checkpoint"), "\n".join(lines) + "\n")

    def restore_or_init(self, init_fn, resume_fn):
        """Restores the latest model.ckpt-<step> of model_dir, or calls init_fn(model) when none.

        resume_fn: (model, prefix) -> None restores the model's weights by path (checkpoints of
        earlier layouts included); None: every object of the model must match the checkpoint.
        A damaged newest checkpoint is skipped for the newest intact one (newest_intact_checkpoint).
        """
        latest = self.newest_intact_checkpoint()
        if not latest:
            if init_fn is not None:
                init_fn(self.model)
            self.input_steps.assign(0)
            return
        saved = dict(tf.train.list_variables(latest))
        parts = {"model": self.model, "optimizer": self.optimizer}
        if _INPUT_STEPS_KEY in saved:
            parts["input_steps"] = self.input_steps
        if _DROPOUT_KEY in saved or not self.dropout:
            parts["dropout"] = self.dropout
        else:
            logging.info("%s keeps no dropout state: the dropout streams start anew", latest)
        status = tf.train.Checkpoint(**parts).restore(latest)
        if resume_fn is None:
            status.assert_existing_objects_matched()
        else:
            status.expect_partial()
            resume_fn(self.model, latest)
        if "input_steps" not in parts:  # older checkpoints: one batch a step
            self.input_steps.assign(self.global_step)
        self.resumed_from = latest
        logging.info("Resumed from %s at global step %d", latest, self.global_step)

    def restore_input(self, iterator):
        """Puts `iterator` (this worker's training input) where the resumed checkpoint left it.

        Returns:
          whether it did; False when the run starts fresh or its checkpoint has no input state (the
          caller then skips input_steps batches).

        Raises:
          InputError: the saved state does not fit this input (other batch size, sequence length or
            input pipeline): resuming would train on other batches than the uninterrupted run.
        """
        if self.resumed_from is None:
            return False
        prefix = self._input_prefix + str(self.global_step)
        if not tf.io.gfile.exists(prefix + ".index"):
            logging.info(
                "No input state %s: reading on by skipping the %d batches trained on",
                prefix,
                int(self.input_steps.numpy()),
            )
            return False
        try:
            tf.train.Checkpoint(input=iterator).read(prefix).assert_consumed()
        except (tf.errors.OpError, AssertionError, ValueError) as error:
            reason = error_reason(str(error)) if str(error).strip() else type(error).__name__
            raise InputError(
                f"cannot restore the input position {prefix}: the training input differs from the "
                f"checkpointed run's ({reason}); resume with the same flags, or delete "
                f"{os.path.dirname(prefix)} to read on by skipping the batches trained on"
            ) from None
        logging.info("Input position restored from %s", prefix)
        return True

    def save(self, step, iterator=None):
        """Writes this worker's input state (when `iterator`) and model.ckpt-<step>, in that order:
        a checkpoint on disk always has its input state beside it."""
        if self.manager.latest_checkpoint and self.manager.latest_checkpoint.endswith(f"-{step}"):
            return
        if iterator is not None and self._input_saveable:
            self._save_input(iterator, step)
        with file_io.writing_checkpoint(f"{self.manager.directory}/{CHECKPOINT_NAME}-{step}"):
            path = self.manager.save(checkpoint_number=step)
        if self.chief:
            logging.info("Saved checkpoint %s", path)
        else:  # every worker must save (collectives); only the chief keeps it
            shutil.rmtree(self.manager.directory, ignore_errors=True)

    def _save_input(self, iterator, step):
        prefix = self._input_prefix + str(step)
        tf.io.gfile.makedirs(os.path.dirname(prefix))
        try:
            with file_io.writing_checkpoint(prefix):
                tf.train.Checkpoint(input=iterator).write(prefix)
        except tf.errors.FailedPreconditionError as error:
            # An input with state tf.data cannot save (a py_function, a generator): resuming then
            # reads through the batches trained on, as without an input state.
            for path in tf.io.gfile.glob(prefix + ".*"):
                tf.io.gfile.remove(path)
            self._input_saveable = False
            logging.warning(
                "The training input's position cannot be saved (%s): a resumed run will read "
                "through the batches trained on",
                error_reason(error.message),
            )
            return
        self._prune_input_states()

    def _prune_input_states(self):
        """Keeps this worker's input states of the newest max_checkpoints_to_keep steps, as the
        manager keeps its checkpoints."""
        if self.keep is None:
            return
        pattern = re.compile(re.escape(self._input_prefix) + r"(\d+)\.index$")
        steps = sorted(
            int(match.group(1))
            for match in map(pattern.match, tf.io.gfile.glob(self._input_prefix + "*.index"))
            if match
        )
        for step in steps[: -self.keep]:
            for path in tf.io.gfile.glob(self._input_prefix + f"{step}.*"):
                tf.io.gfile.remove(path)


def remove_leftovers(model_dir, input_prefix):
    """Removes what killed saves of this run left (their writers' exact names, never a user's file).

    Args:
      model_dir: the chief's folder, whose leftovers it removes (_LEFTOVERS); None on other workers.
      input_prefix: this worker's input-state prefix: its `<prefix><step>_temp` folders go too.

    Returns:
      the paths removed.
    """
    found = []
    if model_dir and tf.io.gfile.isdir(model_dir):
        names = tf.io.gfile.listdir(model_dir)
        found += [
            os.path.join(model_dir, n.rstrip("/")) for n in names if _LEFTOVERS.match(n.rstrip("/"))
        ]
    folder, name = os.path.split(input_prefix)
    if tf.io.gfile.isdir(folder):
        own = re.compile(re.escape(name) + r"\d+_temp$")
        found += [
            os.path.join(folder, n.rstrip("/"))
            for n in tf.io.gfile.listdir(folder)
            if own.match(n.rstrip("/"))
        ]
    for path in found:
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        else:
            tf.io.gfile.remove(path)
    if found:
        logging.info("Removed %d leftover(s) of killed saves: %s", len(found), ", ".join(found))
    return found
