"""What every training run shares: the checks before any work and the Trainer.

The settings (the flags) are bert_tf/shared_settings.py's RunSettings and FineTuningSettings and each
script's own class (tasks/task_settings.py, tasks/pretraining.py); each checks its own fields (`check()`).
`Run` checks everything else a run will read before its first step (the BertConfig, the strategy and
its batches, the --init_checkpoint's shapes against the model) and builds the Trainer with THE restore
path (bert_tf.checkpoints.restore_init_checkpoint). tasks/finetuning.py's `FineTuningRun` adds what
every fine-tuning task does; run_pretraining.py's run (tasks/pretraining.py) subclasses `Run` directly.
"""

import dataclasses
import os

import keras
import tensorflow as tf
from absl import logging

from bert_tf import file_io, objectives
from bert_tf.checkpoints import resolve_checkpoint, restore_init_checkpoint
from bert_tf.distribute import describe, get_strategy, is_chief, resolve_strategy_name
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.models.networks.task_info import TASK_FILE, read_task_info
from bert_tf.training import Trainer, TrainSettings, check_batch_sizes, write_eval_results

# The metrics of --do_predict's test data, when it holds labels (eval_results.txt's format).
TEST_RESULTS_FILE = "test_results.txt"


def recorded_bert_config(checkpoint_path):
    """(BertConfig, the file it is read from) that a checkpoint was trained with, or (None, None).

    The bert_config.json beside the checkpoint (folder or prefix): the file a user passes on; else
    the run's task.json there (a fine-tuning run's folder has no bert_config.json).
    """
    folder = (
        checkpoint_path if tf.io.gfile.isdir(checkpoint_path) else os.path.dirname(checkpoint_path)
    )
    path = os.path.join(folder, "bert_config.json")
    if tf.io.gfile.exists(path):
        try:
            return BertConfig.from_json_file(path), path
        except ValueError as error:
            raise InputError(str(error)) from None
    info = read_task_info(checkpoint_path)
    if info is not None and info.bert_config is not None:
        return info.bert_config, os.path.join(folder, TASK_FILE)
    return None, None


def check_objective_matches(bert_config, bert_config_file, checkpoint_path, flag):
    """A checkpoint is used with the attention it was trained with (bert_tf.objectives), or InputError.

    Args:
      bert_config: the BertConfig the run builds its model with.
      bert_config_file: where that config comes from (for the message).
      checkpoint_path: the checkpoint (prefix or folder) the run reads weights from.
      flag: the flag that names the checkpoint, e.g. "--init_checkpoint".

    Raises:
      InputError: one line naming both files, when the checkpoint's recorded config (task.json or
        bert_config.json beside it) has causal attention and `bert_config` not, or the other way.
    """
    recorded, recorded_file = recorded_bert_config(checkpoint_path)
    if recorded is None or recorded.causal_attention == bert_config.causal_attention:
        return
    raise InputError(
        f"{flag}={checkpoint_path} was trained with {objectives.describe(recorded.objective)} ({recorded_file}), "
        f"but --bert_config_file={bert_config_file} gives {objectives.describe(bert_config.objective)}: pass "
        "the checkpoint's own bert_config.json"
    )


def objective_config(bert_config, bert_config_file, init_checkpoint=None, objective=None):
    """A run's BertConfig: with --objective recorded (run_pretraining.py), checked against the
    attention --init_checkpoint was trained with (check_objective_matches).

    Raises:
      InputError: when --bert_config_file records another objective than the original's and
        --objective's, or the checkpoint's attention is not the config's.
    """
    if objective is not None:
        if bert_config.objective not in (objectives.DEFAULT_OBJECTIVE, objective):
            raise InputError(
                f"--objective={objective}, but --bert_config_file={bert_config_file} records "
                f"objective {bert_config.objective}: pass --objective={bert_config.objective}"
            )
        bert_config = dataclasses.replace(bert_config, objective=objective)
    if init_checkpoint:
        check_objective_matches(bert_config, bert_config_file, init_checkpoint, "--init_checkpoint")
    return bert_config


def load_bert_config(bert_config_file, max_seq_length, init_checkpoint=None, objective=None):
    """--bert_config_file's BertConfig, checked against --max_seq_length, with --objective (pretraining),
    and with the attention --init_checkpoint was trained with (check_objective_matches); InputError naming them."""
    if not tf.io.gfile.exists(bert_config_file):
        raise InputError(f"--bert_config_file={bert_config_file} does not exist")
    try:
        bert_config = BertConfig.from_json_file(bert_config_file)
    except ValueError as error:
        raise InputError(f"--bert_config_file: {error}") from None
    if max_seq_length > bert_config.max_position_embeddings:
        raise InputError(
            f"--max_seq_length={max_seq_length} exceeds max_position_embeddings="
            f"{bert_config.max_position_embeddings} of --bert_config_file={bert_config_file}"
        )
    return objective_config(bert_config, bert_config_file, init_checkpoint, objective)


def make_strategy(settings):
    """The tf.distribute strategy the flags ask for (one device, mirrored, multi-worker or TPU)."""
    try:
        strategy = get_strategy(
            resolve_strategy_name(settings.distribution_strategy, settings.use_tpu),
            num_gpus=settings.num_gpus,
            tpu_name=settings.tpu_name or settings.master,
            tpu_zone=settings.tpu_zone,
            gcp_project=settings.gcp_project,
            num_tpu_cores=settings.num_tpu_cores if settings.use_tpu else None,
            collective_timeout_seconds=settings.collective_timeout_seconds,
        )
    except ValueError as error:  # no such device, no TPU reachable: the message names the flag
        raise InputError(str(error).splitlines()[0]) from None
    return strategy


def read_test_results(folder):
    """{name: value as text} of the test_results.txt in `folder`, or None when there is none."""
    path = os.path.join(folder, TEST_RESULTS_FILE)
    if not file_io.exists(path):
        return None
    return dict(line.split(" = ", 1) for line in file_io.read_text(path).splitlines() if line)


class Run:
    """One run of a training script: its settings checked, its strategy, its Trainer.

    A subclass (FineTuningRun, PretrainingRun) defines `build_model()` (the model the Trainer trains,
    built in the strategy scope) and its steps; `check_init_checkpoint()` and `make_trainer()` restore --init_checkpoint into it.

    Attributes:
      settings: the script's settings (a RunSettings subclass).
      bert_config: the encoder's BertConfig (checked against the flags).
      strategy: the tf.distribute strategy.
    """

    # What --init_checkpoint gives the model's heads (checkpoints.HEADS).
    checkpoint_heads = "optional"
    # Micro-batches of one training batch (run_pretraining.py's --num_accumulation_steps).
    num_accumulation_steps = 1
    # The attention objective the run records in its BertConfig (run_pretraining.py's --objective).
    objective = None

    def __init__(self, settings):
        self.settings = settings
        self.bert_config = self.check_settings()
        self.strategy = make_strategy(settings)
        batches = settings.batch_sizes()
        check_batch_sizes(
            self.strategy.num_replicas_in_sync,
            settings.train_batch_size,
            self.num_accumulation_steps,
            **{f"{step}_batch_size": size for step, size in batches.items() if step != "train"},
        )
        logging.info("Devices: %s", describe(self.strategy, batches))
        self._trainer = None

    def build_model(self):
        """The model the Trainer trains (built in the strategy scope): each kind of run's own."""
        raise NotImplementedError(f"{type(self).__name__} builds no model")

    @property
    def is_chief(self):
        """Whether this process writes the output files (always, but on multi-worker's other workers)."""
        return is_chief(self.strategy)

    def check_settings(self):
        """Checks the settings every run shares before any work; returns the BertConfig.

        Raises:
          InputError: naming the flag (and the file), for a missing or bad value (the settings' own
            check() first).
        """
        settings = self.settings
        settings.check()
        bert_config = load_bert_config(
            settings.bert_config_file,
            settings.max_seq_length,
            settings.init_checkpoint,
            self.objective,
        )
        if settings.init_checkpoint:
            try:
                resolve_checkpoint(settings.init_checkpoint)
            except FileNotFoundError as error:
                raise InputError(f"--init_checkpoint: {error}") from None
        return bert_config

    def resumes(self):
        """Whether --output_dir holds a checkpoint this run resumes from."""
        return tf.train.latest_checkpoint(self.settings.output_dir) is not None

    def check_init_checkpoint(self, needs_head):
        """Checks --init_checkpoint against the model (names, shapes) before any work.

        Args:
          needs_head: the run uses the model's head without training it first (evaluation or
            prediction only): a head --init_checkpoint lacks is then an error, not a fresh head.
        """
        settings = self.settings
        if self.resumes():
            if settings.init_checkpoint:
                use = "resuming" if getattr(settings, "do_train", True) else "using it"
                logging.info(
                    "--output_dir holds a checkpoint: %s, not reading --init_checkpoint", use
                )
            return
        if not settings.init_checkpoint:
            if needs_head:
                raise InputError(
                    f"nothing to evaluate or predict with: --output_dir={settings.output_dir} has no "
                    "checkpoint; pass --init_checkpoint (a fine-tuned model) or --do_train"
                )
            return
        try:
            report = restore_init_checkpoint(
                self.build_model(), settings.init_checkpoint, self.checkpoint_heads, dry_run=True
            )
        except InputError as error:
            raise InputError(f"--init_checkpoint: {error}") from None
        if needs_head and report.new:
            raise InputError(
                f"--init_checkpoint={settings.init_checkpoint} has no trained {report.new[0]}, and "
                "without --do_train the predictions would come from an untrained head"
            )

    def make_trainer(self, trainable, optimizer_fn, train_settings):
        """A Trainer over `trainable` (a training.Trainable) in --output_dir (resuming there), initialized from --init_checkpoint.

        --seed is set first, so the initial weights depend on it alone.
        """
        init_checkpoint, heads = self.settings.init_checkpoint, self.checkpoint_heads
        if self.settings.seed is not None:
            keras.utils.set_random_seed(self.settings.seed)
        return Trainer(
            trainable,
            self.strategy,
            optimizer_fn,
            train_settings,
            init_fn=(lambda model: restore_init_checkpoint(model, init_checkpoint, heads))
            if init_checkpoint
            else None,
            resume_fn=lambda model, prefix: restore_init_checkpoint(
                model, prefix, "required", resuming=True
            ),
        )

    def train_settings(self, num_train_steps, **loop_settings):
        """The loop settings of the flags, for `num_train_steps` steps."""
        settings = self.settings
        return TrainSettings(
            model_dir=settings.output_dir,
            train_batch_size=settings.train_batch_size,
            eval_batch_size=settings.eval_batch_size,
            num_train_steps=num_train_steps,
            steps_per_loop=settings.iterations_per_loop,
            save_checkpoints_steps=settings.save_checkpoints_steps,
            log_steps=settings.log_steps,
            num_accumulation_steps=self.num_accumulation_steps,
            mixed_precision=settings.mixed_precision,
            jit_compile=settings.jit_compile,
            **loop_settings,
        )

    def write_output(self, name, text):
        """Writes output_dir/<name> atomically, on the chief only."""
        if self.is_chief:
            file_io.write_text(os.path.join(self.settings.output_dir, name), text)

    def write_eval_results(self, results):
        """Writes output_dir/eval_results.txt (the original's `key = value` lines), on the chief only."""
        if self.is_chief:
            write_eval_results(os.path.join(self.settings.output_dir, "eval_results.txt"), results)

    def write_test_results(self, results, source):
        """Writes output_dir/test_results.txt: eval_results.txt's metrics, of the labelled test data
        at `source` (a file, or a TFDS split), in its format, on the chief only; logs them."""
        if self.is_chief:
            path = os.path.join(self.settings.output_dir, TEST_RESULTS_FILE)
            logging.info("test results of %s (%s):", source, path)
            write_eval_results(path, results)

    def no_test_labels(self, source, what="labels"):
        """Logs that the test data at `source` holds no labels (`what`: SQuAD's are answers), so no
        test_results.txt is written (and an earlier run's in --output_dir, of other test data, is
        removed)."""
        path = os.path.join(self.settings.output_dir, TEST_RESULTS_FILE)
        if self.is_chief and file_io.exists(path):
            tf.io.gfile.remove(path)
        logging.info("%s holds no %s: predictions only, no %s", source, what, TEST_RESULTS_FILE)
