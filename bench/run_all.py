"""The whole benchmark suite in one run, written to bench/results/run_all.md (and .json): every table
from one machine.

    .venv/bin/python -m bench.run_all                    # every step but real (41 minutes in the last whole run;
                                                         # restart 43, beam 20 + 3, latency 9 more, each in its own run)
    .venv/bin/python -m bench.run_all --quick            # tiny sizes: checks that every bench runs
    .venv/bin/python -m bench.run_all --only=finetune,precision

The steps (STEPS), in the order of README's performance table: each runs its scripts (each also
runs alone; its docstring says what it measures); `real` (finetune_real.py, bench_real_text.py)
only with --real.

Each benchmark runs in its own process; the peers need `pip install -e .[bench,compare]`. Every step's
output, with the load average before and after, is printed and written to --log; then the run
rewrites --results above its appendix and writes its JSON record beside it (bench/report.py),
unless --quick.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from bench import BENCH_DIR, REPO_DIR, machine, report

# name -> [(label, script, full-size arguments, --quick arguments)]
STEPS = {
    "pretraining_data": [
        ("create_pretraining_data", "bench.bench_create_pretraining_data", [], ["--repeats=1", "--scales="]),
    ],
    "beam": [
        ("create_pretraining_data on Beam beside the pool, 2.7 MB to 1.1 GB", "bench.bench_beam_data", [], ["--quick"]),
        ("batch_predict.py on Beam against a direct loop over the export", "bench.bench_beam_predict", [], ["--model=bert_tiny", "--rows=500"]),
    ],
    "finetune": [
        ("run_classifier fine-tuning and prediction, real lengths", "bench.bench_finetune", ["--num_train=1024", "--num_dev=256", "--epochs=1", "--rounds=4", "--predict_passes=3"], ["--num_train=64", "--num_dev=32", "--epochs=1", "--rounds=2", "--predict_passes=2"]),
    ],
    "inference": [
        ("encoder inference, batch 16 and batch 1", "bench.bench_inference", [], ["--model=bert_mini", "--repeats=2", "--latency_calls=5"]),
    ],
    "latency": [
        ("the export, one request at a time, vs transformers and keras-hub", "bench.bench_latency", [], ["--model=bert_tiny", "--calls=5"]),
    ],
    "training": [
        ("pretraining step, run 1", "bench.bench_pretraining", ["--steps=10", "--rounds=2"], ["--models=mini", "--steps=2", "--rounds=1", "--warmup_steps=1"]),
        ("pretraining step, run 2", "bench.bench_pretraining", ["--steps=10", "--rounds=2"], ["--models=mini", "--steps=2", "--rounds=1", "--warmup_steps=1"]),
        ("pretraining step with transformers", "bench.bench_pretraining", ["--models=mini", "--runners=bert_tf,keras_hub,transformers", "--jit_compile=no", "--steps=10", "--rounds=2"], ["--models=mini", "--runners=bert_tf,transformers", "--jit_compile=no", "--steps=2", "--rounds=1", "--warmup_steps=1"]),
    ],
    "restart": [
        ("resume to the first step, global step 10 to 100,000", "bench.bench_restart", [], ["--quick"]),
    ],
    "attention": [
        ("attention block forms", "bench.bench_attention", [], ["--calls=2", "--rounds=1"]),
    ],
    "serving": [
        ("tokenizers, tokens/s", "bench.bench_tokenizer", ["--repeats=3"], ["--batch_sizes=256", "--repeats=1"]),
        ("raw-text exports: the tokenizer's cost, padding", "bench.bench_serving", ["--calls=30"], ["--models=bert_mini", "--calls=5"]),
    ],
    "precision": [
        ("mixed_bfloat16 against float32", "bench.bench_precision", [], ["--inference_model=bert_tiny", "--repeats=2", "--steps=2", "--rounds=1", "--finetune_train=64", "--finetune_dev=32", "--finetune_steps=2", "--finetune_rounds=1"]),
    ],
    "real": [
        ("all-MiniLM-L6-v2 on BBC News", "bench.finetune_real", [], ["--max_articles=100", "--num_train_epochs=1"]),
        ("accuracy on real text: ours, bag of words, transformers", "bench.bench_real_text", ["--work_dir=/tmp/bench_real_text", "--rotten_tomatoes_sizes=400,200,500", "--tweets_sizes=400,200,500", "--imdb_sizes=80,64,200", "--learning_rates=5e-5", "--epoch_values=3", "--threads=1"], ["--work_dir=/tmp/bench_real_text_quick", "--rotten_tomatoes_sizes=64,32,32", "--tweets_sizes=64,32,32", "--imdb_sizes=8,8,8", "--learning_rates=5e-5", "--epoch_values=1", "--seeds=1,2"]),
    ],
}  # fmt: skip


def _shown(path):
    """path relative to the repository when inside it (a report reads the same from any clone)."""
    relative = os.path.relpath(path, REPO_DIR)
    return path if relative.startswith("..") else relative


def _utc():
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--only", default="", help="comma-separated step names; default: all")
    add("--quick", action="store_true", help="tiny sizes: a smoke test, not results")
    add("--real", action="store_true", help="also the real-data steps (STEPS['real'])")
    add("--log", default=os.path.join(tempfile.gettempdir(), "bench_run_all.log"), help="the log")
    # The report this run rewrites above its appendix (never with --quick); its JSON beside it.
    add("--results", default=os.path.join(BENCH_DIR, "results", "run_all.md"), help="the report")
    # Without --quiet, quiet is recorded as unknown and bench/figures.py judges no speed of the run.
    add("--quiet", action="store_true", help="declare that nothing else ran on the machine")
    args = parser.parse_args()
    chosen = [name for name in args.only.split(",") if name] or [
        name for name in STEPS if name != "real" or args.real
    ]
    unknown = sorted(set(chosen) - set(STEPS))
    if unknown:
        parser.error(f"unknown steps {unknown}; known: {sorted(STEPS)}")
    names = [name for name in STEPS if name in chosen]  # README's order, whatever --only's

    failed, steps = [], []
    run = dict(
        command=" ".join([_shown(sys.executable), "-m", "bench.run_all", *sys.argv[1:]]),
        started=_utc(), commit=report.commit(REPO_DIR), versions=report.versions(),
        machine=machine.header(with_tensorflow=False), load_before=machine.load_line(),
    )  # fmt: skip
    with open(args.log, "w", encoding="utf-8") as log:

        def say(text):
            print(text, flush=True)
            log.write(text + "\n")
            log.flush()

        say(f"bench/run_all.py {'--quick ' if args.quick else ''}started {time.ctime()}")
        for name in names:
            for label, module, full, quick in STEPS[name]:
                command = [sys.executable, "-m", module]
                command += quick if args.quick else full
                load_before = machine.load_line()
                say(f"\n## {label}\n$ {' '.join(command)}\n{load_before} (before)")
                start = time.perf_counter()
                process = subprocess.run(
                    command, cwd=REPO_DIR, capture_output=True, text=True, check=False
                )
                # TensorFlow's start-up chatter goes to stderr; the tables go to stdout.
                output = process.stdout.rstrip()
                say(output)
                if process.returncode:
                    failed.append(label)
                    say(process.stderr[-3000:])
                    output += "\n" + "\n".join(process.stderr.splitlines()[-20:])
                seconds = time.perf_counter() - start
                load_after = machine.load_line()
                say(f"{load_after} (after); {seconds:.0f} s, exit {process.returncode}")
                steps.append(
                    dict(label=label, command=" ".join(_shown(part) for part in command),
                         output=output, load_before=load_before, load_after=load_after,
                         seconds=seconds, returncode=process.returncode)
                )  # fmt: skip
        say(f"\nfinished {time.ctime()}; failed: {', '.join(failed) or 'none'}; log: {args.log}")
    if args.quick:
        print(f"--quick: {args.results} left as it was (a smoke run is not results)")
    else:
        run.update(finished=_utc(), load_after=machine.load_line())
        not_run = [name for name in STEPS if name not in names]
        text = report.render(run, steps, not_run)
        appendix = report.appendix(args.results)
        with open(args.results, "w", encoding="utf-8") as writer:
            writer.write(text + ("\n" + appendix if appendix else ""))
        record_path = os.path.splitext(args.results)[0] + ".json"
        with open(record_path, "w", encoding="utf-8") as writer:
            writer.write(report.render_json(run, steps, True if args.quiet else None))
        print(f"wrote {args.results} and {record_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
