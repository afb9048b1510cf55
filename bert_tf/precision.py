"""Mixed precision in the training loop: the dtype policies --mixed_precision names, building a model
under one, and dynamic loss scaling that every replica applies or skips alike."""

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


class SyncedLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Dynamic loss scaling whose skip-or-apply decision is the same on every replica and worker."""

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return finite
        num_finite = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(finite, tf.int32))
        return tf.equal(num_finite, context.num_replicas_in_sync)
