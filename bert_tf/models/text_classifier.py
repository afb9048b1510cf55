"""`BertTextClassifier`: run_classifier.py's model on raw strings (one text or pairs; single-label,
multi-label or regression).

It composes `BertPreprocessor` with the task model run_classifier.py trains
(bert_tf.models.networks.classifier_network's BertClassifier, or BertMultiLabelClassifier), and exports
with that task's export_model, the one export_saved_model.py calls.

N = texts, L = labels (1 for regression).
"""

import keras
import numpy as np

from bert_tf.models import arguments, classifier_windows, presets
from bert_tf.models.networks import classifier_network
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.models.networks.text_windows import WINDOW_COMBINATIONS
from bert_tf.models.preprocessor import BertPreprocessor, preprocessor_argument
from bert_tf.models.task import BertTask, doc_stride_argument, integer_labels, labels_array

# The peak learning rate of the default compile: the paper's 5e-5 (it picks among 5e-5, 3e-5 and
# 2e-5), the largest of its choices; a larger one can leave a small fine-tuning set at chance
# (measured in bench/results/history/RESULTS_2026-12-07.md, *The Keras API's `fit` against
# run_classifier.py*).
DEFAULT_LEARNING_RATE = 5e-5


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTextClassifier(BertTask):
    """Raw strings -> logits [N, L]: run_classifier.py's classifier.

    `predict` gives logits: softmax them for probabilities (a sigmoid each with multi_label), or
    read the score (regression). `export` writes run_classifier.py's export: serving_default takes
    text_a (and text_b for a model of text pairs) and gives "probabilities" and "label" ("labels"
    with multi_label; "predictions" for regression).

    Example:
    ```python
    classifier = BertTextClassifier.from_preset("uncased_L-12_H-768_A-12", num_classes=2)
    classifier.fit(x=["a great film", "dull"], y=[1, 0], batch_size=32, epochs=3)
    classifier.predict(["what a film"])  # logits [1, 2]
    classifier.save("classifier.keras")
    classifier.export("/models/classifier/1")
    ```
    """

    default_learning_rate = DEFAULT_LEARNING_RATE

    def __init__(
        self,
        preprocessor,
        bert_config,
        num_classes=None,
        multi_label=False,
        regression=False,
        labels=None,
        text_pairs=None,
        doc_stride=None,
        window_combination="weighted_mean",
        **kwargs,
    ):
        """
        Args:
          preprocessor: a BertPreprocessor (or its config).
          bert_config: a BertConfig, or a dict of bert_config.json keys.
          num_classes: L, the number of labels; None for regression.
          multi_label: several labels per text, a sigmoid each (run_classifier.py --multi_label).
          regression: one score per text, a squared-error loss (STS-B).
          labels: the label strings of the export's "label" output; default "0", "1", ...
          text_pairs: the model reads text pairs (True), single texts (False), or either until
            its first fit (None).
          doc_stride: read each single text whole, in windows of max_seq_length - 2 wordpieces
            starting this many apart (run_classifier.py --doc_stride): fit trains on every window
            with its text's label (a batch is batch_size texts' windows), predict and evaluate
            combine a text's windows by `window_combination` (weighted_mean, mean or max).
        """
        preprocessor = preprocessor_argument(preprocessor)
        bert_config = arguments.bert_config(bert_config)
        settings = _checked_settings(
            num_classes, multi_label, regression, text_pairs, doc_stride, window_combination
        )
        self.multi_label, self.regression = settings["multi_label"], settings["regression"]
        self.num_classes = _check_num_classes(num_classes, self.multi_label, self.regression)
        self.labels = _checked_labels(labels, self.num_classes, self.regression)
        self.text_pairs = settings["text_pairs"]
        self.doc_stride, self.window_combination = _check_windows(
            settings["doc_stride"], window_combination, self.text_pairs
        )
        arguments.at_most(
            "doc_stride",
            self.doc_stride,
            preprocessor.max_seq_length - 2,
            "max_seq_length - 2 (a window's wordpieces)",
        )
        if self.doc_stride is not None:
            self.text_pairs = False
        if self.multi_label:
            task_model = classifier_network.BertMultiLabelClassifier(bert_config, self.num_classes)
        else:
            task_model = classifier_network.BertClassifier(
                bert_config, self.num_classes, is_regression=self.regression
            )
        kwargs.setdefault("name", "bert_text_classifier")
        super().__init__(preprocessor, task_model, **kwargs)

    @classmethod
    def from_preset(
        cls,
        folder,
        num_classes=None,
        *,
        multi_label=None,
        regression=None,
        labels=None,
        text_pairs=None,
        doc_stride=None,
        window_combination=None,
        vocabulary=None,
        do_lower_case=None,
        max_seq_length=None,
    ):
        """A classifier of a preset folder (bert_tf.models.presets): the encoder of a release (a
        new head; num_classes required unless regression), or a fine-tuning run's whole model
        (its head, labels and settings from task.json).

        Raises:
          ValueError: one line naming the folder or the argument, before any model is built.
        """
        given = _checked_settings(
            num_classes,
            multi_label,
            regression,
            text_pairs,
            doc_stride,
            window_combination,
            optional=True,
        )
        if labels is not None:
            arguments.string_list("labels", labels, 0)
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        if preset.kind == "run":
            settings = _run_settings(preset, **given)
            labels = settings.pop("labels") if labels is None else labels
            heads = "required"
        else:
            settings = {
                **given,
                "multi_label": bool(multi_label),
                "regression": bool(regression),
                "window_combination": window_combination or "weighted_mean",
            }
            heads = "optional"
        # The arguments are checked before the preprocessor's tables are built.
        _check_num_classes(settings["num_classes"], settings["multi_label"], settings["regression"])
        _checked_labels(labels, settings["num_classes"], settings["regression"])
        _check_windows(settings["doc_stride"], settings["window_combination"], text_pairs)
        arguments.at_most(
            "doc_stride",
            settings["doc_stride"],
            preset.max_seq_length - 2,
            "max_seq_length - 2 (a window's wordpieces)",
        )
        model = cls(
            BertPreprocessor.of_preset(preset), preset.bert_config, labels=labels, **settings
        )
        presets.restore(model.task_model, preset, heads=heads)
        return model

    def call(self, inputs, training=None):
        """{"input_ids", "input_mask", "segment_ids"}: int32 [N, S] -> logits float32 [N, L]."""
        return self.task_model(inputs, training=training)["logits"]

    def dataset(self, columns, labels=None, batch_size=32, shuffle=False):
        """BertTask's batches, or with doc_stride batches of texts as their windows."""
        if self.doc_stride is None:
            return super().dataset(columns, labels, batch_size, shuffle)
        tokenizer = self.preprocessor.tokenizer
        return classifier_windows.windows_dataset(
            tokenizer, self.doc_stride, columns[0], labels, batch_size, shuffle
        )

    def predict(self, x, batch_size=None, **kwargs):
        """Logits float32 [N, L]; with doc_stride, each text's windows combined."""
        if self.doc_stride is None:
            return super().predict(x, batch_size=batch_size, **kwargs)
        dataset = self.dataset(self.check_texts(x), None, self._batch_size(batch_size))
        return classifier_windows.predict_texts(self, dataset, self.window_combination)

    def evaluate(self, x=None, y=None, batch_size=None, return_dict=False, **kwargs):
        """Keras' evaluate; with doc_stride, of the texts' combined logits (as run_classifier.py)."""
        if self.doc_stride is None:
            return super().evaluate(x, y, batch_size=batch_size, return_dict=return_dict, **kwargs)
        labels = self.check_labels(y, len(self.check_texts(x)[0]))
        logits = self.predict(x, batch_size=batch_size)
        results = {"loss": float(self.default_loss()(labels, logits))}
        for metric in self.default_metrics():
            metric.update_state(labels, logits)
            results[metric.name] = float(metric.result())
        return results if return_dict else list(results.values())

    def default_loss(self):
        if self.regression:
            return keras.losses.MeanSquaredError()
        if self.multi_label:
            return keras.losses.BinaryCrossentropy(from_logits=True)
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        if self.regression:
            return [keras.metrics.PearsonCorrelation(name="pearson")]
        if self.multi_label:  # logits over 0: probabilities over 0.5
            return [keras.metrics.BinaryAccuracy(name="binary_accuracy", threshold=0.0)]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def check_labels(self, y, num_examples, argument="y"):
        """int32 [N] labels in [0, L); float32 [N, L] of 0 and 1 (multi_label); float32 [N] scores.

        y may name the labels instead: a label string of `labels` per text, or (multi_label) a
        list of them per text.
        """
        default = self.labels == [str(i) for i in range(self.num_classes)]
        if not self.regression and not self.multi_label:
            y = arguments.label_ids(y, self.labels, default, argument)
            return integer_labels(y, num_examples, self.num_classes, argument)
        if self.multi_label:
            y = arguments.label_rows(y, self.labels, default, argument)
        labels = labels_array(y, num_examples, argument).astype(np.float32)
        if self.regression:
            if labels.ndim != 1:
                raise ValueError(f"{argument}: one score per text, got shape {labels.shape}")
            return labels
        if labels.shape != (num_examples, self.num_classes):
            raise ValueError(
                f"{argument}: multi-label targets must be [texts, num_classes] = "
                f"[{num_examples}, {self.num_classes}] of 0 and 1, got shape {labels.shape}"
            )
        if not np.isin(labels, (0.0, 1.0)).all():
            raise ValueError(f"{argument}: multi-label targets must be 0 or 1")
        return labels

    def task_info(self):
        """The TaskInfo run_classifier.py records for this model (its task.json)."""
        settings = {
            "is_pair": bool(self.text_pairs),
            "is_regression": self.regression,
            "doc_stride": self.doc_stride,
            "window_combination": self.window_combination,
        }
        return TaskInfo(
            model_type=self.task_model.task_name,
            bert_config=self.task_model.config,
            do_lower_case=self.preprocessor.do_lower_case,
            max_seq_length=self.preprocessor.max_seq_length,
            labels=self.labels or None,
            **settings,
        )

    def write_export(self, export_dir):
        info = self.task_info()
        return classifier_network.export_model(
            self.task_model, info, self.preprocessor.vocab_file, export_dir, version=1
        )

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
            "bert_config": self.task_model.config.to_dict(),
            "num_classes": None if self.regression else self.num_classes,
            "multi_label": self.multi_label,
            "regression": self.regression,
            "labels": self.labels,
            "text_pairs": self.text_pairs,
            "doc_stride": self.doc_stride,
            "window_combination": self.window_combination,
        }


def _checked_settings(
    num_classes, multi_label, regression, text_pairs, doc_stride, window_combination,
    optional=False,
):  # fmt: skip
    """The classifier's settings, each checked by type (None passes for those not given when
    `optional`, as from_preset takes them)."""
    return {
        "num_classes": arguments.integer("num_classes", num_classes, 1, optional=True),
        "multi_label": arguments.boolean("multi_label", multi_label, optional=optional),
        "regression": arguments.boolean("regression", regression, optional=optional),
        "text_pairs": arguments.boolean("text_pairs", text_pairs, optional=True),
        "doc_stride": doc_stride_argument(doc_stride),
        "window_combination": arguments.choice(
            "window_combination", window_combination, WINDOW_COMBINATIONS, optional=optional
        ),
    }


def _check_num_classes(num_classes, multi_label, regression):
    if regression:
        if multi_label:
            raise ValueError("regression and multi_label: choose one")
        if num_classes not in (None, 1):
            raise ValueError(f"num_classes={num_classes} with regression: a score is one output")
        return 1
    if num_classes is None:
        raise ValueError("num_classes is required (or regression=True)")
    minimum = 1 if multi_label else 2
    return arguments.integer("num_classes", num_classes, minimum)


def _checked_labels(labels, num_classes, regression):
    """The label strings: those given (one per class), else "0", "1", ...; none for regression."""
    if labels is None:
        return [] if regression else [str(i) for i in range(num_classes)]
    labels = arguments.string_list("labels", labels, 0)
    if regression and labels:
        raise ValueError(f"labels={labels} with regression: a score has no labels")
    if not regression and len(labels) != num_classes:
        raise ValueError(
            f"labels: {len(labels)} strings for num_classes={num_classes}; give one per class"
        )
    return labels


def _check_windows(doc_stride, window_combination, text_pairs):
    window_combination = arguments.choice(
        "window_combination", window_combination, WINDOW_COMBINATIONS
    )
    doc_stride = doc_stride_argument(doc_stride)
    if doc_stride is not None and text_pairs:
        raise ValueError("doc_stride reads single texts in windows, not text pairs")
    return doc_stride, window_combination


def _run_settings(
    preset, num_classes, multi_label, regression, text_pairs, doc_stride, window_combination
):
    """The classifier settings of a run's task.json, checked against the arguments given."""
    info, where = preset.task_info, f"the run in {preset.folder}"
    if info.model_type not in (
        classifier_network.MODEL_TYPE,
        classifier_network.MULTI_LABEL_MODEL_TYPE,
    ):
        raise ValueError(f"{where} trained a {info.model_type} model, not a classifier")
    is_multi_label = info.model_type == classifier_network.MULTI_LABEL_MODEL_TYPE
    run_classes = None if info.settings.is_regression else len(info.labels or [])
    for name, given, recorded in (
        ("num_classes", num_classes, run_classes),
        ("multi_label", multi_label, is_multi_label),
        ("regression", regression, info.settings.is_regression),
        ("text_pairs", text_pairs, info.settings.is_pair),
        ("doc_stride", doc_stride, info.settings.doc_stride),
        ("window_combination", window_combination, info.settings.window_combination),
    ):
        if given is not None and given != recorded:
            raise ValueError(f"{name}={given}, but {where} has {name}={recorded}")
    return {
        "num_classes": run_classes,
        "multi_label": is_multi_label,
        "regression": info.settings.is_regression,
        "text_pairs": info.settings.is_pair,
        "doc_stride": info.settings.doc_stride,
        "window_combination": info.settings.window_combination,
        "labels": info.labels,
    }
