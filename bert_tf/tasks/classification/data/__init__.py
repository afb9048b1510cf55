"""Sentence (pair) classification data for run_classifier.py: GLUE files, users' TSV / CSV, TFDS, features.

One module per job:
  * `glue`: the GLUE distribution files, read as published (`cola`, `sst-2`, `mrpc`, `qqp`, `sts-b`,
    `mnli`, `mnli-mm`, `qnli`, `rte`, `wnli`, `ax`), and XNLI as the original reads it (`xnli`);
  * `tables`: users' own `train/dev/test.{tsv,csv}` with chosen columns (`tsv`, `csv`);
  * `tfds`: TensorFlow Datasets (`--tfds_name=glue/mrpc` with that GLUE task's name or `tfds`; any
    other dataset with `tfds` and its feature names as the columns);
  * `features`: examples -> the original run_classifier.py's features and their TFRecords;
  * `processor`: the `InputExample` and `DataProcessor` they share.

`get_processor(source)` picks the reader of the data flags (tasks/task_settings.py's `DataSource`).
Bad data raises `InputError` naming the file and line (or the TFDS split and index).
"""

import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.tasks.classification.data.glue import GLUE_TASKS, GlueProcessor
from bert_tf.tasks.classification.data.tables import ColumnsProcessor
from bert_tf.tasks.classification.data.tfds import MNLI_MISMATCHED, TFDS_GLUE, TfdsProcessor

_ALIASES = {"sst2": "sst-2", "stsb": "sts-b"}
TASK_NAMES = (*GLUE_TASKS, *_ALIASES, "tsv", "csv", "tfds")


def check_data_dir(data_dir):
    """--data_dir is a folder, or InputError naming it and what it must hold (before the files'
    own messages, which would name a file in a folder that is not there)."""
    if not data_dir:
        return
    if not tf.io.gfile.exists(data_dir):
        raise InputError(
            f"--data_dir={data_dir}: no such folder; pass the folder that holds the task's "
            "train, dev and test files"
        )
    if not tf.io.gfile.isdir(data_dir):
        raise InputError(
            f"--data_dir={data_dir} is a file; pass the folder that holds the task's train, dev "
            "and test files"
        )


def get_processor(source):
    """Returns the `DataProcessor` for a DataSource (--task_name is case-insensitive).

    task_name is one of TASK_NAMES; with tfds_name, None means "tfds". For "tsv" / "csv" the column
    fields are indexes or header names, for "tfds" with a non-GLUE dataset feature names (the label
    defaults to "label"); labels is the "tsv" / "csv" label set ("a,b,c"; default: the training file's
    labels, sorted).

    Raises:
      InputError: for an unknown or missing task, or options that the task does not take.
    """
    if not source.task_name and not source.tfds_name:
        raise InputError("--task_name (or --tfds_name) is required")
    task = source.task_name.lower() if source.task_name else "tfds"
    task = _ALIASES.get(task, task)
    if task not in TASK_NAMES:
        raise InputError(f"--task_name={source.task_name!r} is not one of {', '.join(TASK_NAMES)}")
    columns = {
        "text_a_column": source.text_a_column,
        "text_b_column": source.text_b_column,
        "label_column": source.label_column,
    }
    if source.tfds_name:
        return _tfds_processor(task, source.tfds_name, source.tfds_data_dir, columns, source.labels)
    if task in ("tsv", "csv"):
        return ColumnsProcessor(
            task,
            **columns,
            has_header=source.has_header,
            labels=source.labels,
            data_dir=source.data_dir,
            skip_malformed_lines=source.skip_malformed_lines,
        )
    if task == "tfds":
        raise InputError("--task_name=tfds needs --tfds_name (e.g. glue/mrpc)")
    _refuse_options(columns, source.labels, f"task {task} reads the GLUE files' own columns")
    return GlueProcessor(
        task, language=source.xnli_language, skip_malformed_lines=source.skip_malformed_lines
    )


def _refuse_options(columns, labels, why):
    given = [f"--{flag}" for flag, value in columns.items() if value is not None]
    given += ["--labels"] if labels is not None else []
    if given:
        raise InputError(f"{', '.join(given)}: not used; {why}")


def _tfds_processor(task, tfds_name, tfds_data_dir, columns, labels):
    if task in ("tsv", "csv", "xnli"):
        raise InputError(f"--task_name={task} reads files; --tfds_name is for GLUE tasks or tfds")
    if not tfds_name.startswith("glue/"):
        _refuse_options({}, labels, f"--tfds_name={tfds_name} has its own ClassLabel names")
        if task != "tfds":
            raise InputError(f"--tfds_name={tfds_name} is not GLUE: use --task_name=tfds")
        if columns["text_a_column"] is None:
            raise InputError(f"--tfds_name={tfds_name} needs --text_a_column (a feature name)")
        return TfdsProcessor(
            tfds_name,
            tfds_data_dir,
            text_a_feature=columns["text_a_column"],
            text_b_feature=columns["text_b_column"],
            label_feature=columns["label_column"] or "label",
        )
    _refuse_options(columns, labels, f"--tfds_name={tfds_name} has GLUE's features and labels")
    config = tfds_name.removeprefix("glue/")
    if config not in TFDS_GLUE:
        raise InputError(
            f"--tfds_name={tfds_name}: GLUE configs are glue/{', glue/'.join(TFDS_GLUE)}"
        )
    glue_task, text_features, splits = TFDS_GLUE[config]
    if task == "mnli-mm" and config == "mnli":
        glue_task, splits = "mnli-mm", MNLI_MISMATCHED
    if task not in ("tfds", glue_task):
        raise InputError(f"--task_name={task} does not match --tfds_name={tfds_name} ({glue_task})")
    return TfdsProcessor(
        tfds_name,
        tfds_data_dir,
        task_name=glue_task,
        text_a_feature=text_features[0],
        text_b_feature=text_features[1] if len(text_features) > 1 else None,
        glue_labels=GLUE_TASKS[glue_task].labels,
        splits=splits,
    )
