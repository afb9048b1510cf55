"""What a checkpoint keeps beyond the weights: the input position and the dropout streams.

A toy regression task whose input is shuffled and repeated, and whose model has dropout: a resumed
run ends with the uninterrupted run's weights only if it reads the same batches AND draws the same
masks. One that reads the input from its start, or starts its dropout streams anew, moves this toy's
weights by 1e-3 or more, far above float32 rounding (the 1e-6 used here).
"""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_training import ToyModel, toy_task

from bert_tf.errors import InputError
from bert_tf.optimization import create_optimizer
from bert_tf.training import Trainer, TrainSettings, inputs
from bert_tf.training.checkpoint_state import INPUT_STATE_DIR, CheckpointState, dropout_states


class DropoutToy(ToyModel):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dropout = keras.layers.Dropout(0.3)

    def call(self, features, training=False):
        hidden = self.dropout(self.norm(self.dense(features["x"])), training=training)
        return {"prediction": self.head(hidden)[:, 0]}


def _task(extra_shuffle=False):
    """toy_task with dropout, its 64 examples shuffled anew each epoch (8 batches of 8)."""
    task = toy_task(num_examples=64)
    base = task.dataset_fn

    def dataset_fn(input_context, batch_size, is_training):
        dataset = base(input_context, batch_size, is_training).unbatch()
        if is_training:
            dataset = dataset.shuffle(64, seed=5)
            if extra_shuffle:  # another pipeline than the checkpointed one
                dataset = dataset.shuffle(8, seed=6)
        return dataset.batch(batch_size, drop_remainder=True)

    task.build_model = lambda: DropoutToy(name="toy")
    task.dataset_fn = dataset_fn
    return task


def _trainer(model_dir, task=None, **config):
    keras.utils.set_random_seed(1)
    settings = dict(
        train_batch_size=8, num_train_steps=12, steps_per_loop=4, save_checkpoints_steps=4,
        log_steps=4,
    )  # fmt: skip
    return Trainer(
        task or _task(),
        tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: create_optimizer(0.05, 12, 2),
        TrainSettings(model_dir=str(model_dir), **{**settings, **config}),
    )


def _weights(trainer):
    return [v.numpy() for v in trainer.model.trainable_variables]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """Weights and dropout states of an uninterrupted 12-step run."""
    trainer = _trainer(tmp_path_factory.mktemp("straight"))
    trainer.train()
    return _weights(trainer), [v.numpy() for v in dropout_states(trainer.model)]


def _stopped_at_6(model_dir):
    """A run stopped at step 6, its checkpoint saved there (as SIGTERM saves it)."""
    _trainer(model_dir).train(until=6)


def test_a_resumed_run_reads_on_from_the_saved_position_and_draws_the_same_masks(
    tmp_path, straight, monkeypatch
):
    _stopped_at_6(tmp_path)
    assert os.path.exists(tmp_path / INPUT_STATE_DIR / "worker0of1-6.index")

    def no_reading(*args):
        raise AssertionError("read through the batches trained on")

    monkeypatch.setattr(inputs, "_advance", no_reading)
    resumed = _trainer(tmp_path)
    assert resumed.global_step == 6
    resumed.train()
    weights, masks = straight
    _assert_same(_weights(resumed), weights)
    # The streams moved on from their seeds (one draw a step) and resumed where they were.
    states = [v.numpy() for v in dropout_states(resumed.model)]
    assert len(states) == 1 and states[0][1] == 12
    np.testing.assert_array_equal(states, masks)


def test_a_checkpoint_without_input_state_resumes_by_reading_through_in_one_log_line(
    tmp_path, straight, caplog
):
    _stopped_at_6(tmp_path)
    tf.io.gfile.rmtree(str(tmp_path / INPUT_STATE_DIR))  # as a checkpoint of an earlier version
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        resumed = _trainer(tmp_path)
        resumed.train()
    skipping = [r.getMessage() for r in caplog.records if "by skipping" in r.getMessage()]
    assert len(skipping) == 1 and "the 6 batches trained on" in skipping[0]
    _assert_same(_weights(resumed), straight[0])


def test_input_states_are_kept_for_the_checkpoints_kept(tmp_path):
    trainer = _trainer(tmp_path, save_checkpoints_steps=2, max_checkpoints_to_keep=2)
    trainer.train()
    kept = sorted(
        name for name in os.listdir(tmp_path / INPUT_STATE_DIR) if name.endswith(".index")
    )
    assert kept == ["worker0of1-10.index", "worker0of1-12.index"]
    steps = [int(path.rsplit("-", 1)[1]) for path in trainer.manager.checkpoints]
    assert steps == [10, 12]


def test_an_input_pipeline_unlike_the_checkpointed_one_is_one_error(tmp_path):
    _stopped_at_6(tmp_path)
    resumed = _trainer(tmp_path, task=_task(extra_shuffle=True))
    with pytest.raises(InputError) as error:
        resumed.train()
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(
        f"cannot restore the input position {tmp_path}/input_state/worker0of1-6"
    )
    assert "resume with the same flags" in message


def test_an_input_tf_data_cannot_save_is_read_through_on_resume(tmp_path, straight, caplog):
    task = _task()
    base = task.dataset_fn

    def with_py_function(input_context, batch_size, is_training):  # state tf.data cannot save
        dataset = base(input_context, batch_size, is_training)

        def through_python(batch):
            y = tf.py_function(tf.identity, [batch["y"]], tf.float32)
            return {**batch, "y": tf.ensure_shape(y, batch["y"].shape)}

        return dataset.map(through_python)

    task.dataset_fn = with_py_function
    with caplog.at_level(logging.WARNING, logger="absl"), caplog.at_level(logging.WARNING):
        _trainer(tmp_path, task=task).train(until=6)
    warnings = [r.getMessage() for r in caplog.records if "cannot be saved" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, not at every checkpoint
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-6")
    assert not tf.io.gfile.glob(str(tmp_path / INPUT_STATE_DIR / "*"))
    resumed = _trainer(tmp_path, task=task)
    resumed.train()
    _assert_same(_weights(resumed), straight[0])


# CheckpointState alone: a small model, an optimizer and an input iterator, no Trainer and no step.


def _state(model_dir, keep=5, init_fn=None):
    """A CheckpointState over a fresh DropoutToy (weights from seed 1) and an SGD optimizer."""
    keras.utils.set_random_seed(1)
    model = DropoutToy(name="toy")
    model({"x": tf.zeros([1, 4])}, training=False)
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    input_steps = tf.Variable(-1, dtype=tf.int64, trainable=False)
    config = TrainSettings(model_dir=str(model_dir), max_checkpoints_to_keep=keep)
    state = CheckpointState(
        model, optimizer, input_steps, config, chief=True, worker=tf.distribute.InputContext()
    )
    state.restore_or_init(init_fn, None)
    return state


def _shuffled_input():
    return iter(tf.data.Dataset.range(100).shuffle(100, seed=3).batch(4))


def test_a_restored_state_has_the_saved_weights_step_and_input_position(tmp_path):
    saved = _state(tmp_path)
    iterator = _shuffled_input()
    for _ in range(3):
        next(iterator)
    saved.model.head.kernel.assign(saved.model.head.kernel + 1.0)
    saved.optimizer.iterations.assign(3)
    saved.input_steps.assign(3)
    saved.save(3, iterator)
    expected_batch = next(iterator).numpy()

    restored = _state(tmp_path)
    assert restored.global_step == 3 and int(restored.input_steps.numpy()) == 3
    np.testing.assert_array_equal(restored.model.head.kernel.numpy(), saved.model.head.kernel)
    fresh = _shuffled_input()
    assert restored.restore_input(fresh)
    np.testing.assert_array_equal(next(fresh).numpy(), expected_batch)  # reads on, not anew


def test_a_new_state_initializes_and_a_resumed_one_does_not(tmp_path):
    initialized = []
    fresh = _state(tmp_path, init_fn=initialized.append)
    assert initialized == [fresh.model] and int(fresh.input_steps.numpy()) == 0
    assert not fresh.restore_input(_shuffled_input())  # nothing to restore: the caller reads anew
    fresh.save(0, _shuffled_input())
    resumed = _state(tmp_path, init_fn=initialized.append)
    assert len(initialized) == 1 and resumed.resumed_from == str(tmp_path / "model.ckpt-0")


def test_only_the_newest_checkpoints_and_their_input_states_are_kept(tmp_path):
    state = _state(tmp_path, keep=2)
    iterator = _shuffled_input()
    for step in (1, 2, 3, 4):
        next(iterator)
        state.optimizer.iterations.assign(step)
        state.save(step, iterator)
    kept = sorted(
        name for name in os.listdir(tmp_path / INPUT_STATE_DIR) if name.endswith(".index")
    )
    assert kept == ["worker0of1-3.index", "worker0of1-4.index"]
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == [
        str(tmp_path / "model.ckpt-3"),
        str(tmp_path / "model.ckpt-4"),
    ]
