"""The training step and evaluation, each alone: no Trainer, no loop, no checkpoint.

The reference for a step is plain TensorFlow: the gradient of the whole batch's loss (a tape over the
batch at once) and SGD's update w - lr * g.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_training import ToyModel, toy_task

from bert_tf.training.evaluation import evaluate
from bert_tf.training.steps import TrainStep

LEARNING_RATE = 0.1


def _built(task, strategy):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = ToyModel(name="toy")
        model(task.dummy_batch(), training=False)
        optimizer = keras.optimizers.SGD(LEARNING_RATE)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def _batch(num_examples=16, seed=4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=[num_examples, 4]).astype(np.float32)
    return {
        "x": tf.constant(x),
        "y": tf.constant(x @ [1.0, -2.0, 0.5, 0.0] + 0.3, tf.float32),
        "weight": tf.constant(rng.integers(0, 3, size=[num_examples]), tf.float32),
    }


def _whole_batch_update(task, model, batch):
    """SGD's new weights and the loss, from one tape over the whole batch (the reference)."""
    normalizers = task.normalizer_fn(batch)
    with tf.GradientTape() as tape:
        loss = task.loss_fn(model(batch, training=True), batch, normalizers)["loss"]
    grads = tape.gradient(loss, model.trainable_variables)
    new = [
        v.numpy() - LEARNING_RATE * g.numpy()
        for v, g in zip(model.trainable_variables, grads, strict=True)
    ]
    return new, float(loss)


@pytest.mark.parametrize("micro_batches", [1, 2, 4])
def test_a_step_of_k_micro_batches_is_one_update_of_the_whole_batch(micro_batches):
    task, strategy, batch = toy_task(), tf.distribute.OneDeviceStrategy("/cpu:0"), _batch()
    model, optimizer = _built(task, strategy)
    expected, expected_loss = _whole_batch_update(task, model, batch)
    step = TrainStep(task, model, optimizer, strategy, num_accumulation_steps=micro_batches)

    tf.function(lambda features: strategy.run(step, args=(features,)))(batch)

    assert int(optimizer.iterations.numpy()) == 1  # one update, not one per micro-batch
    # Summation order differs from the reference's: float32 rounding (values ~1) only.
    for value, reference in zip(model.trainable_variables, expected, strict=True):
        np.testing.assert_allclose(value.numpy(), reference, rtol=1e-5, atol=1e-6)
    # The logged loss is the whole batch's, not a sum of micro-batch means.
    assert step.loss_sums.take()["loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert step.loss_sums.total("loss") == 0.0  # taken: the next interval starts from zero


def test_a_step_under_xla_is_the_same_update():
    task, strategy, batch = toy_task(), tf.distribute.OneDeviceStrategy("/cpu:0"), _batch()
    model, optimizer = _built(task, strategy)
    expected, _ = _whole_batch_update(task, model, batch)
    step = TrainStep(task, model, optimizer, strategy, num_accumulation_steps=2, jit_compile=True)
    tf.function(lambda features: strategy.run(step, args=(features,)))(batch)
    # XLA fuses and reorders the math: 1e-4 (an update moves these weights by 1e-2 or more).
    for value, reference in zip(model.trainable_variables, expected, strict=True):
        np.testing.assert_allclose(value.numpy(), reference, rtol=1e-4, atol=1e-5)


def test_loss_sums_add_up_the_steps_since_they_were_taken():
    task, strategy = toy_task(), tf.distribute.OneDeviceStrategy("/cpu:0")
    model, optimizer = _built(task, strategy)
    step = TrainStep(task, model, optimizer, strategy)
    run = tf.function(lambda features: strategy.run(step, args=(features,)))
    losses = []
    for seed in (1, 2, 3):
        batch = _batch(seed=seed)
        losses.append(_whole_batch_update(task, model, batch)[1])  # before this step's update
        run(batch)
    totals = step.loss_sums.take()
    assert set(totals) == {"loss", "squared_error"}
    assert totals["loss"] == pytest.approx(sum(losses), rel=1e-5)


def _weighted_errors(task, model, num_examples):
    """Each example's squared error and weight, computed on the whole input at once."""
    examples = next(iter(task.dataset_fn(tf.distribute.InputContext(), num_examples, False)))
    error = (model(examples)["prediction"].numpy() - examples["y"].numpy()) ** 2
    return error, examples["weight"].numpy()


def test_evaluation_reports_the_weighted_metric_over_all_examples_and_the_mean_batch_loss():
    task, strategy = toy_task(num_examples=24), tf.distribute.OneDeviceStrategy("/cpu:0")
    model, _ = _built(task, strategy)
    error, weight = _weighted_errors(task, model, 24)
    batch_losses = [
        (error[i : i + 8] * weight[i : i + 8]).sum() / (weight[i : i + 8].sum() + 1e-5)
        for i in (0, 8, 16)
    ]

    results = evaluate(task, model, strategy, 8)

    assert set(results) == {"loss", "mse"}
    # The metric pools every example (not a mean of batch means, which uneven weights would move).
    assert results["mse"] == pytest.approx((error * weight).sum() / weight.sum(), rel=1e-5)
    assert results["loss"] == pytest.approx(np.mean(batch_losses), rel=1e-5)


def test_evaluation_reads_at_most_max_steps_batches_and_an_empty_input_is_an_error():
    task, strategy = toy_task(num_examples=24), tf.distribute.OneDeviceStrategy("/cpu:0")
    model, _ = _built(task, strategy)
    error, weight = _weighted_errors(task, model, 24)
    first = evaluate(task, model, strategy, 8, max_steps=1)
    expected = (error[:8] * weight[:8]).sum() / weight[:8].sum()
    assert first["mse"] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="the eval input is empty"):
        evaluate(task, model, strategy, 32)  # 24 examples: no whole batch
