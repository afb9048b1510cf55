"""The training loop alone, driving counting fakes: where it stops, what it saves, when it gives up.

No model and no TensorFlow step: `run_steps` moves an optimizer's step counter and adds a loss, so each
test states in steps what a user sees (checkpoints, progress lines, the one-line errors).
"""

import logging
import math

import keras
import pytest
import tensorflow as tf

from bert_tf.errors import Diverged
from bert_tf.training import TrainSettings
from bert_tf.training.loop import TrainLoop
from bert_tf.training.preemption import Preempted
from bert_tf.training.progress import Mark, Progress, format_seconds


class _Losses:
    """LossSums' interface over plain floats."""

    def __init__(self):
        self.sums = {"loss": 0.0}

    def total(self, key="loss"):
        return self.sums[key]

    def take(self):
        taken, self.sums = self.sums, {"loss": 0.0}
        return taken


class _Run:
    """Steps that add `loss_per_step` each (NaN from step `nan_from` on), SIGTERM after `stop_after`
    calls; records the calls and the checkpoints."""

    def __init__(self, config, loss_per_step=0.5, nan_from=None, stop_after=None):
        self.optimizer = keras.optimizers.SGD(0.01)
        self.losses, self.calls, self.saved = _Losses(), [], []
        self.loss_per_step, self.nan_from, self.stop_after = loss_per_step, nan_from, stop_after
        self.loop = TrainLoop(
            config,
            run_steps=self.run_steps,
            optimizer=self.optimizer,
            loss_sums=self.losses,
            save=self.saved.append,
            latest_checkpoint=lambda: f"model.ckpt-{self.saved[-1]}" if self.saved else None,
            stopping=lambda: self.stop_after is not None and len(self.calls) >= self.stop_after,
        )

    def run_steps(self, num_steps):
        assert num_steps.dtype == tf.int32 and num_steps.shape == ()  # a tensor: no retracing
        num_steps = int(num_steps)
        start = int(self.optimizer.iterations.numpy())
        self.calls.append((start, start + num_steps))
        for step in range(start + 1, start + num_steps + 1):
            nan = self.nan_from is not None and step >= self.nan_from
            self.losses.sums["loss"] += math.nan if nan else self.loss_per_step
        self.optimizer.iterations.assign_add(num_steps)


def _config(**settings):
    defaults = dict(
        model_dir="/tmp/unused", train_batch_size=8, num_train_steps=10, steps_per_loop=4,
        log_steps=3, save_checkpoints_steps=5,
    )  # fmt: skip
    return TrainSettings(**{**defaults, **settings})


def _writer():
    return tf.summary.create_noop_writer()


def test_each_call_stops_at_the_next_log_line_checkpoint_or_end_and_saves_there():
    run = _Run(_config())
    run.loop.run(10, _writer())
    ends = [end for _, end in run.calls]
    assert ends[-1] == 10
    assert all(end - start <= 4 for start, end in run.calls)  # steps_per_loop
    assert {3, 5, 6, 9, 10} <= set(ends)  # every log line and checkpoint is a call's end
    assert run.saved == [5, 10]


def test_a_stop_before_the_end_is_saved_and_the_next_run_goes_on_from_there():
    run = _Run(_config())
    run.loop.run(7, _writer())
    assert run.calls[-1][1] == 7 and run.saved == [5, 7]
    run.loop.run(10, _writer())
    assert run.calls[-1][1] == 10 and run.saved == [5, 7, 10]
    assert sum(end - start for start, end in run.calls) == 10  # no step run twice


def test_the_returned_progress_is_the_last_intervals_mean_loss():
    run = _Run(_config(), loss_per_step=0.25)
    last = run.loop.run(10, _writer())
    assert last["global_step"] == 10
    assert last["loss"] == pytest.approx(0.25)  # the sum over the interval, divided by its steps
    assert last["learning_rate"] == pytest.approx(0.01)
    assert last["examples_per_second"] > 0


def test_a_run_at_its_end_runs_no_step_and_saves_nothing():
    run = _Run(_config())
    run.optimizer.iterations.assign(10)
    assert run.loop.run(10, _writer()) == {"global_step": 10}
    assert run.calls == [] and run.saved == []


def test_a_non_finite_loss_is_one_line_naming_the_steps_and_the_last_checkpoint():
    run = _Run(_config(), nan_from=7)
    with pytest.raises(Diverged) as error:
        run.loop.run(10, _writer())
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("training diverged: the loss is nan in the steps after global step 6")
    assert "the last checkpoint kept is model.ckpt-5" in message and "--learning_rate" in message
    assert run.saved == [5]  # nothing of the diverged call


def test_sigterm_saves_the_step_reached_and_stops_with_one_line():
    run = _Run(_config(), stop_after=2)
    with pytest.raises(Preempted) as error:
        run.loop.run(10, _writer())
    step = run.calls[-1][1]
    assert len(run.calls) == 2 and run.saved == [step]
    assert str(error.value).startswith(f"SIGTERM: stopped at global step {step}, saved in ")


def test_progress_lines_count_examples_of_the_interval_and_the_eta_from_the_start(caplog):
    config = _config(num_train_steps=100, train_batch_size=16)
    progress = Progress(config, _writer(), Mark(step=10, time=1000.0))
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        first = progress.log(Mark(step=20, time=1010.0), {"loss": 5.0}, 0.001)
        second = progress.log(Mark(step=40, time=1015.0), {"loss": 2.0}, 0.001)
    assert first["examples_per_second"] == pytest.approx(10 * 16 / 10)
    assert second["examples_per_second"] == pytest.approx(20 * 16 / 5)  # its own interval only
    assert (first["loss"], second["loss"]) == (0.5, 0.1)
    lines = [r.getMessage() for r in caplog.records if "examples/s" in r.getMessage()]
    # 30 steps in 15 s since the start: the 60 steps left take 30 s.
    assert lines[1].startswith("step 40/100  loss 0.1000  lr 0.001")
    assert lines[1].endswith(f"ETA {format_seconds(30)}") and format_seconds(30) == "0:00:30"


class _Clock:
    """time.time() of a run whose steps take `pace` seconds each."""

    def __init__(self, pace):
        self.now, self.pace = 1000.0, pace

    def time(self):
        return self.now


def _progress_steps(caplog):
    return [
        int(r.getMessage().split()[1].split("/")[0])
        for r in caplog.records
        if "examples/s" in r.getMessage()
    ]


def test_the_first_progress_line_comes_after_the_first_step_with_an_eta(caplog):
    run = _Run(
        _config(
            num_train_steps=200, log_steps=100, steps_per_loop=1000, save_checkpoints_steps=1000
        )
    )
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        run.loop.run(200, _writer())
    assert run.calls[0] == (0, 1)
    lines = [r.getMessage() for r in caplog.records if "examples/s" in r.getMessage()]
    assert lines[0].startswith("step 1/200  loss 0.5000") and " ETA 0:00:" in lines[0]
    assert _progress_steps(caplog) == [1, 100, 200]


def test_a_progress_line_comes_every_30_seconds_when_log_steps_take_longer(monkeypatch, caplog):
    clock = _Clock(pace=2.0)  # 2 s a step: log_steps=100 would be 200 s apart
    monkeypatch.setattr("bert_tf.training.loop.time", clock)
    monkeypatch.setattr("bert_tf.training.progress.time", clock, raising=False)
    config = _config(
        num_train_steps=100, log_steps=100, steps_per_loop=1000, save_checkpoints_steps=1000
    )
    run = _Run(config)
    steps = run.run_steps

    def timed_steps(num_steps):
        clock.now += clock.pace * int(num_steps)
        steps(num_steps)

    run.loop.run_steps = timed_steps
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        run.loop.run(100, _writer())
    logged = _progress_steps(caplog)
    assert logged[0] == 1 and logged[-1] == 100
    gaps = [b - a for a, b in zip(logged, logged[1:])]
    assert max(gaps) <= 15 and min(gaps[:-1]) >= 14  # 30 s at 2 s a step
