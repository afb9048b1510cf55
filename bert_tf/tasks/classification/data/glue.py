"""The GLUE tasks and XNLI, read from their distribution files as published.

Quote characters in the GLUE files are text, not CSV quoting, so their lines are split at tabs only.
"""

import dataclasses
import os

from bert_tf.errors import InputError
from bert_tf.tasks.classification.data.processor import Columns, TableProcessor, rows


@dataclasses.dataclass(frozen=True)
class _Layout:
    """One GLUE file: its name ("{language}" filled in for XNLI), header, columns."""

    filename: str
    columns: Columns
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
        train=_Layout("train.tsv", Columns(8, 9, label=-1, guid=0)),
        dev=_Layout(f"{dev_file}.tsv", Columns(8, 9, label=-1, guid=0), guid_prefix=dev_file),
        test=_Layout(f"{test_file}.tsv", Columns(8, 9, guid=0), guid_prefix=test_file),
    )


def _indexed_pairs(labels):
    """QNLI, RTE, WNLI: header; index, text_a, text_b, label (test: no label)."""
    return _two_splits(
        dict(columns=Columns(1, 2, label=3, guid=0)),
        dict(columns=Columns(1, 2, guid=0)),
        labels=labels,
    )


# Columns as the GLUE download (download_glue_data.py) writes them; guids as the original names them.
GLUE_TASKS = {
    # train/dev: no header; source, label, original judgement, sentence. test: index, sentence.
    "cola": _two_splits(
        dict(columns=Columns(3, label=1), header=False),
        dict(columns=Columns(1)),
        labels=_BINARY,
        is_pair=False,
    ),
    # sentence, label. test: index, sentence.
    "sst-2": _two_splits(
        dict(columns=Columns(0, label=1)), dict(columns=Columns(1)), labels=_BINARY, is_pair=False
    ),
    # Quality, #1 ID, #2 ID, #1 String, #2 String. test: index in place of Quality.
    "mrpc": _two_splits(
        dict(columns=Columns(3, 4, label=0)), dict(columns=Columns(3, 4)), labels=_BINARY
    ),
    # id, qid1, qid2, question1, question2, is_duplicate. test: id, question1, question2.
    "qqp": _two_splits(
        dict(columns=Columns(3, 4, label=5, guid=0)),
        dict(columns=Columns(1, 2, guid=0)),
        labels=_BINARY,
    ),
    # index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score.
    "sts-b": _two_splits(
        dict(columns=Columns(7, 8, label=-1, guid=0)),
        dict(columns=Columns(7, 8, guid=0)),
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
        test=_Layout("diagnostic.tsv", Columns(1, 2, guid=0)),
    ),
    # XNLI-MT train: premise, hypo, label. XNLI dev/test: language, gold_label, ..., sentence1 (6),
    # sentence2 (7), ...
    "xnli": _GlueTask(
        labels=_NLI_LABELS,
        train=_Layout(
            os.path.join("multinli", "multinli.train.{language}.tsv"), Columns(0, 1, label=2)
        ),
        dev=_Layout("xnli.dev.tsv", Columns(6, 7, label=1), language_column=0),
        test=_Layout("xnli.test.tsv", Columns(6, 7), language_column=0),
        label_aliases=(("contradictory", "contradiction"),),
    ),
}


class GlueProcessor(TableProcessor):
    """Reads one GLUE task (or XNLI) from its distribution files in `data_dir`.

    Example:
      processor = GlueProcessor("mrpc")
      examples = processor.get_train_examples("glue_data/MRPC")  # guid "train-1", label "0" / "1"
    """

    def __init__(self, task_name, language="zh", skip_malformed_lines=False):
        """
        Args:
          task_name: a key of `GLUE_TASKS` ("cola", "mnli-mm", "xnli", ...).
          language: XNLI's language (file names and the dev / test rows kept).
          skip_malformed_lines: skip lines with too few columns (logged) instead of failing.
        """
        self.task_name = task_name
        self._task = GLUE_TASKS[task_name]
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
        data_rows = rows(path, "\t")
        if layout.header:
            next(data_rows, None)
        keep = None
        if layout.language_column is not None:

            def keep(fields):
                return fields[layout.language_column] == self.language

        guid_prefix = layout.guid_prefix or split
        return self._read_examples(
            path, data_rows, layout.columns, guid_prefix, self._check_label, keep
        )

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
