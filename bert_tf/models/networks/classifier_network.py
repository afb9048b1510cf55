"""The classifier's network: run_classifier.py's model of ids, its multi-label variant, their export.

The model is the original run_classifier.py's: BertModel, dropout 0.1 on the pooled output, then logits
= pooled @ output_weights^T + output_bias (a BertHead), with output_weights [num_labels, H] and
output_bias [num_labels] under those very names in Google's format (so the original's fine-tuned
checkpoints load, for prediction too). Regression (STS-B) has one output. The multi-label variant
(`--multi_label`) has one sigmoid per label instead of a softmax over them.

B = batch, S = sequence length, H = hidden size, L = number of labels (1 for regression).
"""

import functools

import keras
import tensorflow as tf

from bert_tf.export import serving_module, serving_signatures, write_saved_model
from bert_tf.models.networks.network_spec import NetworkSpec
from bert_tf.models.networks.task_head import BertTaskModel
from bert_tf.models.networks.task_info import LABELS_FILE, labels_text
from bert_tf.models.networks.text_windows import window_signatures

MODEL_TYPE = "classifier"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(BertTaskModel):
    """BertModel + a BertHead over the pooled output (dropout, then L logits).

    Inputs: BertModel's ("input_ids", "input_mask", "segment_ids", int32 [B, S]); other keys are ignored.
    Outputs: {"logits": float32 [B, L]} plus, for classification, "probabilities" (softmax) [B, L].

    Example:
    ```python
    model = BertClassifier(BertConfig.from_preset("bert_tiny"), num_labels=3)
    model({"input_ids": tf.constant([[101, 7592, 102]])})["probabilities"]  # [1, 3]
    ```
    """

    task_name = MODEL_TYPE

    def __init__(self, config, num_labels, is_regression=False, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        self.num_labels = 1 if is_regression else num_labels
        self.is_regression = is_regression
        super().__init__(config, self.num_labels, "pooled_output", **kwargs)

    def call(self, inputs, training=None):
        logits = self.logits(inputs, training=training)  # [B, L]
        if self.is_regression:
            return {"logits": logits}
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    def serving_outputs(self, logits, labels, info):
        """The export's outputs of logits [B, L] (combined windows' included): "probabilities" [B, L]
        and "label" [B] (of the strings `labels` [L]); for regression, "predictions" [B]."""
        if self.is_regression:
            return {"predictions": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        best = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities, "label": tf.gather(labels, best)}

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "is_regression": self.is_regression,
        }


def build_model(bert_config, info):
    """The classifier of a run's TaskInfo (its labels, regression or not)."""
    return BertClassifier(
        bert_config, max(len(info.labels or []), 1), is_regression=info.settings.is_regression
    )


def export_model(model, info, vocab_file, export_dir, version=None, freeze_weights=False):
    """Writes the classifier as a SavedModel serving raw text (docs/serving.md's contract).

    serving_default: text_a (and text_b for pair tasks) -> "probabilities" [B, L] and "label" [B]
    (the label string); for regression, "predictions" [B]. labels.txt lands in assets/. A model
    trained with --doc_stride classifies each text whole from its windows (`window_signatures`).
    """
    labels = list(info.labels or [])
    module = serving_module(model, info, vocab_file)
    label_strings = tf.constant(labels or [""], tf.string)
    outputs_of = functools.partial(model.serving_outputs, labels=label_strings, info=info)
    if info.settings.doc_stride:
        signatures = window_signatures(module.preprocessor, model, info, outputs_of)
    else:
        signatures = serving_signatures(
            module.preprocessor,
            lambda features: outputs_of(model(features, training=False)["logits"]),
            pair=info.settings.is_pair,
        )
    assets = {LABELS_FILE: labels_text(labels)} if labels else None
    return write_saved_model(
        export_dir, module, signatures, version=version, freeze=freeze_weights, assets=assets
    )


MULTI_LABEL_MODEL_TYPE = "multi_label"


DEFAULT_THRESHOLD = 0.5


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultiLabelClassifier(BertClassifier):
    """The classifier with a sigmoid per label: {"logits", "probabilities"} float32 [B, L].

    Example:
    ```python
    model = BertMultiLabelClassifier(BertConfig.from_preset("bert_tiny"), num_labels=4)
    model({"input_ids": tf.constant([[101, 7592, 102]])})["probabilities"]  # [1, 4], each in (0, 1)
    ```
    """

    task_name = MULTI_LABEL_MODEL_TYPE
    multi_label = True  # windows combine each label's probability (models/networks/text_windows.py)

    def __init__(self, config, num_labels, **kwargs):
        kwargs.setdefault("name", "bert_multi_label_classifier")
        kwargs.pop("is_regression", None)
        super().__init__(config, num_labels, **kwargs)

    def call(self, inputs, training=None):
        logits = self.logits(inputs, training=training)  # [B, L]
        return {"logits": logits, "probabilities": tf.sigmoid(logits)}

    def serving_outputs(self, logits, labels, info):
        """ "probabilities" [B, L] and "labels": string [B, K], the labels over their thresholds in
        label order, padded with "" to the most any input of the batch has."""
        probabilities = tf.sigmoid(logits)
        over = probabilities > tf.constant(thresholds_of(info), tf.float32)  # [B, L]
        names = tf.ragged.boolean_mask(tf.broadcast_to(labels, tf.shape(over)), over)
        return {"probabilities": probabilities, "labels": names.to_tensor(default_value="")}


def thresholds_of(info):
    """Each label's threshold in a TaskInfo: its own, else 0.5."""
    return list(info.settings.thresholds or [DEFAULT_THRESHOLD] * len(info.labels))


def build_multi_label_model(bert_config, info):
    return BertMultiLabelClassifier(bert_config, len(info.labels))


NETWORK = NetworkSpec(
    name=MODEL_TYPE,
    build_model=build_model,
    export_model=export_model,
    google_head="output_weights",
    # The original's fine-tuned checkpoints name no labels: "0", "1", ... (or a labels.txt beside).
    info_from_google_head=lambda shape: {
        "labels": [str(i) for i in range(shape[0])],
        "is_pair": True,
    },
)
MULTI_LABEL_NETWORK = NetworkSpec(
    name=MULTI_LABEL_MODEL_TYPE,
    build_model=build_multi_label_model,
    export_model=export_model,
    google_head="output_weights",
)
