"""The settings of every training run: each field is a flag, declared once (bert_tf.settings.setting).

run_pretraining.py takes the original run_pretraining.py's flags and the fine-tuning scripts the original
run_classifier.py's (same names and defaults), plus what TF2 users need. `RunSettings` holds what every
script takes, `FineTuningSettings` what every fine-tuning script adds; a task's settings (tasks/task_settings.py)
subclasses it with its own. Scripts define the flags from the dataclass and pass the parsed dataclass on,
so the tasks run the same from flags, from tests and from bench/ without absl.
"""

import dataclasses

from bert_tf import file_io
from bert_tf.adapters import DEFAULT_LORA_TARGETS, LORA_TARGETS, check_lora_arguments
from bert_tf.distribute import STRATEGIES
from bert_tf.errors import InputError
from bert_tf.export import check_export_dir
from bert_tf.models.task import LORA_LEARNING_RATE
from bert_tf.precision import MIXED_PRECISION_POLICIES
from bert_tf.settings import changed, setting
from bert_tf.shared_settings import BertConfigFileSetting, InitCheckpointSetting, VocabFileSetting
from bert_tf.tokenization import validate_case_matches_checkpoint
from bert_tf.training.train_settings import check_learning_rate_value


def _values(value):
    """A flag's values: each of a sweep's list (a tuple), else the one value."""
    return value if isinstance(value, tuple) else (value,)


@dataclasses.dataclass(kw_only=True)
class RunSettings(BertConfigFileSetting, InitCheckpointSetting):
    """The settings of every training script; the original's flags first, then what TF2 users need."""

    bert_config_file = changed(help="bert_config.json of the pretrained model.")
    output_dir: str | None = setting(
        None, "Checkpoints (model.ckpt-<step>), TensorBoard summaries, results; a rerun resumes."
    )
    init_checkpoint = changed(
        help="Initial weights: a Google checkpoint (release or fine-tuned) or one of ours, a "
        "prefix or its folder. The encoder always; a head when it is a trained model of this task."
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
        """Checks these settings on their own (no file read but --output_dir's folder).

        Raises:
          InputError: naming the flag, for a missing or bad value.
        """
        if not self.bert_config_file:
            raise InputError("--bert_config_file is required")
        self.check_output_dir()
        for rate in _values(self.learning_rate):
            check_learning_rate_value(rate)
        for name in self.positive:
            for value in _values(getattr(self, name)):
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
    learning_rate = changed(sweep=True)
    train_batch_size = changed(sweep=True)
    num_train_epochs: float = setting(3.0, "Epochs over the training set.", sweep=True)
    seed = changed(sweep=True, help="Seed of weights init, dropout and input order (restarts).")
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
        """RunSettings.check, then the fine-tuning flags'.

        Raises:
          InputError: naming the flag.
        """
        self.take_run_files()
        if not self.vocab_file:
            raise InputError("--vocab_file is required")
        validate_case_matches_checkpoint(self.do_lower_case, self.init_checkpoint)
        super().check()
        if not (self.do_train or self.do_eval or self.do_predict):
            raise InputError("At least one of --do_train, --do_eval or --do_predict must be True")
        if not 0 <= self.warmup_proportion <= 1:
            raise InputError(f"--warmup_proportion must be in [0, 1], got {self.warmup_proportion}")
        if self.num_train_epochs <= 0:
            raise InputError(f"--num_train_epochs must be positive, got {self.num_train_epochs}")
        self.lora_targets()
        if self.export_dir:
            check_export_dir(self.export_dir)

    def lora_targets(self):
        """(rank, target names) of --lora_rank and --lora_target_names, or None (LoRA off).

        Raises:
          InputError: naming the flag, for a negative rank or an unknown target name.
        """
        rank = self.lora_rank
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise InputError(f"--lora_rank must be 0 (off) or a positive integer, got {rank!r}")
        names = [name.strip() for name in (self.lora_target_names or "").split(",")]
        try:
            targets = check_lora_arguments(max(rank, 1), [name for name in names if name])
        except ValueError:
            raise InputError(
                f"--lora_target_names={self.lora_target_names}: give names of "
                f"{', '.join(LORA_TARGETS)}, comma-separated"
            ) from None
        return targets if rank else None

    def asked_steps(self):
        """The steps the --do_* flags ask for, of "train", "eval" and "predict"."""
        return super().asked_steps() + (("predict",) if self.do_predict else ())

    def batch_sizes(self):
        sizes = super().batch_sizes()
        return {**sizes, "predict": self.predict_batch_size} if self.do_predict else sizes
