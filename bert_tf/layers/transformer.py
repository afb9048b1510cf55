"""One post-LayerNorm transformer encoder block, the original's `transformer_model` loop body.

B = batch, S = sequence length, H = hidden size, I = intermediate size.
"""

import keras

from bert_tf.layers.activations import get_activation
from bert_tf.layers.attention import SelfAttention
from bert_tf.layers.dense import dense_over_tokens
from bert_tf.layers.initializer import truncated_normal


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerBlock(keras.layers.Layer):
    """x = LayerNorm(x + Dropout(Dense(SelfAttention(x)))); x = LayerNorm(x + Dropout(Dense(act(Dense(x))))).

    Example:
    ```python
    block = TransformerBlock(hidden_size=32, num_attention_heads=4, intermediate_size=64)
    out = block(tf.random.normal([2, 5, 32]), tf.ones([2, 5], tf.int32))  # [2, 5, 32]
    ```
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # === Config ===
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        # === Layers ===
        policy = self.dtype_policy
        self.attention = SelfAttention(
            hidden_size,
            num_attention_heads,
            dropout_rate=attention_probs_dropout_prob,
            initializer_range=initializer_range,
            name="attention",
            dtype=policy,
        )
        self.attention_output = keras.layers.Dense(
            hidden_size,
            kernel_initializer=truncated_normal(initializer_range),
            name="attention_output",
            dtype=policy,
        )
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, name="attention_output_LayerNorm", dtype=policy
        )
        # Training replaces the activation in call() (activations.TRAINING_ACTIVATIONS).
        self.intermediate = keras.layers.Dense(
            intermediate_size,
            activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range),
            name="intermediate",
            dtype=policy,
        )
        self.output_dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=truncated_normal(initializer_range),
            name="output",
            dtype=policy,
        )
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, name="output_LayerNorm", dtype=policy
        )
        self.dropout = keras.layers.Dropout(hidden_dropout_prob, dtype=policy)

    def build(self, input_shape):
        hidden_shape = (None, None, self.hidden_size)
        self.attention.build(hidden_shape)
        self.attention_output.build(hidden_shape)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate.build(hidden_shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(hidden_shape)
        self.built = True

    def call(self, hidden_states, input_mask, training=None):
        """Maps [B, S, H] hidden states (and the [B, S] or [B, S, S] mask) to the next layer's [B, S, H]."""
        context = self.attention(hidden_states, input_mask, training=training)
        attention_output = dense_over_tokens(self.attention_output, context)
        attention_output = self.dropout(attention_output, training=training)
        attention_output = self.attention_layer_norm(attention_output + hidden_states)
        activation = get_activation(self.hidden_act, training=True) if training else None
        intermediate = dense_over_tokens(
            self.intermediate, attention_output, activation
        )  # [B, S, I]
        layer_output = dense_over_tokens(self.output_dense, intermediate)
        layer_output = self.dropout(layer_output, training=training)
        return self.output_layer_norm(layer_output + attention_output)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            initializer_range=self.initializer_range,
        )
        return config
