"""A long text classified whole: its windows, in the graph for the export, and their combination.

run_classifier.py --doc_stride cuts a text longer than S - 2 wordpieces into windows, as run_squad.py
does; every window is classified, and a text's windows combine into one row by the run's
--window_combination (weighted_mean, mean or max). The features file's windows come from
tasks/classification/data/features.py; the export makes the same windows in the graph (`text_windows`).

B = batch, S = sequence length, W = windows, T = texts, L = labels.
"""

import numpy as np
import tensorflow as tf

from bert_tf import metrics
from bert_tf.export import ID_FEATURES
from bert_tf.models.networks.task_info import WINDOW_COMBINATIONS


def text_windows(preprocessor, text, doc_stride):
    """run_classifier.py's windows of texts, in the graph (data_features' window features).

    Args:
      preprocessor: a GraphPreprocessor (its max_seq_length is S).
      text: tf.string [B].
      doc_stride: Python int.

    Returns:
      (features, text_index): {"input_ids", "input_mask", "segment_ids"} int32 [W, S'] and
      int32 [W], the text of each window, non-decreasing. Window k of a text of N pieces holds
      pieces k * s : min(k * s + M, N), M = S - 2, s = min(doc_stride, M), and a text has
      1 + ceil((N - M) / s) windows (1 when N <= M, an empty text included).
    """
    pieces = preprocessor.tokenize(text)  # [B, (N)]
    num_pieces = pieces.row_lengths()  # [B]
    window = preprocessor.max_seq_length - 2
    step = min(window, doc_stride)
    more = 1 + (num_pieces - window + step - 1) // step  # windows past the first: ceil((N - M) / s)
    counts = tf.where(num_pieces <= window, tf.ones_like(num_pieces), more)
    text_index = tf.repeat(tf.range(tf.shape(counts, out_type=tf.int64)[0]), counts)  # [W]
    starts = tf.ragged.range(counts).flat_values * step  # [W]
    ends = tf.minimum(starts + window, tf.gather(num_pieces, text_index))
    offset = tf.gather(pieces.row_splits, text_index)
    window_pieces = tf.gather(pieces.flat_values, tf.ragged.range(offset + starts, offset + ends))
    return preprocessor.pack([window_pieces]), tf.cast(text_index, tf.int32)


def window_signatures(preprocessor, model, info, outputs_of):
    """serving_default (text_a), preprocess (text_a -> the windows and text_index) and serve_ids
    (the windows -> outputs) of a classifier that combines its windows (combine_windows' rules)."""
    text_spec = [tf.TensorSpec([None], tf.string, name="text_a")]
    ids_specs = [tf.TensorSpec([None, None], tf.int32, name=name) for name in ID_FEATURES]
    ids_specs.append(tf.TensorSpec([None], tf.int32, name="text_index"))

    @tf.function(input_signature=text_spec)
    def preprocess(text_a):
        features, text_index = text_windows(preprocessor, text_a, info.settings.doc_stride)
        return {**features, "text_index": text_index}

    @tf.function(input_signature=ids_specs)
    def serve_ids(input_ids, input_mask, segment_ids, text_index):
        features = dict(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids)
        logits = tf.cast(model(features, training=False)["logits"], tf.float32)  # [W, L]
        multi_label = getattr(model, "multi_label", False)
        if model.is_regression:
            values = logits
        elif multi_label:
            values = tf.sigmoid(logits)
        else:
            values = tf.nn.log_softmax(logits, axis=-1)
        rule = info.settings.window_combination
        if rule == "max" and not model.is_regression:
            combined = tf.math.segment_max(values, text_index)
        elif rule != "weighted_mean":
            combined = tf.math.segment_mean(values, text_index)
        else:
            # combine_windows' weights: the text's wordpieces a window holds, at least 1.
            pieces = tf.maximum(tf.reduce_sum(input_mask, axis=-1) - 2, 1)
            weights = tf.cast(pieces, tf.float32)[:, None]
            total = tf.math.segment_sum(values * weights, text_index)
            combined = tf.math.divide_no_nan(total, tf.math.segment_sum(weights, text_index))
        if multi_label:  # back to logits, whose sigmoid is the combined probability
            combined = tf.math.log(combined) - tf.math.log1p(-combined)
        return outputs_of(combined)

    @tf.function(input_signature=text_spec)
    def serve(text_a):
        return serve_ids(**preprocess(text_a))

    return {"serving_default": serve, "preprocess": preprocess, "serve_ids": serve_ids}


def combine_windows(
    logits, text_index, rule, is_regression=False, num_tokens=None, multi_label=False
):
    """One row per text from its windows' logits [W, L], windows in text order.

    Args:
      logits: float [W, L].
      text_index: int [W], non-decreasing: the text of each window.
      rule: "weighted_mean": the mean of the windows' log-probabilities, each window weighted by
        the text's wordpieces it holds ([CLS] and [SEP] not counted; at least 1, for the one
        window of an empty text), so that a short last window counts for the few words it reads;
        "mean": their plain mean; "max": each label's largest log-probability. Any is a text's
        logits (softmax renormalizes them). Regression: the windows' scores averaged (weighted
        for "weighted_mean").
      is_regression: the logits are scores [W, 1].
      num_tokens: int [W], the windows' tokens (their input_mask's sum); "weighted_mean" only.
      multi_label: the logits are each label's own (a sigmoid each): the rule combines each
        label's probability, and the result is the logits of the combined probabilities.

    Returns:
      float64 [T, L].
    """
    if rule not in WINDOW_COMBINATIONS:
        raise ValueError(f"window combination {rule!r}: none of {WINDOW_COMBINATIONS}")
    logits = np.asarray(logits, np.float64)
    if multi_label:
        values = 1 / (1 + np.exp(-logits))
    else:
        values = logits if is_regression else metrics.log_softmax(logits)
    _, starts = np.unique(text_index, return_index=True)
    if rule == "max" and not is_regression:
        combined = np.maximum.reduceat(values, starts, axis=0)
    else:
        if rule == "weighted_mean":
            if num_tokens is None:
                raise ValueError("the weighted_mean rule needs the windows' num_tokens")
            weights = np.maximum(np.asarray(num_tokens, np.float64) - 2, 1)[:, None]
        else:
            weights = np.ones_like(values[:, :1])
        total = np.add.reduceat(values * weights, starts, axis=0)
        combined = total / np.add.reduceat(weights, starts, axis=0)
    if multi_label:
        with np.errstate(divide="ignore"):
            return np.log(combined) - np.log1p(-combined)
    return combined
