"""What every fine-tuning script shares: its settings and flags, the strategy, the Trainer, the output files.

run_classifier.py, run_squad.py, run_ner.py and run_swag.py take the original run_classifier.py's flags
(same names and defaults) plus what TF2 users need; `define_finetuning_flags` defines them once, and each
script adds its own. The settings travel as a `FineTuningConfig` (a dataclass), so the tasks run the same
from flags, from tests and from bench/ without absl. A task's run can subclass `FineTuningRun`, which holds
the steps every task takes the same way (build the Trainer, train, predict a features file in file order,
run the steps the flags ask for).
"""

import dataclasses
import json
import math
import os

import keras
import numpy as np
import tensorflow as tf
from absl import flags, logging

from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.data.feature_cache import make_feature_dataset, reading_cached_records
from bert_tf.distribute import STRATEGIES, get_strategy, is_chief, resolve_strategy_name
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.optimization import create_optimizer
from bert_tf.training import MIXED_PRECISION_POLICIES, TrainConfig, Trainer


@dataclasses.dataclass
class FineTuningConfig:
    """The settings every fine-tuning task takes; field names are the flags' names."""

    bert_config_file: str
    vocab_file: str
    output_dir: str
    init_checkpoint: str | None = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    use_tpu: bool = False
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    master: str | None = None
    num_tpu_cores: int = 8
    distribution_strategy: str = "one_device"
    num_gpus: int = 0
    mixed_precision: str = "float32"
    jit_compile: bool = False
    seed: int | None = 12345
    export_dir: str | None = None
    log_steps: int = 100
    length_bucketing: bool = True

    @classmethod
    def from_flags(cls, flag_values=None):
        """The config of the parsed absl flags whose names are fields of `cls`."""
        flag_values = flag_values or flags.FLAGS
        return cls(
            **{field.name: flag_values[field.name].value for field in dataclasses.fields(cls)}
        )


def define_finetuning_flags(**defaults):
    """Defines the flags of FineTuningConfig; `defaults` overrides a default (e.g. max_seq_length=384).

    Called by a script's cli(), not at import time: absl refuses a flag defined twice in one process,
    and the test suite imports several scripts.
    """
    d = {field.name: field.default for field in dataclasses.fields(FineTuningConfig)}
    d.update(defaults)
    # The original's flags, names and defaults.
    flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt the model was trained with.")
    flags.DEFINE_string(
        "output_dir", None, "Checkpoints, cached features, eval_results.txt and predictions."
    )
    flags.DEFINE_string(
        "init_checkpoint", None, "Initial weights: a Google release checkpoint or one of ours."
    )
    flags.DEFINE_bool("do_lower_case", d["do_lower_case"], "Lower-case (True for uncased models).")
    flags.DEFINE_integer(
        "max_seq_length", d["max_seq_length"], "Longest WordPiece sequence; longer ones are cut."
    )
    flags.DEFINE_bool("do_train", False, "Fine-tune on the training set.")
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set.")
    flags.DEFINE_bool("do_predict", False, "Predict on the test set.")
    flags.DEFINE_integer("train_batch_size", d["train_batch_size"], "Global training batch.")
    flags.DEFINE_integer("eval_batch_size", d["eval_batch_size"], "Global eval batch.")
    flags.DEFINE_integer("predict_batch_size", d["predict_batch_size"], "Global predict batch.")
    flags.DEFINE_float("learning_rate", d["learning_rate"], "Peak learning rate of Adam.")
    flags.DEFINE_float("num_train_epochs", d["num_train_epochs"], "Epochs over the training set.")
    flags.DEFINE_float(
        "warmup_proportion", d["warmup_proportion"], "Fraction of steps of linear LR warmup."
    )
    flags.DEFINE_integer(
        "save_checkpoints_steps", d["save_checkpoints_steps"], "Steps between checkpoints."
    )
    flags.DEFINE_integer(
        "iterations_per_loop", d["iterations_per_loop"], "Steps per tf.function call."
    )
    flags.DEFINE_bool("use_tpu", False, "Run on a Cloud TPU (same as --distribution_strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "TPU name or grpc:// address.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.")
    flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.")
    flags.DEFINE_string("master", None, "TPU address; used when --tpu_name is unset.")
    flags.DEFINE_integer("num_tpu_cores", 8, "TPU cores; checked against the TPU found.")
    # What TF2 users need besides.
    flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES, "tf.distribute strategy.")
    flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored; 0 = CPU.")
    flags.DEFINE_enum("mixed_precision", "float32", MIXED_PRECISION_POLICIES, "Keras dtype policy.")
    flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")
    flags.DEFINE_integer("seed", d["seed"], "Seed of initialization, dropout and input order.")
    flags.DEFINE_string(
        "export_dir", None, "Write a SavedModel for TF Serving to export_dir/<version>/."
    )
    flags.DEFINE_integer("log_steps", d["log_steps"], "Steps between progress lines.")
    flags.DEFINE_bool(
        "length_bucketing",
        d["length_bucketing"],
        "Batch inputs of similar length and cut each batch to its longest input (same results, "
        "less padding computed). False pads every batch to --max_seq_length, as the original.",
    )


def check_config(config, needs_data=True):
    """Checks settings every task shares; raises InputError naming the flag."""
    if not (config.do_train or config.do_eval or config.do_predict):
        raise InputError("At least one of --do_train, --do_eval or --do_predict must be True")
    for name in ("bert_config_file", "vocab_file", "output_dir"):
        if not getattr(config, name):
            raise InputError(f"--{name} is required")
    for name in ("bert_config_file", "vocab_file"):
        if not tf.io.gfile.exists(getattr(config, name)):
            raise InputError(f"--{name}={getattr(config, name)} does not exist")
    for name in (
        "max_seq_length",
        "train_batch_size",
        "eval_batch_size",
        "predict_batch_size",
        "save_checkpoints_steps",
        "iterations_per_loop",
        "log_steps",
    ):
        if getattr(config, name) <= 0:
            raise InputError(f"--{name} must be positive, got {getattr(config, name)}")
    if not 0 <= config.warmup_proportion <= 1:
        raise InputError(f"--warmup_proportion must be in [0, 1], got {config.warmup_proportion}")
    if config.num_train_epochs <= 0:
        raise InputError(f"--num_train_epochs must be positive, got {config.num_train_epochs}")
    bert_config = BertConfig.from_json_file(config.bert_config_file)
    if config.max_seq_length > bert_config.max_position_embeddings:
        raise InputError(
            f"--max_seq_length={config.max_seq_length} exceeds max_position_embeddings="
            f"{bert_config.max_position_embeddings} of --bert_config_file={config.bert_config_file}"
        )
    return bert_config


def make_strategy(config):
    """The tf.distribute strategy the flags ask for (one device, mirrored, multi-worker or TPU)."""
    strategy = get_strategy(
        resolve_strategy_name(config.distribution_strategy, config.use_tpu),
        num_gpus=config.num_gpus,
        tpu_name=config.tpu_name or config.master,
        tpu_zone=config.tpu_zone,
        gcp_project=config.gcp_project,
        num_tpu_cores=config.num_tpu_cores if config.use_tpu else None,
    )
    logging.info(
        "Strategy %s with %d replica(s)", type(strategy).__name__, strategy.num_replicas_in_sync
    )
    return strategy


def num_train_steps(config, num_train_examples):
    """(steps, warmup steps) as the original computes them: examples / batch * epochs."""
    steps = int(num_train_examples / config.train_batch_size * config.num_train_epochs)
    if config.do_train and steps <= 0:
        raise InputError(
            f"{num_train_examples} training examples make no step of --train_batch_size="
            f"{config.train_batch_size} in --num_train_epochs={config.num_train_epochs}"
        )
    return max(steps, 1), int(max(steps, 1) * config.warmup_proportion)


def make_trainer(task, config, strategy, train_steps, warmup_steps):
    """A Trainer over `task` in config.output_dir (resuming there), initialized from --init_checkpoint.

    The task's model must hold its encoder as `.bert`: --init_checkpoint (a Google release, a
    pretraining checkpoint of ours, or a fine-tuned one) initializes that encoder.
    """
    if config.seed is not None:
        keras.utils.set_random_seed(config.seed)
    train_config = TrainConfig(
        model_dir=config.output_dir,
        train_batch_size=config.train_batch_size,
        eval_batch_size=config.eval_batch_size,
        num_train_steps=train_steps,
        steps_per_loop=config.iterations_per_loop,
        save_checkpoints_steps=config.save_checkpoints_steps,
        log_steps=config.log_steps,
        mixed_precision=config.mixed_precision,
        jit_compile=config.jit_compile,
    )
    init_checkpoint = config.init_checkpoint
    return Trainer(
        task,
        strategy,
        lambda: create_optimizer(config.learning_rate, train_steps, warmup_steps),
        train_config,
        init_fn=(lambda model: restore_init_checkpoint(model.bert, init_checkpoint))
        if init_checkpoint
        else None,
    )


def padded_count(num_examples, batch_size):
    """Examples after padding the last batch with fake ones: the next multiple of batch_size."""
    return int(math.ceil(num_examples / batch_size) * batch_size)


def write_text_atomically(path, text):
    """Writes text to path via a temporary file renamed when complete (gfile URLs work)."""
    temp_path = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(temp_path, "w") as f:
        f.write(text)
    tf.io.gfile.rename(temp_path, path, overwrite=True)


TASK_INFO_FILE = "task.json"
LABELS_FILE = "labels.txt"


def write_labels(folder, labels):
    """Writes folder/labels.txt: one label string per line, in id order."""
    write_text_atomically(
        os.path.join(folder, LABELS_FILE), "".join(f"{label}\n" for label in labels)
    )


def read_labels(folder):
    """The labels of folder/labels.txt, or None when there is no such file."""
    path = os.path.join(folder, LABELS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def write_task_info(output_dir, model_type, bert_config, **info):
    """Writes output_dir/task.json: what export_saved_model.py needs to rebuild this run's model.

    Args:
      output_dir: the run's folder (beside its checkpoints).
      model_type: "classifier", "squad", "tagger" or "multiple_choice".
      bert_config: the encoder's BertConfig.
      **info: the head's settings (labels, is_pair, ...) and the tokenizer's (do_lower_case,
        max_seq_length).
    """
    text = json.dumps(
        {"model_type": model_type, "bert_config": bert_config.to_dict(), **info},
        indent=2,
        sort_keys=True,
    )
    write_text_atomically(os.path.join(output_dir, TASK_INFO_FILE), text + "\n")


def read_task_info(checkpoint_path):
    """The task.json of the folder holding checkpoint_path (a folder or a prefix), or None."""
    folder = (
        checkpoint_path if tf.io.gfile.isdir(checkpoint_path) else os.path.dirname(checkpoint_path)
    )
    path = os.path.join(folder, TASK_INFO_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise InputError(f"{path} is not valid JSON: {error}") from None


def dummy_batch(feature_spec, feature):
    """One example of `feature` ({name: list}) as [1, ...] tensors of the spec's dtypes (int32 for int64)."""
    return {
        name: tf.constant([feature[name]], tf.float32 if spec.dtype == tf.float32 else tf.int32)
        for name, spec in feature_spec.items()
    }


class FineTuningRun:
    """What one run of every fine-tuning script shares: settings, strategy, Trainer, the steps.

    A task's run subclasses it and provides:
      features(split) -> (path, info): writes or reuses the split's feature TFRecord ("train", "eval",
        "predict"); info holds "num_real_examples" and "num_records" (see records.cached_records).
      dataset(path, batch_size, is_training, input_context=None, num_records=None): its tf.data input.
      task(train_path) -> training.Task; evaluate(), predict_test(): the steps' work.
      model_type: its name in exporting.MODEL_TYPES; task_info() -> dict: the head's settings for
        task.json and the export (labels, ...), beside do_lower_case and max_seq_length.

    Attributes:
      config: the task's FineTuningConfig (subclass).
      bert_config: the encoder's BertConfig (checked against the flags).
      strategy: the tf.distribute strategy.
    """

    def __init__(self, config):
        self.config = config
        self.bert_config = check_config(config)
        tf.io.gfile.makedirs(config.output_dir)
        self.strategy = make_strategy(config)
        self._trainer = None

    @property
    def is_chief(self):
        """Whether this process writes the output files (always, but on multi-worker's other workers)."""
        return is_chief(self.strategy)

    def feature_dataset(
        self, path, feature_spec, batch_size, is_training, padding_feature, **kwargs
    ):
        """make_feature_dataset with the run's seed and --length_bucketing; padding only for inference.

        kwargs: input_context, num_records, sequence_features (see make_feature_dataset).
        """
        return make_feature_dataset(
            path,
            feature_spec,
            batch_size,
            is_training,
            seed=self.config.seed,
            length_bucketing=self.config.length_bucketing,
            padding_features=None if is_training else padding_feature,
            **kwargs,
        )

    def trainer(self, train_path=None, num_train_examples=0):
        """The Trainer (built on first use, resuming from output_dir's latest checkpoint)."""
        if self._trainer is None:
            steps, warmup = num_train_steps(self.config, num_train_examples)
            self._trainer = make_trainer(
                self.task(train_path), self.config, self.strategy, steps, warmup
            )
        return self._trainer

    def train(self):
        """Fine-tunes on the training features; returns Trainer.train's last progress values."""
        path, info = self.features("train")
        trainer = self.trainer(path, info["num_real_examples"])
        with reading_cached_records([path]):
            return trainer.train()

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

    def export(self):
        """Writes the trained model as a SavedModel to --export_dir (the task's export_model)."""
        from bert_tf.tasks.exporting import task_module  # exporting imports this module

        config = self.config
        return task_module(self.model_type).export_model(
            self.trainer().model,
            self.task_info(),
            config.vocab_file,
            config.do_lower_case,
            config.max_seq_length,
            config.export_dir,
        )

    def run(self):
        """The steps the flags ask for; returns {"train", "eval", "predict", "export"}: their results.

        First writes task.json (what export_saved_model.py needs to rebuild this run's model).
        """
        config, outcome = self.config, {}
        if self.is_chief:
            write_task_info(
                config.output_dir, self.model_type, self.bert_config, **self.task_info()
            )
        if config.do_train:
            outcome["train"] = self.train()
        if config.do_eval:
            outcome["eval"] = self.evaluate()
        if config.do_predict:
            outcome["predict"] = self.predict_test()
        if config.export_dir and self.is_chief:
            outcome["export"] = self.export()
        return outcome
