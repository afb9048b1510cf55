"""Users' own train / dev / test tables (.tsv or .csv), read by chosen columns."""

import functools
import itertools
import os

import numpy as np

from bert_tf import file_io
from bert_tf.errors import InputError
from bert_tf.file_io import MissingFileError
from bert_tf.tasks.classification.data.processor import Columns, TableProcessor, rows


def _sorted_labels(labels):
    """Integer labels in numeric order ("2" before "10"), any others in string order."""
    try:
        return sorted(labels, key=lambda label: (int(label), label))
    except ValueError:
        return sorted(labels)


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


class ColumnsProcessor(TableProcessor):
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
            if not file_io.exists(train_path):
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
        data_rows = rows(path, self.delimiter)
        header = None
        if self.has_header:
            _, header = next(data_rows, (0, None))
            header = [name.strip() for name in header or []]
        with_label = True
        if split == "test":  # a test file may have the label column: then the run scores it
            first = next(data_rows, None)
            data_rows = itertools.chain([first] if first else [], data_rows)
            with_label = first is not None and self._has_label_column(path, header, first[1])
        columns = self._columns(path, header, with_label=with_label)
        finding_labels = split == "train" and self._given_labels is None
        allowed = None if finding_labels or not with_label else self._known_labels()
        check_label = functools.partial(self._check_label, allowed=allowed)
        examples = self._read_examples(path, data_rows, columns, split, check_label)
        if finding_labels:
            self._found_labels = _sorted_labels(self._label_set(examples))
        return examples

    def _has_label_column(self, path, header, fields):
        """Whether a test file's rows (`fields`: its first) hold the --label_column."""
        if self.column_specs["label_column"] is None:
            return False
        try:
            columns = self._columns(path, header, with_label=True)
        except InputError:  # a header without the label's name
            return False
        return not columns.missing(len(fields))

    def _known_labels(self):
        """The label set, or None when neither --labels nor the training file gives it (a run
        without training data checks a test file's labels against its model's)."""
        if self._given_labels is None and self._found_labels is None and self.data_dir is not None:
            (train_path,) = self._source(self.data_dir, "train")
            if not file_io.exists(train_path):
                return None
        return self.get_labels()

    def _label_set(self, examples):
        """The labels that examples of the training file have."""
        return {example.label for example in examples}

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
        return Columns(text_a, text_b, label, names=(*names, "guid"))

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
