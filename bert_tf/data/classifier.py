"""Sentence (pair) classification data for run_classifier.py: GLUE files, users' TSV / CSV, TFDS, features.

A `DataProcessor` reads one task's data as `InputExample`s (text_a, optional text_b, label string);
`convert_example_to_feature` turns an example into the original run_classifier.py's features:

    tokens:      [CLS] is this jack ##son ##ville ? [SEP] no it is not . [SEP] 0 0 ...
    segment_ids: 0     0  0    0    0     0       0 0     1  1  1  1   1 1     0 0 ...
    input_mask:  1 for each token, 0 for the padding

`get_processor` picks the source:
  * the GLUE distribution files, read as published (`cola`, `sst-2`, `mrpc`, `qqp`, `sts-b`, `mnli`,
    `mnli-mm`, `qnli`, `rte`, `wnli`, `ax`), and XNLI as the original reads it (`xnli`);
  * users' own `train/dev/test.{tsv,csv}` with chosen columns (`tsv`, `csv`);
  * TensorFlow Datasets (`tfds_name="glue/mrpc"` with that GLUE task's name or `tfds`; any other
    dataset with `tfds` and its feature names as the columns).

Quote characters in the GLUE files are text, not CSV quoting, so their lines are split at tabs only. Bad
data raises `InputError` naming the file and line (or the TFDS split and index).

S = max_seq_length.
"""

import csv
import dataclasses
import functools
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.data.packing import pack_tokens, pad_to
from bert_tf.data.records import float_feature, int64_feature, serialize_example
from bert_tf.errors import InputError


class MissingFileError(InputError, FileNotFoundError):
    """An input file that does not exist: an InputError that callers may catch as FileNotFoundError."""


@dataclasses.dataclass
class InputExample:
    """One example: its text (a pair when text_b is set) and label (None in test sets)."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | None = None
    source: str = ""  # where it was read, "file:line", for error messages


class DataProcessor:
    """One task's examples and labels.

    Attributes:
      task_name: the GLUE task it reads ("cola", "mrpc", "sts-b", ...; which metrics apply), or
        "tsv" / "csv" / "tfds" for users' data.
      is_regression: labels are numbers (STS-B); `get_labels()` is then [].
      is_pair: examples have text_b.
    """

    task_name = ""
    is_regression = False
    is_pair = False

    def get_train_examples(self, data_dir):
        """Returns the training set as a list of `InputExample`s."""
        return self._examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        """Returns the evaluation set as a list of `InputExample`s."""
        return self._examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        """Returns the prediction set as a list of `InputExample`s, labels None."""
        return self._examples(data_dir, "test")

    def get_labels(self):
        """Returns the label strings in id order ([] for regression)."""
        raise NotImplementedError

    def train_source(self, data_dir):
        """Returns the paths the training examples come from (for cache invalidation)."""
        return self._source(data_dir, "train")

    def dev_source(self, data_dir):
        """Returns the paths the evaluation examples come from."""
        return self._source(data_dir, "dev")

    def test_source(self, data_dir):
        """Returns the paths the prediction examples come from."""
        return self._source(data_dir, "test")

    def _examples(self, data_dir, split):
        raise NotImplementedError

    def _source(self, data_dir, split):
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------------
# Reading text tables


def _open_binary(path):
    path = os.fspath(path)
    if "://" in path:  # gs://... as the original's tf.gfile read it
        if not tf.io.gfile.exists(path):
            raise MissingFileError(f"{path} does not exist")
        return tf.io.gfile.GFile(path, "rb")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise MissingFileError(f"{path} does not exist") from None
    except OSError as error:
        raise InputError(f"{path}: cannot open it ({error.strerror})") from None


def _text_lines(path, keep_ends=False):
    """Yields (line number from 1, line) of a UTF-8 file; a byte-order mark at the start is dropped.

    Lines end at "\\n" only (a "\\r" before it is dropped too), so a stray "\\r" inside a field stays text.

    Raises:
      InputError: if the file is missing or empty, or a line is not valid UTF-8.
    """
    number = 0
    with _open_binary(path) as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"{path}:{number}: not valid UTF-8 (byte {raw[error.start : error.start + 1]!r} "
                    f"at column {error.start + 1}); save the file as UTF-8"
                ) from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            if not keep_ends:
                line = line.removesuffix("\n").removesuffix("\r")
            yield number, line
    if number == 0:
        raise InputError(f"{path} is empty")


def _rows(path, delimiter):
    """Yields (line number, fields) of each non-blank row of a tab- or comma-separated file.

    "\\t" splits each line at tabs and nothing else (quotes are text); "," reads CSV with its quoting
    (a quoted field may span lines; the number is the row's first line).
    """
    if delimiter == "\t":
        for number, line in _text_lines(path):
            if line:
                yield number, line.split("\t")
        return
    reader = csv.reader(line for _, line in _text_lines(path, keep_ends=True))
    first_line = 1
    try:
        for fields in reader:
            number, first_line = first_line, reader.line_num + 1
            if fields:
                yield number, fields
    except csv.Error as error:
        raise InputError(f"{path}:{reader.line_num}: {error}") from None


def _sorted_labels(labels):
    """Integer labels in numeric order ("2" before "10"), any others in string order."""
    try:
        return sorted(labels, key=lambda label: (int(label), label))
    except ValueError:
        return sorted(labels)


@dataclasses.dataclass(frozen=True)
class _Columns:
    """Where a table keeps an example's fields: 0-based columns, -1 for the last one."""

    text_a: int
    text_b: int | None = None
    label: int | None = None  # None: not read (test sets)
    guid: int | None = None  # the column naming the example; None: the line's index from 0
    names: tuple = ("text_a", "text_b", "label", "guid")  # how errors call them

    @functools.cached_property
    def width(self):
        """The fewest fields a row needs."""
        texts = [c for c in (self.text_a, self.text_b, self.guid) if c is not None]
        return max(texts + [self.label or 0]) + 1 + (self.label == -1)

    def missing(self, num_fields):
        """Says which columns a row of `num_fields` fields lacks, or returns ""."""
        if num_fields >= self.width:
            return ""
        texts = [c for c in (self.text_a, self.text_b, self.guid) if c is not None]
        lacking = [
            f"{name} (column {column})"
            for name, column in zip(
                self.names, (self.text_a, self.text_b, self.label, self.guid), strict=True
            )
            if column is not None and column >= num_fields
        ]
        if self.label == -1 and num_fields <= max(texts) + 1:  # the last column must not be a text
            lacking.append(f"{self.names[2]} (the last column, after column {max(texts)})")
        return ", ".join(lacking)


class _TableProcessor(DataProcessor):
    """Reads examples from tab- or comma-separated files; subclasses say which file and columns."""

    skip_malformed_lines = False

    def _read_examples(self, path, rows, columns, guid_prefix, check_label, keep=None):
        """Makes the examples of one file's rows.

        Args:
          path: the file, for messages.
          rows: (line number, fields) of its data rows.
          columns: a `_Columns`.
          guid_prefix: guids are "<prefix>-<guid column or line index>".
          check_label: (label, "file:line") -> the label, or raises InputError.
          keep: fields -> whether the row is an example of this task (XNLI keeps one language).
        """
        examples, skipped = [], []
        for number, fields in rows:
            if keep is not None and not keep(fields):
                continue
            if len(fields) < columns.width:
                missing = columns.missing(len(fields))
                if self.skip_malformed_lines:
                    skipped.append(number)
                    continue
                raise InputError(
                    f"{path}:{number}: the line has {len(fields)} columns and no {missing} "
                    f"(task {self.task_name}; --skip_malformed_lines skips such lines)"
                )
            label = None
            if columns.label is not None:
                label = check_label(fields[columns.label], f"{path}:{number}")
            name = number - 1 if columns.guid is None else fields[columns.guid]
            examples.append(
                InputExample(
                    guid=f"{guid_prefix}-{name}",
                    text_a=fields[columns.text_a],
                    text_b=None if columns.text_b is None else fields[columns.text_b],
                    label=label,
                    source=f"{path}:{number}",
                )
            )
        if skipped:
            logging.warning(
                "%s: skipped %d malformed lines (too few columns): %s%s",
                path,
                len(skipped),
                ", ".join(map(str, skipped[:10])),
                " ..." if len(skipped) > 10 else "",
            )
        if not examples:
            raise InputError(f"{path} holds no examples for task {self.task_name}")
        return examples


# ---------------------------------------------------------------------------------------------------
# The GLUE and XNLI files


@dataclasses.dataclass(frozen=True)
class _Layout:
    """One GLUE file: its name ("{language}" filled in for XNLI), header, columns."""

    filename: str
    columns: _Columns
    header: bool = True
    guid_prefix: str | None = None  # default: the split's name
    language_column: int | None = None  # XNLI: keep the rows of one language


@dataclasses.dataclass(frozen=True)
class _GlueTask:
    labels: tuple
    train: _Layout | None
    dev: _Layout | None
    test: _Layout | None
    is_pair: bool = True
    is_regression: bool = False
    label_aliases: tuple = ()  # (written, meant) pairs


_BINARY = ("0", "1")
_NLI_LABELS = ("contradiction", "entailment", "neutral")
_ENTAILMENT = ("entailment", "not_entailment")


def _two_splits(train_and_dev, test, **task):
    """A task whose train.tsv and dev.tsv share one layout."""
    return _GlueTask(
        train=_Layout("train.tsv", **train_and_dev),
        dev=_Layout("dev.tsv", **train_and_dev),
        test=_Layout("test.tsv", **test),
        **task,
    )


def _mnli(dev_file, test_file):
    return _GlueTask(
        labels=_NLI_LABELS,
        train=_Layout("train.tsv", _Columns(8, 9, label=-1, guid=0)),
        dev=_Layout(f"{dev_file}.tsv", _Columns(8, 9, label=-1, guid=0), guid_prefix=dev_file),
        test=_Layout(f"{test_file}.tsv", _Columns(8, 9, guid=0), guid_prefix=test_file),
    )


def _indexed_pairs(labels):
    """QNLI, RTE, WNLI: header; index, text_a, text_b, label (test: no label)."""
    return _two_splits(
        dict(columns=_Columns(1, 2, label=3, guid=0)),
        dict(columns=_Columns(1, 2, guid=0)),
        labels=labels,
    )


# Columns as the GLUE download (download_glue_data.py) writes them; guids as the original names them.
_GLUE_TASKS = {
    # train/dev: no header; source, label, original judgement, sentence. test: index, sentence.
    "cola": _two_splits(
        dict(columns=_Columns(3, label=1), header=False),
        dict(columns=_Columns(1)),
        labels=_BINARY,
        is_pair=False,
    ),
    # sentence, label. test: index, sentence.
    "sst-2": _two_splits(
        dict(columns=_Columns(0, label=1)), dict(columns=_Columns(1)), labels=_BINARY, is_pair=False
    ),
    # Quality, #1 ID, #2 ID, #1 String, #2 String. test: index in place of Quality.
    "mrpc": _two_splits(
        dict(columns=_Columns(3, 4, label=0)), dict(columns=_Columns(3, 4)), labels=_BINARY
    ),
    # id, qid1, qid2, question1, question2, is_duplicate. test: id, question1, question2.
    "qqp": _two_splits(
        dict(columns=_Columns(3, 4, label=5, guid=0)),
        dict(columns=_Columns(1, 2, guid=0)),
        labels=_BINARY,
    ),
    # index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score.
    "sts-b": _two_splits(
        dict(columns=_Columns(7, 8, label=-1, guid=0)),
        dict(columns=_Columns(7, 8, guid=0)),
        labels=(),
        is_regression=True,
    ),
    # index, promptID, pairID, genre, 4 parses, sentence1, sentence2, [label1..5], gold_label.
    "mnli": _mnli("dev_matched", "test_matched"),
    "mnli-mm": _mnli("dev_mismatched", "test_mismatched"),
    "qnli": _indexed_pairs(_ENTAILMENT),
    "rte": _indexed_pairs(_ENTAILMENT),
    "wnli": _indexed_pairs(_BINARY),
    # The diagnostic set (GLUE's diagnostic/diagnostic.tsv): index, sentence1, sentence2; test only.
    "ax": _GlueTask(
        labels=_NLI_LABELS,
        train=None,
        dev=None,
        test=_Layout("diagnostic.tsv", _Columns(1, 2, guid=0)),
    ),
    # XNLI-MT train: premise, hypo, label. XNLI dev/test: language, gold_label, ..., sentence1 (6),
    # sentence2 (7), ...
    "xnli": _GlueTask(
        labels=_NLI_LABELS,
        train=_Layout(
            os.path.join("multinli", "multinli.train.{language}.tsv"), _Columns(0, 1, label=2)
        ),
        dev=_Layout("xnli.dev.tsv", _Columns(6, 7, label=1), language_column=0),
        test=_Layout("xnli.test.tsv", _Columns(6, 7), language_column=0),
        label_aliases=(("contradictory", "contradiction"),),
    ),
}


class GlueProcessor(_TableProcessor):
    """Reads one GLUE task (or XNLI) from its distribution files in `data_dir`.

    Example:
      processor = GlueProcessor("mrpc")
      examples = processor.get_train_examples("glue_data/MRPC")  # guid "train-1", label "0" / "1"
    """

    def __init__(self, task_name, language="zh", skip_malformed_lines=False):
        """
        Args:
          task_name: a key of `_GLUE_TASKS` ("cola", "mnli-mm", "xnli", ...).
          language: XNLI's language (file names and the dev / test rows kept).
          skip_malformed_lines: skip lines with too few columns (logged) instead of failing.
        """
        self.task_name = task_name
        self._task = _GLUE_TASKS[task_name]
        self.is_pair = self._task.is_pair
        self.is_regression = self._task.is_regression
        self.language = language
        self.skip_malformed_lines = skip_malformed_lines
        self._label_aliases = dict(self._task.label_aliases)

    def get_labels(self):
        return list(self._task.labels)

    def _layout(self, split):
        layout = getattr(self._task, split)
        if layout is None:
            raise InputError(
                f"task {self.task_name} has no {split} set (only "
                f"{', '.join(s for s in ('train', 'dev', 'test') if getattr(self._task, s))})"
            )
        return layout

    def _path(self, data_dir, split):
        filename = self._layout(split).filename.format(language=self.language)
        return os.path.join(data_dir, filename)

    def _source(self, data_dir, split):
        return [self._path(data_dir, split)]

    def _examples(self, data_dir, split):
        layout = self._layout(split)
        path = self._path(data_dir, split)
        rows = _rows(path, "\t")
        if layout.header:
            next(rows, None)
        keep = None
        if layout.language_column is not None:

            def keep(fields):
                return fields[layout.language_column] == self.language

        guid_prefix = layout.guid_prefix or split
        return self._read_examples(path, rows, layout.columns, guid_prefix, self._check_label, keep)

    def _check_label(self, value, where):
        value = self._label_aliases.get(value, value)
        if self.is_regression:
            try:
                float(value)
            except ValueError:
                raise InputError(f"{where}: the score {value!r} is not a number") from None
        elif value not in self._task.labels:
            raise InputError(
                f"{where}: label {value!r} is not one of task {self.task_name}'s labels "
                f"{list(self._task.labels)}"
            )
        return value


# ---------------------------------------------------------------------------------------------------
# Users' own TSV / CSV files


def _parse_labels(labels):
    """A list of label strings from a list or a "a,b,c" string; None stays None."""
    if labels is None:
        return None
    if isinstance(labels, str):
        labels = labels.split(",")
    labels = [str(label).strip() for label in labels]
    if not labels or "" in labels:
        raise InputError(f"--labels={','.join(labels)!r} has an empty label")
    if len(set(labels)) != len(labels):
        raise InputError(f"--labels={','.join(labels)!r} names a label twice")
    return labels


class ColumnsProcessor(_TableProcessor):
    """Reads users' `train`, `dev` and `test` files (`.tsv` or `.csv`) in `data_dir` by chosen columns.

    A column is a 0-based index, or a header name when the files have a header (a name found in the
    header wins over reading it as an index). Each file's own header is looked up, so the files may order
    their columns differently. The test file needs no label column. The labels are `labels` if given,
    else those of the training file, sorted (integers in numeric order).

    Example:
      processor = ColumnsProcessor("csv", text_a_column="review", label_column="stars", has_header=True)
      processor.get_train_examples("my_data")  # reads my_data/train.csv
    """

    def __init__(
        self,
        file_format,
        text_a_column,
        text_b_column=None,
        label_column=None,
        has_header=False,
        labels=None,
        data_dir=None,
        skip_malformed_lines=False,
    ):
        """
        Args:
          file_format: "tsv" (split at tabs; quotes are text) or "csv" (the csv module's quoting).
          text_a_column, text_b_column, label_column: column indexes (int or digit string) or names.
          has_header: the first line of each file names the columns.
          labels: the label set, a list or "a,b,c"; a label outside it is an error in every file.
          data_dir: where the training file is, to find the labels when they are not given.
          skip_malformed_lines: skip lines that lack a column (logged) instead of failing.
        """
        if text_a_column is None:
            raise InputError(f"task {file_format} needs --text_a_column (an index or header name)")
        self.task_name = file_format
        self.delimiter = "\t" if file_format == "tsv" else ","
        self.column_specs = {
            "text_a_column": text_a_column,
            "text_b_column": text_b_column,
            "label_column": label_column,
        }
        self.is_pair = text_b_column is not None
        self.has_header = has_header
        self.data_dir = data_dir
        self.skip_malformed_lines = skip_malformed_lines
        self._given_labels = _parse_labels(labels)
        self._found_labels = None

    def get_labels(self):
        if self._given_labels is not None:
            return list(self._given_labels)
        if self._found_labels is None:
            if self.data_dir is None:
                raise InputError(
                    f"task {self.task_name}: give --labels, or a data_dir whose training file has them"
                )
            (train_path,) = self._source(self.data_dir, "train")
            if not tf.io.gfile.exists(train_path):
                raise MissingFileError(
                    f"task {self.task_name} finds its labels in {train_path}, which does not "
                    "exist; give --labels"
                )
            self.get_train_examples(self.data_dir)
        return list(self._found_labels)

    def _source(self, data_dir, split):
        return [os.path.join(data_dir, f"{split}.{self.task_name}")]

    def _examples(self, data_dir, split):
        if self.data_dir is None:
            self.data_dir = data_dir
        (path,) = self._source(data_dir, split)
        if split != "test" and self.column_specs["label_column"] is None:
            raise InputError(f"task {self.task_name} needs --label_column to read {path}")
        rows = _rows(path, self.delimiter)
        header = None
        if self.has_header:
            _, header = next(rows, (0, None))
            header = [name.strip() for name in header or []]
        columns = self._columns(path, header, with_label=split != "test")
        finding_labels = split == "train" and self._given_labels is None
        allowed = None if finding_labels or split == "test" else self.get_labels()
        check_label = functools.partial(self._check_label, allowed=allowed)
        examples = self._read_examples(path, rows, columns, split, check_label)
        if finding_labels:
            self._found_labels = _sorted_labels({example.label for example in examples})
        return examples

    def _columns(self, path, header, with_label):
        """Resolves the column flags against this file's header."""
        names = [f"--{flag}={spec!r}" for flag, spec in self.column_specs.items()]
        specs = list(self.column_specs.values())
        if not with_label:
            specs[2] = None
        text_a, text_b, label = (
            self._column_index(path, header, flag, spec)
            for flag, spec in zip(self.column_specs, specs, strict=True)
        )
        return _Columns(text_a, text_b, label, names=(*names, "guid"))

    def _column_index(self, path, header, flag, spec):
        if spec is None:
            return None
        if isinstance(spec, int | np.integer) and not isinstance(spec, bool):
            if spec < 0:
                raise InputError(f"--{flag}={spec}: a column index counts from 0")
            return int(spec)
        name = str(spec).strip()
        if header is not None and name in header:
            return header.index(name)
        if name.isdigit():
            return int(name)
        if header is None:
            raise InputError(
                f"--{flag}={name!r} names a column, but the files have no header (--has_header is "
                "false); give a 0-based column index"
            )
        raise InputError(f"{path}:1: the header has no column {name!r} (--{flag}); it has {header}")

    def _check_label(self, value, where, allowed):
        """The label, stripped; `allowed`: the labels it must be one of (None: any)."""
        value = value.strip()
        if not value:
            raise InputError(f"{where}: the label is empty")
        if allowed is not None and value not in allowed:
            origin = "--labels" if self._given_labels is not None else "the training file's labels"
            raise InputError(f"{where}: label {value!r} is not one of {origin} {allowed}")
        return value


# ---------------------------------------------------------------------------------------------------
# TensorFlow Datasets

_STANDARD_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
_MNLI_MATCHED = {"train": "train", "dev": "validation_matched", "test": "test_matched"}
_MNLI_MISMATCHED = {"train": "train", "dev": "validation_mismatched", "test": "test_mismatched"}
_EVAL_ONLY = {"train": None, "dev": "validation", "test": "test"}

# tfds glue config -> (GLUE task, text features, splits)
_TFDS_GLUE = {
    "cola": ("cola", ("sentence",), _STANDARD_SPLITS),
    "sst2": ("sst-2", ("sentence",), _STANDARD_SPLITS),
    "mrpc": ("mrpc", ("sentence1", "sentence2"), _STANDARD_SPLITS),
    "qqp": ("qqp", ("question1", "question2"), _STANDARD_SPLITS),
    "stsb": ("sts-b", ("sentence1", "sentence2"), _STANDARD_SPLITS),
    "mnli": ("mnli", ("premise", "hypothesis"), _MNLI_MATCHED),
    "mnli_matched": ("mnli", ("premise", "hypothesis"), _EVAL_ONLY),
    "mnli_mismatched": ("mnli-mm", ("premise", "hypothesis"), _EVAL_ONLY),
    "qnli": ("qnli", ("question", "sentence"), _STANDARD_SPLITS),
    "rte": ("rte", ("sentence1", "sentence2"), _STANDARD_SPLITS),
    "wnli": ("wnli", ("sentence1", "sentence2"), _STANDARD_SPLITS),
    "ax": ("ax", ("premise", "hypothesis"), {"train": None, "dev": None, "test": "test"}),
}


class TfdsProcessor(DataProcessor):
    """Reads a dataset of TensorFlow Datasets, prepared in `tfds_data_dir` (`data_dir` is unused).

    For a GLUE config the labels are the GLUE files' (ClassLabel names where they are GLUE's, as for
    MNLI; the class index as a string where GLUE writes 0 / 1, as for CoLA), so a model trained on either
    source reads the other. Other datasets keep their ClassLabel names in their id order. Test sets have
    no labels (TFDS writes -1).
    """

    def __init__(
        self,
        tfds_name,
        tfds_data_dir=None,
        *,
        task_name="tfds",
        text_a_feature,
        text_b_feature=None,
        label_feature="label",
        glue_labels=None,
        splits=None,
    ):
        """
        Args:
          tfds_name: "name" or "name/config" ("glue/mrpc").
          tfds_data_dir: where it is prepared (TFDS's default, ~/tensorflow_datasets, when None).
          task_name: the GLUE task it holds ("mrpc"), or "tfds".
          text_a_feature, text_b_feature, label_feature: feature names.
          glue_labels: the GLUE task's labels, for a GLUE config.
          splits: {"train" / "dev" / "test": TFDS split name or None}.
        """
        import tensorflow_datasets as tfds  # only here: it is slow to import

        try:
            self._builder = tfds.builder(tfds_name, data_dir=tfds_data_dir)
        except ValueError as error:  # DatasetNotFoundError, an unknown config
            reason = str(error).splitlines()[0]
            raise InputError(f"--tfds_name={tfds_name}: {reason}") from None
        self.tfds_name = tfds_name
        self.task_name = task_name
        self.text_features = (text_a_feature, text_b_feature)
        self.label_feature = label_feature
        self.is_pair = text_b_feature is not None
        self.splits = splits or _STANDARD_SPLITS
        features = self._builder.info.features
        for feature in (text_a_feature, text_b_feature, label_feature):
            if feature is not None and feature not in features:
                raise InputError(
                    f"--tfds_name={tfds_name} has no feature {feature!r}; it has {list(features)}"
                )
        self._class_names = getattr(features[label_feature], "names", None)
        self.is_regression = self._class_names is None
        if self.is_regression and not np.issubdtype(features[label_feature].np_dtype, np.floating):
            raise InputError(
                f"--tfds_name={tfds_name}: feature {label_feature!r} is neither a ClassLabel nor a "
                "float score"
            )
        self._labels = [] if self.is_regression else list(glue_labels or self._class_names)
        self._label_names = self._class_names  # names as they are (MNLI, QNLI, RTE, non-GLUE)
        if not self.is_regression and not set(self._class_names) <= set(self._labels):
            self._label_names = [str(index) for index in range(len(self._class_names))]

    def get_labels(self):
        return list(self._labels)

    def _split(self, split):
        name = self.splits[split]
        if name is None:
            available = [s for s, n in self.splits.items() if n]
            raise InputError(f"--tfds_name={self.tfds_name} has no {split} set (only {available})")
        return name

    def _source(self, data_dir, split):
        split_info = self._builder.info.splits.get(self._split(split))  # None until prepared
        return [os.fspath(path) for path in split_info.filepaths] if split_info else []

    def _load(self, split):
        try:
            return self._builder.as_dataset(split=split, shuffle_files=False)
        except ValueError as error:  # a split the dataset lacks
            reason = str(error).splitlines()[0]
            raise InputError(f"--tfds_name={self.tfds_name}: {reason}") from None
        except AssertionError:
            if self._builder.is_prepared():
                raise
            root = os.fspath(self._builder.data_dir_root)
            raise InputError(
                f"TFDS dataset {self.tfds_name} is not prepared in {root}: prepare it once with "
                f"`tfds build {self.tfds_name} --data_dir={root}` (or tfds.builder("
                f"{self.tfds_name!r}, data_dir={root!r}).download_and_prepare()), then pass "
                f"--tfds_data_dir={root}"
            ) from None

    def _examples(self, data_dir, split):
        tfds_split = self._split(split)
        examples = []
        for index, row in enumerate(self._load(tfds_split).as_numpy_iterator()):
            source = f"{self.tfds_name}:{tfds_split}[{index}]"
            text_a, text_b = (
                None if feature is None else row[feature].decode("utf-8")
                for feature in self.text_features
            )
            label = None if split == "test" else self._label(row[self.label_feature], source)
            name = row["idx"] if "idx" in row else index
            examples.append(InputExample(f"{tfds_split}-{name}", text_a, text_b, label, source))
        if not examples:
            raise InputError(f"--tfds_name={self.tfds_name}: split {tfds_split} is empty")
        return examples

    def _label(self, value, source):
        if self.is_regression:
            return str(value)  # numpy's shortest form: float32 3.8 -> "3.8"
        if value < 0:
            raise InputError(f"{source}: the example has no label ({value})")
        return self._label_names[value]


# ---------------------------------------------------------------------------------------------------
# Choosing a processor

_FILE_TASKS = tuple(_GLUE_TASKS)
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b"}
TASK_NAMES = (*_FILE_TASKS, *_ALIASES, "tsv", "csv", "tfds")


def get_processor(
    task_name,
    *,
    text_a_column=None,
    text_b_column=None,
    label_column=None,
    has_header=False,
    labels=None,
    tfds_name=None,
    tfds_data_dir=None,
    xnli_language="zh",
    data_dir=None,
    skip_malformed_lines=False,
):
    """Returns the `DataProcessor` for a --task_name (case-insensitive) and the data flags.

    Args:
      task_name: one of TASK_NAMES; with tfds_name, None means "tfds".
      text_a_column, text_b_column, label_column: for "tsv" / "csv", column indexes or header names;
        for "tfds" with a non-GLUE dataset, feature names (label_column defaults to "label").
      has_header: "tsv" / "csv" files start with a header line.
      labels: "tsv" / "csv" label set (list or "a,b,c"); default: the training file's labels, sorted.
      tfds_name: read TensorFlow Datasets ("glue/mrpc") instead of files in data_dir.
      tfds_data_dir: where the TFDS dataset is prepared.
      xnli_language: XNLI's language.
      data_dir: the data folder, where "tsv" / "csv" find their labels.
      skip_malformed_lines: skip lines with too few columns (logged) instead of raising InputError.

    Raises:
      InputError: for an unknown task, or options that the task does not take.
    """
    task = task_name.lower() if task_name else ("tfds" if tfds_name else "")
    task = _ALIASES.get(task, task)
    if task not in TASK_NAMES:
        raise InputError(f"--task_name={task_name!r} is not one of {', '.join(TASK_NAMES)}")
    columns = {
        "text_a_column": text_a_column,
        "text_b_column": text_b_column,
        "label_column": label_column,
    }
    if tfds_name:
        return _tfds_processor(task, tfds_name, tfds_data_dir, columns, labels)
    if task in ("tsv", "csv"):
        return ColumnsProcessor(
            task,
            **columns,
            has_header=has_header,
            labels=labels,
            data_dir=data_dir,
            skip_malformed_lines=skip_malformed_lines,
        )
    if task == "tfds":
        raise InputError("--task_name=tfds needs --tfds_name (e.g. glue/mrpc)")
    _refuse_options(columns, labels, f"task {task} reads the GLUE files' own columns")
    return GlueProcessor(task, language=xnli_language, skip_malformed_lines=skip_malformed_lines)


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
    if config not in _TFDS_GLUE:
        raise InputError(
            f"--tfds_name={tfds_name}: GLUE configs are glue/{', glue/'.join(_TFDS_GLUE)}"
        )
    glue_task, text_features, splits = _TFDS_GLUE[config]
    if task == "mnli-mm" and config == "mnli":
        glue_task, splits = "mnli-mm", _MNLI_MISMATCHED
    if task not in ("tfds", glue_task):
        raise InputError(f"--task_name={task} does not match --tfds_name={tfds_name} ({glue_task})")
    return TfdsProcessor(
        tfds_name,
        tfds_data_dir,
        task_name=glue_task,
        text_a_feature=text_features[0],
        text_b_feature=text_features[1] if len(text_features) > 1 else None,
        glue_labels=_GLUE_TASKS[glue_task].labels,
        splits=splits,
    )


# ---------------------------------------------------------------------------------------------------
# Features


def make_label_map(labels):
    """{label string: id} for labels in id order."""
    return {label: index for index, label in enumerate(labels)}


def _label_id(example, label_map, is_regression):
    where = example.source or example.guid
    if is_regression:
        try:
            return 0.0 if example.label is None else float(example.label)
        except ValueError:
            raise InputError(f"{where}: the score {example.label!r} is not a number") from None
    if example.label is None:
        return 0  # test examples: the label is not used
    if example.label not in label_map:
        raise InputError(f"{where}: label {example.label!r} is not one of {list(label_map)}")
    return label_map[example.label]


def convert_example_to_feature(example, label_map, max_seq_length, tokenizer, is_regression=False):
    """Tokenizes, truncates and pads one example as the original run_classifier.py does.

    A text_b that is empty or tokenizes to nothing makes a single-text example, as in the original.

    Args:
      example: an `InputExample`.
      label_map: {label: id} (or the label list); unused for regression.
      max_seq_length: S, the tokens in all, [CLS] and [SEP]s included.
      tokenizer: a `FullTokenizer`.
      is_regression: the label is a float score.

    Returns:
      {"input_ids", "input_mask", "segment_ids": S ints each; "label_ids": int (float for
      regression; 0 when the example has no label); "is_real_example": 1}.

    Raises:
      InputError: for a label outside label_map, or an S too small for the special tokens.
    """
    if isinstance(label_map, list | tuple):
        label_map = make_label_map(label_map)
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else []
    if max_seq_length < (3 if tokens_b else 2):  # [CLS] a [SEP] (b [SEP])
        raise InputError(f"--max_seq_length={max_seq_length} leaves no room for the text")
    tokens, segment_ids = pack_tokens(tokens_a, tokens_b, max_seq_length)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    return {
        "input_ids": pad_to(input_ids, max_seq_length),
        "input_mask": pad_to([1] * len(input_ids), max_seq_length),
        "segment_ids": pad_to(segment_ids, max_seq_length),
        "label_ids": _label_id(example, label_map, is_regression),
        "is_real_example": 1,
    }


def padding_feature(max_seq_length, is_regression=False):
    """A feature that fills the last evaluation / prediction batch; is_real_example 0 keeps it out."""
    zeros = [0] * max_seq_length
    return {
        "input_ids": zeros,
        "input_mask": zeros,
        "segment_ids": zeros,
        "label_ids": 0.0 if is_regression else 0,
        "is_real_example": 0,
    }


def classifier_feature_spec(max_seq_length, is_regression=False):
    """The TFRecord features, as the original's: int64 ids [S], label_ids int64 (float32 regression)."""
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    return {
        "input_ids": sequence,
        "input_mask": sequence,
        "segment_ids": sequence,
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def serialize_classifier_feature(feature, is_regression=False):
    """A feature dict from `convert_example_to_feature` as serialized tf.train.Example bytes."""
    label_feature = float_feature if is_regression else int64_feature
    return serialize_example(
        {
            "input_ids": int64_feature(feature["input_ids"]),
            "input_mask": int64_feature(feature["input_mask"]),
            "segment_ids": int64_feature(feature["segment_ids"]),
            "label_ids": label_feature([feature["label_ids"]]),
            "is_real_example": int64_feature([feature["is_real_example"]]),
        }
    )
