"""Activation functions by the names bert_config.json uses.

The original's "gelu" is the tanh approximation; Hugging Face's "gelu" is the exact erf form, which is
"gelu_exact" here. A config must name the function its weights were trained with.
"""

import math

import tensorflow as tf


def gelu(x):
    """The original BERT GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def gelu_exact(x):
    """GELU with the exact normal CDF: 0.5 x (1 + erf(x / sqrt(2)))."""
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


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
