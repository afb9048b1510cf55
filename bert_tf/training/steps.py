"""The training step: one optimizer update on a global batch, its gradient summed over k micro-batches.

Losses are normalized by GLOBAL counts (summed over replicas and accumulation micro-batches) that the
Trainable names in `normalizer_fn`, so the gradient summed over replicas and micro-batches equals the
one-device gradient of the whole global batch; the optimizer then sums over replicas and clips.

B = per-replica batch, k = num_accumulation_steps.
"""

import keras
import tensorflow as tf


class LossSums:
    """Per-replica sums of the training losses since they were last taken (for the progress line)."""

    def __init__(self, strategy, keys):
        with strategy.scope():
            self.variables = {
                key: tf.Variable(
                    0.0,
                    trainable=False,
                    synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.SUM,
                )
                for key in keys
            }

    def add(self, losses):
        """In a replica: adds this replica's {key: scalar float32 loss}."""
        for key, value in losses.items():
            self.variables[key].assign_add(value)

    def total(self, key="loss"):
        """The sum of `key` over the replicas since the last `take`."""
        return float(self.variables[key].read_value())

    def take(self):
        """{key: its sum over the replicas}, and starts the sums anew."""
        totals = {key: self.total(key) for key in self.variables}
        for var in self.variables.values():
            var.assign(tf.zeros_like(var))
        return totals


class TrainStep:
    """One optimizer update per call on this replica's B examples, split into k micro-batches.

    Call it in a replica (`strategy.run(step, args=(features,))`): the normalizers are summed over
    the replicas, each micro-batch's gradient is computed (in XLA with jit_compile) and summed, and
    the optimizer applies the sum once. The losses go to `loss_sums`.

    Example:
    ```python
    step = TrainStep(trainable, model, optimizer, strategy, num_accumulation_steps=4)
    strategy.run(step, args=(features,))  # features: this replica's [B, ...] batch, B divisible by 4
    ```
    """

    def __init__(
        self, trainable, model, optimizer, strategy, num_accumulation_steps=1, jit_compile=False
    ):
        """Traces nothing yet; runs the model once on trainable.dummy_batch() to learn the loss names."""
        self.trainable, self.model, self.optimizer = trainable, model, optimizer
        self.num_accumulation_steps = num_accumulation_steps
        self._grad_fn = (
            tf.function(self._compute_grads, jit_compile=True)
            if jit_compile
            else self._compute_grads
        )
        self._loss_keys = self._find_loss_keys()
        self.loss_sums = LossSums(strategy, self._loss_keys)

    def __call__(self, features):
        k = self.num_accumulation_steps
        context = tf.distribute.get_replica_context()
        normalizers = context.all_reduce(
            tf.distribute.ReduceOp.SUM, self.trainable.normalizer_fn(features)
        )
        if k == 1:
            grads, losses = self._grad_fn(features, normalizers)
        else:
            grads, losses = self._accumulate(features, normalizers, k)
        self.optimizer.apply(grads, self.model.trainable_variables)
        self.loss_sums.add(losses)

    def _accumulate(self, features, normalizers, k):
        """The gradient and losses summed over k micro-batches, in a tf.while_loop."""
        variables = self.model.trainable_variables
        # [B, ...] -> [k, B/k, ...]
        micro_batches = tf.nest.map_structure(
            lambda x: tf.reshape(x, [k, -1, *x.shape[1:]]), features
        )
        missing = set()  # variables without a gradient, found while tracing the body

        def body(i, grad_sums, loss_sums):
            micro = tf.nest.map_structure(lambda x: x[i], micro_batches)
            grads, losses = self._grad_fn(micro, normalizers)
            missing.update(j for j, g in enumerate(grads) if g is None)
            grads = [
                tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(grads, variables, strict=True)
            ]
            grad_sums = [s + g for s, g in zip(grad_sums, grads, strict=True)]
            loss_sums = {key: loss_sums[key] + losses[key] for key in loss_sums}
            return i + 1, grad_sums, loss_sums

        zero_losses = {key: tf.zeros([], tf.float32) for key in self._loss_keys}
        _, grads, losses = tf.while_loop(
            lambda i, *_: i < k,
            body,
            (tf.constant(0), [tf.zeros_like(v) for v in variables], zero_losses),
        )
        return [None if j in missing else g for j, g in enumerate(grads)], losses

    def _compute_grads(self, features, normalizers):
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            losses = self.trainable.loss_fn(outputs, features, normalizers)
            loss = losses["loss"]
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, self.model.trainable_variables)
        return grads, {key: tf.cast(value, tf.float32) for key, value in losses.items()}

    def _find_loss_keys(self):
        features = self.trainable.dummy_batch()
        normalizers = self.trainable.normalizer_fn(features)
        outputs = self.model(features, training=False)
        return sorted(self.trainable.loss_fn(outputs, features, normalizers))


def make_steps_fn(strategy, step, next_batch, input_steps, stop_flag):
    """A tf.function (iterator, num_steps) running `step` on num_steps global batches of `iterator`.

    Args:
      strategy: the tf.distribute strategy.
      step: the replica function of one update (a TrainStep).
      next_batch: (iterator) -> the next global batch for strategy.run.
      input_steps: the int64 variable counting the global batches taken; one more per step.
      stop_flag: a bool variable (preemption.StopSignal.flag): one process stops before its next
        step once it is set. Several workers must agree (collectives) and stop together after the
        call, so under multi-worker it is not read here.
    """
    stoppable = not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)

    @tf.function
    def steps_fn(iterator, num_steps):
        for _ in tf.range(num_steps):
            if stoppable and stop_flag:
                break
            strategy.run(step, args=(next_batch(iterator),))
            input_steps.assign_add(1)

    return steps_fn
