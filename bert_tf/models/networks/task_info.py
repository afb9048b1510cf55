"""A run folder's own files besides checkpoints: task.json (what rebuilds its model) and labels.txt.

Every run_*.py writes task.json into --output_dir before its first step; export_saved_model.py and
--init_checkpoint read it from beside a checkpoint to know the task and the settings of its head.
The shared keys are flat, and each task's own settings sit under its model_type (`TaskInfo`); the
all-flat task.json files of earlier versions read the same.
"""

import dataclasses
import os
import types

import tensorflow as tf

from bert_tf import file_io
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig

TASK_FILE = "task.json"
LABELS_FILE = "labels.txt"
# The run's --vocab_file, copied beside task.json: the folder alone rebuilds the model and its
# tokenizer (BertTextClassifier.from_preset(output_dir), convert_checkpoint.py --output_format).
VOCAB_FILE = "vocab.txt"


_SHARED = ("model_type", "bert_config", "do_lower_case", "max_seq_length", "labels")

# The choices of recorded settings: how a classifier combines a text's windows
# (text_windows.combine_windows), the feature-based tagger's layers, the embedder's pooling.
WINDOW_COMBINATIONS = ("weighted_mean", "mean", "max")
FEATURE_LAYERS = (
    "embeddings",
    "second_to_last_hidden",
    "last_hidden",
    "weighted_sum_last_four",
    "concat_last_four",
    "weighted_sum_all",
)
POOLINGS = ("mean", "cls", "max")


@dataclasses.dataclass(frozen=True)
class RecordedSetting:
    """One setting of a task's part of task.json: what a missing (or null) value reads as, and the
    values it may take (None: any)."""

    name: str
    default: object = None
    choices: tuple | None = None


_CLASSIFIER = (
    RecordedSetting("doc_stride"),
    RecordedSetting("window_combination", "mean", WINDOW_COMBINATIONS),
    RecordedSetting("is_pair", False),
    RecordedSetting("is_regression", False),
)
_TAGGER = (RecordedSetting("doc_stride"),)

# {model_type: its recorded settings}: each task's part of task.json, the flags its script records
# (`setting(..., recorded=True)` and `derived` fields of its settings class, which
# tests/test_task_info.py holds equal to these).
RECORDED_SETTINGS = {
    "classifier": _CLASSIFIER,
    "multi_label": (*_CLASSIFIER, RecordedSetting("thresholds")),
    "squad": (
        RecordedSetting("doc_stride", 128),
        RecordedSetting("max_query_length", 64),
        RecordedSetting("n_best_size", 20),
        RecordedSetting("max_answer_length", 30),
        RecordedSetting("version_2_with_negative", False),
        RecordedSetting("null_score_diff_threshold", 0.0),
    ),
    "tagger": _TAGGER,
    "feature_tagger": (
        *_TAGGER,
        RecordedSetting("feature_layers", None, FEATURE_LAYERS),
        RecordedSetting("lstm_size", 768),
    ),
    "multiple_choice": (),
    "embedding": (
        RecordedSetting("pooling", "mean", POOLINGS),
        RecordedSetting("normalize", True),
    ),
}


def recorded_settings(model_type, **values):
    """A task's recorded settings (its part of task.json): a namespace of its RECORDED_SETTINGS,
    or None for a task that has none.

    Each is `values`' or, when missing or None, the setting's default: a task.json that lacks a
    setting, or holds null, reads as that default.

    Raises:
      ValueError: for a name that is no recorded setting, or a value outside a setting's choices.
    """
    known = RECORDED_SETTINGS.get(model_type, ())
    if not known:
        return None
    unknown = sorted(set(values) - {setting.name for setting in known})
    if unknown:
        raise ValueError(
            f"unknown {model_type} settings {unknown} (known: {sorted(s.name for s in known)})"
        )
    settings = {}
    for setting in known:
        value = values.get(setting.name)
        if value is None:
            value = setting.default
        if value is not None and setting.choices and value not in setting.choices:
            raise ValueError(f"{setting.name} {value!r} is none of {', '.join(setting.choices)}")
        settings[setting.name] = value
    return types.SimpleNamespace(**settings)


@dataclasses.dataclass(init=False)
class TaskInfo:
    """What rebuilds a run's model and its export: the task, the encoder, the tokenizer, the head.

    task.json holds the shared fields flat and the task's own settings under its model_type (e.g.
    "classifier": {"doc_stride": ..., "window_combination": ...}), read as `info.settings`. The
    task.json of an earlier version, all flat, reads the same.

    Attributes:
      model_type: the task's name (bert_tf.tasks.TASKS, RECORDED_SETTINGS) ("classifier", "multi_label", "squad",
        "tagger", "feature_tagger", "multiple_choice", "embedding", "encoder"), or "pretraining".
      bert_config: the encoder's BertConfig (None: give --bert_config_file).
      do_lower_case, max_seq_length: the tokenizer's settings.
      labels: the label strings in id order (tasks with labels), else None.
      settings: the task's own settings (`recorded_settings` of its model_type: a namespace of
        its RECORDED_SETTINGS), or None.

    Example:
    ```python
    info = TaskInfo(model_type="tagger", labels=["O", "B-PER"], doc_stride=64)
    info.settings.doc_stride  # 64
    ```
    """

    model_type: str
    bert_config: BertConfig | None
    do_lower_case: bool
    max_seq_length: int
    labels: list | None
    settings: object | None

    def __init__(
        self, *, model_type, bert_config=None, do_lower_case=True, max_seq_length=128,
        labels=None, settings=None, **task_settings,
    ):  # fmt: skip
        """Shared fields by name; the task's own as `settings` or as keywords of their own."""
        self.model_type, self.bert_config = model_type, bert_config
        self.do_lower_case, self.max_seq_length, self.labels = do_lower_case, max_seq_length, labels
        if settings is None and model_type in RECORDED_SETTINGS:
            settings = recorded_settings(model_type, **task_settings)
        elif task_settings:
            raise ValueError(f"{model_type} has no settings {sorted(task_settings)}")
        self.settings = settings

    def to_json(self):
        values = {name: getattr(self, name) for name in _SHARED}
        values["bert_config"] = self.bert_config.to_dict() if self.bert_config else None
        if self.settings is not None:
            values[self.model_type] = dict(vars(self.settings))
        return values

    @classmethod
    def from_json(cls, values, where):
        """A TaskInfo of task.json's dict; `where` names the file in errors."""
        if not isinstance(values, dict) or "model_type" not in values:
            raise InputError(f"{where}: a task.json needs a JSON object with a model_type")
        model_type = values["model_type"]
        own = {setting.name for setting in RECORDED_SETTINGS.get(model_type, ())}
        task_settings = dict(values.get(model_type) or {}) if own else {}
        known = {*_SHARED, *_flat_keys(), *own, *([model_type] if own else [])}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InputError(f"{where}: unknown keys {unknown} (known: {sorted(known)})")
        # A flat key of the task's part: the layout before the part (or a hand edit) wins.
        task_settings.update({key: values[key] for key in own if key in values})
        shared = {name: values[name] for name in _SHARED if name in values}
        if shared.get("bert_config") is not None:
            try:
                shared["bert_config"] = BertConfig.from_dict(shared["bert_config"])
            except ValueError as error:
                raise InputError(f"{where}: bert_config: {error}") from None
        try:
            return cls(**shared, **task_settings)
        except (TypeError, ValueError) as error:
            raise InputError(f"{where}: {error}") from None


def _flat_keys():
    """Every task's own settings: the task.json of a version before each task had its own part held
    them all flat (they read as the part's)."""
    return {setting.name for known in RECORDED_SETTINGS.values() for setting in known}


def write_task_info(folder, info):
    """Writes folder/task.json (atomically)."""
    import json

    text = json.dumps(info.to_json(), indent=2, sort_keys=True)
    file_io.write_text(os.path.join(folder, TASK_FILE), text + "\n")


def read_task_info(checkpoint_path):
    """The TaskInfo of the task.json beside checkpoint_path (a folder or a prefix), or None."""
    folder = (
        checkpoint_path if tf.io.gfile.isdir(checkpoint_path) else os.path.dirname(checkpoint_path)
    )
    path = os.path.join(folder, TASK_FILE)
    if not tf.io.gfile.exists(path):
        return None
    return TaskInfo.from_json(file_io.read_json(path), path)


def write_labels(folder, labels):
    """Writes folder/labels.txt: one label string per line, in id order."""
    file_io.write_text(os.path.join(folder, LABELS_FILE), labels_text(labels))


def write_vocab(folder, vocab_file):
    """Copies `vocab_file` to folder/vocab.txt (atomically), unless that file already holds it."""
    target = os.path.join(folder, VOCAB_FILE)
    text = file_io.read_text(vocab_file)
    if not file_io.exists(target) or file_io.read_text(target) != text:
        file_io.write_text(target, text)


def labels_text(labels):
    """labels.txt's content (also the assets/labels.txt of an export)."""
    return "".join(f"{label}\n" for label in labels)


def read_labels(folder):
    """The labels of folder/labels.txt, or None when there is no such file."""
    path = os.path.join(folder, LABELS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    return [line for _, line in file_io.read_lines(path) if line.strip()]
