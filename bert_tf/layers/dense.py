"""A Dense layer over every token of a [B, S, H] tensor, as one 2-D matmul.

B = batch, S = sequence length, H = input width, U = the layer's units.
"""

import tensorflow as tf


def dense_over_tokens(dense, x, activation=None):
    """dense(x) for x [B, S, H] -> [B, S, U], computed on the [B*S, H] matrix of tokens; then
    `activation`, if given (on the matrix, where oneDNN can fuse it too).

    The same products and sums as dense(x). On a 3-D input Keras multiplies through a Tensordot, whose
    Reshape between the MatMul and the BiasAdd keeps TensorFlow's oneDNN rewrite from fusing the bias
    and the activation into the matmul; on a 2-D input the three run as one kernel.
    """
    batch_size, seq_length = tf.shape(x)[0], tf.shape(x)[1]
    tokens = dense(tf.reshape(x, [-1, x.shape[-1]]))  # [B*S, U]
    if activation is not None:
        tokens = activation(tokens)
    return tf.reshape(tokens, [batch_size, seq_length, dense.units])
