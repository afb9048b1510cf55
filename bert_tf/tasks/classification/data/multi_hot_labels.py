"""Multi-label classification data: a label cell holding several labels, and their multi-hot features.

    text<TAB>label cell          labels           label_ids (labels: economy, politics, sport)
    Budget vote today<TAB>economy,politics   ("economy", "politics")   [1, 1, 0]
    Match report<TAB>sport                   ("sport",)                [0, 0, 1]
    Weather<TAB>                             ()                        [0, 0, 0]

Users' TSV / CSV tables only (`--task_name=tsv|csv`), read by `tables.ColumnsProcessor`'s columns. The
label set is the sorted union of the training file's labels (or `--labels`); a dev or test label
outside it is refused naming the file, the line and the label. L = number of labels, S = sequence length.
"""

import collections

import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.tasks.classification.data.features import parse_class_weights
from bert_tf.tasks.classification.data.tables import ColumnsProcessor


class MultiLabelProcessor(ColumnsProcessor):
    """A ColumnsProcessor whose label cells hold labels joined by `separator`; an empty cell, none.

    An example's `label` is the tuple of its labels, in the cell's order, without repeats.
    """

    def __init__(self, *args, separator=",", **kwargs):
        super().__init__(*args, **kwargs)
        if not separator:
            raise InputError("--label_separator must not be empty")
        self.separator = separator

    def _label_set(self, examples):
        return {label for example in examples for label in example.label}

    def _check_label(self, value, where, allowed):
        labels = tuple(dict.fromkeys(part.strip() for part in value.split(self.separator)))
        labels = tuple(label for label in labels if label)
        for label in labels:
            if allowed is not None and label not in allowed:
                origin = (
                    "--labels" if self._given_labels is not None else "the training file's labels"
                )
                raise InputError(f"{where}: label {label!r} is not one of {origin} {allowed}")
        return labels


def multi_hot(labels, label_map):
    """[L] floats: 1.0 for each of `labels` (a tuple of label strings), else 0.0."""
    values = [0.0] * len(label_map)
    for label in labels or ():
        values[label_map[label]] = 1.0
    return values


def positive_weights(value, labels, training_label_sets):
    """--class_weights of a multi-label run: each label's weight of its positives against its negatives.

    Args:
      value: "none"; "auto": n_negative / n_positive of each label in the training data (a rare
        label's few positives weigh as much in all as its many negatives); or L comma-separated
        positive numbers, in label order.
      labels: the label strings in id order.
      training_label_sets: () -> the training examples' label tuples (auto only).

    Returns:
      A list of L floats, or None for "none".

    Raises:
      InputError: naming the flag, for a wrong count or value, or (auto) a label that every training
        example has, or none does.
    """
    if value in (None, "", "none"):
        return None
    if value != "auto":
        return parse_class_weights(value, labels, training_labels=None)
    label_sets = training_label_sets()
    counts = collections.Counter(label for label_set in label_sets for label in label_set)
    weights = []
    for label in labels:
        positives, negatives = counts[label], len(label_sets) - counts[label]
        if not positives or not negatives:
            kind = "no" if not positives else "every"
            raise InputError(
                f"--class_weights=auto: {kind} training example has label {label!r}, so its "
                "positives cannot be weighed against its negatives"
            )
        weights.append(negatives / positives)
    return weights


def feature_spec(max_seq_length, num_labels):
    """The TFRecord features: the classifier's int64 ids [S], and label_ids float32 [L] (multi-hot)."""
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    return {
        "input_ids": sequence,
        "input_mask": sequence,
        "segment_ids": sequence,
        "label_ids": tf.io.FixedLenFeature([num_labels], tf.float32),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }
