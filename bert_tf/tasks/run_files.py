"""A run folder's own files besides checkpoints: task.json (what rebuilds its model) and labels.txt.

Every run_*.py writes task.json into --output_dir before its first step; export_saved_model.py and
--init_checkpoint read it from beside a checkpoint to know the task and the settings of its head.
The keys are the fields of `TaskInfo`, flat, so task.json files of earlier versions stay readable.
"""

import dataclasses
import os

import tensorflow as tf

from bert_tf import io
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.objectives import DEFAULT_OBJECTIVE, describe

TASK_FILE = "task.json"
# How a classifier combines a text's windows (bert_tf.tasks.windows.combine_windows).
WINDOW_COMBINATIONS = ("weighted_mean", "mean", "max")
LABELS_FILE = "labels.txt"


@dataclasses.dataclass(kw_only=True)
class TaskInfo:
    """What rebuilds a run's model and its export: the task, the encoder, the tokenizer, the head.

    Attributes:
      model_type: the task's name in bert_tf.tasks.TASKS ("classifier", "multi_label", "squad",
        "tagger", "feature_tagger", "multiple_choice", "encoder"), or "pretraining".
      bert_config: the encoder's BertConfig (None: give --bert_config_file).
      do_lower_case, max_seq_length: the tokenizer's settings.
      labels: classifier and tagger: the label strings in id order.
      is_pair, is_regression: classifier: two texts per example; a score instead of labels.
      doc_stride: tagger, SQuAD, classifier windows: pieces between the starts of two windows.
      window_combination: classifier windows: how a text's windows combine ("weighted_mean",
        "mean", "max"); "mean" for a run that recorded none (the rule before weighted_mean).
      thresholds: multi_label: each label's threshold (probability over it: predicted); None: 0.5.
      version_2_with_negative, max_query_length, n_best_size, max_answer_length,
      null_score_diff_threshold: SQuAD's settings (run_squad.py's flags).
      feature_layers, lstm_size: feature_tagger: the layers its head reads and its BiLSTM's size
        (run_ner.py --feature_layers, --lstm_size; bert_tf/tasks/feature_based.py).
    """

    model_type: str
    bert_config: BertConfig | None = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    labels: list | None = None
    is_pair: bool = False
    is_regression: bool = False
    doc_stride: int | None = None
    window_combination: str = "mean"
    thresholds: list | None = None
    version_2_with_negative: bool = False
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    feature_layers: str | None = None
    lstm_size: int | None = None

    def __post_init__(self):
        if self.window_combination is None:  # a task.json's null
            self.window_combination = "mean"
        if self.window_combination not in WINDOW_COMBINATIONS:
            raise ValueError(
                f"window_combination {self.window_combination!r} is none of "
                f"{', '.join(WINDOW_COMBINATIONS)}"
            )

    def to_json(self):
        values = dataclasses.asdict(self)
        values["bert_config"] = self.bert_config.to_dict() if self.bert_config else None
        return values

    @classmethod
    def from_json(cls, values, where):
        """A TaskInfo of task.json's dict; `where` names the file in errors."""
        if not isinstance(values, dict) or "model_type" not in values:
            raise InputError(f"{where}: a task.json needs a JSON object with a model_type")
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InputError(f"{where}: unknown keys {unknown} (known: {sorted(known)})")
        values = dict(values)
        if values.get("bert_config") is not None:
            try:
                values["bert_config"] = BertConfig.from_dict(values["bert_config"])
            except ValueError as error:
                raise InputError(f"{where}: bert_config: {error}") from None
        try:
            return cls(**values)
        except ValueError as error:
            raise InputError(f"{where}: {error}") from None


def write_task_info(folder, info):
    """Writes folder/task.json (atomically)."""
    import json

    text = json.dumps(info.to_json(), indent=2, sort_keys=True)
    io.write_text(os.path.join(folder, TASK_FILE), text + "\n")


def read_task_info(checkpoint_path):
    """The TaskInfo of the task.json beside checkpoint_path (a folder or a prefix), or None."""
    folder = (
        checkpoint_path if tf.io.gfile.isdir(checkpoint_path) else os.path.dirname(checkpoint_path)
    )
    path = os.path.join(folder, TASK_FILE)
    if not tf.io.gfile.exists(path):
        return None
    return TaskInfo.from_json(io.read_json(path), path)


def write_labels(folder, labels):
    """Writes folder/labels.txt: one label string per line, in id order."""
    io.write_text(os.path.join(folder, LABELS_FILE), labels_text(labels))


def labels_text(labels):
    """labels.txt's content (also the assets/labels.txt of an export)."""
    return "".join(f"{label}\n" for label in labels)


def read_labels(folder):
    """The labels of folder/labels.txt, or None when there is no such file."""
    path = os.path.join(folder, LABELS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    return [line for _, line in io.read_lines(path) if line.strip()]


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
        f"{flag}={checkpoint_path} was trained with {describe(recorded.objective)} ({recorded_file}), "
        f"but --bert_config_file={bert_config_file} gives {describe(bert_config.objective)}: pass "
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
        if bert_config.objective not in (DEFAULT_OBJECTIVE, objective):
            raise InputError(
                f"--objective={objective}, but --bert_config_file={bert_config_file} records "
                f"objective {bert_config.objective}: pass --objective={bert_config.objective}"
            )
        bert_config = dataclasses.replace(bert_config, objective=objective)
    if init_checkpoint:
        check_objective_matches(bert_config, bert_config_file, init_checkpoint, "--init_checkpoint")
    return bert_config
