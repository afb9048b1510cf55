"""Multi-head self-attention with the original's additive mask.

B = batch, S = sequence length, H = hidden size, N = attention heads, D = H / N (head size).
"""

import math

import keras
import tensorflow as tf

from bert_tf.layers.dense import dense_over_tokens
from bert_tf.layers.initializer import truncated_normal

# Added to the attention logits of padding positions: exp(-10000) is 0 in float32, and -10000 still fits
# in float16 (the original's constant, kept so the numbers match).
MASK_ADDER = -10000.0


@keras.saving.register_keras_serializable(package="bert_tf")
class SelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over N heads, returning the heads' context concatenated.

    Query, key and value are separate [H, H] dense layers, as in Google's checkpoints. Softmax runs in
    float32 under a mixed-precision policy, except in bfloat16 inference (see `call`). The output
    projection lives in TransformerBlock.

    Example:
    ```python
    attention = SelfAttention(hidden_size=32, num_attention_heads=4)
    context = attention(tf.random.normal([2, 5, 32]), tf.ones([2, 5], tf.int32))  # [2, 5, 32]
    ```
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        dropout_rate=0.1,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) is not a multiple of "
                f"num_attention_heads ({num_attention_heads})"
            )
        # === Config ===
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        # === Layers ===
        self.query, self.key, self.value = (
            keras.layers.Dense(
                hidden_size,
                kernel_initializer=truncated_normal(initializer_range),
                name=name,
                dtype=self.dtype_policy,
            )
            for name in ("query", "key", "value")
        )
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape):
        for dense in (self.query, self.key, self.value):
            dense.build(input_shape)
        self.built = True

    def _split_heads(self, x):
        """[B, S, H] -> [B, N, S, D]."""
        batch_size, seq_length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, [batch_size, seq_length, self.num_attention_heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])

    def call(self, hidden_states, input_mask, training=None):
        """Attends from every position to every unmasked position.

        Args:
          hidden_states: [B, S, H] float.
          input_mask: [B, S] int or float, 1 for real tokens and 0 for padding; or [B, S, S], where
            [b, i, j] = 1 lets position i attend to position j (a causal mask).
          training: whether dropout is applied to the attention probabilities.

        Returns:
          [B, S, H] context, in the compute dtype.
        """
        query = self._split_heads(dense_over_tokens(self.query, hidden_states))  # [B, N, S, D]
        key = self._split_heads(dense_over_tokens(self.key, hidden_states))
        value = self._split_heads(dense_over_tokens(self.value, hidden_states))

        # Transposes once, then batched matmuls: tf.einsum("bqnd,bknd->bnqk") transposes inside every
        # call and again in each of its gradients (22% more CPU time for this block, forward and
        # backward, at BERT-mini training shapes). Same products, same sums: the same numbers.
        scores = tf.matmul(query, key, transpose_b=True)  # [B, N, S, S]
        mask = tf.cast(input_mask, tf.float32)
        # expand_dims rather than [:, tf.newaxis]: LiteRT has no kernel for a strided slice that
        # adds axes (the same values either way).
        if mask.shape.rank == 3:  # [B, S, S]: a mask per query position (causal attention)
            mask = tf.expand_dims(mask, 1)  # [B, 1, S, S]
        else:
            mask = tf.expand_dims(tf.expand_dims(mask, 1), 1)  # [B, 1, 1, S]
        adder = (1.0 - mask) * MASK_ADDER
        scale = 1.0 / math.sqrt(self.head_size)
        if self.compute_dtype == "bfloat16" and not training:
            # oneDNN's bfloat16 softmax keeps its maximum and sum in float32 and rounds once at the
            # end, as the float32 softmax's result is rounded here: this skips two casts and the
            # float32 element-wise ops around it. Training keeps float32, whose softmax
            # gradient runs element-wise ops, each slower in bfloat16 on CPU.
            scores = scores * tf.constant(scale, tf.bfloat16) + tf.cast(adder, tf.bfloat16)
            probs = tf.nn.softmax(scores, axis=-1)
        else:
            scores = tf.cast(scores, tf.float32) * scale + adder
            probs = tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.dropout(probs, training=training)

        context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])  # [B, S, N, D]
        batch_size, seq_length = tf.shape(context)[0], tf.shape(context)[1]
        return tf.reshape(context, [batch_size, seq_length, self.hidden_size])  # [B, S, H]

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
