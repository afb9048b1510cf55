"""What every fine-tuning task does the same way: FineTuningRun, the base of each task's run.

It owns the tokenizer, which data each step reads (the split map), the data checks before any work, the
features template (the task's own settings plus the shared cache key: vocab, casing, max_seq_length,
through bert_tf/data/feature_cache.py), the Trainer, the steps (train, evaluate, predict, export) and
task.json. What is a task's own (its reader, its features, loss, metrics and outputs) is its Task
(tasks/task_parts.py), a part the run makes and calls: `FineTuningRun(settings, ClassifierTask)`.
"""

import json
import os

import tensorflow as tf
from absl import logging

from bert_tf import adapters, file_io, metrics
from bert_tf.checkpoints import copy_checkpoint, resolve_checkpoint, restore_init_checkpoint
from bert_tf.data.feature_cache import (
    cached_records,
    file_identity,
    reading_cached_records,
)
from bert_tf.errors import InputError
from bert_tf.modeling import BertModel
from bert_tf.models.networks.task_info import (
    LABELS_FILE,
    TASK_FILE,
    VOCAB_FILE,
    TaskInfo,
    read_labels,
    read_task_info,
    write_labels,
    write_task_info,
    write_vocab,
)
from bert_tf.optimization import create_optimizer
from bert_tf.precision import build_with_policy, store_in_compute_dtype
from bert_tf.settings import recorded_fields, recorded_settings
from bert_tf.sigterm import doing
from bert_tf.tasks.run import Run
from bert_tf.tokenization import FullTokenizer, check_vocab
from bert_tf.training import Trainable

# --eval_every_steps keeps the best checkpoint of a run here, with its metric in BEST_METRIC_FILE.
BEST_CHECKPOINT = "best_checkpoint"
BEST_METRIC_FILE = "dev_metric.json"
EVAL_RESULTS_FILES = ("eval_results.txt", "eval_results.json")
# --lora_rank: the adapters and the head, beside the checkpoints (bert_tf.adapters' file format).
LORA_FILE = "lora_weights.npz"
BERT_CONFIG_FILE = "bert_config.json"


def encoder_of(model):
    """The BertModel of a task's network: the network itself (an embedder) or its `.bert`."""
    return model if isinstance(model, BertModel) else model.bert


def num_train_steps(settings, num_train_examples):
    """(steps, warmup steps) as the original computes them: examples / batch * epochs."""
    steps = int(num_train_examples / settings.train_batch_size * settings.num_train_epochs)
    if settings.do_train and steps <= 0:
        raise InputError(
            f"{num_train_examples} training examples make no step of --train_batch_size="
            f"{settings.train_batch_size} in --num_train_epochs={settings.num_train_epochs}"
        )
    return max(steps, 1), int(max(steps, 1) * settings.warmup_proportion)


class FineTuningRun(Run):
    """One run of a fine-tuning script: the checks, the data, the Trainer, the steps, of one task.

    Args:
      settings: the script's settings (a FineTuningSettings subclass, the task's settings class).
      task_class: the task's Task subclass (tasks/task_parts.py), or any callable of the run that makes
        one: the run makes its task with itself as its context and calls its parts (its data,
        features, loss and steps); everything else (the features cache, the Trainer,
        --eval_every_steps, task.json, the export) is here.

    Attributes (beside Run's):
      task: the run's Task.
      settings: the settings as the task's setup settled them (once, before any work).
      tokenizer: the FullTokenizer of --vocab_file.
      collapsed: what every dev prediction of the last evaluation was, when they were all one.

    Raises:
      TypeError: a task without its TaskSpec (`spec`), or one that misses a required part.
      InputError: naming the flag, for settings the run or its task cannot run with.
    """

    def __init__(self, settings, task_class):
        self.task = task_class(self)
        if self.task.spec is None:
            raise TypeError(
                f"{type(self.task).__name__}.spec is not set: its class body names its TaskSpec"
            )
        self.collapsed = None
        super().__init__(settings)
        if not tf.io.gfile.exists(settings.vocab_file):
            raise InputError(f"--vocab_file={settings.vocab_file} does not exist")
        check_vocab(
            settings.vocab_file,
            vocab_size=self.bert_config.vocab_size,
            config_name=f"--bert_config_file={settings.bert_config_file}",
        )
        self.tokenizer = FullTokenizer(settings.vocab_file, do_lower_case=settings.do_lower_case)
        self._data = {}
        self._feature_infos = {}  # {features path: its info}, of the files this run wrote or read
        self.settings = self.task.setup(self.settings)

    @property
    def labels(self):
        """The task's label strings in id order (labels.txt), or None for a task without labels."""
        return self.task.labels

    @property
    def checkpoint_heads(self):
        return "optional" if self.settings.restore_head else "skip"

    def build_model(self, lora=True):
        """The task's model; with --lora_rank (and `lora`), its encoder frozen under adapters."""
        model = self.task.spec.build_model(self.bert_config, self.task_info())
        targets = self.settings.lora_targets() if lora else None
        if targets is not None:
            model(model.dummy_inputs(), training=False)
            encoder_of(model).enable_lora(*targets)
        return model

    def write_lora_file(self):
        """Writes output_dir/lora_weights.npz (the adapters and the head), on the chief only: with
        the base (--init_checkpoint), all the trained model needs (bert_tf.adapters)."""
        model = self.trainer().model
        encoder = encoder_of(model)
        if self.is_chief and encoder.lora_rank is not None:
            path = os.path.join(self.settings.output_dir, LORA_FILE)
            head = adapters.head_variables(model, encoder)
            adapters.write_lora_file(path, encoder, head=head)

    def task_info(self):
        """What rebuilds this run's model and export: task.json's content, the task's part being
        the recorded settings of its settings class (bert_tf.settings.recorded_settings)."""
        settings, spec = self.settings, self.task.spec
        values = {
            field.name: getattr(settings, field.name)
            for field in recorded_fields(spec.settings_class)
        }
        values.update(self.task.recorded_changes())
        return TaskInfo(
            model_type=spec.name,
            bert_config=self.bert_config,
            do_lower_case=settings.do_lower_case,
            max_seq_length=settings.max_seq_length,
            labels=self.labels,
            settings=recorded_settings(spec.settings_class, **values),
        )

    def checkpoint_task_info(self):
        """The TaskInfo of the run the model comes from, or None (no task.json there, or no
        checkpoint): --output_dir's when it holds a checkpoint (resumed), else --init_checkpoint's
        (which check_settings() found)."""
        if self.resumes():
            return read_task_info(self.settings.output_dir)
        if self.settings.init_checkpoint:
            return read_task_info(resolve_checkpoint(self.settings.init_checkpoint))
        return None

    def earlier_labels(self):
        """The labels of an earlier run: --output_dir's labels.txt, else --init_checkpoint's run's."""
        labels = read_labels(self.settings.output_dir)
        if labels is None and self.settings.init_checkpoint:
            prefix = resolve_checkpoint(self.settings.init_checkpoint)
            info = read_task_info(prefix)
            labels = info.labels if info else read_labels(os.path.dirname(prefix))
        return labels

    # ------------------------------------------------------------------ data

    def data(self, split):
        """The task's read_split(split), read once."""
        if split not in self._data:
            self._data[split] = self.task.read_split(split)
        return self._data[split]

    def step_data(self, step):
        """The data "train", "eval" or "predict" reads."""
        return self.data(self.task.splits[step])

    def check_data(self):
        """Reads and checks the data of the steps the flags ask for, before any work."""
        for step in self.settings.asked_steps():
            self.task.check_split(step, self.step_data(step))

    def cached_features(self, step, key, make_records):
        """The features file of `step` (feature_path), remade by make_records() unless it was
        made with the same `key` (what the features depend on) and the same vocab, casing and
        max_seq_length."""
        settings, path = self.settings, self.feature_path(step)
        key = {
            **key,
            "vocab": file_identity(settings.vocab_file),
            "do_lower_case": settings.do_lower_case,
            "max_seq_length": settings.max_seq_length,
        }
        with doing(f"writing the {step} features {path}"):
            info = cached_records(path, key, make_records)
        logging.info("%s: %s", path, self.task.feature_summary(info))
        self._feature_infos[path] = info
        return path, info

    def features(self, step):
        """The task's features file of `step` ("train", "eval", "predict"): (path, info)."""
        return self.task.features(step)

    def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
        """The task's batches of the features file at `path` (Task.dataset)."""
        return self.task.dataset(path, batch_size, is_training, input_context, num_records)

    def feature_info(self, path):
        """The info of the features file at `path`, written or reused by this run's `features`
        (what a feature_spec that depends on the file reads: a row's number of choices, ...)."""
        return self._feature_infos[path]

    def check_settings(self):
        """Run.check_settings, then the task's own (its check_own_settings)."""
        bert_config = super().check_settings()
        self.task.check_own_settings(bert_config)
        return bert_config

    def validate(self):
        """Everything the run will read, checked before its first step."""
        self.task.check_checkpoint()
        self.check_resumed_adapters()
        self.check_data()
        self.task.prepare_init_checkpoint()
        self.check_init_checkpoint(needs_head=not self.settings.do_train)

    def check_resumed_adapters(self):
        """A LoRA run resumes with its --lora_rank and --lora_target_names (and a full fine-tuning
        run without): InputError naming the flags otherwise, before any work."""
        settings = self.settings
        lora_file = os.path.join(settings.output_dir, LORA_FILE)
        if self.resumes() and (settings.lora_rank or file_io.exists(lora_file)):
            latest = tf.train.latest_checkpoint(settings.output_dir)
            restore_init_checkpoint(
                self.build_model(), latest, "required", dry_run=True, resuming=True
            )

    def trainable(self, train_path=None):
        """What the loop trains (a training.Trainable), over the training features at `train_path`."""

        def dataset_fn(input_context, batch_size, is_training):
            if train_path is None:
                raise ValueError("no training features")
            return self.dataset(train_path, batch_size, is_training, input_context)

        return Trainable(
            build_model=self.build_model,
            loss_fn=self.task.loss,
            normalizer_fn=self.task.normalizers,
            metric_fn=lambda outputs, features: {},
            dataset_fn=dataset_fn,
            dummy_batch_fn=self.task.dummy_batch,
        )

    def trainer(self, train_path=None, num_train_examples=0):
        """The Trainer (built on first use, resuming from output_dir's latest checkpoint)."""
        if self._trainer is None:
            settings = self.settings
            steps, warmup = num_train_steps(settings, num_train_examples)
            self._trainer = self.make_trainer(
                self.trainable(train_path),
                lambda: create_optimizer(settings.learning_rate, steps, warmup),
                self.train_settings(steps),
            )
        return self._trainer

    def feature_path(self, step):
        """The features file of "train", "eval" or "predict" (a sweep's runs share one folder)."""
        return os.path.join(
            self.settings.feature_dir or self.settings.output_dir, f"{step}.tf_record"
        )

    def dev_metric(self, results):
        """(name, value) of the metric that ranks runs, from evaluate()'s results."""
        name = self.task.metric_name
        name = name if name in results else "eval_accuracy"
        return name, float(results[name])

    def train(self):
        """Fine-tunes on the training features; returns Trainer.train's last progress values.

        With --eval_every_steps=N it evaluates every N steps (and at the end), and keeps the
        checkpoint of the best dev metric so far in best_checkpoint/ beside the last ones.
        """
        path, info = self.task.features("train")
        trainer = self.trainer(path, info["num_real_examples"])
        every, end = self.settings.eval_every_steps, trainer.settings.num_train_steps
        if every <= 0:
            with reading_cached_records([path]):
                outcome = trainer.train()
            self.write_lora_file()
            return outcome
        best = self.best_checkpoint_metric()
        outcome = None
        while trainer.global_step < end:
            with reading_cached_records([path]):
                outcome = trainer.train(until=(trainer.global_step // every + 1) * every)
            self.write_lora_file()
            name, value = self.dev_metric(self.evaluate())
            logging.info("step %d: %s = %.4f", trainer.global_step, name, value)
            if best is None or value > best["value"]:
                best = {"metric": name, "value": value, "global_step": trainer.global_step}
                self.keep_best_checkpoint(best)
        return outcome or {"global_step": trainer.global_step}

    def best_checkpoint_metric(self):
        """The metric of best_checkpoint/ (an earlier part of this run), or None."""
        path = os.path.join(self.settings.output_dir, BEST_CHECKPOINT, BEST_METRIC_FILE)
        return file_io.read_json(path) if file_io.exists(path) else None

    def keep_best_checkpoint(self, best):
        """Copies the latest checkpoint to best_checkpoint/, with its metric and eval results."""
        if not self.is_chief:
            return
        folder = self.settings.output_dir
        metric_file = os.path.join(folder, BEST_METRIC_FILE)
        file_io.write_text(metric_file, json.dumps(best, indent=2) + "\n")
        # With task.json and labels.txt, --init_checkpoint=best_checkpoint rebuilds the run's model.
        extra = [metric_file] + [
            path
            for path in (
                os.path.join(folder, name)
                for name in (
                    *EVAL_RESULTS_FILES,
                    TASK_FILE,
                    LABELS_FILE,
                    VOCAB_FILE,
                    LORA_FILE,
                    BERT_CONFIG_FILE,
                )
            )
            if file_io.exists(path)
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
        # The Predictor drops the padding rows and undoes length bucketing's order (example_index).
        dataset = self.dataset(path, batch_size, False, num_records=info["num_records"])
        with reading_cached_records([path]):
            return self.trainer().predict(dataset, output_keys, feature_keys)

    def evaluation_done(self, results, predictions=None, what="prediction", hint=None):
        """Adds the global step to eval results, writes eval_results.txt and returns them; with
        `predictions`, note_collapse."""
        results["global_step"] = self.trainer().global_step
        self.write_eval_results(results)
        if predictions is not None:
            self.note_collapse(predictions, what, hint)
        return results

    def note_collapse(self, predictions, what="prediction", hint=None):
        """Logs a WARNING and sets `collapsed` (a sweep records it) when every dev prediction is
        the same, with `hint` (what to try; by default a lower learning rate or a longer warm-up)."""
        self.collapsed = metrics.collapse(
            predictions, what, self.settings.learning_rate, hint or metrics.LEARNING_RATE_HINT
        )

    def evaluate(self):
        """The --do_eval step: the task's evaluate (its dev metrics, written and returned)."""
        return self.task.evaluate()

    def predict_test(self):
        """The --do_predict step: the task's predict_test (its predictions, written and returned)."""
        return self.task.predict_test()

    def export(self):
        """Writes the trained model as a SavedModel to --export_dir (the task's export_model), under
        the run's --mixed_precision (the model it trained; its outputs are float32 all the same).

        Under a mixed policy the kernels and embedding tables are stored in the compute dtype first,
        as export_saved_model.py does (the same rounding once instead of on every call), so the run's
        export is that script's export of the run's checkpoint. It is the model's last use: it can
        no longer train afterwards.
        """
        settings, model = self.settings, self.trainer().model
        if encoder_of(model).lora_rank is not None:  # a plain model of the merged kernels
            plain = build_with_policy(
                lambda: self.build_model(lora=False), settings.mixed_precision
            )
            plain(plain.dummy_inputs(), training=False)
            adapters.merge_weights(model, plain)
            model = plain
        if settings.mixed_precision != "float32":
            store_in_compute_dtype(model)
        return self.task.spec.export_model(
            model, self.task_info(), settings.vocab_file, settings.export_dir
        )

    def run(self):
        """The steps the flags ask for; returns {"train", "eval", "predict", "export"}: their results.

        Everything the run reads is checked first; then task.json is written (what
        export_saved_model.py and a later --init_checkpoint read to rebuild this run's model).
        """
        settings, outcome = self.settings, {}
        self.validate()
        if self.is_chief:
            info = self.task_info()
            write_task_info(settings.output_dir, info)
            write_vocab(settings.output_dir, settings.vocab_file)
            # With vocab.txt and task.json, a run dir is a whole model (--init_checkpoint=<run dir>).
            bert_config = os.path.join(settings.output_dir, BERT_CONFIG_FILE)
            file_io.write_text(bert_config, self.bert_config.to_json_string())
            if info.labels:
                write_labels(settings.output_dir, info.labels)
        if settings.do_train:
            outcome["train"] = self.train()
        if settings.do_eval:
            with doing("evaluation"):
                outcome["eval"] = self.evaluate()
        if settings.do_predict:
            with doing("prediction"):
                outcome["predict"] = self.predict_test()
        if settings.export_dir and self.is_chief:
            with doing("the export"):
                outcome["export"] = self.export()
        self.task.add_to_outcome(outcome)
        return outcome
