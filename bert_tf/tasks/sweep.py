"""The BERT paper's fine-tuning protocol: a grid of settings with restarts, the best run on dev kept.

The paper fine-tunes each task over learning rates {5e-5, 4e-5, 3e-5, 2e-5}, batch sizes {16, 32} and
epochs {2, 3, 4}, with random restarts on small data sets, and keeps the model that does best on dev.
Every fine-tuning script does this when --learning_rate, --train_batch_size, --num_train_epochs or
--seed lists several values (comma-separated):

  * each combination trains and evaluates in its own sub-folder of --output_dir (named after its
    settings), all of them reading the features written once in --output_dir;
  * a finished combination leaves sweep_run.json (its settings and dev metric) and is skipped when
    the sweep runs again; one that was cut off resumes from its checkpoint;
  * a combination whose training loss turns NaN or infinite (too high a learning rate, say) is
    recorded as diverged, with the one-line reason, and the sweep goes on with the next; it never
    becomes best/, and a rerun skips it (the same settings would diverge again);
  * --output_dir/sweep_results.tsv gets one row per combination of learning rate, batch size and
    epochs: the metric of each seed ("diverged" for one that did), the mean and standard deviation
    of the others; with --do_predict on labelled test data, each seed's test score (of its run's
    last model: every combination predicts), their mean and standard deviation as well;
  * --output_dir/best/ gets the best run's checkpoint (by the task's official dev metric),
    eval results and task.json; --do_predict and --export_dir then use it, and
    export_saved_model.py --init_checkpoint=<output_dir> exports it;
  * --sweep_shard=i/n trains every n-th combination from the i-th (several machines, one grid), and
    --sweep_collect writes the table and best/ from the finished sub-folders without training.

One value of each flag keeps a single run exactly as before.
"""

import dataclasses
import itertools
import json
import os
import statistics

import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import copy_checkpoint
from bert_tf.errors import Diverged, InputError
from bert_tf.models.networks.task_info import LABELS_FILE, TASK_FILE, VOCAB_FILE, write_vocab
from bert_tf.sigterm import doing
from bert_tf.tasks.finetuning import BEST_CHECKPOINT, EVAL_RESULTS_FILES
from bert_tf.tasks.run import read_test_results

SWEEP_FIELDS = ("learning_rate", "train_batch_size", "num_train_epochs", "seed")
RESULTS_FILE = "sweep_results.tsv"
RUN_FILE = "sweep_run.json"
BEST = "best"
_NAMES = {"learning_rate": "lr", "train_batch_size": "batch", "num_train_epochs": "epochs"}


def _values(value):
    return list(value) if isinstance(value, tuple) else [value]


def combinations(settings):
    """The grid of the settings: one {field: value} per combination, seeds varying fastest."""
    grid = [_values(getattr(settings, name)) for name in SWEEP_FIELDS]
    return [dict(zip(SWEEP_FIELDS, values, strict=True)) for values in itertools.product(*grid)]


def is_sweep(settings):
    return (
        any(isinstance(getattr(settings, name), tuple) for name in SWEEP_FIELDS)
        or bool(settings.sweep_shard)
        or settings.sweep_collect
    )


def run_name(combination):
    """The sub-folder of a combination, e.g. lr3e-05_batch32_epochs3_seed1."""
    parts = [f"{_NAMES[name]}{combination[name]:g}" for name in SWEEP_FIELDS[:3]]
    return "_".join([*parts, f"seed{combination['seed']}"])


def parse_shard(text):
    """'i/n' -> (i, n); InputError naming --sweep_shard if it is not 0 <= i < n."""
    if not text:
        return 0, 1
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise InputError(f"--sweep_shard={text}: expected i/n, e.g. 0/4") from None
    if not 0 <= index < count:
        raise InputError(f"--sweep_shard={text}: needs 0 <= i < n")
    return index, count


def read_run(folder):
    """The sweep_run.json of a finished combination's folder, or None."""
    path = os.path.join(folder, RUN_FILE)
    return file_io.read_json(path) if file_io.exists(path) else None


class Sweep:
    """A fine-tuning script's sweep: the runs of its grid, best/ and sweep_results.tsv.

    Args:
      settings: the script's FineTuningSettings, a sweep flag holding a tuple of values (is_sweep).
      run_class: the task's run (bert_tf.tasks.RUNS: run_class(settings) is a FineTuningRun of
        its task): each combination is one of its runs.

    Raises:
      InputError: a sweep without --do_eval (it ranks on dev), without --do_train or
        --sweep_collect, or a bad --sweep_shard.
    """

    def __init__(self, settings, run_class):
        if not settings.do_eval:
            raise InputError("a sweep ranks its runs on the dev set: pass --do_eval")
        if not (settings.do_train or settings.sweep_collect):
            raise InputError(
                "a sweep trains its combinations: pass --do_train (or --sweep_collect)"
            )
        self.shard = parse_shard(settings.sweep_shard)
        self.settings, self.run_class = settings, run_class

    def run(self):
        """Trains the shard's combinations, then (unless sharded) writes the results and best/.

        Returns:
          {"runs": {name: sweep_run.json's dict}, "best": the best run's, "predict", "export"}.
        """
        settings, run_class, (index, count) = self.settings, self.run_class, self.shard
        settings.check_output_dir()
        grid = combinations(settings)
        outcome = {"runs": {}}
        if not settings.sweep_collect:
            for number, combination in enumerate(grid):
                if number % count == index:
                    name = run_name(combination)
                    with doing(f"the sweep's run {name}"):
                        outcome["runs"][name] = _train(
                            settings, run_class, combination, number, len(grid)
                        )
            if count > 1:
                logging.info("Shard %d/%d done; --sweep_collect writes the results", index, count)
                return outcome
        outcome["best"], best_combination = collect(settings, grid)
        best_config = _settings(settings, best_combination, os.path.join(settings.output_dir, BEST))
        if settings.do_predict or settings.export_dir:
            final = run_class(
                dataclasses.replace(
                    best_config,
                    do_train=False,
                    do_eval=False,
                    do_predict=settings.do_predict,
                    export_dir=settings.export_dir,
                )
            ).run()
            outcome.update({key: final[key] for key in ("predict", "export") if key in final})
        return outcome


def _settings(settings, combination, output_dir):
    """One combination's run settings: scalars, its own folder, the sweep's features."""
    return dataclasses.replace(
        settings,
        **combination,
        output_dir=output_dir,
        feature_dir=settings.output_dir,
        do_predict=settings.do_predict,
        export_dir=None,
        sweep_shard=None,
        sweep_collect=False,
    )


def _train(settings, run_class, combination, number, total):
    """Trains and evaluates one combination (unless it finished before); its sweep_run.json."""
    name = run_name(combination)
    folder = os.path.join(settings.output_dir, name)
    done = read_run(folder)
    if done is None:
        task_run = run_class(_settings(settings, combination, folder))
        try:
            done = _outcome(task_run, combination, task_run.run())
        except Diverged as error:
            # The paper's grid goes on past a learning rate too high for the task.
            done = {"settings": combination, "metric": None, "value": None, "diverged": str(error)}
        if task_run.is_chief:
            file_io.write_text(os.path.join(folder, RUN_FILE), json.dumps(done, indent=2) + "\n")
    else:
        name += " (finished before)"
    if done["value"] is None:
        logging.warning("sweep %d/%d %s: %s", number + 1, total, name, done["diverged"])
    else:
        logging.info(
            "sweep %d/%d %s: %s = %.4f", number + 1, total, name, done["metric"], done["value"]
        )
    return done


def _outcome(task_run, combination, results):
    """A trained combination's sweep_run.json: its dev metric, from the run's end or its best
    checkpoint (--eval_every_steps), and whether it collapsed."""
    metric, value = task_run.dev_metric(results["eval"])
    checkpoint = "."
    best = task_run.best_checkpoint_metric()
    if best is not None and best["value"] > value:  # --eval_every_steps kept a better one
        metric, value, checkpoint = best["metric"], best["value"], BEST_CHECKPOINT
    done = {"settings": combination, "metric": metric, "value": value, "checkpoint": checkpoint}
    done["collapsed"] = task_run.collapsed  # every dev prediction one value, or None
    test = read_test_results(task_run.settings.output_dir)  # --do_predict on labelled test data
    if test is not None:
        done["test_metric"], done["test_value"] = task_run.dev_metric(test)
    return done


def collect(settings, grid):
    """Writes sweep_results.tsv and best/ from the finished combinations; returns (best run, its
    combination)."""
    finished = {}
    for combination in grid:
        done = read_run(os.path.join(settings.output_dir, run_name(combination)))
        if done is not None:
            finished[run_name(combination)] = done
    if not finished:
        raise InputError(f"--output_dir={settings.output_dir} holds no finished combination")
    missing = [run_name(c) for c in grid if run_name(c) not in finished]
    if missing:
        logging.warning("%d combination(s) not finished: %s", len(missing), ", ".join(missing))
    file_io.write_text(
        os.path.join(settings.output_dir, RESULTS_FILE), results_table(grid, finished)
    )
    ranked = [name for name, done in finished.items() if done["value"] is not None]
    if not ranked:
        first = next(iter(finished))
        raise Diverged(
            f"every finished combination in --output_dir={settings.output_dir} diverged; "
            f"{first}: {finished[first]['diverged']}"
        )
    best_name = max(ranked, key=lambda name: finished[name]["value"])  # the first of ties
    best = finished[best_name]
    source = os.path.join(settings.output_dir, best_name, best["checkpoint"])
    extra = [
        os.path.join(settings.output_dir, best_name, name)
        for name in (TASK_FILE, LABELS_FILE, VOCAB_FILE)
    ]
    extra += [os.path.join(source, name) for name in (*EVAL_RESULTS_FILES, RUN_FILE)]
    extra.append(os.path.join(settings.output_dir, best_name, RUN_FILE))
    copy_checkpoint(
        tf.train.latest_checkpoint(source),
        os.path.join(settings.output_dir, BEST),
        [path for path in dict.fromkeys(extra) if file_io.exists(path)],
    )
    # export_saved_model.py --init_checkpoint=<output_dir> reads the task from here.
    task_file = os.path.join(settings.output_dir, best_name, TASK_FILE)
    file_io.write_text(os.path.join(settings.output_dir, TASK_FILE), file_io.read_text(task_file))
    write_vocab(settings.output_dir, settings.vocab_file)
    logging.info(
        "Best of %d run(s): %s, %s = %.4f -> %s",
        len(ranked),
        best_name,
        best["metric"],
        best["value"],
        os.path.join(settings.output_dir, BEST),
    )
    return best, best["settings"]


def results_table(grid, finished):
    """sweep_results.tsv: per learning rate, batch size and epochs, each seed's metric ("diverged" if
    its training loss did), mean and std of the others, and the seeds whose run collapsed (every dev
    prediction one value: it learned nothing)."""
    seeds = list(dict.fromkeys(c["seed"] for c in grid))
    metric = next((done["metric"] for done in finished.values() if done["metric"]), "")
    header = [*SWEEP_FIELDS[:3], *(f"seed={seed}" for seed in seeds), "mean", "std", "metric"]
    header.append("collapsed_seeds")
    tested = any(done.get("test_value") is not None for done in finished.values())
    if tested:  # --do_predict on labelled test data: each seed's test score, of its last model
        header += [*(f"test seed={seed}" for seed in seeds), "test_mean", "test_std"]
    rows = ["\t".join(header)]
    settings = list(dict.fromkeys(tuple(c[name] for name in SWEEP_FIELDS[:3]) for c in grid))
    for values in settings:
        scores, collapsed, cells = [], [], [f"{v:g}" for v in values]
        for seed in seeds:
            combination = dict(zip(SWEEP_FIELDS, (*values, seed), strict=True))
            done = finished.get(run_name(combination))
            scores.append(None if done is None else done["value"])
            if done is not None and done.get("collapsed"):
                collapsed.append(f"{seed}")
            cells.append(_score_cell(done))
        known = [score for score in scores if score is not None]
        mean = f"{statistics.fmean(known):.4f}" if known else ""
        std = f"{statistics.stdev(known):.4f}" if len(known) > 1 else ""
        row = [*cells, mean, std, metric, ",".join(collapsed)]
        if tested:
            row += _test_cells(values, seeds, finished)
        rows.append("\t".join(row))
    return "\n".join(rows) + "\n"


def _test_cells(values, seeds, finished):
    """The test score of each seed of one setting (empty when it has none), their mean and std."""
    scores = []
    for seed in seeds:
        combination = dict(zip(SWEEP_FIELDS, (*values, seed), strict=True))
        done = finished.get(run_name(combination)) or {}
        scores.append(done.get("test_value"))
    known = [score for score in scores if score is not None]
    cells = ["" if score is None else f"{score:.4f}" for score in scores]
    cells.append(f"{statistics.fmean(known):.4f}" if known else "")
    cells.append(f"{statistics.stdev(known):.4f}" if len(known) > 1 else "")
    return cells


def _score_cell(done):
    """A seed's cell of sweep_results.tsv: its metric, "diverged", or empty when not finished."""
    if done is None:
        return ""
    return "diverged" if done["value"] is None else f"{done['value']:.4f}"
