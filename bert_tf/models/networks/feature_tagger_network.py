"""The feature-based tagger's network (BERT paper §5.3, Table 7): a frozen BERT's layers feed a BiLSTM.

The layers read (`feature_layers`, run_ner.py --feature_layers):

    embeddings               the embedding layer's output (after LayerNorm: the first block's input)
    second_to_last_hidden    the output of block N - 1
    last_hidden              the output of block N (the sequence output)
    weighted_sum_last_four   gamma * sum_k softmax(w)_k * block_k, k = N-3 .. N (ELMo's scalar mix,
                             with its learned scale gamma; w starts at 0, gamma at 1)
    concat_last_four         blocks N-3 .. N concatenated, [B, S, 4H]
    weighted_sum_all         the scalar mix of every block 1 .. N (the paper's "all 12 layers": the
                             embeddings are not one of them)

The head is feature_head.py's; the export runs the frozen encoder and the head on raw text
(tagging_serving.py).

B = batch, S = sequence length, K = layers read, H = hidden size, L = number of labels.
"""

import keras
import tensorflow as tf

from bert_tf.data.encoder_features import ENCODER_FEATURES, padding_window
from bert_tf.errors import InputError
from bert_tf.modeling import BertModel, _as_bert_config, _SavesBertConfig
from bert_tf.models.networks import tagging_serving
from bert_tf.models.networks.feature_head import DEFAULT_LSTM_SIZE, GOOGLE_SCOPE, FeatureHead
from bert_tf.models.networks.network_spec import NetworkSpec
from bert_tf.models.networks.task_info import FEATURE_LAYERS

MODEL_TYPE = "feature_tagger"


# Encoder blocks a choice needs: "last four" of fewer blocks is a misuse, not a shorter sum.
LAYERS_NEEDED = {"second_to_last_hidden": 2, "weighted_sum_last_four": 4, "concat_last_four": 4}


def layer_indices(feature_layers, num_hidden_layers):
    """The layers `feature_layers` reads, as indices into [embeddings, block 1, ..., block N].

    Raises:
      InputError: naming --feature_layers and the model's layer count, for a choice the model lacks.
    """
    if feature_layers not in FEATURE_LAYERS:
        raise InputError(
            f"--feature_layers must be one of {', '.join(FEATURE_LAYERS)}, got {feature_layers!r}"
        )
    n = num_hidden_layers
    needed = LAYERS_NEEDED.get(feature_layers, 1)
    if n < needed:
        raise InputError(
            f"--feature_layers={feature_layers} needs at least {needed} encoder layers, but the "
            f"model has num_hidden_layers={n}"
        )
    last_four = tuple(range(n - 3, n + 1))
    return {
        "embeddings": (0,),
        "second_to_last_hidden": (n - 1,),
        "last_hidden": (n,),
        "weighted_sum_last_four": last_four,
        "concat_last_four": last_four,
        "weighted_sum_all": tuple(range(1, n + 1)),
    }[feature_layers]


def encoder_layers(bert, inputs, indices):
    """The chosen layers of a BertModel in inference mode (no dropout): float [B, S, K, H].

    The one computation of the features, for the cache and for the model's raw-text path alike.
    """
    if indices == (0,):  # the embeddings alone: no block to run
        return bert.embedding_output(inputs)[:, :, None, :]
    every = [None, *bert(inputs, training=False)["encoder_outputs"]]
    if 0 in indices:
        every[0] = bert.embedding_output(inputs)
    return tf.stack([every[i] for i in indices], axis=2)


def combination(feature_layers):
    return (
        feature_layers.split("_")[0] if feature_layers.startswith(("weighted", "concat")) else None
    )


@keras.saving.register_keras_serializable(package="bert_tf")
class FeatureTagger(_SavesBertConfig, keras.Model):
    """A frozen BertModel and a FeatureHead: one label distribution per piece.

    Inputs: either BertModel's ("input_ids", "input_mask", "segment_ids", int32 [B, S]): the encoder
    computes the layers (the export); or "encoder_features" float32 [B, S, K, H] and "input_mask"
    (the cache: the encoder does not run). Other keys are ignored.
    Outputs: {"logits": float32 [B, S, L]}.

    Example:
    ```python
    model = FeatureTagger(BertConfig.from_preset("bert_mini"), 9, "concat_last_four", lstm_size=64)
    model({"input_ids": tf.constant([[101, 5616, 102]])})["logits"]  # [1, 3, 9]
    ```
    """

    task_name = MODEL_TYPE

    def __init__(self, config, num_labels, feature_layers, lstm_size=DEFAULT_LSTM_SIZE, **kwargs):
        kwargs.setdefault("name", "feature_tagger")
        super().__init__(**kwargs)
        self.config = config = _as_bert_config(config)
        self.num_labels, self.feature_layers, self.lstm_size = num_labels, feature_layers, lstm_size
        self.layer_indices = layer_indices(feature_layers, config.num_hidden_layers)
        self.head = FeatureHead(
            num_labels,
            len(self.layer_indices),
            config.hidden_size,
            combination(feature_layers),
            lstm_size,
            dropout_rate=config.hidden_dropout_prob,
            name="head",
            dtype=self.dtype_policy,
        )
        self.bert = BertModel(config, dtype=self.dtype_policy)
        self.bert.trainable = False  # frozen: the optimizer never sees its weights

    def build(self, input_shape=None):
        self.bert.build()  # built, not called: a run on cached features never runs it
        self.head.build()
        self.built = True

    def call(self, inputs, training=None):
        if ENCODER_FEATURES in inputs:
            layers = inputs[ENCODER_FEATURES]
        else:
            layers = encoder_layers(self.bert, inputs, self.layer_indices)
        input_mask = inputs.get("input_mask")
        if input_mask is None:
            input_mask = tf.ones(tf.shape(layers)[:2], tf.int32)
        return {"logits": self.head(layers, input_mask, training=training)}

    def dummy_inputs(self):
        """Cached-feature inputs: they build every weight without running the encoder."""
        window = padding_window(len(self.layer_indices), self.config.hidden_size, length=2)
        return {ENCODER_FEATURES: window[ENCODER_FEATURES][None], "input_mask": tf.ones([1, 2])}

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "feature_layers": self.feature_layers,
            "lstm_size": self.lstm_size,
        }


def build_model(bert_config, info):
    """The feature-based tagger of a run's TaskInfo (labels, feature_layers, lstm_size)."""
    # A TaskInfo that records no choice (none of a feature-based run's) reads the last layer.
    return FeatureTagger(
        bert_config,
        len(info.labels),
        info.settings.feature_layers or "last_hidden",
        info.settings.lstm_size or DEFAULT_LSTM_SIZE,
    )


def info_from_google_head(shape):
    raise InputError(
        "a feature-based tagger's checkpoint needs its run's task.json beside it (its "
        "feature_layers and lstm_size)"
    )


NETWORK = NetworkSpec(
    name=MODEL_TYPE,
    build_model=build_model,
    export_model=tagging_serving.export_model,
    google_head=f"{GOOGLE_SCOPE}output_weights",
    info_from_google_head=info_from_google_head,
)
