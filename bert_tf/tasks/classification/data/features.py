"""Classification examples -> the original run_classifier.py's features, and their TFRecord form.

    tokens:      [CLS] is this jack ##son ##ville ? [SEP] no it is not . [SEP] 0 0 ...
    segment_ids: 0     0  0    0    0     0       0 0     1  1  1  1   1 1     0 0 ...
    input_mask:  1 for each token, 0 for the padding

S = max_seq_length.
"""

import collections

import tensorflow as tf

from bert_tf.data.packing import Span, pack_tokens, pad_to, window_spans
from bert_tf.errors import InputError


def make_label_map(labels):
    """{label string: id} for labels in id order."""
    return {label: index for index, label in enumerate(labels)}


def label_id(example, label_map, is_regression):
    """The id of an example's label (its float score for regression); InputError naming its line."""
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


def parse_class_weights(value, labels, training_labels):
    """--class_weights as one float per label, in label order, or None for "none".

    Args:
      value: "none", "auto" (inverse frequency in the training data: n / (L * n_label), so that
        every label weighs as much in all as the others: scikit-learn's "balanced") or L
        comma-separated positive numbers.
      labels: the label strings in id order (L of them).
      training_labels: the training examples' label strings (auto only; a callable, read then).

    Returns:
      A list of L floats, or None.

    Raises:
      InputError: naming the flag, for a wrong count, a non-positive weight, or (auto) a label
        without a training example.
    """
    if value in (None, "", "none"):
        return None
    if value == "auto":
        counts = collections.Counter(training_labels())
        total = sum(counts.values())
        absent = [label for label in labels if not counts[label]]
        if absent:
            raise InputError(
                f"--class_weights=auto: label {absent[0]!r} has no training example to count"
            )
        return [total / (len(labels) * counts[label]) for label in labels]
    try:
        weights = [float(part) for part in value.split(",")]
    except ValueError:
        raise InputError(
            f"--class_weights={value}: auto, none or {len(labels)} comma-separated numbers"
        ) from None
    if len(weights) != len(labels) or min(weights) <= 0:
        raise InputError(
            f"--class_weights={value}: needs {len(labels)} positive numbers, one per label "
            f"{labels}, in that order"
        )
    return weights


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
        "label_ids": label_id(example, label_map, is_regression),
        "is_real_example": 1,
    }


def convert_example_to_window_features(
    example, label_map, max_seq_length, tokenizer, doc_stride, text_index, is_regression=False
):
    """A single text as overlapping windows, each packed [CLS] window [SEP], for long documents.

    The windows are the original run_squad.py's (packing.window_spans): at most S - 2 wordpieces,
    starting doc_stride apart, the last one reaching the end of the text; a text of at most S - 2
    pieces is one window, as is a text without pieces. Every window carries the example's label
    and `text_index`, which puts the windows' predictions back together.

    Returns:
      A list of convert_example_to_feature's dicts, each with "text_index".
    """
    if example.text_b:
        raise InputError(f"{example.source or example.guid}: windows are for single texts only")
    if max_seq_length < 3:
        raise InputError(f"--max_seq_length={max_seq_length} leaves no room for the text")
    pieces = tokenizer.tokenize(example.text_a)
    spans = window_spans(len(pieces), max_seq_length - 2, doc_stride) or [Span(0, 0)]
    label = label_id(example, label_map, is_regression)
    features = []
    for span in spans:
        tokens = ["[CLS]", *pieces[span.start : span.start + span.length], "[SEP]"]
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        features.append(
            {
                "input_ids": pad_to(input_ids, max_seq_length),
                "input_mask": pad_to([1] * len(input_ids), max_seq_length),
                "segment_ids": [0] * max_seq_length,
                "label_ids": label,
                "is_real_example": 1,
                "text_index": text_index,
            }
        )
    return features


def classifier_feature_spec(max_seq_length, is_regression=False, windows=False):
    """The TFRecord features, as the original's: int64 ids [S], label_ids int64 (float32 regression);
    with windows, the int64 text_index of each window's text too."""
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    spec = {
        "input_ids": sequence,
        "input_mask": sequence,
        "segment_ids": sequence,
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }
    if windows:
        spec["text_index"] = tf.io.FixedLenFeature([], tf.int64)
    return spec
