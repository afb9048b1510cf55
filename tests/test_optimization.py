"""bert_tf.optimization against hand-computed numbers and a numpy transcription of the original update."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.optimization import WarmupLinearDecay, create_optimizer


def _variable(scope, name, value):
    with keras.name_scope(scope):
        return keras.Variable(np.asarray(value, np.float32), name=name)


def _make_variables():
    return [
        _variable("dense", "kernel", [[0.5, -1.0], [2.0, 0.25]]),
        _variable("dense", "bias", [0.1, -0.2]),
        _variable("LayerNorm", "gamma", [1.0, 1.5]),
    ]


# Gradients of 3 steps; the first has global norm > 1 (clipped), the others < 1.
GRADIENTS = [
    [np.array([[3.0, -4.0], [1.0, 2.0]]), np.array([1.0, 0.0]), np.array([0.5, -2.0])],
    [np.array([[0.1, 0.2], [-0.1, 0.05]]), np.array([0.2, -0.1]), np.array([0.0, 0.3])],
    [np.array([[-0.3, 0.1], [0.2, 0.0]]), np.array([0.0, 0.1]), np.array([0.1, 0.1])],
]


def _reference_adamw(params, grads_per_step, init_lr, num_train_steps, num_warmup_steps, decays):
    """The original optimization.py, step by step, in numpy."""
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step):
        norm = np.sqrt(sum(np.sum(g**2) for g in grads))
        grads = [g * 1.0 / max(norm, 1.0) for g in grads]
        if t < num_warmup_steps:
            lr = init_lr * t / num_warmup_steps
        else:
            lr = init_lr * (1 - min(t, num_train_steps) / num_train_steps)
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g**2
            update = m[i] / (np.sqrt(v[i]) + 1e-6)
            if decays[i]:
                update += 0.01 * params[i]
            params[i] = params[i] - lr * update
    return params


def _run(optimizer, variables, grads_per_step):
    for grads in grads_per_step:
        optimizer.apply_gradients(
            zip([tf.constant(g, tf.float32) for g in grads], variables, strict=True)
        )
    return [v.numpy() for v in variables]


def test_schedule_warms_up_then_decays_linearly():
    schedule = WarmupLinearDecay(1.0, num_train_steps=10, num_warmup_steps=4)
    got = [float(schedule(t)) for t in range(13)]
    want = [0.0, 0.25, 0.5, 0.75, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, 0.0, 0.0]
    # float32 arithmetic of values <= 1: a few rounding steps (6e-8 each); off-by-one steps are 0.1.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_schedule_without_warmup_starts_at_init_lr():
    schedule = WarmupLinearDecay(2.0, num_train_steps=4, num_warmup_steps=0)
    np.testing.assert_allclose(
        [float(schedule(t)) for t in range(5)], [2.0, 1.5, 1.0, 0.5, 0.0], rtol=0, atol=1e-6
    )


def test_first_step_matches_hand_computation():
    # t = 0 has lr 0 under warmup, so no warmup here: lr(0) = 0.1 * (1 - 0/10) = 0.1.
    # One scalar, g = 0.5 (norm < 1, not clipped): m = 0.05, v = 0.00025,
    # update = 0.05 / (0.0158113883 + 1e-6) + 0.01 * 2.0 = 3.162078... + 0.02; param = 2 - 0.1 * update.
    variable = _variable("layer", "kernel", [2.0])
    optimizer = create_optimizer(0.1, num_train_steps=10, num_warmup_steps=0)
    optimizer.apply_gradients([(tf.constant([0.5]), variable)])
    update = 0.05 / (np.sqrt(0.00025) + 1e-6) + 0.02
    # Six float32 operations, each within half a rounding step (6e-8): 1e-5 relative is 80 steps;
    # bias correction (x3.2) or a missed decay (0.002 of 1.68) would be far outside it.
    np.testing.assert_allclose(variable.numpy(), [2.0 - 0.1 * update], rtol=1e-5)
    np.testing.assert_allclose(variable.numpy(), [1.6818], atol=1e-4)


def test_adamw_matches_original_trajectory_with_clipping_and_decay_exclusions():
    variables = _make_variables()
    initial = [v.numpy() for v in variables]
    steps = GRADIENTS + GRADIENTS[::-1]  # 6 steps: warmup 2, decay to 0 at step 4, then lr 0
    optimizer = create_optimizer(0.05, num_train_steps=4, num_warmup_steps=2)
    got = _run(optimizer, variables, steps)
    want = _reference_adamw(initial, steps, 0.05, 4, 2, decays=[True, False, False])
    # float32 against float64 over 6 steps: rtol 1e-5 is 84 rounding steps, atol covers values near
    # 0; clipping per replica instead of globally, or decaying a bias, changes weights by 1e-3 or more.
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert int(optimizer.iterations) == 6


def test_weight_decay_skips_layer_norm_and_bias():
    # Zero gradients: only weight decay moves a parameter.
    variables = _make_variables()
    initial = [v.numpy() for v in variables]
    optimizer = create_optimizer(0.5, num_train_steps=10, num_warmup_steps=0)
    optimizer.apply_gradients(zip([tf.zeros_like(v) for v in variables], variables, strict=True))
    # One multiply-subtract in float32 (1e-6 relative is 8 rounding steps); no decay would be 0.005.
    np.testing.assert_allclose(variables[0].numpy(), initial[0] * (1 - 0.5 * 0.01), rtol=1e-6)
    np.testing.assert_array_equal(variables[1].numpy(), initial[1])
    np.testing.assert_array_equal(variables[2].numpy(), initial[2])


def test_lamb_matches_numpy_reference():
    variables = _make_variables()
    initial = [v.numpy().astype(np.float64) for v in variables]
    optimizer = create_optimizer(0.1, num_train_steps=10, num_warmup_steps=0, optimizer_type="lamb")
    got = _run(optimizer, variables, GRADIENTS)

    params, m, v = initial, [0 * p for p in initial], [0 * p for p in initial]
    for t, grads in enumerate(GRADIENTS):
        norm = np.sqrt(sum(np.sum(g**2) for g in grads))
        grads = [g / max(norm, 1.0) for g in grads]
        lr = 0.1 * (1 - t / 10)
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g**2
            update = (m[i] / (1 - 0.9 ** (t + 1))) / (np.sqrt(v[i] / (1 - 0.999 ** (t + 1))) + 1e-6)
            ratio = 1.0
            if i == 0:  # only the kernel is decayed and layer-adapted
                update = update + 0.01 * params[i]
                ratio = np.linalg.norm(params[i]) / np.linalg.norm(update)
            params[i] = params[i] - lr * ratio * update
    # As for AdamW above: float32 against float64 over 3 steps, 84 rounding steps of slack; leaving
    # out the trust ratio or the bias correction moves these weights by 1e-2 or more.
    for g, w in zip(got, params, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_embedding_gradients_as_indexed_slices_are_applied():
    table = _variable("embeddings", "word_embeddings", np.ones([4, 2]))
    optimizer = create_optimizer(0.1, num_train_steps=10, num_warmup_steps=0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table.value, [1, 1, 3]))
    (grad,) = tape.gradient(loss, [table.value])
    assert isinstance(grad, tf.IndexedSlices)
    optimizer.apply_gradients([(grad, table)])
    moved = np.abs(table.numpy() - 1.0).sum(axis=1) > 0.05
    np.testing.assert_array_equal(moved, [False, True, False, True])


def test_unknown_optimizer_type_is_rejected():
    with pytest.raises(ValueError, match="optimizer_type"):
        create_optimizer(1e-4, 10, 1, optimizer_type="sgd")
