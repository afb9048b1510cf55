"""Word + position + token-type embeddings, LayerNorm and dropout, as in the original embedding_postprocessor.

B = batch, S = sequence length, H = hidden size, V = vocabulary size.
"""

import keras
import tensorflow as tf

from bert_tf.layers.initializer import truncated_normal


def _check_sequence_length(input_ids, max_position_embeddings):
    """Returns input_ids, checked to be at most max_position_embeddings long.

    A length known only at run time is checked in the graph; the returned tensor depends on that
    check, so nothing computed from it can fail first with a less clear shape error.
    """
    seq_length = input_ids.shape[1]
    if seq_length is not None and seq_length > max_position_embeddings:
        raise ValueError(
            f"Sequence length {seq_length} exceeds max_position_embeddings "
            f"({max_position_embeddings}) of the BertConfig"
        )
    if seq_length is None:
        check = tf.debugging.assert_less_equal(
            tf.shape(input_ids)[1],
            max_position_embeddings,
            message=f"Sequence length exceeds max_position_embeddings ({max_position_embeddings})",
        )
        with tf.control_dependencies([check]):
            input_ids = tf.identity(input_ids)
    return input_ids


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
    """Sums the three embeddings of each token, then LayerNorm (epsilon 1e-12) and dropout.

    Example:
    ```python
    layer = BertEmbeddings(vocab_size=100, hidden_size=32, max_position_embeddings=64)
    out = layer(tf.constant([[2, 5, 3]]), tf.constant([[0, 0, 1]]))  # [1, 3, 32]
    ```
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings,
        type_vocab_size=2,
        dropout_rate=0.1,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # === Config ===
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        # === Layers ===
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, name="LayerNorm", dtype=self.dtype_policy
        )
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.word_embeddings = self.add_weight(
            shape=(self.vocab_size, self.hidden_size),
            initializer=truncated_normal(self.initializer_range),
            name="word_embeddings",
            autocast=False,
        )
        self.token_type_embeddings = self.add_weight(
            shape=(self.type_vocab_size, self.hidden_size),
            initializer=truncated_normal(self.initializer_range),
            name="token_type_embeddings",
            autocast=False,
        )
        self.position_embeddings = self.add_weight(
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=truncated_normal(self.initializer_range),
            name="position_embeddings",
            autocast=False,
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=None):
        """Embeds [B, S] int32 token and segment ids into [B, S, H] (the compute dtype).

        Raises:
          ValueError: if S exceeds max_position_embeddings (InvalidArgumentError when S is only
            known at run time).
        """
        input_ids = _check_sequence_length(input_ids, self.max_position_embeddings)
        seq_length = tf.shape(input_ids)[1]
        dtype = self.compute_dtype
        # Gather, then cast: under mixed precision only the looked-up rows are cast. The tables are
        # not autocast (Keras would cast a whole [V, H] table to the compute dtype on every call,
        # before the lookup: 94 MB read per call for BERT-base's word table).
        word = tf.cast(tf.gather(self.word_embeddings, input_ids), dtype)  # [B, S, H]
        token_type = tf.cast(tf.gather(self.token_type_embeddings, segment_ids), dtype)
        position = tf.cast(self.position_embeddings[:seq_length], dtype)  # [S, H]
        embeddings = word + token_type + position[tf.newaxis]
        return self.dropout(self.layer_norm(embeddings), training=training)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
