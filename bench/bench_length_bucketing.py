"""Length bucketing at equal accuracy? run_classifier's batching variants over seeds, on real lengths.

The tasks are bench_finetune.py's (`sst2_like`: one sentence, which novel; `mrpc_like`: a pair, does
the second sentence follow the first), all-MiniLM-L6-v2, batch 32, max_seq_length 128. Each variant
trains and evaluates with `ClassifierRun` (what run_classifier.py --do_train --do_eval runs) once per
seed; only the batching differs:

  * fixed: --length_bucketing=False, every batch of 32 random examples padded to 128 (the original);
  * window<N>: --length_bucketing with make_feature_dataset's bucket_window=N: windows of N batches
    (N * 32 shuffled examples) sorted by length and cut into batches, each cut to its longest input,
    the batches shuffled. window1 keeps the fixed path's random batches (only the padding is cut).

Before training it prints how mixed in label the batches of each window size are (the share of
label 0 per batch against the 0.5 of random batches), from the examples' wordpiece lengths.

Every run appends one JSON line to --results (dev accuracy, training examples/s); a run already
there is skipped, so the grid can be split over several commands. The table at the end reads the
whole file: per task and variant, the mean dev accuracy over seeds with its standard error, the
difference from the fixed path's mean in units of the fixed path's standard error, and the median
training examples/s (wall clock of ClassifierRun.train, tracing included, features written before).

    .venv/bin/python -m bench.bench_length_bucketing --work_dir=/tmp/lb --tasks=sst2_like \\
        --seeds=1,2,3,4,5 --variants=fixed,window32,window4 --num_dev=1024
    .venv/bin/python -m bench.bench_length_bucketing --work_dir=/tmp/lb --summarize_only

The flags --tasks, --num_train, --num_dev, --epochs, --batch_size, --max_seq_length, --learning_rate,
--threads and --work_dir are bench_finetune.py's (this script reuses its data).
"""

import json
import os
import shutil
import statistics
import time

import numpy as np
from absl import app, flags, logging

from bench import (
    bench_finetune,  # defines the shared flags
    machine,
    minilm,
    stats,
)

FLAGS = flags.FLAGS
flags.DEFINE_list("variants", ["fixed", "window32", "window4"], "fixed, or window<N> (bucketing).")
flags.DEFINE_list("seeds", ["1", "2", "3", "4", "5"], "Seeds (head init, dropout, input order).")
flags.DEFINE_string("results", None, "JSON lines of the runs (default: work_dir/runs.jsonl).")
flags.DEFINE_bool("summarize_only", False, "Train nothing: print the table of --results.")
flags.DEFINE_list("mix_windows", ["1", "4", "32"], "Window sizes of the label-mix table.")


def bucket_window(variant):
    """None for "fixed", N for "window<N>"."""
    if variant == "fixed":
        return None
    if not variant.startswith("window") or not variant[6:].isdigit() or int(variant[6:]) < 1:
        raise ValueError(f"--variants: {variant!r} is neither fixed nor window<N>, N >= 1")
    return int(variant[6:])


def classifier_run(config, window):
    """A ClassifierRun whose datasets use bucket_window=window (run.py passes the default)."""
    from bert_tf.data.feature_cache import make_feature_dataset
    from bert_tf.tasks.classification.task import ClassifierRun

    class WindowRun(ClassifierRun):
        def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
            return make_feature_dataset(
                path, self.feature_spec(is_training, path), batch_size, is_training,
                input_context=input_context, seed=self.config.seed,
                length_bucketing=self.config.length_bucketing,
                sequence_features=self.sequence_features, bucket_window=window,
                num_records=num_records,
                padding_features=None if is_training else self.padding_feature(is_training, path),
            )  # fmt: skip

    return WindowRun(config) if window else ClassifierRun(config)


def label_mix(labels, lengths, window, batch_size, repeats=20, seed=0):
    """Mean |share of the first label - 0.5| over the batches of windows sorted by length."""
    rng = np.random.default_rng(seed)
    is_first = (labels == sorted(set(labels))[0]).astype(float)
    examples_per_window, deviations = window * batch_size, []
    for _ in range(repeats):
        order = rng.permutation(len(labels))
        for start in range(0, len(order) - examples_per_window + 1, examples_per_window):
            chosen = order[start : start + examples_per_window]
            chosen = chosen[np.argsort(lengths[chosen], kind="stable")]
            for batch in range(0, examples_per_window, batch_size):
                deviations.append(abs(is_first[chosen[batch : batch + batch_size]].mean() - 0.5))
    return float(np.mean(deviations))


def describe_task(task, train, vocab_file):
    lengths = np.minimum(bench_finetune.packed_lengths(train, vocab_file), FLAGS.max_seq_length)
    labels = np.array([row[0] for row in train])
    by_label = ", ".join(
        f"{label}: median {np.median(lengths[labels == label]):.0f} / mean "
        f"{lengths[labels == label].mean():.1f}"
        for label in sorted(set(labels))
    )
    mixes = ", ".join(
        f"window {w}: {label_mix(labels, lengths, int(w), FLAGS.batch_size):.3f}"
        for w in FLAGS.mix_windows
    )
    print(
        f"{task}: wordpieces by label ({by_label}); |share of one label - 0.5| per batch: {mixes}"
    )


def train_and_evaluate(task, variant, seed, data_dir, model_dir, work_dir):
    """One run: {"accuracy", "train_examples_per_sec", ...}."""
    from bert_tf.tasks.classification.task import ClassifierSettings

    window = bucket_window(variant)
    output_dir = os.path.join(work_dir, "runs", f"{task}_{variant}_seed{seed}")
    shutil.rmtree(output_dir, ignore_errors=True)  # a run cut off earlier starts again
    feature_dir = os.path.join(work_dir, f"{task}_features")  # shared by the variants and seeds
    os.makedirs(feature_dir, exist_ok=True)
    config = ClassifierSettings(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
        output_dir=output_dir, feature_dir=feature_dir,
        data_dir=data_dir, task_name="tsv", label_column="0", text_a_column="1",
        text_b_column="2" if task == "mrpc_like" else None, do_train=True, do_eval=True,
        max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.epochs, seed=seed, length_bucketing=window is not None,
        log_steps=10**6, save_checkpoints_steps=10**6,
        cut_batches_to_longest=False,  # "fixed": the original's batches padded to 128, as measured
    )  # fmt: skip
    run = classifier_run(config, window)
    run.validate()
    path, info = run.features("train")
    trainer = run.trainer(path, info["num_real_examples"])
    start = time.perf_counter()
    last = run.train()
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    results = run.evaluate()
    predict_seconds = time.perf_counter() - start
    steps = trainer.settings.num_train_steps
    shutil.rmtree(output_dir, ignore_errors=True)
    return {
        "accuracy": float(results["eval_accuracy"]),
        "eval_loss": float(results["eval_loss"]),
        "train_loss": float(last.get("loss", float("nan"))),
        "steps": steps,
        "train_seconds": train_seconds,
        "train_examples_per_sec": steps * FLAGS.batch_size / train_seconds,
        "predict_seconds": predict_seconds,
    }


def settings():
    """What makes runs comparable: the same data sizes and training settings."""
    return {
        "num_train": FLAGS.num_train,
        "num_dev": FLAGS.num_dev,
        "epochs": FLAGS.epochs,
        "batch_size": FLAGS.batch_size,
        "max_seq_length": FLAGS.max_seq_length,
        "learning_rate": FLAGS.learning_rate,
    }


def summarize(rows):
    """The Markdown table: per task and variant, accuracy over seeds and training speed."""
    print(
        "\n| task | batching | seeds | dev accuracy: mean (standard error) | std | min - max | "
        "difference from fixed (in fixed's standard errors) | train examples/s (median) | "
        "speed / fixed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    for task in tasks:
        by_variant = {}
        for row in rows:
            if row["task"] == task:
                by_variant.setdefault(row["variant"], []).append(row)
        fixed = by_variant.get("fixed")
        fixed_mean, fixed_error = (
            stats.mean_and_error(r["accuracy"] for r in fixed) if fixed else (None, None)
        )
        fixed_speed = (
            statistics.median(r["train_examples_per_sec"] for r in fixed) if fixed else None
        )
        for variant in sorted(by_variant, key=lambda v: (v != "fixed", -(bucket_window(v) or 0))):
            runs = by_variant[variant]
            accuracies = [r["accuracy"] for r in runs]
            mean, error = stats.mean_and_error(accuracies)
            std = statistics.stdev(accuracies) if len(accuracies) > 1 else None
            speed = statistics.median(r["train_examples_per_sec"] for r in runs)
            difference = ""
            if fixed and variant != "fixed":
                in_errors = f"{(mean - fixed_mean) / fixed_error:+.1f}" if fixed_error else "no SE"
                difference = f"{mean - fixed_mean:+.4f} ({in_errors})"
            ratio = f"{speed / fixed_speed:.2f}" if fixed else ""
            print(
                f"| {task} | {variant} | {len(runs)} | {mean:.4f} ({stats.error_text(error)}) | "
                f"{stats.error_text(std)} | "
                f"{min(accuracies):.4f} - {max(accuracies):.4f} | {difference} | {speed:.1f} | "
                f"{ratio} |"
            )


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    work_dir = FLAGS.work_dir or "/tmp/bench_length_bucketing"
    results_path = FLAGS.results or os.path.join(work_dir, "runs.jsonl")
    if FLAGS.summarize_only:
        summarize(machine.read_json_lines(results_path))
        return
    threads = machine.set_threads(FLAGS.threads)
    model_dir = minilm.converted(work_dir)
    print(machine.header())
    print(
        f"all-MiniLM-L6-v2, {machine.threads_line(threads)}; {FLAGS.num_train} train / "
        f"{FLAGS.num_dev} dev examples, {FLAGS.epochs:g} epochs, batch {FLAGS.batch_size}, "
        f"max_seq_length {FLAGS.max_seq_length}, lr {FLAGS.learning_rate:g}\n",
        flush=True,
    )
    for variant in FLAGS.variants:
        bucket_window(variant)  # a bad name fails before any training
    for task in FLAGS.tasks:
        data_dir = os.path.join(work_dir, task)
        train, _ = bench_finetune.write_task(task, data_dir)
        describe_task(task, train, os.path.join(model_dir, "vocab.txt"))
    done = {
        (row["task"], row["variant"], row["seed"])
        for row in machine.read_json_lines(results_path)
        if row["settings"] == settings()
    }
    for seed in (int(seed) for seed in FLAGS.seeds):
        for task in FLAGS.tasks:
            for variant in FLAGS.variants:  # taking turns: load falls on every variant alike
                if (task, variant, seed) in done:
                    continue
                data_dir = os.path.join(work_dir, task)
                result = train_and_evaluate(task, variant, seed, data_dir, model_dir, work_dir)
                row = {"task": task, "variant": variant, "seed": seed, "settings": settings()}
                row.update(result, load=machine.load_line())
                print(json.dumps(row), flush=True)
                with open(results_path, "a", encoding="utf-8") as writer:
                    writer.write(json.dumps(row) + "\n")
    rows = [row for row in machine.read_json_lines(results_path) if row["settings"] == settings()]
    summarize(rows)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
