"""Activation functions by the names bert_config.json uses.

The original's "gelu" is the tanh approximation; Hugging Face's "gelu" is the exact erf form, which is
"gelu_exact" here. A config must name the function its weights were trained with.

Both GELUs are tf.nn.gelu, whose graph TensorFlow's oneDNN rewrite recognises: after a 2-D MatMul and
BiasAdd (a Dense layer on [B*S, H] tokens) the three become one fused kernel. Written out as separate
ops, the GELU of BERT-base's [B*S, 3072] intermediate took as long as all the matmuls under
mixed_bfloat16 on an AMX CPU (each element-wise bfloat16 op is a separate pass over memory).
"""

import tensorflow as tf


def gelu(x):
    """The original BERT GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return tf.nn.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU with the exact normal CDF: 0.5 x (1 + erf(x / sqrt(2)))."""
    return tf.nn.gelu(x, approximate=False)


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


def get_activation(name):
    """Returns the activation function called `name` (a key of ACTIVATIONS).

    Raises:
      ValueError: if `name` is not one of ACTIVATIONS.
    """
    if name not in ACTIVATIONS:
        raise ValueError(f"Unknown hidden_act {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]
