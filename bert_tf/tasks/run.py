"""What every training run shares: the checks before any work, the Trainer, the fine-tuning steps.

The settings (the flags) are tasks/config.py's dataclasses. `Run` checks everything a run will read before its first step (files, flags, the output folder, the
--init_checkpoint's shapes against the model) and builds the Trainer with THE restore path
(bert_tf.checkpoints.restore_init_checkpoint). `FineTuningRun` adds the steps every fine-tuning task
takes the same way; a task's run (tasks/classification.py, ...) subclasses it with its data, loss and
outputs.
"""

import json
import math
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import io, metrics
from bert_tf.checkpoints import copy_checkpoint, resolve_checkpoint, restore_init_checkpoint
from bert_tf.data.feature_cache import make_feature_dataset, reading_cached_records
from bert_tf.distribute import describe, get_strategy, is_chief, resolve_strategy_name
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.optimization import create_optimizer
from bert_tf.tasks.run_files import (
    LABELS_FILE,
    TASK_FILE,
    TaskInfo,
    objective_config,
    read_labels,
    read_task_info,
    write_labels,
    write_task_info,
)
from bert_tf.tokenization import check_vocab, validate_case_matches_checkpoint
from bert_tf.training import (
    Task,
    TrainConfig,
    Trainer,
    write_eval_results,
)

# --eval_every_steps keeps the best checkpoint of a run here, with its metric in BEST_METRIC_FILE.
BEST_CHECKPOINT = "best_checkpoint"
BEST_METRIC_FILE = "dev_metric.json"
EVAL_RESULTS_FILES = ("eval_results.txt", "eval_results.json")

# Flags that must be positive, when the run's settings have them.
_POSITIVE = ("max_seq_length", "train_batch_size", "eval_batch_size", "save_checkpoints_steps")
_POSITIVE += ("iterations_per_loop", "log_steps", "predict_batch_size", "num_tpu_cores")
_POSITIVE += ("max_predictions_per_seq", "max_eval_steps", "num_accumulation_steps")


def load_bert_config(bert_config_file, max_seq_length, init_checkpoint=None, objective=None):
    """--bert_config_file's BertConfig, checked against --max_seq_length, with --objective (pretraining),
    and with the attention --init_checkpoint was trained with (run_files); InputError naming them."""
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


def make_strategy(config):
    """The tf.distribute strategy the flags ask for (one device, mirrored, multi-worker or TPU)."""
    try:
        strategy = get_strategy(
            resolve_strategy_name(config.distribution_strategy, config.use_tpu),
            num_gpus=config.num_gpus,
            tpu_name=config.tpu_name or config.master,
            tpu_zone=config.tpu_zone,
            gcp_project=config.gcp_project,
            num_tpu_cores=config.num_tpu_cores if config.use_tpu else None,
            collective_timeout_seconds=config.collective_timeout_seconds,
        )
    except ValueError as error:  # no such device, no TPU reachable: the message names the flag
        raise InputError(str(error).splitlines()[0]) from None
    return strategy


class Run:
    """One run of a training script: its settings checked, its strategy, its Trainer.

    A subclass provides `build_model()` (the model the Trainer trains, built in the strategy scope)
    and its steps; `check_init_checkpoint()` and `make_trainer()` restore --init_checkpoint into it.

    Attributes:
      config: the script's settings (a RunConfig subclass).
      bert_config: the encoder's BertConfig (checked against the flags).
      strategy: the tf.distribute strategy.
    """

    checkpoint_heads = (
        "optional"  # what --init_checkpoint gives the model's heads (checkpoints.HEADS)
    )

    def __init__(self, config):
        self.config = config
        self.bert_config = self.check_settings()
        self.strategy = make_strategy(config)
        self.check_batch_sizes()
        steps = [step for step in ("train", "eval", "predict") if getattr(config, f"do_{step}", 0)]
        batches = {step: getattr(config, f"{step}_batch_size") for step in steps}
        logging.info("Devices: %s", describe(self.strategy, batches))
        self._trainer = None

    def check_batch_sizes(self):
        """Each global batch must split evenly over the replicas (and accumulation micro-batches)."""
        config, replicas = self.config, self.strategy.num_replicas_in_sync
        accumulation = getattr(config, "num_accumulation_steps", 1)
        if config.train_batch_size % (replicas * accumulation):
            raise InputError(
                f"--train_batch_size={config.train_batch_size} must be divisible by the number of "
                f"replicas ({replicas}) times --num_accumulation_steps ({accumulation})"
            )
        for name in ("eval_batch_size", "predict_batch_size"):
            value = getattr(config, name, replicas)
            if value % replicas:
                raise InputError(
                    f"--{name}={value} must be divisible by the number of replicas ({replicas})"
                )

    @property
    def is_chief(self):
        """Whether this process writes the output files (always, but on multi-worker's other workers)."""
        return is_chief(self.strategy)

    def check_settings(self):
        """Checks the settings every run shares before any work; returns the BertConfig.

        Raises:
          InputError: naming the flag (and the file), for a missing or bad value.
        """
        config = self.config
        for name in ("bert_config_file", "output_dir"):
            if not getattr(config, name):
                raise InputError(f"--{name} is required")
        for name in _POSITIVE:
            value = getattr(config, name, 1)
            if value <= 0:
                raise InputError(f"--{name} must be positive, got {value}")
        bert_config = load_bert_config(
            config.bert_config_file, config.max_seq_length, config.init_checkpoint,
            getattr(config, "objective", None),
        )  # fmt: skip
        if hasattr(config, "do_lower_case"):  # the original checks this first
            validate_case_matches_checkpoint(config.do_lower_case, config.init_checkpoint)
        if config.init_checkpoint:
            try:
                resolve_checkpoint(config.init_checkpoint)
            except FileNotFoundError as error:
                raise InputError(f"--init_checkpoint: {error}") from None
        io.check_writable_folder(config.output_dir, "--output_dir")
        return bert_config

    def resumes(self):
        """Whether --output_dir holds a checkpoint this run resumes from."""
        return tf.train.latest_checkpoint(self.config.output_dir) is not None

    def check_init_checkpoint(self, needs_head):
        """Checks --init_checkpoint against the model (names, shapes) before any work.

        Args:
          needs_head: the run uses the model's head without training it first (evaluation or
            prediction only): a head --init_checkpoint lacks is then an error, not a fresh head.
        """
        config = self.config
        if self.resumes():
            if config.init_checkpoint:
                logging.info(
                    "--output_dir holds a checkpoint: resuming, not reading --init_checkpoint"
                )
            return
        if not config.init_checkpoint:
            if needs_head:
                raise InputError(
                    f"nothing to evaluate or predict with: --output_dir={config.output_dir} has no "
                    "checkpoint; pass --init_checkpoint (a fine-tuned model) or --do_train"
                )
            return
        try:
            report = restore_init_checkpoint(
                self.build_model(), config.init_checkpoint, self.checkpoint_heads, dry_run=True
            )
        except InputError as error:
            raise InputError(f"--init_checkpoint: {error}") from None
        if needs_head and report.new:
            raise InputError(
                f"--init_checkpoint={config.init_checkpoint} has no trained {report.new[0]}, and "
                "without --do_train the predictions would come from an untrained head"
            )

    def make_trainer(self, task, optimizer_fn, train_config):
        """A Trainer over `task` in --output_dir (resuming there), initialized from --init_checkpoint.

        --seed is set first, so the initial weights depend on it alone.
        """
        init_checkpoint, heads = self.config.init_checkpoint, self.checkpoint_heads
        if self.config.seed is not None:
            keras.utils.set_random_seed(self.config.seed)
        return Trainer(
            task,
            self.strategy,
            optimizer_fn,
            train_config,
            init_fn=(lambda model: restore_init_checkpoint(model, init_checkpoint, heads))
            if init_checkpoint
            else None,
            resume_fn=lambda model, prefix: restore_init_checkpoint(
                model, prefix, "required", resuming=True
            ),
        )

    def train_config(self, num_train_steps, **settings):
        """The loop settings of the flags, for `num_train_steps` steps."""
        config = self.config
        return TrainConfig(
            model_dir=config.output_dir,
            train_batch_size=config.train_batch_size,
            eval_batch_size=config.eval_batch_size,
            num_train_steps=num_train_steps,
            steps_per_loop=config.iterations_per_loop,
            save_checkpoints_steps=config.save_checkpoints_steps,
            log_steps=config.log_steps,
            mixed_precision=config.mixed_precision,
            jit_compile=config.jit_compile,
            **settings,
        )

    def write_output(self, name, text):
        """Writes output_dir/<name> atomically, on the chief only."""
        if self.is_chief:
            io.write_text(os.path.join(self.config.output_dir, name), text)

    def write_eval_results(self, results):
        """Writes output_dir/eval_results.txt (the original's `key = value` lines), on the chief only."""
        if self.is_chief:
            write_eval_results(os.path.join(self.config.output_dir, "eval_results.txt"), results)


def num_train_steps(config, num_train_examples):
    """(steps, warmup steps) as the original computes them: examples / batch * epochs."""
    steps = int(num_train_examples / config.train_batch_size * config.num_train_epochs)
    if config.do_train and steps <= 0:
        raise InputError(
            f"{num_train_examples} training examples make no step of --train_batch_size="
            f"{config.train_batch_size} in --num_train_epochs={config.num_train_epochs}"
        )
    return max(steps, 1), int(max(steps, 1) * config.warmup_proportion)


def padded_count(num_examples, batch_size):
    """Examples after padding the last batch with fake ones: the next multiple of batch_size."""
    return int(math.ceil(num_examples / batch_size) * batch_size)


def dummy_batch(feature_spec, feature):
    """One example of `feature` ({name: list}) as [1, ...] tensors of the spec's dtypes (int32 for int64)."""
    return {
        name: tf.constant([feature[name]], tf.float32 if spec.dtype == tf.float32 else tf.int32)
        for name, spec in feature_spec.items()
    }


class FineTuningRun(Run):
    """What one run of every fine-tuning script shares: the checks, the Trainer, the steps.

    A task's run subclasses it and provides:
      spec: its bert_tf.tasks.spec.TaskSpec; head_info() -> the TaskInfo fields of its head (labels, ...).
      check_data(): reads the data the flags ask for and checks it (labels, files), before any work.
      features(split) -> (path, info): writes or reuses the split's feature TFRecord ("train", "eval",
        "predict"); info holds "num_real_examples" and "num_records" (see feature_cache.cached_records).
      feature_spec(is_training, path=None), padding_feature(is_training, path=None): the records'
        tf.io spec and one fake example ({name: list}), of the features file at `path` (None: of one
        example to build the model with).
      loss(outputs, features, normalizers) -> {"loss": ...}; normalizers(features) if the loss
        divides by something else than the examples.
      evaluate(), predict_test(): the steps' work.
    """

    # Features whose last axis is the sequence: length bucketing cuts them to a batch's longest input.
    sequence_features = ("input_ids", "input_mask", "segment_ids")
    # The key of evaluate()'s results that ranks runs (a sweep's best/, --eval_every_steps' best).
    metric_name = "eval_accuracy"
    # Flags a task cannot run without (besides the shared ones).
    required_flags = ()
    # What every dev prediction of the last evaluation was, when they were all one (evaluation_done).
    collapsed = None

    def __init__(self, config):
        super().__init__(config)
        for name in ("vocab_file", *self.required_flags):
            if not getattr(config, name):
                raise InputError(f"--{name} is required")
        if not tf.io.gfile.exists(config.vocab_file):
            raise InputError(f"--vocab_file={config.vocab_file} does not exist")
        check_vocab(
            config.vocab_file,
            vocab_size=self.bert_config.vocab_size,
            config_name=f"--bert_config_file={config.bert_config_file}",
        )
        if not (config.do_train or config.do_eval or config.do_predict):
            raise InputError("At least one of --do_train, --do_eval or --do_predict must be True")
        if not 0 <= config.warmup_proportion <= 1:
            raise InputError(
                f"--warmup_proportion must be in [0, 1], got {config.warmup_proportion}"
            )
        if config.num_train_epochs <= 0:
            raise InputError(f"--num_train_epochs must be positive, got {config.num_train_epochs}")

    @property
    def checkpoint_heads(self):
        return "optional" if self.config.restore_head else "skip"

    def build_model(self):
        return self.spec.build_model(self.bert_config, self.task_info())

    def head_info(self):
        """The TaskInfo fields of the task's head and data (labels, windows, ...); none by default."""
        return {}

    def task_info(self):
        """What rebuilds this run's model and export: task.json's content."""
        config = self.config
        return TaskInfo(
            model_type=self.spec.name,
            bert_config=self.bert_config,
            do_lower_case=config.do_lower_case,
            max_seq_length=config.max_seq_length,
            **self.head_info(),
        )

    def checkpoint_task_info(self):
        """The TaskInfo of the run the model comes from, or None (no task.json there, or no
        checkpoint): --output_dir's when it holds a checkpoint (resumed), else --init_checkpoint's
        (which check_settings() found)."""
        if self.resumes():
            return read_task_info(self.config.output_dir)
        if self.config.init_checkpoint:
            return read_task_info(resolve_checkpoint(self.config.init_checkpoint))
        return None

    def earlier_labels(self):
        """The labels of an earlier run: --output_dir's labels.txt, else --init_checkpoint's run's."""
        labels = read_labels(self.config.output_dir)
        if labels is None and self.config.init_checkpoint:
            prefix = resolve_checkpoint(self.config.init_checkpoint)
            info = read_task_info(prefix)
            labels = info.labels if info else read_labels(os.path.dirname(prefix))
        return labels

    def check_data(self):
        """Reads and checks the data of the steps the flags ask for (a task overrides it)."""

    def validate(self):
        """Everything the run will read, checked before its first step."""
        self.check_data()
        self.check_init_checkpoint(needs_head=not self.config.do_train)

    def normalizers(self, features):
        """The loss's denominators: the examples of the batch (summed over replicas by the loop)."""
        return {"examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    def task(self, train_path=None):
        """The training.Task over the training features at `train_path`."""

        def dataset_fn(input_context, batch_size, is_training):
            if train_path is None:
                raise ValueError("no training features")
            return self.dataset(train_path, batch_size, is_training, input_context)

        return Task(
            build_model=self.build_model,
            loss_fn=self.loss,
            normalizer_fn=self.normalizers,
            metric_fn=lambda outputs, features: {},
            dataset_fn=dataset_fn,
            dummy_batch_fn=self.dummy_batch,
        )

    def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
        """The features file at `path` as batches (make_feature_dataset with the run's seed).

        Training batches are the original's random ones, cut to their longest input unless
        --cut_batches_to_longest=false, or sorted by length (--length_bucketing). Evaluation and
        prediction sort by length and cut (the padding is masked: the same outputs, put back in file
        order), and pad their last batch with fake examples. On a TPU (one shape) only
        --length_bucketing cuts.
        """
        strategy = resolve_strategy_name(self.config.distribution_strategy, self.config.use_tpu)
        return make_feature_dataset(
            path,
            self.feature_spec(is_training, path),
            batch_size,
            is_training,
            input_context=input_context,
            seed=self.config.seed,
            length_bucketing=self.config.length_bucketing if is_training else strategy != "tpu",
            cut_to_longest=self.config.cut_batches_to_longest and strategy != "tpu",
            sequence_features=self.sequence_features,
            num_records=num_records,
            padding_features=None if is_training else self.padding_feature(is_training, path),
        )

    def dummy_batch(self):
        """One fake training example, [1, ...] tensors: what builds the model's weights."""
        return dummy_batch(self.feature_spec(True), self.padding_feature(True))

    def trainer(self, train_path=None, num_train_examples=0):
        """The Trainer (built on first use, resuming from output_dir's latest checkpoint)."""
        if self._trainer is None:
            config = self.config
            steps, warmup = num_train_steps(config, num_train_examples)
            self._trainer = self.make_trainer(
                self.task(train_path),
                lambda: create_optimizer(config.learning_rate, steps, warmup),
                self.train_config(steps),
            )
        return self._trainer

    def feature_path(self, split):
        """The features file of "train", "eval" or "predict" (a sweep's runs share one folder)."""
        return os.path.join(self.config.feature_dir or self.config.output_dir, f"{split}.tf_record")

    def dev_metric(self, results):
        """(name, value) of the metric that ranks runs, from evaluate()'s results."""
        name = self.metric_name if self.metric_name in results else "eval_accuracy"
        return name, float(results[name])

    def train(self):
        """Fine-tunes on the training features; returns Trainer.train's last progress values.

        With --eval_every_steps=N it evaluates every N steps (and at the end), and keeps the
        checkpoint of the best dev metric so far in best_checkpoint/ beside the last ones.
        """
        path, info = self.features("train")
        trainer = self.trainer(path, info["num_real_examples"])
        every, end = self.config.eval_every_steps, trainer.config.num_train_steps
        if every <= 0:
            with reading_cached_records([path]):
                return trainer.train()
        best = self.best_checkpoint_metric()
        outcome = None
        while trainer.global_step < end:
            with reading_cached_records([path]):
                outcome = trainer.train(until=(trainer.global_step // every + 1) * every)
            name, value = self.dev_metric(self.evaluate())
            logging.info("step %d: %s = %.4f", trainer.global_step, name, value)
            if best is None or value > best["value"]:
                best = {"metric": name, "value": value, "global_step": trainer.global_step}
                self.keep_best_checkpoint(best)
        return outcome or {"global_step": trainer.global_step}

    def best_checkpoint_metric(self):
        """The metric of best_checkpoint/ (an earlier part of this run), or None."""
        path = os.path.join(self.config.output_dir, BEST_CHECKPOINT, BEST_METRIC_FILE)
        return io.read_json(path) if io.exists(path) else None

    def keep_best_checkpoint(self, best):
        """Copies the latest checkpoint to best_checkpoint/, with its metric and eval results."""
        if not self.is_chief:
            return
        folder = self.config.output_dir
        metric_file = os.path.join(folder, BEST_METRIC_FILE)
        io.write_text(metric_file, json.dumps(best, indent=2) + "\n")
        # With task.json and labels.txt, --init_checkpoint=best_checkpoint rebuilds the run's model.
        extra = [metric_file] + [
            path
            for path in (
                os.path.join(folder, name) for name in (*EVAL_RESULTS_FILES, TASK_FILE, LABELS_FILE)
            )
            if io.exists(path)
        ]
        copy_checkpoint(
            tf.train.latest_checkpoint(folder), os.path.join(folder, BEST_CHECKPOINT), extra
        )
        tf.io.gfile.remove(metric_file)

    def predict_features(self, path, info, batch_size, output_keys, feature_keys=()):
        """Model outputs for every real example of a features file, in file order (Trainer.predict).

        Args:
          path, info: a features file and its info (from `features`).
          batch_size: the global batch.
          output_keys: the model outputs to return.
          feature_keys: input features to return beside them.

        Returns:
          {name: np.ndarray [N, ...]} over the file's N real examples, in file order; outputs and
          features whose last axis is the sequence are zero-padded to the longest batch.
        """
        dataset = self.dataset(path, batch_size, False, num_records=info["num_records"])
        keys = [*feature_keys, "is_real_example"]
        if "example_index" in dataset.element_spec:
            keys.append("example_index")  # length bucketing sorted the examples
        with reading_cached_records([path]):
            result = self.trainer().predict(dataset, output_keys=output_keys, feature_keys=keys)
        if "example_index" in result:
            order = np.argsort(result["example_index"], kind="stable")
            result = {name: value[order] for name, value in result.items()}
        real = result["is_real_example"].astype(bool)
        return {name: value[real] for name, value in result.items()}

    def evaluation_done(self, results, predictions=None, what="prediction"):
        """Adds the global step to eval results, writes eval_results.txt and returns them; logs a
        WARNING and sets `collapsed` (a sweep records it) when every dev prediction is the same."""
        results["global_step"] = self.trainer().global_step
        self.write_eval_results(results)
        if predictions is not None:
            self.collapsed = metrics.collapse(predictions, what, self.config.learning_rate)
        return results

    def export(self):
        """Writes the trained model as a SavedModel to --export_dir (the task's export_model)."""
        config = self.config
        return self.spec.export_model(
            self.trainer().model, self.task_info(), config.vocab_file, config.export_dir
        )

    def run(self):
        """The steps the flags ask for; returns {"train", "eval", "predict", "export"}: their results.

        Everything the run reads is checked first; then task.json is written (what
        export_saved_model.py and a later --init_checkpoint read to rebuild this run's model).
        """
        config, outcome = self.config, {}
        self.validate()
        if self.is_chief:
            info = self.task_info()
            write_task_info(config.output_dir, info)
            if info.labels:
                write_labels(config.output_dir, info.labels)
        if config.do_train:
            outcome["train"] = self.train()
        if config.do_eval:
            outcome["eval"] = self.evaluate()
        if config.do_predict:
            outcome["predict"] = self.predict_test()
        if config.export_dir and self.is_chief:
            outcome["export"] = self.export()
        return outcome
