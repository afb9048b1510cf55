"""Mixed precision: the dtype policies --mixed_precision names, building a model under one, dynamic loss
scaling that every replica applies or skips alike, and the export-only storage of a mixed model's
matrices in its compute dtype."""

import keras
import tensorflow as tf

MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def build_with_policy(build_model, policy):
    """Builds the model under a dtype policy without leaving the policy set for the rest of the process."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        return build_model()
    finally:
        keras.config.set_dtype_policy(previous)


def _matrices_read_in_compute_dtype(model):
    """[(Keras variable, compute dtype)] for the variables of `model` that a mixed policy casts on every
    call: the Dense kernels and the embedding tables (biases, LayerNorm and head weights are left
    alone)."""
    from bert_tf.layers.embeddings import BertEmbeddings

    variables = []
    for layer in model._flatten_layers(include_self=True, recursive=True):
        policy = layer.dtype_policy
        if policy.compute_dtype == policy.variable_dtype:
            continue
        if isinstance(layer, keras.layers.Dense):
            variables.append((layer.kernel, policy.compute_dtype))
        elif isinstance(layer, BertEmbeddings):
            tables = (layer.word_embeddings, layer.token_type_embeddings, layer.position_embeddings)
            variables.extend((table, policy.compute_dtype) for table in tables)
    return variables


def store_in_compute_dtype(model):
    """Stores the Dense kernels and embedding tables of a mixed-precision model in its compute dtype.

    Under mixed_bfloat16 every call casts each float32 kernel to bfloat16 (and the embedding tables
    whole, before the lookup): about 18% of a BERT-base batch, and at batch 1 twice the bytes read
    from memory. A stored copy is the same rounding done once, so the outputs are bit-identical.
    For exports only: the model can no longer train or write a float32 checkpoint afterwards.

    Returns:
      The number of variables converted.
    """
    variables = _matrices_read_in_compute_dtype(model)
    for variable, dtype in variables:
        # A Keras 3 variable keeps its storage in `_value` (the tf.Variable the export tracks and
        # its signatures read) and its type in `_dtype`; under an autocast scope of the same type
        # it is read without a cast.
        stored = tf.Variable(tf.cast(variable.value, dtype), trainable=False, name=variable.name)
        variable._value, variable._dtype = stored, dtype
    return len(variables)


class SyncedLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Dynamic loss scaling whose skip-or-apply decision is the same on every replica and worker."""

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return finite
        num_finite = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(finite, tf.int32))
        return tf.equal(num_finite, context.num_replicas_in_sync)
