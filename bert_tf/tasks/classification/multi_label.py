"""Multi-label classification (`run_classifier.py --multi_label=True`): several labels per text, or none.

The classifier's model with a sigmoid per label in place of the softmax, trained with binary
cross-entropy (each label's positives weighed against its negatives by `--class_weights`, auto unless
given: with sparse labels the unweighted loss is lowest with every label under 0.5). A label is
predicted when its probability is over its threshold: `--threshold` for all, or each label's own, picked
on dev by `--tune_thresholds` and kept in task.json for prediction and the export. Everything else (the
tables, features cache, checkpoints, --init_checkpoint, sweeps, the export's serving contract) is the
classifier's: `MultiLabelTask` is a `ClassifierTask` that says only what differs (its label scheme,
its metrics and outputs).

B = batch, L = number of labels, N = examples.
"""

import dataclasses

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import metrics
from bert_tf.errors import InputError
from bert_tf.models.networks import classifier_network
from bert_tf.models.networks.classifier_network import DEFAULT_THRESHOLD, thresholds_of
from bert_tf.models.networks.task_info import write_task_info
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.data import multi_hot_labels
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_settings import MultiLabelSettings


def multi_label_loss(outputs, features, num_examples, positive_weights=None):
    """Binary cross-entropy, the mean over the L labels of an example, summed / num_examples.

    positive_weights: None or float [L]: each label's positive term is multiplied by its weight.
    """
    logits = tf.cast(outputs["logits"], tf.float32)  # [B, L]
    labels = tf.cast(features["label_ids"], tf.float32)  # [B, L]
    weights = 1.0 if positive_weights is None else tf.constant(positive_weights, tf.float32)
    per_label = tf.nn.weighted_cross_entropy_with_logits(labels, logits, weights)
    return tf.reduce_sum(tf.reduce_mean(per_label, axis=-1)) / num_examples


def evaluation_results(probabilities, gold, thresholds, labels):
    """eval_results.txt's values at `thresholds`: micro and macro F1, micro precision and recall,
    subset accuracy (every label right), eval_loss (binary cross-entropy, unweighted) and each
    label's F1 (`eval_f1_<label>`). A label nobody predicted and nobody has scores F1 0, as
    scikit-learn's zero_division=0."""
    probabilities = np.asarray(probabilities, np.float64)  # [N, L]
    gold = np.asarray(gold) > 0.5  # [N, L]
    predicted = probabilities > np.asarray(thresholds)
    true_positives = (predicted & gold).sum(axis=0)
    predicted_count, gold_count = predicted.sum(axis=0), gold.sum(axis=0)
    per_label_f1 = [
        _f1(*counts) for counts in zip(true_positives, predicted_count, gold_count, strict=True)
    ]
    clipped = np.clip(probabilities, 1e-7, 1 - 1e-7)
    bce = -(gold * np.log(clipped) + ~gold * np.log(1 - clipped))
    results = {
        "eval_micro_f1": _f1(true_positives.sum(), predicted_count.sum(), gold_count.sum()),
        "eval_macro_f1": float(np.mean(per_label_f1)),
        "eval_micro_precision": _ratio(true_positives.sum(), predicted_count.sum()),
        "eval_micro_recall": _ratio(true_positives.sum(), gold_count.sum()),
        "eval_subset_accuracy": float(np.mean((predicted == gold).all(axis=1))),
        "eval_loss": float(bce.mean()),
    }
    results.update({f"eval_f1_{label}": f1 for label, f1 in zip(labels, per_label_f1, strict=True)})
    results["loss"] = results["eval_loss"]
    return results


def _ratio(numerator, denominator):
    return float(numerator / denominator) if denominator else 0.0


def _f1(true_positives, predicted, gold):
    return _ratio(2 * true_positives, predicted + gold)


def tune_thresholds(probabilities, gold):
    """Each label's threshold that maximizes its F1 on these examples.

    The candidates are 0.5 and the midpoints between a label's consecutive distinct probabilities; of
    equal F1s, the one nearest 0.5 wins (so a label without dev positives keeps 0.5).

    Returns:
      A list of L floats.
    """
    probabilities, gold = np.asarray(probabilities, np.float64), np.asarray(gold) > 0.5
    thresholds = []
    for column, positives in zip(probabilities.T, gold.T, strict=True):
        values = np.unique(column)
        candidates = [DEFAULT_THRESHOLD, *((values[:-1] + values[1:]) / 2)]
        scores = [
            (_f1((over := column > t)[positives].sum(), over.sum(), positives.sum()), -abs(t - 0.5))
            for t in candidates
        ]
        thresholds.append(float(candidates[max(range(len(candidates)), key=scores.__getitem__)]))
    return thresholds


SPEC = TaskSpec.of(
    classifier_network.MULTI_LABEL_NETWORK,
    settings_class=MultiLabelSettings,
    variant_of=classification.SPEC,
    chosen_by="multi_label",
)


class MultiLabelTask(classification.ClassifierTask):
    """run_classifier.py --multi_label=True's task: several labels per text, or none."""

    spec = SPEC

    metric_name = "eval_micro_f1"
    multi_label = True

    @property
    def feature_format(self):
        return f"bert_tf multi-label features 1, separator {self.settings.label_separator!r}"

    def setup(self, settings):
        """The classifier's setup, then each label's threshold (`thresholds`): --threshold, else
        the checkpoint's run's when it goes on with a model, else 0.5."""
        settings = super().setup(settings)
        # Each label's threshold, recorded in task.json; --tune_thresholds changes it on dev.
        self.thresholds = self._thresholds(settings)
        return dataclasses.replace(settings, thresholds=self.thresholds)

    def recorded_changes(self):
        return {"thresholds": self.thresholds}

    def make_processor(self, settings):
        return multi_hot_labels.MultiLabelProcessor(
            settings.task_name,
            text_a_column=settings.text_a_column,
            text_b_column=settings.text_b_column,
            label_column=settings.label_column,
            has_header=settings.has_header,
            labels=settings.labels,
            data_dir=settings.data_dir,
            skip_malformed_lines=settings.skip_malformed_lines,
            separator=settings.label_separator,
        )

    def _thresholds(self, settings):
        """--threshold for every label; else the checkpoint's run's, when it goes on with a model."""
        if settings.threshold is not None:
            return [settings.threshold] * len(self.labels)
        info = None
        if not settings.do_train or self.run.resumes():
            info = self.run.checkpoint_task_info()
        if (
            info is not None
            and info.model_type == classifier_network.MULTI_LABEL_MODEL_TYPE
            and info.labels == self.labels
        ):
            return thresholds_of(info)
        return [DEFAULT_THRESHOLD] * len(self.labels)

    @property
    def class_weights_setting(self):
        """--class_weights as the run reads it: auto unless given (sparse labels need it)."""
        return self.settings.class_weights or "auto"

    def class_weights_of_flags(self):
        """Each label's weight of its positives (logged), or None; read only when training."""
        if not self.settings.do_train:
            return None
        value = self.class_weights_setting
        weights = multi_hot_labels.positive_weights(
            value, self.labels, lambda: [example.label for example in self.run.step_data("train")]
        )
        if weights is not None:
            shown = ", ".join(
                f"{label}={w:.4g}" for label, w in zip(self.labels, weights, strict=True)
            )
            logging.info("positive weights (--class_weights=%s): %s", value, shown)
        return weights

    def label_value(self, example):
        for label in example.label or ():
            if label not in self.label_map:
                where = example.source or example.guid
                raise InputError(f"{where}: label {label!r} is not one of {self.labels}")
        return multi_hot_labels.multi_hot(example.label, self.label_map)

    def example_features(self, example, index):
        # The classifier's features (windows included) of the example without its labels, which
        # are the multi-hot label_ids instead of one id.
        features = super().example_features(dataclasses.replace(example, label=None), index)
        return [{**feature, "label_ids": self.label_value(example)} for feature in features]

    def record_spec(self):
        spec = multi_hot_labels.feature_spec(self.settings.max_seq_length, len(self.labels))
        if self.windows:
            spec["text_index"] = tf.io.FixedLenFeature([], tf.int64)
        return spec

    def label_loss(self, outputs, features, num_examples):
        """Binary cross-entropy of each label (its positives weighed by the class weights)."""
        return multi_label_loss(outputs, features, num_examples, self.class_weights)

    def evaluate(self):
        path, info = self.features("eval")
        result = self.text_logits(path, info, self.settings.eval_batch_size, ["label_ids"])
        probabilities = _sigmoid(result["logits"])
        if self.settings.tune_thresholds:
            self.thresholds = tune_thresholds(probabilities, result["label_ids"])
            shown = ", ".join(
                f"{label}={t:.4g}" for label, t in zip(self.labels, self.thresholds, strict=True)
            )
            logging.info("thresholds tuned on dev: %s", shown)
            if self.run.is_chief:
                write_task_info(self.settings.output_dir, self.run.task_info())
        results = evaluation_results(
            probabilities, result["label_ids"], self.thresholds, self.labels
        )
        label_sets = [tuple(self._labels_over(row)) for row in probabilities]
        return self.run.evaluation_done(results, label_sets, "label set", self._collapse_hint())

    def _collapse_hint(self):
        """What the "learned nothing" WARNING says to try."""
        value = self.class_weights_setting
        if value == "none":
            # Sparse labels: unweighted binary cross-entropy is lowest with every label under 0.5.
            return (
                "sparse labels need --class_weights=auto (the default: each label's positives "
                f"weighed against its negatives), else {metrics.LEARNING_RATE_HINT}"
            )
        levers = "more --num_train_epochs, another --learning_rate"
        if not self.settings.tune_thresholds:
            levers += ", or --tune_thresholds=True (each label's threshold picked on dev)"
        return f"the labels are weighed already (--class_weights={value}); try {levers}"

    def _labels_over(self, probabilities):
        pairs = zip(self.labels, zip(probabilities, self.thresholds, strict=True), strict=True)
        return [label for label, (p, t) in pairs if p > t]

    def predict_test(self):
        """test_results.tsv: a header of the labels, then each example's probabilities; test_labels.tsv:
        each example's labels over their thresholds, joined by --label_separator (empty: none)."""
        path, info = self.features("predict")
        probabilities = _sigmoid(
            self.text_logits(path, info, self.settings.predict_batch_size)["logits"]
        )
        rows = ["\t".join(self.labels)] + [
            "\t".join(f"{p:.6f}" for p in row) for row in probabilities
        ]
        self.run.write_output("test_results.tsv", "".join(f"{row}\n" for row in rows))
        separator = self.settings.label_separator
        lines = [separator.join(self._labels_over(row)) for row in probabilities]
        self.run.write_output("test_labels.tsv", "".join(f"{line}\n" for line in lines))
        gold = self.test_label_ids()
        if gold is None:
            self.run.no_test_labels(self.test_source())
        else:
            results = evaluation_results(probabilities, gold, self.thresholds, self.labels)
            results["global_step"] = self.run.trainer().global_step
            self.run.write_test_results(results, self.test_source())
        return probabilities


def _sigmoid(logits):
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))


class MultiLabelRun(FineTuningRun):
    """One run_classifier.py --multi_label=True invocation: a FineTuningRun of a MultiLabelTask."""

    def __init__(self, settings):
        super().__init__(settings, MultiLabelTask)
