"""What every classification data source shares: the example, the processor, reading text tables.

A `DataProcessor` reads one task's data as `InputExample`s (text_a, optional text_b, label string);
`TableProcessor` is the base of the processors that read tab- or comma-separated files, with errors
that name the file and line.
"""

import csv
import dataclasses
import functools

from absl import logging

from bert_tf.errors import InputError
from bert_tf.file_io import read_lines


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


def _nonempty(path, lines):
    """The (number, line) pairs of `lines`; an InputError if there is none."""
    empty = True
    for number, line in lines:
        empty = False
        yield number, line
    if empty:
        raise InputError(f"{path} is empty")


def rows(path, delimiter):
    """Yields (line number, fields) of each non-blank row of a tab- or comma-separated file.

    "\\t" splits each line at tabs and nothing else (quotes are text); "," reads CSV with its quoting
    (a quoted field may span lines; the number is the row's first line).
    """
    if delimiter == "\t":
        for number, line in _nonempty(path, read_lines(path)):
            if line:
                yield number, line.split("\t")
        return
    reader = csv.reader(line for _, line in _nonempty(path, read_lines(path, keep_ends=True)))
    first_line = 1
    try:
        for fields in reader:
            number, first_line = first_line, reader.line_num + 1
            if fields:
                yield number, fields
    except csv.Error as error:
        raise InputError(f"{path}:{reader.line_num}: {error}") from None


@dataclasses.dataclass(frozen=True)
class Columns:
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


class TableProcessor(DataProcessor):
    """Reads examples from tab- or comma-separated files; subclasses say which file and columns."""

    skip_malformed_lines = False

    def _read_examples(self, path, rows, columns, guid_prefix, check_label, keep=None):
        """Makes the examples of one file's rows.

        Args:
          path: the file, for messages.
          rows: (line number, fields) of its data rows.
          columns: a `Columns`.
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
