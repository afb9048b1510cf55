"""bert_tf/optimization.py's one use of Keras' private API, held to the Keras it was written against.

`_BertOptimizer._backend_update_step` overrides Keras' TensorFlow optimizer method of that name (and
calls `tf.__internal__.distribute.interim.maybe_merge_call` as it does) to clip the gradients summed
over the replicas, as the original does, where Keras clips each replica's. These tests fail when
Keras changes that method, so the override is read again before it is trusted.
"""

import inspect
import json
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf
from keras.src.backend.tensorflow.optimizer import TFOptimizer

from bert_tf.optimization import AdamWeightDecay

from conftest import REPO_DIR, SUBPROCESS_ENV

# Keras 3's TFOptimizer._backend_update_step, which ours repeats with the clipping added.
KERAS_UPDATE_STEP = """
def _backend_update_step(self, grads, trainable_variables, learning_rate):
    trainable_variables = [
        v.value if isinstance(v, backend.Variable) else v
        for v in trainable_variables
    ]
    grads_and_vars = list(zip(grads, trainable_variables))
    grads_and_vars = self._all_reduce_sum_gradients(grads_and_vars)
    tf.__internal__.distribute.interim.maybe_merge_call(
        self._distributed_tf_update_step,
        self._distribution_strategy,
        grads_and_vars,
        learning_rate,
    )
"""


def test_the_keras_method_we_override_is_the_one_we_read():
    assert textwrap.dedent(inspect.getsource(TFOptimizer._backend_update_step)).strip() == (
        KERAS_UPDATE_STEP.strip()
    )
    assert "_backend_update_step" in vars(AdamWeightDecay.__mro__[1])  # ours overrides it
    for name in ("_all_reduce_sum_gradients", "_distributed_tf_update_step"):
        assert callable(getattr(TFOptimizer, name))
    assert callable(tf.__internal__.distribute.interim.maybe_merge_call)


_TWO_REPLICAS = """
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from bert_tf.optimization import AdamWeightDecay

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    kernel = keras.Variable([1.0, 2.0], name="kernel")
    optimizer = AdamWeightDecay(learning_rate=0.1)
    optimizer.build([kernel])

@tf.function
def step(scale):
    def replica_step():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        # Replica r's gradient: (r + 1) * scale * [3, 4]; their sum has norm 15 * scale.
        gradient = tf.cast(replica + 1, tf.float32) * scale * tf.constant([3.0, 4.0])
        optimizer.apply([gradient], [kernel])
    strategy.run(replica_step)

step(tf.constant(1.0))  # the sum is clipped from norm 15 to 1 (each replica's alone to 1 and 1)
step(tf.constant(0.01))  # norm 0.15: not clipped
print(json.dumps(kernel.numpy().tolist()))
"""


def test_two_replicas_clip_the_sum_of_their_gradients():
    result = subprocess.run(
        [sys.executable, "-c", _TWO_REPLICAS],
        capture_output=True, text=True, env=SUBPROCESS_ENV, cwd=REPO_DIR, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    kernel = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
    # The original's two steps in numpy: clip the summed gradient to norm 1, then AdamW without bias
    # correction (beta_1 0.9, beta_2 0.999, epsilon 1e-6), weight decay 0.01, learning rate 0.1.
    # The second step's update depends on how far the first gradient was clipped: clipping each
    # replica's before the sum gives [1.2, 1.6] there, and other weights.
    weights, m, v = np.array([1.0, 2.0]), np.zeros(2), np.zeros(2)
    for summed in (np.array([9.0, 12.0]), np.array([0.09, 0.12])):
        gradient = summed / max(1.0, np.linalg.norm(summed))
        m, v = 0.9 * m + 0.1 * gradient, 0.999 * v + 0.001 * gradient**2
        weights = weights - 0.1 * (m / (np.sqrt(v) + 1e-6) + 0.01 * weights)
    np.testing.assert_allclose(kernel, weights, rtol=1e-5)
