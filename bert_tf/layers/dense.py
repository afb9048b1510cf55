"""A Dense layer over every token of a [B, S, H] tensor, as one 2-D matmul.

B = batch, S = sequence length, H = input width, U = the layer's units.
"""

import tensorflow as tf


def dense_over_tokens(dense, x, activation=None):
    """dense(x) for x [B, S, H] -> [B, S, U], computed on the [B*S, H] matrix of tokens.

    The same products and sums as dense(x). On a 3-D input Keras multiplies through a Tensordot, whose
    Reshape between the MatMul and the BiasAdd keeps TensorFlow's oneDNN rewrite from fusing the bias
    and the activation into the matmul; on a 2-D input the three run as one kernel (when the activation
    is the layer's own: applied after the layer's call, the rewrite left a tf.nn.gelu unfused).

    Args:
      dense: a built keras.layers.Dense.
      x: [B, S, H] float.
      activation: if given, applied instead of the layer's own activation (the same kernel and bias,
        cast to the layer's compute dtype as the layer would).
    """
    batch_size, seq_length = tf.shape(x)[0], tf.shape(x)[1]
    tokens = tf.reshape(x, [-1, x.shape[-1]])  # [B*S, H]
    if activation is None:
        tokens = dense(tokens)  # [B*S, U]
    else:
        dtype = dense.compute_dtype
        kernel, bias = float_kernel(dense), tf.cast(dense.bias, dtype)
        tokens = activation(tf.nn.bias_add(tf.matmul(tf.cast(tokens, dtype), kernel), bias))
    return tf.reshape(tokens, [batch_size, seq_length, dense.units])


def float_kernel(dense):
    """The [H, U] kernel `dense` multiplies by, in its compute dtype, with any LoRA update added.

    An int8 layer (`quantize("int8")`) stores kernel * scale rounded, one scale per output column:
    dividing by the scale gives the float kernel back (within half a step).
    """
    dtype = dense.compute_dtype
    if dense.quantization_mode is None:
        return tf.cast(dense.kernel, dtype)  # Keras' kernel property adds the LoRA update
    if dense.quantization_mode != "int8":
        raise ValueError(f"{dense.name}: quantization {dense.quantization_mode!r} is not supported")
    kernel = tf.cast(dense._kernel, dtype) / tf.cast(dense.kernel_scale, dtype)
    if dense.lora_enabled:
        update = tf.matmul(dense.lora_kernel_a, dense.lora_kernel_b)
        kernel += tf.cast(update * (dense.lora_alpha / dense.lora_rank), dtype)
    return kernel
