"""Restart cost: a resumed pretraining run's time to its first new step, at global step 10 and 100,000.

A run resumed from model.ckpt-<step> puts its training input where the checkpoint left it: with the
input state (<model_dir>/input_state/, each worker's tf.data iterator saved beside the checkpoint)
it restores that position; from a checkpoint without it the run reads through (skips) every batch
it trained on, which costs time in proportion to the step.

    .venv/bin/python -m bench.bench_restart           # steps 10,1000,10000,100000, batch 256:
                                                      # trains to each step first; 7 GB of disk
    .venv/bin/python -m bench.bench_restart --quick   # steps 10,100, batch 16: checks that it runs

Measured, for each --steps value N: the wall time of `run_pretraining.py --num_train_steps=N+1`
resuming from model.ckpt-N in a fresh process, as a user restarts a run (start, restore, input,
tracing, the step, the checkpoint at N + 1): "ours" with the input state, "skip" from a copy
without input_state/. Medians of --repeats (ours) and --baseline_repeats (skip) processes taking
turns, each on a fresh copy. Also printed: the checkpoint's and the input state's bytes, whether
the log says the input position was restored, and whether the first step's loss is the same both
ways (the same batch). The checkpoints are made by run_pretraining.py training N steps of
sample_data's tiny config on synthetic records (a few thousand distinct ones, repeated). Target:
ours at the largest step within 2x of the smallest, an input state that does not grow with the step.
"""

import glob
import json
import os
import re
import shutil
import statistics
import tempfile
import time

from absl import app, flags

from bench import REPO_DIR, corpora, machine, scripts

TINY_CONFIG = os.path.join(REPO_DIR, "sample_data", "bert_config_tiny.json")
FULL = dict(steps="10,1000,10000,100000", batch_size=256, repeats=3)
QUICK = dict(steps="10,100", batch_size=16, repeats=1)

FLAGS = flags.FLAGS
# Unset, --steps, --batch_size and --repeats take FULL's values, or QUICK's with --quick.
flags.DEFINE_string("steps", None, "Comma-separated global steps to resume at.")
flags.DEFINE_integer("batch_size", None, "Global batch.")
flags.DEFINE_integer("repeats", None, "Resumes of ours per step (the median counts).")
flags.DEFINE_integer("baseline_repeats", 1, "Resumes of the skip baseline per step.")
flags.DEFINE_integer("skip_baseline_max_step", 0, "The skip baseline only up to this step; 0: all.")
flags.DEFINE_integer("max_seq_length", 16, "Tokens per record.")
flags.DEFINE_integer("vocab_size", 30522, "The model's vocabulary, and the synthetic ids' range.")
flags.DEFINE_integer("num_files", 4, "TFRecord files of the corpus.")
flags.DEFINE_string("work_dir", tempfile.gettempdir(), "Where the run's folder is made.")
flags.DEFINE_bool("keep", False, "Keep that folder (removed at the end by default).")
flags.DEFINE_bool("quick", False, "Tiny sizes: a smoke test, not results.")
MAX_PREDICTIONS = 2
DISTINCT_RECORDS = 4096
MARGIN_BATCHES = 100  # beyond the largest step: the step at N + 1, the shuffle and prefetch buffers
BYTES_PER_RECORD = 300  # an upper bound of one synthetic record's size, for the disk check


def _pretrain(settings, model_dir, steps):
    """run_pretraining.py to global step `steps` in model_dir: (wall seconds, its log)."""
    seconds, result = scripts.timed(
        "run_pretraining", bert_config_file=settings["bert_config_file"],
        input_file=settings["input_file"], output_dir=model_dir, do_train=True,
        max_seq_length=settings["max_seq_length"], max_predictions_per_seq=MAX_PREDICTIONS,
        train_batch_size=settings["batch_size"], num_train_steps=steps, num_warmup_steps=1,
        learning_rate=1e-4, iterations_per_loop=min(steps, 1000), save_checkpoints_steps=steps,
        log_steps=10**9,
    )  # fmt: skip
    return seconds, result.stderr


def _resume(settings, model_dir, step):
    """One resume from model.ckpt-step in model_dir: its seconds, input restored, first loss."""
    seconds, log = _pretrain(settings, model_dir, step + 1)
    losses = re.findall(rf"step {step + 1}/{step + 1}\s+loss ([0-9.]+)", log)
    return {
        "seconds": seconds,
        "input_restored": "Input position restored" in log,
        "loss": float(losses[-1]),
    }


def _rounded(values):
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in values.items()}


def _bytes(pattern):
    return sum(os.path.getsize(path) for path in glob.glob(pattern))


def _write_inputs(work_dir, args, max_step):
    """The BERT config and the corpus in work_dir; returns (config path, comma-separated files)."""
    with open(TINY_CONFIG, encoding="utf-8") as reader:
        bert_config = json.load(reader)
    bert_config.update(vocab_size=args.vocab_size)
    config_path = os.path.join(work_dir, "bert_config.json")
    with open(config_path, "w", encoding="utf-8") as writer:
        json.dump(bert_config, writer, indent=2)
    num_records = (max_step + MARGIN_BATCHES) * args.batch_size
    needed, free = num_records * BYTES_PER_RECORD, shutil.disk_usage(work_dir).free
    if needed > 0.9 * free:
        raise OSError(
            f"{work_dir}: the corpus needs about {needed / 1e9:.1f} GB, {free / 1e9:.1f} GB are "
            "free: pass --work_dir on a larger disk, or smaller --steps or --batch_size"
        )
    files = [os.path.join(work_dir, f"corpus-{i}.tfrecord") for i in range(args.num_files)]
    start = time.perf_counter()
    features = corpora.random_features(
        DISTINCT_RECORDS, args.max_seq_length, MAX_PREDICTIONS, args.vocab_size
    )
    per_file = -(-num_records // len(files))
    for path in files:
        corpora.write_records(path, features, per_file)
    written = per_file * len(files)
    size = sum(os.path.getsize(path) for path in files)
    print(
        f"corpus: {written:,} records in {len(files)} files, {size / 1e9:.2f} GB, "
        f"written in {time.perf_counter() - start:.0f} s",
        flush=True,
    )
    return config_path, ",".join(files)


def _timed_resume(source, trial_dir, settings, keep_input_state):
    """One resume in a fresh process, from a fresh copy of the checkpoint in `source`."""
    ignore = None if keep_input_state else shutil.ignore_patterns("input_state")
    shutil.copytree(source, trial_dir, ignore=ignore)
    try:
        return _resume(settings, trial_dir, settings["step"])
    finally:
        shutil.rmtree(trial_dir)


def _make_checkpoints(work_dir, settings, steps):
    """{step: row}: each step's checkpoint, made by a setup process, and its sizes."""
    rows = {}
    for step in steps:
        model_dir = os.path.join(work_dir, f"step-{step}")
        seconds, _ = _pretrain(settings, model_dir, step)
        rows[step] = dict(
            step=step,
            model_dir=model_dir,
            setup_train_seconds=round(seconds, 1),
            checkpoint_bytes=_bytes(os.path.join(model_dir, f"model.ckpt-{step}.*")),
            input_state_bytes=_bytes(os.path.join(model_dir, "input_state", f"*-{step}.*")),
        )
        print(json.dumps({k: v for k, v in rows[step].items() if k != "model_dir"}), flush=True)
        rows[step].update(ours=[], skip=[])
    return rows


def _time_resumes(args, work_dir, settings, rows):
    """Appends each resume's result to rows[step]["ours"] and ["skip"]; all take turns, repeat by
    repeat, so that load from other work on the machine falls on every step alike."""
    baseline_max = args.skip_baseline_max_step or max(rows)
    trial = os.path.join(work_dir, "trial")
    for repeat in range(max(args.repeats, args.baseline_repeats)):
        for step, row in rows.items():
            runs = [("ours", True)] if repeat < args.repeats else []
            if repeat < args.baseline_repeats and step <= baseline_max:
                runs.append(("skip", False))
            for name, keep_input_state in runs:
                step_settings = {**settings, "step": step}
                result = _timed_resume(row["model_dir"], trial, step_settings, keep_input_state)
                row[name].append(result)
                print(json.dumps({"step": step, "run": name, **_rounded(result)}), flush=True)


def _median(results):
    return statistics.median(r["seconds"] for r in results) if results else None


def _print_table(rows, batch_size):
    print(
        "\n| step | examples before | resume to first step, ours (s) | skip baseline (s) | ratio "
        "| checkpoint MB | input state KB |"
    )
    print("|---|---|---|---|---|---|---|")
    for step, row in rows.items():
        ours, skip = _median(row["ours"]), _median(row["skip"])
        skipped = "" if all(r["input_restored"] for r in row["ours"]) else " (input skipped!)"
        print(
            f"| {step:,} | {step * batch_size:,} | {ours:.2f}{skipped} | "
            f"{f'{skip:.2f}' if skip is not None else 'not run'} | "
            f"{f'{skip / ours:.1f}x' if skip is not None else '-'} | "
            f"{row['checkpoint_bytes'] / 2**20:.2f} | {row['input_state_bytes'] / 2**10:.1f} |"
        )
    print("(median seconds of fresh processes; ratio: skip baseline / ours)")


def _print_verdicts(rows):
    first, last = rows[min(rows)], rows[max(rows)]
    ratio = _median(last["ours"]) / _median(first["ours"])
    print(
        f"\nours at {last['step']} / ours at {first['step']} = {ratio:.2f} (target <= 2): "
        f"{'met' if ratio <= 2 else 'NOT met'}"
    )
    # The size varies with what the buffers (prefetch, shuffle, interleave) hold at the save, a few
    # batches at most; a state that kept anything per step read would grow with the step.
    sizes = [row["input_state_bytes"] for row in rows.values()]
    grows = last["input_state_bytes"] > 1.5 * first["input_state_bytes"]
    print(
        f"input state: {min(sizes) / 2**10:.1f} to {max(sizes) / 2**10:.1f} KB over the steps "
        f"(what its buffers held at the save); {last['input_state_bytes'] / 2**10:.1f} KB at "
        f"{last['step']} against {first['input_state_bytes'] / 2**10:.1f} KB at {first['step']}, "
        f"{last['step'] // first['step']:,}x the step: "
        f"{'GROWS with the step (more than 1.5x)' if grows else 'does not grow with the step'}"
    )
    not_restored = [
        step for step, row in rows.items() if not all(r["input_restored"] for r in row["ours"])
    ]
    if not_restored:
        print(f"ours did NOT restore the input state at steps {not_restored}: it skipped instead")
    compared = [
        (s, row["ours"][0]["loss"], row["skip"][0]["loss"])
        for s, row in rows.items()
        if row["skip"]
    ]
    if compared:
        differ = [s for s, ours, skip in compared if abs(ours - skip) > 1e-5 * max(1.0, abs(skip))]
        verdict = f"DIFFERS at steps {differ}" if differ else "the same at every step compared"
        losses = ", ".join(f"{s}: {ours:.6f} vs {skip:.6f}" for s, ours, skip in compared)
        print(f"first new step's loss, ours vs skip (the same batch?): {verdict} ({losses})")


def main(argv):
    del argv
    args = FLAGS
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)  # the flag's default: --quick's, else the full run's
    steps = sorted({int(step) for step in args.steps.split(",") if step})
    if not steps or steps[0] <= 0:
        raise app.UsageError(f"--steps must be positive global steps, got {args.steps!r}")

    print(machine.header(with_tensorflow=False), flush=True)
    print(
        f"resume at steps {steps}, global batch {args.batch_size}, seq {args.max_seq_length}, "
        f"{MAX_PREDICTIONS} predictions, tiny BERT (2 layers, hidden 64, vocab {args.vocab_size}); "
        f"median of {args.repeats} resume(s) ours, {args.baseline_repeats} skip\n",
        flush=True,
    )
    work_dir = tempfile.mkdtemp(prefix="bench_restart_", dir=args.work_dir)
    try:
        config_path, input_file = _write_inputs(work_dir, args, max(steps))
        settings = dict(
            bert_config_file=config_path,
            input_file=input_file,
            max_seq_length=args.max_seq_length,
            batch_size=args.batch_size,
        )
        rows = _make_checkpoints(work_dir, settings, steps)
        _time_resumes(args, work_dir, settings, rows)
    finally:
        if args.keep:
            print(f"kept {work_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    _print_table(rows, args.batch_size)
    _print_verdicts(rows)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
