"""The fine-tuning grid (bert_tf/tasks/sweep.py): a 2 x 2 grid of learning rates and batch sizes with two
seeds, on run_classifier.py's small sentiment task."""

import json
import logging
import os
import shutil
import statistics

import numpy as np
import pytest
from test_run_classifier import tsv_config, write_sentiment_tsv

from bert_tf.checkpoints import resolve_checkpoint
from bert_tf.errors import Diverged, InputError
from bert_tf.models.networks.task_info import read_labels, read_task_info
from bert_tf.settings import parse_sweep
from bert_tf.tasks import run_script, sweep
from bert_tf.tasks.classification import task as classification
from bert_tf.training import Trainer

GRID = dict(learning_rate=(1e-3, 3e-4), train_batch_size=(8, 16), seed=(1, 2))
RUNS = [
    f"lr{lr:g}_batch{batch}_epochs1_seed{seed}"
    for lr in (1e-3, 3e-4)
    for batch in (8, 16)
    for seed in (1, 2)
]


def grid_config(data_dir, output_dir, **overrides):
    values = dict(GRID, num_train_epochs=1.0, do_train=True, do_eval=True, log_steps=4)
    return tsv_config(data_dir, output_dir, **{**values, **overrides})


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sentiment")
    write_sentiment_tsv(folder, sizes=(("train", 64), ("dev", 32), ("test", 8)))
    return folder


@pytest.fixture(scope="module")
def swept(data_dir, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("sweep")
    outcome = run_script(classification.SPEC, grid_config(data_dir, output_dir, do_predict=True))
    return output_dir, outcome


def _eval_accuracy(folder):
    lines = (folder / "eval_results.txt").read_text().splitlines()
    return float(dict(line.split(" = ") for line in lines)["eval_accuracy"])


def test_the_grid_trains_every_combination_on_features_written_once(swept):
    output_dir, outcome = swept
    assert sorted(outcome["runs"]) == sorted(RUNS)
    for name in RUNS:
        run = json.loads((output_dir / name / "sweep_run.json").read_text())
        assert run["metric"] == "eval_accuracy"  # a user's task: accuracy
        assert run["value"] == _eval_accuracy(output_dir / name)
        assert not (output_dir / name / "train.tf_record").exists()
    assert (output_dir / "train.tf_record").exists() and (output_dir / "eval.tf_record").exists()


def test_sweep_results_hold_each_seed_their_mean_and_spread(swept):
    output_dir, _ = swept
    header, *rows = [
        line.split("\t") for line in (output_dir / "sweep_results.tsv").read_text().splitlines()
    ]
    assert header == [
        "learning_rate", "train_batch_size", "num_train_epochs", "seed=1", "seed=2", "mean", "std",
        "metric", "collapsed_seeds",
    ]  # fmt: skip
    assert [row[:3] for row in rows] == [
        ["0.001", "8", "1"], ["0.001", "16", "1"], ["0.0003", "8", "1"], ["0.0003", "16", "1"],
    ]  # fmt: skip
    for row in rows:
        name = f"lr{row[0]}_batch{row[1]}_epochs1"
        scores = [_eval_accuracy(output_dir / f"{name}_seed{seed}") for seed in (1, 2)]
        assert [float(row[3]), float(row[4])] == pytest.approx(scores, abs=5e-5)
        assert float(row[5]) == pytest.approx(statistics.fmean(scores), abs=5e-5)
        assert float(row[6]) == pytest.approx(statistics.stdev(scores), abs=5e-5)
        assert row[7] == "eval_accuracy"
        runs = {
            s: json.loads((output_dir / f"{name}_seed{s}" / "sweep_run.json").read_text())
            for s in (1, 2)
        }
        assert row[8] == ",".join(str(s) for s, run in runs.items() if run["collapsed"])


def test_best_is_the_run_with_the_highest_dev_metric_and_predicts(swept):
    output_dir, outcome = swept
    values = {
        name: json.loads((output_dir / name / "sweep_run.json").read_text())["value"]
        for name in RUNS
    }
    best_name = max(RUNS, key=lambda name: values[name])  # the first of ties, in grid order
    best = output_dir / "best"
    assert json.loads((best / "sweep_run.json").read_text())["value"] == values[best_name]
    assert (best / "eval_results.txt").read_text() == (
        output_dir / best_name / "eval_results.txt"
    ).read_text()
    assert outcome["best"]["value"] == max(values.values())
    # --do_predict used best/, and export_saved_model.py --init_checkpoint=<output_dir> finds it.
    assert len((best / "test_results.tsv").read_text().splitlines()) == 8
    assert resolve_checkpoint(str(output_dir)).startswith(str(best / "model.ckpt-"))
    assert json.loads((output_dir / "task.json").read_text())["labels"] == ["neg", "pos"]


@pytest.mark.slow
def test_a_killed_shard_resumes_and_collecting_gives_the_same_table(
    swept, data_dir, tmp_path, monkeypatch
):
    output_dir, _ = swept
    # Shard 0/2 ran on another machine: its finished combinations (0, 2, 4, 6) are copied here.
    for name in RUNS[0::2]:
        shutil.copytree(output_dir / name, tmp_path / name)
    trained = []  # (folder, global step at the start) of every Trainer.train call
    real_train, real_evaluate = Trainer.train, classification.ClassifierRun.evaluate

    def counting_train(trainer, *args, **kwargs):
        trained.append((os.path.basename(trainer.settings.model_dir), trainer.global_step))
        return real_train(trainer, *args, **kwargs)

    def killed_after_training_the_second(run):
        if run.settings.output_dir.endswith(RUNS[3]):
            raise KeyboardInterrupt("killed")
        return real_evaluate(run)

    monkeypatch.setattr(Trainer, "train", counting_train)
    monkeypatch.setattr(classification.ClassifierRun, "evaluate", killed_after_training_the_second)
    second_half = grid_config(data_dir, tmp_path, sweep_shard="1/2")
    with pytest.raises(KeyboardInterrupt):
        run_script(classification.SPEC, second_half)
    assert trained == [(RUNS[1], 0), (RUNS[3], 0)]  # shard 1/2: combinations 1, 3, 5, 7
    monkeypatch.setattr(classification.ClassifierRun, "evaluate", real_evaluate)
    trained.clear()
    run_script(classification.SPEC, second_half)
    # RUNS[1] is skipped; RUNS[3] resumes at its last step (nothing left to train).
    assert [name for name, _ in trained] == [RUNS[3], RUNS[5], RUNS[7]] and trained[0][1] > 0
    assert not (tmp_path / "sweep_results.tsv").exists()  # a shard leaves collecting to the end
    trained.clear()
    run_script(classification.SPEC, grid_config(data_dir, tmp_path, sweep_collect=True))
    assert trained == []
    assert (tmp_path / "sweep_results.tsv").read_text() == (
        output_dir / "sweep_results.tsv"
    ).read_text()
    assert (tmp_path / "best" / "sweep_run.json").read_text() == (
        output_dir / "best" / "sweep_run.json"
    ).read_text()


def test_a_diverging_learning_rate_is_recorded_and_the_grid_goes_on(
    data_dir, tmp_path, monkeypatch
):
    # 1e30 sends AdamW's first update to ~1e30 a weight: the next step's loss is not finite.
    config = grid_config(
        data_dir, tmp_path, learning_rate=(1e30, 1e-3), train_batch_size=16, seed=1, log_steps=1
    )
    outcome = run_script(classification.SPEC, config)
    high, low = "lr1e+30_batch16_epochs1_seed1", "lr0.001_batch16_epochs1_seed1"
    diverged = json.loads((tmp_path / high / "sweep_run.json").read_text())
    assert diverged["value"] is None and "training diverged: the loss is" in diverged["diverged"]
    assert outcome["runs"][high]["value"] is None
    assert outcome["best"]["settings"]["learning_rate"] == 1e-3
    assert (tmp_path / "best" / "eval_results.txt").read_text() == (
        tmp_path / low / "eval_results.txt"
    ).read_text()
    header, *rows = [
        line.split("\t") for line in (tmp_path / "sweep_results.tsv").read_text().splitlines()
    ]
    accuracy = f"{_eval_accuracy(tmp_path / low):.4f}"
    assert rows[0] == ["1e+30", "16", "1", "diverged", "", "", "eval_accuracy", ""]
    assert rows[1][:7] == ["0.001", "16", "1", accuracy, accuracy, "", "eval_accuracy"]
    # A rerun trains nothing: the diverged combination is skipped like a finished one.
    monkeypatch.setattr(Trainer, "train", lambda *_: pytest.fail("a rerun trained"))
    assert run_script(classification.SPEC, config)["runs"] == outcome["runs"]
    monkeypatch.undo()
    # When every combination diverged there is no best run: the same one-line error, table written.
    with pytest.raises(Diverged, match=r"every finished combination .* diverged; lr1e\+30"):
        run_script(
            classification.SPEC,
            grid_config(
                data_dir, tmp_path / "all", learning_rate=(1e30,), train_batch_size=16, seed=1
            ),
        )
    assert "diverged" in (tmp_path / "all" / "sweep_results.tsv").read_text()


def test_one_value_per_flag_is_a_single_run_and_bad_lists_are_named(data_dir, tmp_path):
    config = tsv_config(data_dir, tmp_path, do_train=True, num_train_epochs=1.0)
    assert not sweep.is_sweep(config)
    assert parse_sweep("learning_rate", "5e-5", float) == 5e-5
    assert parse_sweep("seed", "1, 2,3", int) == (1, 2, 3)
    with pytest.raises(InputError, match=r"--learning_rate=5e-5,x: 'x' is not a float"):
        parse_sweep("learning_rate", "5e-5,x", float)
    with pytest.raises(InputError, match="--seed=1,1: 1 is listed twice"):
        parse_sweep("seed", "1,1", int)
    with pytest.raises(InputError, match="pass --do_eval"):
        run_script(classification.SPEC, tsv_config(data_dir, tmp_path, do_train=True, seed=(1, 2)))
    with pytest.raises(InputError, match="--sweep_shard=2/2: needs 0 <= i < n"):
        run_script(classification.SPEC, grid_config(data_dir, tmp_path, sweep_shard="2/2"))


def test_eval_every_steps_keeps_the_runs_best_checkpoint_beside_the_last(
    data_dir, tmp_path, monkeypatch
):
    evaluated = []
    real_evaluate = classification.ClassifierRun.evaluate

    def recording(run):
        results = real_evaluate(run)
        evaluated.append((results["global_step"], results["eval_accuracy"]))
        return results

    monkeypatch.setattr(classification.ClassifierRun, "evaluate", recording)
    config = tsv_config(
        data_dir, tmp_path, do_train=True, do_eval=True, num_train_epochs=2.0, train_batch_size=8,
        eval_every_steps=4, learning_rate=1e-3,
    )  # fmt: skip
    run_script(classification.SPEC, config)
    # 16 steps: evaluated at 4, 8, 12, 16 while training, then once more by --do_eval.
    assert [step for step, _ in evaluated] == [4, 8, 12, 16, 16]
    best_step, best_value = max(evaluated[:4], key=lambda pair: pair[1])  # the first of ties
    kept = json.loads((tmp_path / "best_checkpoint" / "dev_metric.json").read_text())
    assert (kept["global_step"], kept["value"]) == (best_step, best_value)
    assert resolve_checkpoint(str(tmp_path / "best_checkpoint")).endswith(f"model.ckpt-{best_step}")
    assert resolve_checkpoint(str(tmp_path)).endswith("model.ckpt-16")  # the last stays
    # It rebuilds the run's model alone (--init_checkpoint=best_checkpoint, export_saved_model.py).
    best = read_task_info(str(tmp_path / "best_checkpoint"))
    assert best is not None and best.to_json() == read_task_info(str(tmp_path)).to_json()
    assert read_labels(str(tmp_path / "best_checkpoint")) == ["neg", "pos"]


def test_each_seed_is_scored_on_labelled_test_data_and_the_final_prediction_says_no_resume(
    data_dir, tmp_path, caplog
):
    from test_run_classifier import _write_labelled_test

    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        shutil.copy(data_dir / name, data / name)
    gold = _write_labelled_test(data, 16, seed=5)
    init = tmp_path / "init"  # a model to start from: one step of a classifier run
    run_script(classification.SPEC, tsv_config(data, init, do_train=True, num_train_epochs=0.25))
    config = grid_config(
        data, tmp_path / "sweep", learning_rate=1e-3, train_batch_size=16, seed=(2, 3),
        do_predict=True, init_checkpoint=str(init),
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="absl"):
        run_script(classification.SPEC, config)
    header, row = [
        line.split("\t")
        for line in (tmp_path / "sweep" / "sweep_results.tsv").read_text().splitlines()
    ]
    assert header[-4:] == ["test seed=2", "test seed=3", "test_mean", "test_std"]
    accuracies = []
    for seed in (2, 3):  # the reference: each run's test_results.tsv argmax against test.tsv
        folder = tmp_path / "sweep" / f"lr0.001_batch16_epochs1_seed{seed}"
        columns = (folder / "labels.txt").read_text().split()
        rows = (folder / "test_results.tsv").read_text().splitlines()
        predicted = [columns[int(np.argmax([float(p) for p in r.split("\t")]))] for r in rows]
        accuracies.append(float(np.mean([p == g for p, g in zip(predicted, gold, strict=True)])))
    assert row[-4:] == [
        f"{accuracies[0]:.4f}", f"{accuracies[1]:.4f}", f"{statistics.fmean(accuracies):.4f}",
        f"{statistics.stdev(accuracies):.4f}",
    ]  # fmt: skip
    assert (tmp_path / "sweep" / "best" / "test_results.txt").exists()
    messages = [record.getMessage() for record in caplog.records]
    assert not [m for m in messages if "resuming" in m]  # the final prediction trains nothing
    assert any("--output_dir holds a checkpoint: using it" in m for m in messages)
