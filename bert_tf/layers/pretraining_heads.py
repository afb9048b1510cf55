"""The pretraining heads of the original run_pretraining.py: cls/predictions and cls/seq_relationship.

Each takes a BertConfig (bert_tf.modeling) for its sizes; BertPretrainingModel puts them on a BertModel.
B = batch, S = sequence length, H = hidden size, V = vocabulary size, P = max_predictions_per_seq.
"""

import keras
import tensorflow as tf

from bert_tf.layers.activations import ACTIVATIONS


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(keras.layers.Layer):
    """The original's cls/predictions: dense + activation + LayerNorm, then logits against the word embeddings.

    `embedding_table` is the encoder's [V, H] word-embedding weight (tied, not copied); the head owns only
    the transform and the [V] output_bias. It returns float32 logits; BertPretrainingModel applies the
    log-softmax.
    """

    def __init__(self, config, embedding_table, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.embedding_table = embedding_table
        self.transform = keras.layers.Dense(
            config.hidden_size,
            activation=ACTIVATIONS[config.hidden_act],
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range),
            name="transform",
            dtype=self.dtype_policy,
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, name="transform_LayerNorm", dtype=self.dtype_policy
        )

    def build(self, input_shape=None):
        hidden_shape = (None, None, self.config.hidden_size)
        self.transform.build(hidden_shape)
        self.layer_norm.build(hidden_shape)
        self.output_bias = self.add_weight(
            shape=(self.config.vocab_size,), initializer="zeros", name="output_bias"
        )
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        """[B, S, H] sequence output and [B, P] int32 positions -> [B, P, V] float32 logits."""
        hidden = tf.gather(sequence_output, masked_lm_positions, batch_dims=1)  # [B, P, H]
        hidden = self.layer_norm(self.transform(hidden))
        batch_size, num_predictions = tf.shape(hidden)[0], tf.shape(hidden)[1]
        # A [B*P, H] x [H, V] matmul: a batched [B, P, H] x [V, H] one broadcasts the table, and its
        # gradient then builds a [B, H, V] tensor before summing it (about 100 ms of a 1 s CPU
        # training step for BERT-mini).
        hidden = tf.reshape(hidden, [-1, self.config.hidden_size])
        table = tf.cast(self.embedding_table, self.compute_dtype)
        logits = tf.matmul(hidden, table, transpose_b=True)  # [B*P, V]
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        return tf.reshape(logits, [batch_size, num_predictions, self.config.vocab_size])


@keras.saving.register_keras_serializable(package="bert_tf")
class NextSentenceHead(keras.layers.Layer):
    """The original's cls/seq_relationship: [2, H] weights over the pooled output; label 1 = random next."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            shape=(2, self.config.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.config.initializer_range),
            name="output_weights",
        )
        self.output_bias = self.add_weight(shape=(2,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, pooled_output):
        """[B, H] pooled output -> [B, 2] float32 log-probabilities."""
        weights = tf.cast(self.output_weights, self.compute_dtype)
        logits = tf.matmul(pooled_output, weights, transpose_b=True)  # [B, 2]
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        return tf.nn.log_softmax(logits, axis=-1)
