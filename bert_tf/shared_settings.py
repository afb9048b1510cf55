"""The flags several scripts share, each declared once: the settings classes scripts derive from.

A script's settings class derives from the classes of the shared flags it takes (its flags are the
fields, bert_tf/settings.py). Where its use of one differs, it declares that field again in its own
class, type and all, with `settings.restated` (its own default or help text, e.g. SQuAD's
`--doc_stride` of 128), so that a script's flags are read in two files at most: this one and its own.

    RunSettings    run_pretraining.py and every fine-tuning script (the original's flags, then TF2's)
    FineTuningSettings
                   run_classifier.py, run_ner.py, run_squad.py, run_swag.py, run_embedding.py,
                   run_distillation.py (their settings: bert_tf/tasks/task_settings.py)
    bert_config_file, init_checkpoint
                   run_*.py, extract_features.py, export_saved_model.py, convert_checkpoint.py
    vocab_file     the same, and create_pretraining_data.py
    data_dir       run_classifier.py, run_ner.py, run_swag.py, run_embedding.py (each its layout)
    tfds_data_dir  run_classifier.py, run_squad.py
    doc_stride     run_classifier.py, run_ner.py, run_squad.py (each its windows and default)
    objective, dynamic_masking
                   create_pretraining_data.py, run_pretraining.py (the same value in both)

build_vocab.py's `--vocab_file` is the file it writes, another meaning: it declares its own.

This module sits below the model (docs/architecture.md's layers): the checks that need the model's
modules (the learning rate, the casing of a Google release, the LoRA targets, the export folder) are
the tasks layer's (tasks/run_settings.py: TaskSettings, check_learning_rates), and the choices those
modules define are written here as plain values, which tests/test_flag_files.py holds equal to theirs.
"""

import dataclasses
import os

from bert_tf import file_io
from bert_tf.distribute import STRATEGIES
from bert_tf.errors import InputError
from bert_tf.objectives import DEFAULT_OBJECTIVE, OBJECTIVES
from bert_tf.settings import restated, setting

# What every run_*.py writes beside its checkpoints (bert_tf.models.networks.task_info).
RUN_TASK_FILE = "task.json"
# bert_tf.precision.MIXED_PRECISION_POLICIES, bert_tf.adapters.LORA_TARGETS and DEFAULT_LORA_TARGETS,
# bert_tf.models.task.LORA_LEARNING_RATE: the same values, for the flags.
MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
LORA_TARGETS = ("query", "key", "value", "attention_output", "intermediate", "output")
DEFAULT_LORA_TARGETS = ("query", "value")
LORA_LEARNING_RATE = 1e-3


@dataclasses.dataclass(kw_only=True)
class BertConfigFileSetting:
    """--bert_config_file: the encoder's sizes (bert_config.json)."""

    bert_config_file: str | None = setting(None, "bert_config.json of the model.")


@dataclasses.dataclass(kw_only=True)
class InitCheckpointSetting:
    """--init_checkpoint: the weights a script starts from or reads."""

    init_checkpoint: str | None = setting(None, "Weights: a Google checkpoint or one of ours.")

    def run_folder(self):
        """The folder of --init_checkpoint (itself, or a prefix's) when it holds a run's task.json
        (bert_tf.models.networks.task_info.TASK_FILE), else None."""
        path = self.init_checkpoint
        if not path:
            return None
        for folder in (path, os.path.dirname(path)):
            if folder and file_io.exists(os.path.join(folder, RUN_TASK_FILE)):
                return folder
        return None

    def take_run_files(self):
        """A run dir is a whole model: --vocab_file and --bert_config_file, when absent, are the
        vocab.txt and bert_config.json the run keeps beside its checkpoints (when it has them)."""
        folder = self.run_folder()
        if folder is None:
            return
        for name, file_name in (
            ("vocab_file", "vocab.txt"),
            ("bert_config_file", "bert_config.json"),
        ):
            path = os.path.join(folder, file_name)
            if hasattr(self, name) and not getattr(self, name) and file_io.exists(path):
                setattr(self, name, path)


@dataclasses.dataclass(kw_only=True)
class VocabFileSetting:
    """--vocab_file: the WordPiece vocabulary of the model, one token a line."""

    vocab_file: str | None = setting(None, "vocab.txt the model was trained with.")


@dataclasses.dataclass(kw_only=True)
class DataDirSetting:
    """--data_dir: the folder of a task's train, dev and test files (their names: the task's)."""

    data_dir: str | None = setting(None, "Folder with the task's train, dev and test files.")

    def check_data_dir(self):
        """Raises InputError when --data_dir is not given, does not exist or is a file."""
        if not self.data_dir:
            raise InputError("--data_dir is required")
        holds = "pass the folder that holds the task's train, dev and test files"
        if not file_io.exists(self.data_dir):
            raise InputError(f"--data_dir={self.data_dir}: no such folder; {holds}")
        if not file_io.is_url(self.data_dir) and not os.path.isdir(self.data_dir):
            raise InputError(f"--data_dir={self.data_dir} is a file; {holds}")


@dataclasses.dataclass(kw_only=True)
class TfdsDataDirSetting:
    """--tfds_data_dir: where TensorFlow Datasets keeps the data --tfds_name reads."""

    tfds_data_dir: str | None = setting(None, "TensorFlow Datasets data_dir for --tfds_name.")


@dataclasses.dataclass(kw_only=True)
class DocStrideSetting:
    """--doc_stride: a text longer than a window is read as overlapping windows this far apart.

    Recorded in task.json: the export makes the run's windows.
    """

    doc_stride: int | None = setting(
        None, "Wordpieces between the starts of a long text's windows.", recorded=True
    )

    def check_doc_stride(self):
        """Raises InputError for a --doc_stride that is given and not positive."""
        if self.doc_stride is not None and self.doc_stride <= 0:
            raise InputError(f"--doc_stride must be positive, got {self.doc_stride}")


@dataclasses.dataclass(kw_only=True)
class ObjectiveSetting:
    """The --objective flag of create_pretraining_data.py and run_pretraining.py (give both the same)."""

    objective: str = setting(
        DEFAULT_OBJECTIVE,
        "Pretraining objective (BERT paper, Table 5): mlm_nsp = masked LM + next sentence (the "
        "original); mlm = masked LM alone, one continuous segment; ltr = left-to-right LM with a "
        "causal attention mask (kept in fine-tuning), no masking. Pass the same value to "
        "create_pretraining_data.py and run_pretraining.py. Default mlm_nsp.",
        choices=list(OBJECTIVES),
    )


@dataclasses.dataclass(kw_only=True)
class DynamicMaskingSetting:
    """The --dynamic_masking flag of create_pretraining_data.py and run_pretraining.py (give both)."""

    dynamic_masking: bool = setting(
        False,
        "Dynamic masking (RoBERTa): create_pretraining_data.py writes the instances without masks "
        "(its masking flags then do not apply); run_pretraining.py masks them as it reads them, by "
        "its --masked_lm_prob, --max_predictions_per_seq and --do_whole_word_mask, with a fresh "
        "mask on every pass over the data, drawn from --seed and the record's place in the files. "
        "Give both scripts the same value. Default False.",
    )


def sweep_values(value):
    """A flag's values: each of a sweep's list (a tuple), else the one value."""
    return value if isinstance(value, tuple) else (value,)


@dataclasses.dataclass(kw_only=True)
class RunSettings(BertConfigFileSetting, InitCheckpointSetting):
    """The settings of every training script; the original's flags first, then what TF2 users need."""

    bert_config_file: str | None = restated(
        BertConfigFileSetting, "bert_config_file", help="bert_config.json of the pretrained model."
    )
    output_dir: str | None = setting(
        None, "Checkpoints (model.ckpt-<step>), TensorBoard summaries, results; a rerun resumes."
    )
    init_checkpoint: str | None = restated(
        InitCheckpointSetting,
        "init_checkpoint",
        help="Initial weights: a Google checkpoint (release or fine-tuned) or one of ours, a "
        "prefix or its folder. The encoder always; a head when it is a trained model of this task.",
    )
    max_seq_length: int = setting(128, "Longest WordPiece sequence, [CLS] and [SEP] included.")
    do_train: bool = setting(False, "Train.")
    do_eval: bool = setting(False, "Evaluate on the dev set.")
    train_batch_size: int = setting(32, "Global batch per optimizer update (all replicas).")
    eval_batch_size: int = setting(8, "Global eval batch (all replicas).")
    learning_rate: float = setting(5e-5, "Peak learning rate of the warmup + linear decay.")
    save_checkpoints_steps: int = setting(1000, "Steps between checkpoints.")
    iterations_per_loop: int = setting(1000, "Steps run in one tf.function call (host round trip).")
    use_tpu: bool = setting(False, "Run on a Cloud TPU (same as --distribution_strategy=tpu).")
    tpu_name: str | None = setting(None, "TPU name or grpc:// address (TPUClusterResolver).")
    tpu_zone: str | None = setting(None, "GCE zone of the TPU (looked up from metadata if unset).")
    gcp_project: str | None = setting(
        None, "GCP project of the TPU (looked up from metadata if unset)."
    )
    master: str | None = setting(None, "TPU address; used when --tpu_name is unset.")
    num_tpu_cores: int = setting(8, "TPU cores; checked against the TPU found.")
    distribution_strategy: str | None = setting(
        None,
        "tf.distribute strategy; default by the devices: one_device on the CPU or the one GPU, "
        "mirrored over several GPUs.",
        choices=STRATEGIES,
    )
    num_gpus: int | None = setting(
        None, "GPUs to use; default every visible GPU; 0 = the CPU (one_device / mirrored)."
    )
    collective_timeout_seconds: float = setting(
        300.0,
        "multi_worker_mirrored: a worker whose peer died or hangs stops after this many seconds "
        "without an answer, naming the lost task (0: wait forever).",
    )
    mixed_precision: str = setting(
        "float32",
        "Keras dtype policy; mixed_float16 uses dynamic loss scaling.",
        choices=MIXED_PRECISION_POLICIES,
    )
    jit_compile: bool = setting(False, "Compile the forward and backward pass with XLA.")
    seed: int | None = setting(12345, "Seed of weights init, dropout and input order.")
    log_steps: int = setting(100, "Steps between progress lines and TensorBoard summaries.")

    # Flags that must be positive (a subclass adds its own).
    positive = ("max_seq_length", "train_batch_size", "eval_batch_size", "save_checkpoints_steps")
    positive += ("iterations_per_loop", "log_steps", "num_tpu_cores")

    def check(self):
        """Checks these settings on their own (no file read but --output_dir's folder); the
        learning rate's value is the subclass's check (bert_tf.training's rule).

        Raises:
          InputError: naming the flag, for a missing or bad value.
        """
        if not self.bert_config_file:
            raise InputError("--bert_config_file is required")
        self.check_output_dir()
        for name in self.positive:
            for value in sweep_values(getattr(self, name)):
                if value <= 0:
                    raise InputError(f"--{name} must be positive, got {value}")

    def check_output_dir(self):
        """--output_dir is given and a folder that can be written (created if need be)."""
        if not self.output_dir:
            raise InputError("--output_dir is required")
        file_io.check_writable_folder(self.output_dir, "--output_dir")

    def asked_steps(self):
        """The steps the --do_* flags ask for, of "train" and "eval"."""
        return tuple(
            step for step, asked in (("train", self.do_train), ("eval", self.do_eval)) if asked
        )

    def batch_sizes(self):
        """{step: global batch} of the steps the flags ask for ("train", "eval", ...)."""
        sizes = {"train": self.train_batch_size, "eval": self.eval_batch_size}
        return {step: size for step, size in sizes.items() if step in self.asked_steps()}


@dataclasses.dataclass(kw_only=True)
class FineTuningSettings(RunSettings, VocabFileSetting):
    """The settings every fine-tuning script takes (the original run_classifier.py's and ours)."""

    do_lower_case: bool = setting(True, "Lower-case the input (True for uncased models).")
    do_predict: bool = setting(False, "Predict on the test set.")
    predict_batch_size: int = setting(8, "Global predict batch.")
    # The BERT paper's fine-tuning grid: several values of these make a sweep (tasks/sweep.py).
    learning_rate: float = restated(RunSettings, "learning_rate", sweep=True)
    train_batch_size: int = restated(RunSettings, "train_batch_size", sweep=True)
    num_train_epochs: float = setting(3.0, "Epochs over the training set.", sweep=True)
    seed: int | None = restated(
        RunSettings,
        "seed",
        sweep=True,
        help="Seed of weights init, dropout and input order (restarts).",
    )
    warmup_proportion: float = setting(0.1, "Fraction of steps of linear learning-rate warmup.")
    export_dir: str | None = setting(
        None, "Write a SavedModel for TF Serving (raw text in) to export_dir/<version>/."
    )
    length_bucketing: bool = setting(
        False,
        "Train on batches of inputs of similar length, each cut to its longest input: 2-3x "
        "faster on real sentences, but other batches than the original's random ones, which "
        "cost dev accuracy on a pair task (bench/RESULTS.md). Prediction always cuts padding.",
    )
    cut_batches_to_longest: bool = setting(
        True,
        "Cut each training batch to its longest input (rounded up to a multiple of 8): the "
        "original's random batches, without the padding's work. false pads every batch to "
        "--max_seq_length, as the original does. A TPU always gets full batches.",
    )
    restore_head: bool = setting(
        True,
        "Take this task's head from --init_checkpoint when it holds one (a fine-tuned model of "
        "this task); false starts a fresh head.",
    )
    eval_every_steps: int = setting(
        0,
        "Evaluate on the dev set every N training steps and keep the run's best checkpoint (in "
        "best_checkpoint/) as well as its last; 0: evaluate once, after training.",
    )
    sweep_shard: str | None = setting(
        None, "i/n: of a sweep's combinations, train every n-th from the i-th (0-based) only."
    )
    sweep_collect: bool = setting(
        False,
        "Train nothing: write sweep_results.tsv and best/ from the finished combinations (the "
        "sub-folders of --output_dir), e.g. after --sweep_shard runs on several machines.",
    )
    lora_rank: int = setting(
        0,
        "Train rank-r LoRA adapters on the encoder's --lora_target_names and the task's head, the "
        "rest of the encoder frozen (its biases too); 0: fine-tune every weight. The run keeps "
        "lora_weights.npz (the adapters and the head) beside its checkpoints; exports merge the "
        "adapters into the kernels. --learning_rate stays the flag's: the recipe measured for "
        f"LoRA is --learning_rate={LORA_LEARNING_RATE:g}.",
    )
    lora_target_names: str = setting(
        ",".join(DEFAULT_LORA_TARGETS),
        "With --lora_rank: the projections of every block that take adapters, comma-separated, "
        f"of {', '.join(LORA_TARGETS)}.",
    )
    # Where the features are written and read: a sweep's runs share those of its --output_dir.
    feature_dir: str | None = None

    positive = (*RunSettings.positive, "predict_batch_size")

    def check(self):
        """RunSettings.check, then the fine-tuning flags' (tasks/task_settings.py's TaskSettings
        adds the checks that need the model's modules).

        Raises:
          InputError: naming the flag.
        """
        self.take_run_files()
        if not self.vocab_file:
            raise InputError("--vocab_file is required")
        super().check()
        if not (self.do_train or self.do_eval or self.do_predict):
            raise InputError("At least one of --do_train, --do_eval or --do_predict must be True")
        if not 0 <= self.warmup_proportion <= 1:
            raise InputError(f"--warmup_proportion must be in [0, 1], got {self.warmup_proportion}")
        if self.num_train_epochs <= 0:
            raise InputError(f"--num_train_epochs must be positive, got {self.num_train_epochs}")

    def asked_steps(self):
        """The steps the --do_* flags ask for, of "train", "eval" and "predict"."""
        return super().asked_steps() + (("predict",) if self.do_predict else ())

    def batch_sizes(self):
        sizes = super().batch_sizes()
        return {**sizes, "predict": self.predict_batch_size} if self.do_predict else sizes
