"""The BERT paper's fine-tuning grid through run_classifier's sweep: how far apart do seeds land?

The paper picks each task's learning rate, batch size and epochs on dev, with restarts on small data
sets. `bert_tf.tasks.run_script(classification.SPEC, ...)` does the same when a sweep flag holds several values (what
run_classifier.py --learning_rate=5e-5,3e-5 ... runs; bert_tf/tasks/sweep.py): every combination
trains and evaluates in its own folder, sweep_results.tsv gets each seed's dev metric with their mean
and standard deviation, best/ the best run. This bench runs such a grid with all-MiniLM-L6-v2 on
bench_finetune.py's `sst2_like` (one sentence of real length: Emma or Pride and Prejudice?) and
prints, per combination, the seeds' dev accuracies, their mean, standard deviation and max - min.

    .venv/bin/python -m bench.bench_sweep --work_dir=/tmp/sweep --num_train=1024 --num_dev=1024
    .venv/bin/python -m bench.bench_sweep --learning_rates=1e-4 --batch_sizes=32 --epoch_values=1 \\
        --sweep_seeds=1,2 --num_train=64 --num_dev=32                  # smoke test

A sweep cut off is taken up again by the same command (finished combinations are skipped).
The flags --num_train, --num_dev, --max_seq_length, --threads and --work_dir are bench_finetune.py's.
"""

import csv
import os
import statistics
import time

from absl import app, flags, logging

from bench import (
    bench_finetune,  # defines the shared flags
    machine,
    minilm,
)

FLAGS = flags.FLAGS
flags.DEFINE_string("task", "sst2_like", "bench_finetune.py's task: sst2_like or mrpc_like.")
flags.DEFINE_list("learning_rates", ["5e-5", "3e-5"], "--learning_rate values of the grid.")
flags.DEFINE_list("batch_sizes", ["16", "32"], "--train_batch_size values of the grid.")
flags.DEFINE_list("epoch_values", ["2", "3"], "--num_train_epochs values of the grid.")
flags.DEFINE_list("sweep_seeds", ["1", "2", "3"], "--seed values (restarts) of the grid.")
flags.DEFINE_bool(
    "length_bucketing", True,
    "run_classifier's --length_bucketing: on sst2_like it matches the original's batches in dev "
    "accuracy over 5 seeds at 3x the speed (bench_length_bucketing.py), which makes the grid cheap.",
)  # fmt: skip


def sweep_config(data_dir, model_dir, output_dir):
    """run_classifier.py's settings with the grid's tuples: a sweep."""
    from bert_tf.tasks.classification.task import ClassifierSettings

    return ClassifierSettings(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
        output_dir=output_dir, data_dir=data_dir, task_name="tsv", label_column="0",
        text_a_column="1", text_b_column="2" if FLAGS.task == "mrpc_like" else None,
        do_train=True, do_eval=True, max_seq_length=FLAGS.max_seq_length, eval_batch_size=32,
        learning_rate=tuple(float(v) for v in FLAGS.learning_rates),
        train_batch_size=tuple(int(v) for v in FLAGS.batch_sizes),
        num_train_epochs=tuple(float(v) for v in FLAGS.epoch_values),
        seed=tuple(int(v) for v in FLAGS.sweep_seeds), length_bucketing=FLAGS.length_bucketing,
        log_steps=10**6,
        save_checkpoints_steps=10**6,
    )  # fmt: skip


def print_table(results_path, best):
    """sweep_results.tsv as Markdown, with max - min per combination; the spread's summary."""
    with open(results_path, encoding="utf-8") as reader:
        rows = list(csv.DictReader(reader, delimiter="\t"))
    seed_columns = [name for name in rows[0] if name.startswith("seed=")]
    print(
        "\n| learning rate | batch | epochs | "
        + " | ".join(seed_columns)
        + " | mean | std | max - min |"
    )
    print("|---|---|---|" + "---|" * len(seed_columns) + "---|---|---|")
    spreads, stds = [], []
    for row in rows:
        scores = [float(row[name]) for name in seed_columns if row[name]]
        spread = max(scores) - min(scores)
        spreads.append(spread)
        stds.append(float(row["std"]) if row["std"] else float("nan"))
        print(
            f"| {row['learning_rate']} | {row['train_batch_size']} | {row['num_train_epochs']} | "
            + " | ".join(row[name] for name in seed_columns)
            + f" | {row['mean']} | {row['std']} | {spread:.4f} |"
        )
    best_mean = max(rows, key=lambda row: float(row["mean"]))
    print(
        f"\nstd across seeds: median {statistics.median(stds):.4f}, largest {max(stds):.4f}; "
        f"max - min: median {statistics.median(spreads):.4f}, largest {max(spreads):.4f}"
    )
    print(
        f"best mean: lr {best_mean['learning_rate']}, batch {best_mean['train_batch_size']}, "
        f"epochs {best_mean['num_train_epochs']}: {best_mean['mean']} (std {best_mean['std']}); "
        f"the sweep's best run (best/): {best['settings']}, {best['metric']} = {best['value']:.4f}"
    )


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from bert_tf.tasks import run_script, sweep
    from bert_tf.tasks.classification import task as classification

    threads = machine.set_threads(FLAGS.threads)
    work_dir = FLAGS.work_dir or "/tmp/bench_sweep"
    model_dir = minilm.converted(work_dir)
    data_dir = os.path.join(work_dir, FLAGS.task)
    train, dev = bench_finetune.write_task(FLAGS.task, data_dir)
    output_dir = os.path.join(work_dir, "sweep")
    print(machine.header())
    print(
        f"all-MiniLM-L6-v2, {machine.threads_line(threads)}; {FLAGS.task}: {len(train)} train / "
        f"{len(dev)} dev examples, max_seq_length {FLAGS.max_seq_length}; learning rates "
        f"{FLAGS.learning_rates}, batch sizes {FLAGS.batch_sizes}, epochs {FLAGS.epoch_values}, "
        f"seeds {FLAGS.sweep_seeds}, length bucketing {FLAGS.length_bucketing}\n",
        flush=True,
    )
    start = time.perf_counter()
    outcome = run_script(classification.SPEC, sweep_config(data_dir, model_dir, output_dir))
    print(f"sweep wall time (this command): {time.perf_counter() - start:.0f} s")
    print_table(os.path.join(output_dir, sweep.RESULTS_FILE), outcome["best"])
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
