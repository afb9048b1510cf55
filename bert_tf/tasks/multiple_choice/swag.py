"""Multiple choice (SWAG) data: reading SWAG's CSV files and JSON lines, features of one row per choice.

SWAG's train.csv / val.csv / test.csv have the header
`,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label` (the first,
unnamed column is a row index; test.csv has no label). Columns are found by name, so their order and any
extra columns do not matter. A JSON lines file holds one example per line:
`{"context": str, "choices": [str, ...], "label": int (optional), "id": (optional), "question": str
(optional)}`; "question" plays sent2's part and is empty when absent.

Each choice is packed as in the original BERT SWAG fine-tuning:

    [CLS] sent1 [SEP] sent2 ending [SEP]
    segment_ids: 0 over [CLS] sent1 [SEP], 1 over the rest

and a pair too long for max_seq_length is shortened longest-first (`packing.truncate_seq_pair`).

C = number of choices, S = max_seq_length.
"""

import csv
import dataclasses
import io
import json
import re

import numpy as np
import tensorflow as tf

from bert_tf.data.packing import pack_tokens, pad_to
from bert_tf.data.records import serialize_values
from bert_tf.errors import InputError
from bert_tf.file_io import read_text

_ENDING_COLUMN = re.compile(r"^ending(\d+)$")

# Accepted names of each split's file, in the order they are looked for: SWAG's CSV, then JSON lines.
SWAG_FILE_NAMES = {
    "train": ("train.csv", "train.jsonl"),
    "dev": ("val.csv", "dev.csv", "dev.jsonl", "val.jsonl"),
    "test": ("test.csv", "test.jsonl"),
}

_SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
_SCALAR_FEATURES = ("label_ids", "is_real_example")


@dataclasses.dataclass
class MultipleChoiceExample:
    """One multiple-choice question.

    Attributes:
      id: SWAG's row index column, the JSON "id", or else the example's index in its file (a str).
      context: the first segment (SWAG's sent1).
      start_ending: the start of every ending (SWAG's sent2; a JSON "question"), possibly "".
      endings: the choices, C of them.
      label: the index of the right ending, or None when the file has no labels.
      line: the 1-based line where the example starts in its file.
    """

    id: str
    context: str
    start_ending: str
    endings: list
    label: int | None
    line: int


def read_swag_csv(path, has_labels=None):
    """Reads a SWAG CSV file (quoted fields may hold commas, quotes and newlines).

    Args:
      path: the file.
      has_labels: whether to read the "label" column; None: if the header has one.

    Returns:
      A list of `MultipleChoiceExample`, one per row, with as many endings as the header has
      ending0, ending1, ... columns.

    Raises:
      InputError: naming the file and line, for invalid UTF-8, a missing column, a row with another
        number of fields than the header, or a label that is not an integer in [0, C); naming the file
        for a file without rows.
    """
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    header = next(reader, None)
    if header is None:
        raise InputError(f"{path}: empty file (expected a header line)")
    columns = {name.strip(): index for index, name in enumerate(header)}
    if has_labels is None:
        has_labels = "label" in columns
    ending_columns = _ending_columns(path, columns)
    required = ["sent1", "sent2"] + (["label"] if has_labels else [])
    missing = [name for name in required if name not in columns]
    if missing:
        raise InputError(f"{path}:1: no column {', '.join(missing)} in the header {header}")
    examples = []
    line = reader.line_num + 1
    for row in reader:
        if row:
            if len(row) != len(header):
                raise InputError(
                    f"{path}:{line}: {len(row)} fields, but the header has {len(header)}"
                )
            endings = [row[index] for index in ending_columns]
            examples.append(
                MultipleChoiceExample(
                    id=row[columns[""]] if "" in columns else str(len(examples)),
                    context=row[columns["sent1"]],
                    start_ending=row[columns["sent2"]],
                    endings=endings,
                    label=_label(path, line, row[columns["label"]], len(endings))
                    if has_labels
                    else None,
                    line=line,
                )
            )
        line = reader.line_num + 1
    if not examples:
        raise InputError(f"{path}: no examples (only a header)")
    return examples


def _ending_columns(path, columns):
    """The column indexes of ending0, ending1, ... (consecutive from 0)."""
    numbers = sorted(int(match[1]) for name in columns if (match := _ENDING_COLUMN.match(name)))
    if not numbers or numbers != list(range(len(numbers))):
        raise InputError(
            f"{path}:1: the header needs ending columns ending0, ending1, ... (found {numbers or 'none'})"
        )
    return [columns[f"ending{number}"] for number in numbers]


def _label(path, line, value, num_choices):
    """A label field as an int in [0, num_choices); InputError naming file and line otherwise."""
    try:
        label = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        label = None
    if label is None or not 0 <= label < num_choices:
        raise InputError(
            f"{path}:{line}: label {value!r} is not a choice index in [0, {num_choices})"
        )
    return label


def read_multiple_choice_jsonl(path):
    """Reads a JSON lines file of multiple-choice examples (see the module docstring); blank lines skip.

    Returns:
      A list of `MultipleChoiceExample`.

    Raises:
      InputError: naming the file and line, for invalid UTF-8 or JSON, a missing or mistyped key, a
        number of choices other than the first example's, a label on some examples but not all, or a
        label outside [0, C); naming the file for a file without examples.
    """
    examples = []
    for line, text in enumerate(read_text(path).split("\n"), start=1):
        if not text.strip():
            continue
        example = _jsonl_example(path, line, text, len(examples))
        if examples:
            first = examples[0]
            if len(example.endings) != len(first.endings):
                raise InputError(
                    f"{path}:{line}: {len(example.endings)} choices, but the first example "
                    f"(line {first.line}) has {len(first.endings)}"
                )
            if (example.label is None) != (first.label is None):
                raise InputError(
                    f"{path}:{line}: a label on some examples but not others (line {first.line} "
                    f"{'has none' if first.label is None else 'has one'})"
                )
        examples.append(example)
    if not examples:
        raise InputError(f"{path}: no examples")
    return examples


def _jsonl_example(path, line, text, index):
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{line}: not valid JSON ({error.msg})") from None
    if not isinstance(record, dict):
        raise InputError(f"{path}:{line}: expected a JSON object, got {type(record).__name__}")
    context = record.get("context")
    choices = record.get("choices")
    question = record.get("question", "")
    if not isinstance(context, str) or not isinstance(question, str):
        raise InputError(f'{path}:{line}: "context" (and "question", if given) must be strings')
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
        raise InputError(f'{path}:{line}: "choices" must be a non-empty list of strings')
    label = record.get("label")
    return MultipleChoiceExample(
        id=str(record.get("id", index)),
        context=context,
        start_ending=question,
        endings=choices,
        label=None if label is None else _label(path, line, label, len(choices)),
        line=line,
    )


def read_multiple_choice_file(path):
    """Reads a .csv file with read_swag_csv, anything else with read_multiple_choice_jsonl."""
    if path.lower().endswith(".csv"):
        return read_swag_csv(path)
    return read_multiple_choice_jsonl(path)


def convert_example_to_multiple_choice_feature(example, max_seq_length, tokenizer):
    """One example -> a feature dict of C packed choices.

    Returns:
      {"input_ids", "input_mask", "segment_ids": int lists [C][S], "label_ids": the label (0 when
      the example has none), "is_real_example": 1}.
    """
    context_tokens = tokenizer.tokenize(example.context)
    start_ending_tokens = tokenizer.tokenize(example.start_ending)
    feature = {name: [] for name in _SEQUENCE_FEATURES}
    for ending in example.endings:
        # Tokenizing sent2 and the ending apart gives the pieces of "sent2 ending": words split on spaces.
        ending_tokens = start_ending_tokens + tokenizer.tokenize(ending)
        tokens, segment_ids = pack_tokens(context_tokens, ending_tokens, max_seq_length)
        feature["input_ids"].append(pad_to(tokenizer.convert_tokens_to_ids(tokens), max_seq_length))
        feature["input_mask"].append(pad_to([1] * len(tokens), max_seq_length))
        feature["segment_ids"].append(pad_to(segment_ids, max_seq_length))
    return {**feature, "label_ids": example.label or 0, "is_real_example": 1}


def multiple_choice_feature_spec(num_choices, max_seq_length):
    """The TFRecord spec: int64 [C, S] sequences (stored flat) and int64 scalars."""
    shape = [num_choices, max_seq_length]
    spec = {name: tf.io.FixedLenFeature(shape, tf.int64) for name in _SEQUENCE_FEATURES}
    spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in _SCALAR_FEATURES})
    return spec


def serialize_multiple_choice_feature(feature):
    """A feature dict -> serialized tf.train.Example bytes ([C, S] lists flattened row by row), as
    multiple_choice_feature_spec says."""
    num_choices, max_seq_length = np.shape(feature["input_ids"])
    return serialize_values(feature, multiple_choice_feature_spec(num_choices, max_seq_length))
