"""Sentence-embedding data: (anchor, positive[, hard negative]) rows, and texts to embed.

A pairs file (train and dev) is tab-separated, one row per line and no header:

    anchor<TAB>positive[<TAB>hard negative]

or JSON lines `{"anchor": str, "positive": str, "negative": str (optional)}`. Every row of a file has
the same number of texts (2 or 3). The test file, what prediction embeds, holds one text per line
(test.txt), or JSON lines `{"text": str}`; an empty line is an empty text.

Each text is packed alone, `[CLS] text [SEP]` cut to max_seq_length as sentence-transformers cuts it
(its first max_seq_length - 2 word pieces), and a row's texts are stacked: features [T, S].

T = texts of a row (2 or 3; 1 for the test file), S = max_seq_length.
"""

import dataclasses
import json

import tensorflow as tf

from bert_tf.data.packing import pack_tokens, pad_to
from bert_tf.data.records import serialize_values
from bert_tf.errors import InputError
from bert_tf.file_io import read_lines

# Accepted names of each split's file, in the order they are looked for.
PAIR_FILE_NAMES = {
    "train": ("train.tsv", "train.jsonl"),
    "dev": ("dev.tsv", "dev.jsonl"),
    "test": ("test.txt", "test.jsonl"),
}
_SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
_ROW_KEYS = ("anchor", "positive", "negative")


@dataclasses.dataclass
class TextsRow:
    """One row of a file: its texts (anchor, positive[, negative]; or the one test text) and its line."""

    texts: list
    line: int


def read_pairs_file(path):
    """The rows of a pairs file (TSV or JSON lines, by its extension).

    Returns:
      A list of TextsRow of 2 or 3 texts each, the same count in every row.

    Raises:
      InputError: naming the file and line, for a row of another number of texts, an empty anchor or
        positive, bad JSON or a file without rows.
    """
    is_json = path.endswith(".jsonl")
    rows = []
    for number, line in read_lines(path):
        if not line.strip():
            continue
        texts = _json_row(line, path, number) if is_json else line.split("\t")
        if len(texts) not in (2, 3):
            raise InputError(
                f"{path}:{number}: a row holds an anchor, a positive and optionally a hard "
                f"negative (2 or 3 tab-separated texts), got {len(texts)}"
            )
        for key, text in zip(_ROW_KEYS[:2], texts[:2], strict=True):
            if not text.strip():
                raise InputError(f"{path}:{number}: the {key} is empty")
        if rows and len(texts) != len(rows[0].texts):
            raise InputError(
                f"{path}:{number}: {len(texts)} texts, but line {rows[0].line} has "
                f"{len(rows[0].texts)}: every row of a file has a hard negative, or none does"
            )
        rows.append(TextsRow(texts, number))
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def _json_row(line, path, number):
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{number}: not valid JSON ({error.msg})") from None
    if not isinstance(value, dict) or "anchor" not in value or "positive" not in value:
        raise InputError(f'{path}:{number}: a row needs {{"anchor": ..., "positive": ...}}')
    texts = [value[key] for key in _ROW_KEYS if key in value]
    if not all(isinstance(text, str) for text in texts):
        raise InputError(f"{path}:{number}: anchor, positive and negative must be strings")
    return texts


def read_texts_file(path):
    """The texts of a test file, one per line (or a JSON line's "text"), as TextsRow of one text."""
    rows = []
    for number, line in read_lines(path):
        if path.endswith(".jsonl"):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            if not isinstance(value, dict) or not isinstance(value.get("text"), str):
                raise InputError(f'{path}:{number}: a line needs {{"text": str}}')
            line = value["text"]
        rows.append(TextsRow([line], number))
    if not rows:
        raise InputError(f"{path}: no texts")
    return rows


def convert_row_to_feature(row, max_seq_length, tokenizer):
    """A row's texts, each `[CLS] text [SEP]` zero-padded to max_seq_length: {name: [T, S] lists}."""
    feature = {name: [] for name in _SEQUENCE_FEATURES}
    for text in row.texts:
        tokens, segment_ids = pack_tokens(tokenizer.tokenize(text), None, max_seq_length)
        ids = tokenizer.convert_tokens_to_ids(tokens)
        feature["input_ids"].append(pad_to(ids, max_seq_length))
        feature["input_mask"].append(pad_to([1] * len(ids), max_seq_length))
        feature["segment_ids"].append(pad_to(segment_ids, max_seq_length))
    return {**feature, "is_real_example": 1}


def feature_spec(num_texts, max_seq_length):
    """The TFRecord spec: int64 [T, S] sequences (stored flat) and is_real_example."""
    shape = [num_texts, max_seq_length]
    spec = {name: tf.io.FixedLenFeature(shape, tf.int64) for name in _SEQUENCE_FEATURES}
    spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def serialize_feature(feature):
    """A feature dict -> serialized tf.train.Example bytes, as feature_spec says."""
    num_texts, max_seq_length = len(feature["input_ids"]), len(feature["input_ids"][0])
    return serialize_values(feature, feature_spec(num_texts, max_seq_length))
