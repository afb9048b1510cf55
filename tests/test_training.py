"""The task-agnostic training loop, on a toy regression task small enough to run in seconds."""

import dataclasses
import json
import logging
import math
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import Diverged, InputError, WriteError
from bert_tf.optimization import create_optimizer
from bert_tf.training import (
    Trainable,
    Trainer,
    TrainSettings,
    check_batch_sizes,
    write_eval_results,
)

from conftest import SUBPROCESS_ENV, file_size_limit

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ToyModel(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(8, activation="tanh", name="dense")
        self.norm = keras.layers.LayerNormalization(name="LayerNorm")
        self.head = keras.layers.Dense(1, name="head")

    def call(self, features, training=False):
        return {"prediction": self.head(self.norm(self.dense(features["x"])))[:, 0]}


def _examples(num_examples, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=[num_examples, 4]).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3).astype(np.float32)
    weight = rng.integers(0, 3, size=[num_examples]).astype(
        np.float32
    )  # uneven: global normalizers matter
    return {"x": x, "y": y, "weight": weight}


def toy_task(num_examples=64, seed=0):
    """Weighted squared error; weights make the per-replica counts differ from the global ones."""
    examples = _examples(num_examples, seed)

    def loss_fn(outputs, features, normalizers):
        error = tf.square(tf.cast(outputs["prediction"], tf.float32) - features["y"])
        loss = tf.reduce_sum(error * features["weight"]) / (normalizers["weight"] + 1e-5)
        return {"loss": loss, "squared_error": loss}

    def normalizer_fn(features):
        return {"weight": tf.reduce_sum(features["weight"])}

    def metric_fn(outputs, features):
        error = tf.square(tf.cast(outputs["prediction"], tf.float32) - features["y"])
        return {"mse": (error, features["weight"])}

    def dataset_fn(input_context, batch_size, is_training):
        dataset = tf.data.Dataset.from_tensor_slices(examples)
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        if is_training:
            dataset = dataset.repeat()
        return dataset.batch(batch_size, drop_remainder=True)

    return Trainable(lambda: ToyModel(name="toy"), loss_fn, normalizer_fn, metric_fn, dataset_fn)


def _train(model_dir, strategy=None, num_train_steps=6, schedule_steps=6, task=None, **config):
    keras.utils.set_random_seed(1)
    config = TrainSettings(
        model_dir=str(model_dir),
        train_batch_size=config.pop("train_batch_size", 8),
        eval_batch_size=8,
        num_train_steps=num_train_steps,
        steps_per_loop=config.pop("steps_per_loop", 4),
        save_checkpoints_steps=config.pop("save_checkpoints_steps", 2),
        log_steps=config.pop("log_steps", 3),
        **config,
    )
    trainer = Trainer(
        task or toy_task(),
        strategy or tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: create_optimizer(0.05, schedule_steps, 2),
        config,
    )
    trainer.train_logs = trainer.train()
    return trainer


def _weights(trainer):
    return [v.numpy() for v in trainer.model.trainable_variables]


# Tolerances below: rtol 1e-6 / atol 1e-7 where the two runs execute the same ops on the same shapes
# (float32 results then agree to a rounding step or two); 1e-5 where the summation order differs
# (micro-batches, replicas), 1e-4 under XLA (fused, reordered math). The defects these tests guard
# against (a lost or doubled step, per-replica normalizers, wrong accumulation) move the weights of
# this toy model by 1e-3 or more.
def _assert_weights_close(a, b, **tolerance):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, **tolerance)


def test_a_checkpoint_the_disk_refuses_is_one_error_and_the_previous_one_restores(
    tmp_path, monkeypatch
):
    config = TrainSettings(
        model_dir=str(tmp_path), train_batch_size=8, eval_batch_size=8, num_train_steps=4,
        steps_per_loop=2, save_checkpoints_steps=2, log_steps=2,
    )  # fmt: skip

    def trainer():
        keras.utils.set_random_seed(1)
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        return Trainer(toy_task(), strategy, lambda: create_optimizer(0.05, 4, 1), config)

    first = trainer()
    first.train(until=2)
    at_step_2 = _weights(first)
    save = first.manager.save

    def save_on_a_full_disk(**kwargs):
        with file_size_limit(64):  # TF's own checkpoint writer fails, half-way through
            return save(**kwargs)

    monkeypatch.setattr(first.manager, "save", save_on_a_full_disk)
    with pytest.raises(WriteError) as error:
        first.train()
    assert str(error.value) == f"cannot write {tmp_path / 'model.ckpt-4'}: File too large"
    assert not [name for name in os.listdir(tmp_path) if name.startswith("model.ckpt-4")]
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-2")
    resumed = trainer()
    assert resumed.global_step == 2
    _assert_weights_close(_weights(resumed), at_step_2, rtol=0, atol=0)
    # Not vacuous: the failed run had moved on from step 2's weights.
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(_weights(first), at_step_2, strict=True))


def test_training_reduces_the_loss_and_evaluates(tmp_path):
    trainer = _train(tmp_path, num_train_steps=30, schedule_steps=30, steps_per_loop=10)
    before = Trainer(
        toy_task(),
        tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: create_optimizer(0.05, 30, 2),
        TrainSettings(model_dir=str(tmp_path / "fresh"), eval_batch_size=8),
    ).evaluate()
    after = trainer.evaluate(max_steps=3)
    assert after["global_step"] == 30
    assert after["mse"] < 0.5 * before["mse"]
    assert set(after) == {"global_step", "loss", "mse"}


def test_resumed_run_continues_at_the_checkpointed_step_and_matches_an_uninterrupted_run(tmp_path):
    # One batch = the whole data set, so the data a resumed run sees is the same as the uninterrupted one's.
    task = toy_task(num_examples=8)
    straight = _train(tmp_path / "straight", num_train_steps=6, task=task)
    _train(tmp_path / "resumed", num_train_steps=4, task=task)
    resumed = _train(tmp_path / "resumed", num_train_steps=6, task=task, save_checkpoints_steps=100)
    assert resumed.global_step == 6
    _assert_weights_close(_weights(straight), _weights(resumed), rtol=1e-6, atol=1e-7)
    assert tf.train.latest_checkpoint(str(tmp_path / "resumed")).endswith("ckpt-6")


def test_restart_after_the_last_step_trains_no_further(tmp_path):
    first = _train(tmp_path, num_train_steps=4)
    again = _train(tmp_path, num_train_steps=4)
    assert again.global_step == 4
    _assert_weights_close(_weights(first), _weights(again), rtol=0, atol=0)


def test_gradient_accumulation_matches_the_full_batch(tmp_path):
    full = _train(tmp_path / "full", num_train_steps=3)
    accumulated = _train(tmp_path / "acc", num_train_steps=3, num_accumulation_steps=4)
    _assert_weights_close(_weights(full), _weights(accumulated), rtol=1e-5, atol=1e-6)


def test_jit_compile_matches_graph_mode(tmp_path):
    plain = _train(tmp_path / "plain", num_train_steps=3)
    jitted = _train(tmp_path / "jit", num_train_steps=3, jit_compile=True)
    _assert_weights_close(_weights(plain), _weights(jitted), rtol=1e-4, atol=1e-5)


def _fresh(model_dir, **config):
    """The model _train starts from (the same seed), untrained: a Trainer that takes no step."""
    keras.utils.set_random_seed(1)
    return Trainer(
        toy_task(),
        tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: create_optimizer(0.05, 20, 2),
        TrainSettings(model_dir=str(model_dir), eval_batch_size=8, **config),
    )


def test_mixed_float16_trains_with_loss_scaling_and_leaves_the_policy_alone(tmp_path):
    settings = dict(mixed_precision="mixed_float16")
    before = _fresh(tmp_path / "fresh", **settings)
    trainer = _train(tmp_path / "out", num_train_steps=20, schedule_steps=20, **settings)
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    assert trainer.model.dense.compute_dtype == "float16"
    assert keras.config.dtype_policy().name == "float32"
    assert all(np.isfinite(w).all() for w in _weights(trainer))
    assert trainer.global_step == 20
    # Updates were applied: every weight moved from where it started (20 steps at lr 0.05 move the
    # weights of this toy model by 0.4 or more; float16 compute leaves float32 weights untouched
    # unless an update lands), and the loss fell (here from 5.7 to 0.5).
    for start, end in zip(_weights(before), _weights(trainer), strict=True):
        assert np.abs(end - start).max() > 0.05
    assert trainer.evaluate()["mse"] < 0.25 * before.evaluate()["mse"]


def test_mixed_bfloat16_computes_in_bfloat16(tmp_path):
    trainer = _train(tmp_path, num_train_steps=2, mixed_precision="mixed_bfloat16")
    assert trainer.model.dense.compute_dtype == "bfloat16"
    assert trainer.model.dense.kernel.dtype == "float32"


def test_progress_lines_and_tensorboard_summaries_are_written(tmp_path, caplog):
    # absl's own logger keeps a WARNING level after in-process flag parsing (as other test files
    # do), so the level is set on it, not only on the root logger.
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        _train(tmp_path, num_train_steps=6, log_steps=3)
    lines = [r.getMessage() for r in caplog.records if "examples/s" in r.getMessage()]
    assert [line.split()[1] for line in lines] == ["1/6", "3/6", "6/6"]  # the first step's at once
    assert all("loss" in line and "lr" in line and "ETA" in line for line in lines)
    assert tf.io.gfile.glob(str(tmp_path / "train" / "events.out.tfevents.*"))


def _predict_input(num_examples=12, batch_size=4):
    examples = _examples(num_examples, seed=3)
    examples["index"] = np.arange(num_examples, dtype=np.int32)
    return examples, tf.data.Dataset.from_tensor_slices(examples).batch(batch_size)


def test_predict_returns_every_example_in_input_order(tmp_path):
    trainer = _train(tmp_path, num_train_steps=2)
    examples, dataset = _predict_input(num_examples=10, batch_size=4)  # last batch partial
    result = trainer.predict(dataset, feature_keys=("index",))
    assert set(result) == {"prediction", "index"}
    np.testing.assert_array_equal(result["index"], np.arange(10))
    expected = trainer.model({"x": tf.constant(examples["x"])})["prediction"].numpy()
    # Same model, same inputs, batched differently: float32 rounding only (values ~1).
    np.testing.assert_allclose(result["prediction"], expected, rtol=1e-5, atol=1e-6)


def test_predict_pads_outputs_of_varying_length_to_the_longest_batch(tmp_path):
    trainer = _train(tmp_path, num_train_steps=1)
    trainer.model.call = lambda features, training=False: {"values": features["ids"] + 1}
    trainer.predictor._step_fn = None
    ids = [tf.constant([[1, 2], [3, 4]]), tf.constant([[5, 6, 7], [8, 9, 10]])]
    dataset = tf.data.Dataset.from_generator(
        lambda: ({"ids": x} for x in ids),
        output_signature={"ids": tf.TensorSpec([None, None], tf.int32)},
    )
    result = trainer.predict(dataset)
    np.testing.assert_array_equal(result["values"], [[2, 3, 0], [4, 5, 0], [6, 7, 8], [9, 10, 11]])


@pytest.mark.parametrize(
    "field, value, flag",
    [
        ("train_batch_size", 6, "train_batch_size"),
        ("num_accumulation_steps", 0, "num_accumulation_steps"),
        ("eval_batch_size", 3, "eval_batch_size"),
    ],
)
def test_bad_batch_sizes_name_the_flag(field, value, flag):
    sizes = {"train_batch_size": 8, "num_accumulation_steps": 4, "eval_batch_size": 8, field: value}
    with pytest.raises(ValueError, match=f"--{flag}"):
        check_batch_sizes(2, **sizes)


@pytest.mark.parametrize(
    "field, value, flag",
    [("mixed_precision", "float16", "mixed_precision"), ("log_steps", 0, "log_steps")],
)
def test_bad_settings_name_the_flag(tmp_path, field, value, flag):
    with pytest.raises(ValueError, match=flag):
        _train(tmp_path, **{field: value})


@pytest.mark.parametrize(
    "rate, shown", [(-1e-5, "-1e-05"), (0.0, "0"), (math.nan, "nan"), (math.inf, "inf")]
)
def test_a_learning_rate_that_is_not_positive_is_one_line_naming_the_flag_before_any_step(
    tmp_path, rate, shown
):
    built = []
    task = dataclasses.replace(toy_task(), build_model=lambda: built.append(1) or ToyModel())
    config = TrainSettings(model_dir=str(tmp_path), train_batch_size=8, num_train_steps=6)
    with pytest.raises(InputError) as error:
        Trainer(
            task,
            tf.distribute.OneDeviceStrategy("/cpu:0"),
            lambda: create_optimizer(rate, 6, 2),
            config,
        )
    message = str(error.value)
    assert message.startswith(f"--learning_rate must be a positive, finite number, got {shown}:")
    assert "\n" not in message
    assert built == [] and os.listdir(tmp_path) == []  # no model, no step, no file


def test_a_constant_learning_rate_is_checked_too(tmp_path):
    config = TrainSettings(model_dir=str(tmp_path), train_batch_size=8, num_train_steps=6)
    with pytest.raises(InputError, match="--learning_rate .* got -0.1"):
        Trainer(
            toy_task(),
            tf.distribute.OneDeviceStrategy("/cpu:0"),
            lambda: keras.optimizers.SGD(-0.1),
            config,
        )


def test_run_classifier_with_a_negative_learning_rate_ends_in_one_error_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("a happy day\tpos\na sad day\tneg\n" * 4)
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "run_classifier.py"), "--task_name=tsv",
            "--do_train", f"--data_dir={data}", "--text_a_column=0", "--label_column=1",
            f"--vocab_file={REPO_DIR}/sample_data/vocab.txt", "--max_seq_length=16",
            f"--bert_config_file={REPO_DIR}/sample_data/bert_config_tiny.json",
            f"--output_dir={tmp_path / 'out'}", "--learning_rate=-1e-5", "--train_batch_size=4",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --learning_rate must be a positive, finite number, got -1e-05")
    assert not tf.train.latest_checkpoint(str(tmp_path / "out"))


def test_eval_results_file_has_the_original_format(tmp_path):
    path = tmp_path / "eval_results.txt"
    write_eval_results(str(path), {"loss": 1.5, "global_step": 7, "masked_lm_accuracy": 0.25})
    assert path.read_text() == "global_step = 7\nloss = 1.5\nmasked_lm_accuracy = 0.25\n"
    assert os.listdir(tmp_path) == ["eval_results.txt"]


_MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    sys.path.insert(0, "tests")
    import test_training as t
    from bert_tf.distribute import get_strategy
    from bert_tf.training.evaluation import evaluate
    one = t._train(sys.argv[1] + "/one", num_train_steps=4)
    strategy = get_strategy("mirrored")
    two = t._train(sys.argv[1] + "/two", strategy=strategy, num_train_steps=4)
    # mixed_float16 over the replicas: the loss-scale optimizer's skip-or-apply decision is taken
    # across replicas (precision.SyncedLossScaleOptimizer). float16 sums overflow by batch size, so
    # the one-device run takes the replicas' halves as 2 micro-batches: both skip a step when
    # either half overflows. 20 steps: the scale moves too.
    half = dict(num_train_steps=20, schedule_steps=20, mixed_precision="mixed_float16")
    one16 = t._train(sys.argv[1] + "/one16", num_accumulation_steps=2, **half)
    two16 = t._train(sys.argv[1] + "/two16", strategy=strategy, **half)
    _, dataset = t._predict_input(num_examples=12, batch_size=4)
    predict_one = one.predict(dataset, feature_keys=("index",))
    predict_two = two.predict(dataset, feature_keys=("index",))
    print(json.dumps({
        "predict_one": {k: v.tolist() for k, v in predict_one.items()},
        "predict_two": {k: v.tolist() for k, v in predict_two.items()},
        "replicas": strategy.num_replicas_in_sync,
        "one": [w.tolist() for w in t._weights(one)],
        "two": [w.tolist() for w in t._weights(two)],
        "eval_one": one.evaluate(), "eval_two": two.evaluate(),
        "evaluate_two": evaluate(two.trainable, two.model, strategy, two.settings.eval_batch_size),
        "train_one": one.train_logs, "train_two": two.train_logs,
        "one16": [w.tolist() for w in t._weights(one16)],
        "two16": [w.tolist() for w in t._weights(two16)],
        "scale16": [float(x.optimizer.dynamic_scale.numpy()) for x in (one16, two16)],
        "mse16": [x.evaluate()["mse"] for x in (one16, two16)],
    }))
    """
)


def test_mirrored_over_two_cpu_devices_matches_one_device(tmp_path):
    # Logical devices must be set before TF starts, hence a fresh process.
    env = {**os.environ, "PYTHONPATH": REPO_DIR, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", _MIRRORED_SCRIPT, str(tmp_path)],
        cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["replicas"] == 2
    _assert_weights_close(out["one"], out["two"], rtol=1e-5, atol=1e-6)
    assert out["eval_one"]["mse"] == pytest.approx(out["eval_two"]["mse"], rel=1e-5)
    assert out["eval_one"]["loss"] == pytest.approx(out["eval_two"]["loss"], rel=1e-5)
    # Evaluation through the Predictor: each batch split over the replicas, its loss divided by the
    # whole batch's weight (uneven weights: a replica's own would move it), each batch counted once.
    assert out["evaluate_two"]["mse"] == pytest.approx(out["eval_one"]["mse"], rel=1e-5)
    assert out["evaluate_two"]["loss"] == pytest.approx(out["eval_one"]["loss"], rel=1e-5)
    # The logged training loss is the global-batch loss, not a sum of per-replica means.
    assert out["train_one"]["loss"] == pytest.approx(out["train_two"]["loss"], rel=1e-5)
    # Prediction over two replicas gives every example once, in input order.
    assert out["predict_two"]["index"] == list(range(12))
    np.testing.assert_allclose(
        out["predict_two"]["prediction"], out["predict_one"]["prediction"], rtol=1e-5, atol=1e-6
    )
    # mixed_float16: the same float16 halves and float32 sums in both runs (measured: equal weights
    # and loss scale, 2 steps skipped in 20); the tolerance is the float32 one above. A skip decided
    # on one replica's gradients alone applies another's overflow (NaN) or skips a good step.
    assert out["scale16"][0] == out["scale16"][1] < 32768  # steps were skipped, alike
    _assert_weights_close(out["one16"], out["two16"], rtol=1e-5, atol=1e-6)
    assert out["mse16"][1] == pytest.approx(out["mse16"][0], rel=1e-5)


def _nan_task():
    """The toy task with a NaN target in every batch: the loss and every gradient are NaN."""
    task = toy_task()
    dataset_fn = task.dataset_fn

    def poisoned(input_context, batch_size, is_training):
        dataset = dataset_fn(input_context, batch_size, is_training)
        return dataset.map(lambda features: {**features, "y": features["y"] * np.nan})

    return dataclasses.replace(task, dataset_fn=poisoned)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_a_nan_loss_stops_the_run_with_one_line_and_saves_no_nan_weights(tmp_path, policy):
    # The original's Estimator stopped on a NaN loss (NanTensorHook). Here float32 would otherwise
    # finish with NaN weights and exit 0, and mixed_float16 would skip every step and never finish.
    import signal

    def hung(*_):
        raise AssertionError("the run did not stop within 120 s")

    signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        with pytest.raises(Diverged, match=r"loss is nan .*global step.*--learning_rate"):
            _train(tmp_path, num_train_steps=8, task=_nan_task(), mixed_precision=policy)
    finally:
        signal.alarm(0)
    assert not tf.io.gfile.glob(str(tmp_path / "model.ckpt-*"))
