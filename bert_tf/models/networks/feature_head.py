"""FeatureHead: the feature-based tagger's head (BERT paper §5.3), over a frozen encoder's layers.

The chosen layers are combined (ELMo's scalar mix, concatenated, or one layer), then two BiLSTM
layers and a BertHead over the labels; every variable sits under GOOGLE_SCOPE in Google's format.
bert_tf/tasks/tagging/feature_based.py is the task around it.

B = batch, S = sequence length, K = layers read, H = hidden size, L = number of labels.
"""

import keras
import tensorflow as tf

from bert_tf.models.networks.task_head import BertHead

GOOGLE_SCOPE = "cls/feature_tagging/"
# The paper's head: "a randomly initialized two-layer 768-dimensional BiLSTM" (--lstm_size).
DEFAULT_LSTM_SIZE = 768


@keras.saving.register_keras_serializable(package="bert_tf")
class FeatureHead(keras.layers.Layer):
    """The layers' combination, dropout, two BiLSTM layers, then a BertHead over the labels.

    Inputs: layers [B, S, K, H] (any float dtype), input_mask int [B, S] (1 = real position).
    Outputs: float32 logits [B, S, L].
    """

    def __init__(
        self,
        num_labels,
        num_layers,
        hidden_size,
        combination=None,
        lstm_size=DEFAULT_LSTM_SIZE,
        google_scope=GOOGLE_SCOPE,
        dropout_rate=0.0,
        **kwargs,
    ):
        """
        Args:
          num_labels: L.
          num_layers, hidden_size: K and H of the input.
          combination: "weighted" (scalar mix), "concat", or None (K = 1: the layer itself).
          lstm_size: units of each direction of each BiLSTM layer (its output is 2 x lstm_size).
          google_scope: prefix of the head's names in a Google-format checkpoint.
          dropout_rate: on the combined features and on the BiLSTM's output.
        """
        super().__init__(**kwargs)
        self.num_labels, self.num_layers, self.hidden_size = num_labels, num_layers, hidden_size
        self.combination, self.lstm_size = combination, lstm_size
        self.google_scope, self.dropout_rate = google_scope, dropout_rate
        policy = self.dtype_policy
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=policy)
        # Two attributes, not a list: tf.train.Checkpoint does not see into Keras' tracked lists.
        self.bilstm_0, self.bilstm_1 = (
            keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_size, return_sequences=True, dtype=policy),
                name=f"bilstm_{i}",
                dtype=policy,
            )
            for i in range(2)
        )
        self.output_layer = BertHead(
            num_labels, 2 * lstm_size, google_scope, dropout_rate, name="output", dtype=policy
        )
        # The BiLSTM's output carries its mask; the logits at masked positions are never read.
        self.output_layer.supports_masking = True

    def build(self, input_shape=None):
        if self.combination == "weighted":
            self.layer_weights = self.add_weight(
                shape=(self.num_layers,), initializer="zeros", name="layer_weights"
            )
            self.gamma = self.add_weight(shape=(), initializer="ones", name="gamma")
        width = self.hidden_size * (self.num_layers if self.combination == "concat" else 1)
        self.bilstm_0.build((None, None, width))
        self.bilstm_1.build((None, None, 2 * self.lstm_size))
        self.output_layer.build()
        self.built = True

    def combine(self, layers):
        """[B, S, K, H] -> the BiLSTM's input: [B, S, H], or [B, S, K * H] for "concat"."""
        layers = tf.cast(layers, self.compute_dtype)
        if self.combination == "weighted":
            weights = tf.cast(tf.nn.softmax(self.layer_weights), self.compute_dtype)  # [K]
            mixed = tf.einsum("bskh,k->bsh", layers, weights)
            return tf.cast(self.gamma, self.compute_dtype) * mixed
        if self.combination == "concat":
            shape = tf.shape(layers)
            return tf.reshape(layers, [shape[0], shape[1], self.num_layers * self.hidden_size])
        return layers[:, :, 0]

    def call(self, layers, input_mask, training=None):
        mask = tf.cast(input_mask, tf.bool)  # [B, S]
        hidden = self.dropout(self.combine(layers), training=training)
        hidden = self.bilstm_0(hidden, mask=mask, training=training)  # [B, S, 2 * lstm_size]
        hidden = self.bilstm_1(hidden, mask=mask, training=training)
        return self.output_layer(hidden, training=training)  # [B, S, L]

    def google_variables(self):
        """{name in a Google-format checkpoint: variable}, every one under google_scope."""
        scope, names = self.google_scope, {}
        if self.combination == "weighted":
            names[f"{scope}scalar_mix/layer_weights"] = self.layer_weights
            names[f"{scope}scalar_mix/gamma"] = self.gamma
        for i, bilstm in enumerate((self.bilstm_0, self.bilstm_1)):
            for direction, lstm in (("fw", bilstm.forward_layer), ("bw", bilstm.backward_layer)):
                for part in ("kernel", "recurrent_kernel", "bias"):
                    names[f"{scope}bilstm_{i}/{direction}/{part}"] = getattr(lstm.cell, part)
        return {**names, **self.output_layer.google_variables()}

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "combination": self.combination,
            "lstm_size": self.lstm_size,
            "google_scope": self.google_scope,
            "dropout_rate": self.dropout_rate,
        }
