"""The weights' initial values: the original's truncated normal, drawn afresh for every weight.

Keras 3 gives the same values again each time one initializer object is called (an unseeded one
keeps the seed it drew when made), so an object shared by several weights would start them equal:
query, key and value alike, the position table a copy of the first word embeddings. The original
(`create_initializer` in google-research/bert's modeling.py, used by each `tf.get_variable`) draws
every variable independently; so does a new object per weight here.
"""

import keras


def truncated_normal(stddev):
    """A new TruncatedNormal(stddev) initializer, for one weight only."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
