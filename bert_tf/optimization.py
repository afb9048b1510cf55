"""The original BERT optimizer as Keras 3 optimizers: AdamW without bias correction, LAMB, warmup + decay.

The update of google-research/bert `optimization.py`, step t = 0, 1, ... (the step count before the update):

    g      = clip_by_global_norm(gradients summed over replicas, 1.0)
    m      = beta_1 * m + (1 - beta_1) * g
    v      = beta_2 * v + (1 - beta_2) * g^2
    update = m / (sqrt(v) + epsilon) + weight_decay_rate * param     (no decay for LayerNorm / bias)
    param -= lr(t) * update

with no bias correction of m and v, and lr(t) = init_lr * t / num_warmup_steps while t < num_warmup_steps,
else init_lr * (1 - min(t, num_train_steps) / num_train_steps).
"""

import keras
import tensorflow as tf
from keras import ops

# A variable whose path contains any of these is neither decayed nor (in LAMB) layer-adapted.
NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_TYPES = ("adamw", "lamb")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `init_lr` over `num_warmup_steps`, then linear decay to 0 at `num_train_steps`.

    num_train_steps=None: no decay (`init_lr` after the warmup); the Keras API's default compile holds
    this until `fit` knows the number of steps.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps):
        if num_train_steps is not None and num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
        self.init_lr = float(init_lr)
        self.num_train_steps = None if num_train_steps is None else int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        if self.num_train_steps is None:
            decayed = ops.full_like(step, self.init_lr)
        else:
            total = float(self.num_train_steps)
            decayed = self.init_lr * (1.0 - ops.minimum(step, total) / total)
        if self.num_warmup_steps == 0:
            return decayed
        warmup = self.init_lr * step / float(self.num_warmup_steps)
        return ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
        }


class _BertOptimizer(keras.optimizers.Optimizer):
    """Shared parts: moments m and v, the decay mask, and clipping of the cross-replica gradient sum."""

    def __init__(
        self,
        learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        clip_norm=1.0,
        exclude_from_weight_decay=NO_DECAY_PATTERNS,
        name=None,
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.clip_norm = clip_norm
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m = self.add_optimizer_variables(var_list, "m")
        self._v = self.add_optimizer_variables(var_list, "v")
        # Paths are read here: update_step sees the backend tf.Variable, which lacks the Keras path.
        self._decays = [self._should_decay(v) for v in var_list]

    def _should_decay(self, variable):
        path = getattr(variable, "path", variable.name)
        return self.weight_decay_rate > 0 and not any(
            pattern in path for pattern in self.exclude_from_weight_decay
        )

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # The project's one use of Keras' private API: this overrides Keras' TensorFlow optimizer
        # method (and calls tf.__internal__'s maybe_merge_call as it does), because Keras clips each
        # replica's gradient before the cross-replica sum, and the original clips the sum, which is
        # what makes N replicas match one device on the same global batch. Keras' public apply()
        # has no step between the sum and the update. tests/test_optimizer_keras_internals.py holds
        # the Keras method this repeats, and fails when Keras changes it.
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        grads_and_vars = self._all_reduce_sum_gradients(list(zip(grads, variables, strict=True)))
        grads = [g for g, _ in grads_and_vars]
        if self.clip_norm:
            grads, _ = tf.clip_by_global_norm(grads, self.clip_norm)
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_tf_update_step,
            self._distribution_strategy,
            list(zip(grads, variables, strict=True)),
            learning_rate,
        )

    def _moments(self, gradient, variable):
        """Updates and returns (m, v, whether to decay) for one variable."""
        index = self._get_variable_index(variable)
        m, v = self._m[index], self._v[index]
        # Embedding gradients arrive as IndexedSlices; the original applied them dense too.
        gradient = tf.cast(tf.convert_to_tensor(gradient), variable.dtype)
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        return m, v, self._decays[index]

    def get_config(self):
        config = super().get_config()
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            clip_norm=self.clip_norm,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay),
        )
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(_BertOptimizer):
    """Adam with decoupled weight decay and no bias correction: the original BERT update.

    Example:
    ```python
    opt = AdamWeightDecay(WarmupLinearDecay(5e-5, num_train_steps=1000, num_warmup_steps=100))
    opt.apply_gradients(zip(grads, model.trainable_variables))
    ```
    """

    def __init__(self, learning_rate, name="adam_weight_decay", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        m, v, decay = self._moments(gradient, variable)
        update = m / (ops.sqrt(v) + self.epsilon)
        if decay:
            update = update + self.weight_decay_rate * variable
        self.assign_sub(variable, ops.cast(learning_rate, variable.dtype) * update)


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(_BertOptimizer):
    """LAMB (You et al., 2019): Adam with bias correction and a per-variable trust ratio.

    update = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * param
    param -= lr * (||param|| / ||update||) * update
    The trust ratio is 1 where either norm is 0 and for the variables excluded from weight decay.
    """

    def __init__(self, learning_rate, name="lamb", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        m, v, decay = self._moments(gradient, variable)
        step = ops.cast(self.iterations + 1, variable.dtype)
        m_hat = m / (1.0 - ops.power(self.beta_1, step))
        v_hat = v / (1.0 - ops.power(self.beta_2, step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        ratio = 1.0
        if decay:
            update = update + self.weight_decay_rate * variable
            param_norm = ops.norm(ops.reshape(variable, [-1]))
            update_norm = ops.norm(ops.reshape(update, [-1]))
            ratio = ops.where(
                (param_norm > 0) & (update_norm > 0),
                param_norm / update_norm,
                ops.ones_like(param_norm),
            )
        self.assign_sub(variable, ops.cast(learning_rate, variable.dtype) * ratio * update)


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw"):
    """The original BERT optimizer: warmup + linear decay, global-norm clipping at 1.0, weight decay 0.01.

    Args:
      init_lr: float, the peak learning rate.
      num_train_steps: int, steps after which the learning rate is 0.
      num_warmup_steps: int, steps of linear warmup from 0 (0: none).
      optimizer_type: "adamw" (the original) or "lamb".

    Returns:
      A keras.optimizers.Optimizer; `apply_gradients` in a replica context sums over replicas, then clips.

    Raises:
      ValueError: on an unknown optimizer_type or non-positive num_train_steps.
    """
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    if optimizer_type == "adamw":
        return AdamWeightDecay(schedule)
    if optimizer_type == "lamb":
        return Lamb(schedule)
    raise ValueError(f"optimizer_type must be one of {OPTIMIZER_TYPES}, got {optimizer_type!r}")
