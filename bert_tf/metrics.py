"""Whole-set evaluation metrics: GLUE's classification and regression scores.

Pure Python + numpy (no TensorFlow), so tools and tests use them without loading a model. Every value
is a fraction in [0, 1] (correlations in [-1, 1]), as the original run_classifier.py's eval_accuracy is.

- `glue_metrics(task_name, predictions, labels)`: the dict a GLUE task reports in eval_results.txt.
- `accuracy`, `f1_score` (binary), `matthews_corrcoef`, `pearson`, `spearman`: single scores that match
  scikit-learn's and scipy's definitions, including their values for degenerate inputs.
- `collapse(predictions, what, learning_rate, hint)`: a WARNING when every prediction is one value.

The SQuAD scores live in `bert_tf/squad_evaluation.py`, the CoNLL entity scores (conlleval's) in
`bert_tf/tasks/tagging/entity_metrics.py`.
"""

import math

import numpy as np
from absl import logging

__all__ = [
    "LEARNING_RATE_HINT",
    "accuracy",
    "collapse",
    "f1_score",
    "glue_metrics",
    "log_softmax",
    "matthews_corrcoef",
    "official_glue_metric",
    "pearson",
    "softmax",
    "spearman",
]

# --------------------------------------------------------------------------- classification and regression


LEARNING_RATE_HINT = "try a lower --learning_rate or a larger --warmup_proportion"


def collapse(predictions, what, learning_rate, hint=LEARNING_RATE_HINT):
    """Logs one WARNING when every prediction of an evaluation is the same: a run that learned nothing.

    Fine-tuning BERT can collapse to predicting one label (the original's optimizer has no bias
    correction, so a high learning rate early in training does it), and the metrics alone do not say so.

    Args:
      predictions: the dev set's predictions, flat and hashable (a label per text, a tag per word,
        an answer per question).
      what: what one prediction is ("label", "tag", "answer"), for the message.
      learning_rate: the run's peak learning rate, for the message.
      hint: what to try, for the message.

    Returns:
      "every dev <what> is <value>" when there are at least two predictions, all equal; else None.
    """
    values = set(predictions)
    if len(values) != 1 or len(predictions) < 2:
        return None
    collapsed = f"every dev {what} is {next(iter(values))!r}"
    logging.warning(
        "%s (all %d): the run learned nothing at --learning_rate=%g; %s",
        collapsed, len(predictions), learning_rate, hint,
    )  # fmt: skip
    return collapsed


def _paired(predictions, labels):
    """Both inputs as 1-D arrays of one length (at least one element)."""
    predictions = np.asarray(predictions).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if predictions.shape != labels.shape:
        raise ValueError(
            f"{predictions.size} predictions for {labels.size} labels; they must pair up"
        )
    if predictions.size == 0:
        raise ValueError("no predictions to score")
    return predictions, labels


def log_softmax(logits):
    """[..., C] logits -> float64 log-probabilities over the last axis (max-shifted, so no overflow)."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(logits):
    """[..., C] logits -> float64 probabilities over the last axis."""
    return np.exp(log_softmax(logits))


def accuracy(predictions, labels):
    """The fraction of predictions equal to their labels.

    Args:
      predictions: [N] predicted class ids (or any comparable values).
      labels: [N] true class ids.

    Returns:
      A float in [0, 1].

    Raises:
      ValueError: the lengths differ or N is 0.
    """
    predictions, labels = _paired(predictions, labels)
    return float(np.mean(predictions == labels))


def f1_score(predictions, labels, positive_label=1):
    """Binary F1 of the positive class, as GLUE reports it for MRPC and QQP (scikit-learn's `f1_score`).

    F1 = 2 tp / (2 tp + fp + fn); 0.0 when there are neither positive labels nor positive predictions.

    Args:
      predictions: [N] predicted class ids.
      labels: [N] true class ids.
      positive_label: the class whose F1 is reported (1 = "paraphrase" / "duplicate" in GLUE).

    Returns:
      A float in [0, 1].
    """
    predictions, labels = _paired(predictions, labels)
    predicted_positive = predictions == positive_label
    actually_positive = labels == positive_label
    true_positives = int(np.sum(predicted_positive & actually_positive))
    denominator = int(np.sum(predicted_positive)) + int(np.sum(actually_positive))
    return 2.0 * true_positives / denominator if denominator else 0.0


def matthews_corrcoef(predictions, labels):
    """Matthews correlation coefficient (CoLA's metric), multi-class as scikit-learn defines it.

    With the confusion matrix C, n samples, c = trace(C), t_k / p_k the true / predicted counts of class k:
    MCC = (c n - sum_k p_k t_k) / sqrt((n^2 - sum_k p_k^2) (n^2 - sum_k t_k^2)); 0.0 where that
    denominator is 0 (all labels, or all predictions, one class), as scikit-learn returns.

    Args:
      predictions: [N] predicted class ids.
      labels: [N] true class ids.

    Returns:
      A float in [-1, 1].
    """
    predictions, labels = _paired(predictions, labels)
    classes = np.unique(np.concatenate([predictions, labels]))
    true_counts = np.array([np.sum(labels == k) for k in classes], dtype=np.int64)
    predicted_counts = np.array([np.sum(predictions == k) for k in classes], dtype=np.int64)
    correct = int(np.sum(predictions == labels))
    n = int(labels.size)
    # Python ints: n^2 products overflow int64 long before a data set is large.
    covariance = correct * n - int(np.dot(predicted_counts, true_counts))
    predicted_spread = n * n - int(np.dot(predicted_counts, predicted_counts))
    true_spread = n * n - int(np.dot(true_counts, true_counts))
    if predicted_spread == 0 or true_spread == 0:
        return 0.0
    return covariance / math.sqrt(float(predicted_spread) * float(true_spread))


def pearson(x, y):
    """Pearson correlation of two samples (scipy's `pearsonr` statistic).

    Args:
      x: [N] numbers, N >= 2.
      y: [N] numbers.

    Returns:
      A float in [-1, 1]; NaN when either sample is constant (the correlation is undefined), as scipy.

    Raises:
      ValueError: the lengths differ or N < 2.
    """
    x, y = _paired(x, y)
    if x.size < 2:
        raise ValueError(f"a correlation needs at least 2 pairs, got {x.size}")
    x = x.astype(np.float64) - np.mean(x, dtype=np.float64)
    y = y.astype(np.float64) - np.mean(y, dtype=np.float64)
    x_norm, y_norm = np.linalg.norm(x), np.linalg.norm(y)
    if x_norm == 0.0 or y_norm == 0.0:
        return float("nan")
    # Normalising before the dot product keeps large inputs from overflowing (scipy does the same).
    return float(np.clip(np.dot(x / x_norm, y / y_norm), -1.0, 1.0))


def _average_ranks(values):
    """1-based ranks; tied values share the mean of their ranks (scipy.stats.rankdata "average")."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    # Group boundaries: the first index of each run of equal sorted values, and the end.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], values.size]
    ranks = np.empty(values.size, dtype=np.float64)
    for start, end in zip(starts, ends, strict=True):
        ranks[order[start:end]] = (start + 1 + end) / 2.0  # mean of ranks start+1 .. end
    return ranks


def spearman(x, y):
    """Spearman rank correlation: Pearson of the ranks, ties given their average rank (as scipy).

    Args:
      x: [N] numbers, N >= 2.
      y: [N] numbers.

    Returns:
      A float in [-1, 1]; NaN when either sample is constant.
    """
    x, y = _paired(x, y)
    return pearson(_average_ranks(x), _average_ranks(y))


def _glue_task(task_name):
    """'glue/STS-B', 'sts-b', 'stsb' -> 'stsb'; None -> ''."""
    name = (task_name or "").lower().removeprefix("glue/")
    return name.replace("-", "").replace("_", "")


def glue_metrics(task_name, predictions, labels, is_regression=None):
    """The scores a GLUE task reports; run_classifier.py writes each as `eval_<key>`.

    Keys by task (names as `--task_name` or `--tfds_name` spell them, any case, with or without
    "glue/" and dashes):
      - cola: `accuracy`, `matthews_corrcoef`.
      - mrpc, qqp: `accuracy`, `f1` (binary F1 of label id 1, "paraphrase" / "duplicate").
      - sts-b and any other regression: `pearson`, `spearman`, `corr` (their mean).
      - every other classification task (sst-2, mnli, mnli-mm, qnli, rte, wnli, xnli, users' own):
        `accuracy`.

    Args:
      task_name: the task's name, or None for a user's task.
      predictions: [N] predicted class ids, or predicted scores for regression.
      labels: [N] true class ids, or true scores.
      is_regression: True / False; None infers it: sts-b is regression, another task is when the
        predictions are floating point.

    Returns:
      {key: float}, keys in the order above.
    """
    task = _glue_task(task_name)
    if is_regression is None:
        is_regression = task == "stsb" or np.issubdtype(np.asarray(predictions).dtype, np.floating)
    if task == "stsb" or is_regression:
        pearson_r, spearman_r = pearson(predictions, labels), spearman(predictions, labels)
        return {"pearson": pearson_r, "spearman": spearman_r, "corr": (pearson_r + spearman_r) / 2}
    results = {"accuracy": accuracy(predictions, labels)}
    if task == "cola":
        results["matthews_corrcoef"] = matthews_corrcoef(predictions, labels)
    elif task in ("mrpc", "qqp"):
        results["f1"] = f1_score(predictions, labels, positive_label=1)
    return results


def official_glue_metric(task_name, is_regression=False):
    """The key of `glue_metrics` that GLUE ranks a task by (the BERT paper's dev metric).

    mrpc, qqp: "f1"; cola: "matthews_corrcoef"; sts-b and other regression: "pearson"; every other
    task: "accuracy".
    """
    task = _glue_task(task_name)
    if task == "stsb" or is_regression:
        return "pearson"
    return {"cola": "matthews_corrcoef", "mrpc": "f1", "qqp": "f1"}.get(task, "accuracy")
