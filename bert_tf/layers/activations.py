"""Activation functions by the names bert_config.json uses.

The original's "gelu" is the tanh approximation; Hugging Face's "gelu" is the exact erf form, which is
"gelu_exact" here. A config must name the function its weights were trained with.

Both GELUs are tf.nn.gelu, whose graph TensorFlow's oneDNN rewrite recognises: after a 2-D MatMul and
BiasAdd (a Dense layer on [B*S, H] tokens) the three become one fused kernel. Written out as separate
ops, the GELU of BERT-base's [B*S, 3072] intermediate took as long as all the matmuls under
mixed_bfloat16 on an AMX CPU (each element-wise bfloat16 op is a separate pass over memory).

Training cannot use that fused kernel (the gradient needs the GELU's input), and the gradient TensorFlow
derives for tf.nn.gelu is ~10 element-wise ops, each ~3.5x slower in bfloat16 than in float32 on CPU.
TRAINING_ACTIVATIONS holds GELUs with a hand-written gradient computed in float32 instead: 3x faster
under mixed_bfloat16 (and more accurate), the same values in float32 up to rounding.
"""

import math

import tensorflow as tf


def gelu(x):
    """The original BERT GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return tf.nn.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU with the exact normal CDF: 0.5 x (1 + erf(x / sqrt(2)))."""
    return tf.nn.gelu(x, approximate=False)


def _gelu_float32_gradient(approximate):
    """A GELU whose forward and gradient run in float32, whatever the input dtype."""
    coefficient = math.sqrt(2.0 / math.pi)

    @tf.custom_gradient
    def gelu_function(x):
        x32 = tf.cast(x, tf.float32)
        y = tf.cast(tf.nn.gelu(x32, approximate=approximate), x.dtype)

        def gradient(dy):
            if approximate:  # d/dx 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3)
                t = tf.tanh(coefficient * (x32 + 0.044715 * x32 * x32 * x32))
                derivative = 0.5 * (1.0 + t) + 0.5 * x32 * (1.0 - t * t) * coefficient * (
                    1.0 + 3 * 0.044715 * x32 * x32
                )
            else:  # d/dx x Phi(x) = Phi(x) + x phi(x)
                cdf = 0.5 * tf.math.erfc(x32 * -(1.0 / math.sqrt(2.0)))
                pdf = tf.exp(-0.5 * x32 * x32) * (1.0 / math.sqrt(2.0 * math.pi))
                derivative = cdf + x32 * pdf
            return tf.cast(tf.cast(dy, tf.float32) * derivative, x.dtype)

        return y, gradient

    return gelu_function


def swish(x):
    """x * sigmoid(x) (also called SiLU)."""
    return x * tf.sigmoid(x)


def linear(x):
    return x


ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "swish": swish,
    "linear": linear,
}


# The same functions, for a forward pass that will be differentiated.
TRAINING_ACTIVATIONS = {
    **ACTIVATIONS,
    "gelu": _gelu_float32_gradient(approximate=True),
    "gelu_exact": _gelu_float32_gradient(approximate=False),
}


def get_activation(name, training=False):
    """Returns the activation function called `name` (a key of ACTIVATIONS); with training=True, its
    TRAINING_ACTIVATIONS form.

    Raises:
      ValueError: if `name` is not one of ACTIVATIONS.
    """
    if name not in ACTIVATIONS:
        raise ValueError(f"Unknown hidden_act {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return (TRAINING_ACTIVATIONS if training else ACTIVATIONS)[name]
