"""Benchmark: create_pretraining_data.py on Beam (2 local worker processes) beside the one-machine pool.

Per-worker memory must stay flat as the corpus grows; the per-CPU rate tells what a cluster would
take. On the same corpus and flags: "pool" (--num_workers=2) and "beam"
(--beam_pipeline_options=runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing).
Corpora: Austen (2.7 MB), 20 copies (54 MB) and 400 copies (1.1 GB, 20 files), each copy shuffled
(bench_create_pretraining_data.scaled_corpus). Measured per run (a child process): wall and CPU
seconds of the process tree, and peak RSS sampled every 20 ms of the largest worker and of the
coordinating process (which, on the local runner, holds the data between stages). dupe_factor is 1
for the three sizes, and 10 for one more 54 MB pair, which gives the projection's per-CPU rate.

    .venv/bin/python -m bench.bench_beam_data                 # about 25 minutes on 2 cores
    .venv/bin/python -m bench.bench_beam_data --scales=1,20   # without the 1.1 GB corpus
    .venv/bin/python -m bench.bench_beam_data --quick         # 2.7 MB only: checks that it runs
"""

import argparse
import os
import random
import sys
import tempfile

from bench import REPO_DIR, SHARED_DIR, bench_create_pretraining_data, machine

AUSTEN = os.path.join(SHARED_DIR, "data", "austen_sentences.txt")
VOCAB = os.path.join(REPO_DIR, "sample_data", "vocab.txt")
FLAGS = dict(max_seq_length=128, max_predictions_per_seq=20, random_seed=12345)
LOCAL_BEAM = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
COPIES_PER_FILE = 20


def _process_tree(root_pid):
    """{pid: (command line, RSS bytes)} of root_pid and its descendants."""
    found, stack = {}, [root_pid]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/status") as f:
                rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
            found[pid] = (command, rss)
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    stack.extend(int(child) for child in f.read().split())
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return found


def _measure(command):
    """Runs command: wall and CPU seconds, peak RSS MB of the coordinating process and of the largest
    worker (any other Python process of the tree)."""
    peaks, root = {}, []

    def sample(pid):
        root[:] = [pid]
        for child, (cmd, rss) in _process_tree(pid).items():
            peaks[child] = (cmd, max(rss, peaks.get(child, ("", 0))[1]))

    seconds, cpu = bench_create_pretraining_data.run_sampled(command, sample)
    workers = [rss for pid, (cmd, rss) in peaks.items() if pid not in root and "python" in cmd]
    return {
        "wall": seconds,
        "cpu": cpu,
        "coordinator": peaks.get(root[0], ("", 0))[1] / 2**20 if root else 0.0,
        "worker": max(workers, default=0) / 2**20,
        "workers seen": len(workers),
    }


def _command(input_file, output, dupe_factor, beam):
    flags = [f"--{k}={v}" for k, v in {**FLAGS, "dupe_factor": dupe_factor}.items()]
    how = [f"--beam_pipeline_options={LOCAL_BEAM}"] if beam else ["--num_workers=2"]
    return [sys.executable, "create_pretraining_data.py", f"--input_file={input_file}",
            f"--output_file={output}", f"--vocab_file={VOCAB}", "--progress_interval_s=1000",
            *how, *flags]  # fmt: skip


def _corpus(folder, copies):
    """Austen `copies` times in files of up to COPIES_PER_FILE copies; returns (glob, bytes)."""
    documents = open(AUSTEN, encoding="utf-8").read().strip().split("\n\n")
    os.makedirs(folder, exist_ok=True)
    written, file_index = 0, 0
    while written < copies:
        rng = random.Random(file_index)
        with open(os.path.join(folder, f"part-{file_index:03d}.txt"), "w", encoding="utf-8") as f:
            for _ in range(min(COPIES_PER_FILE, copies - written)):
                rng.shuffle(documents)
                f.write("\n\n".join(documents) + "\n\n")
                written += 1
        file_index += 1
    paths = [os.path.join(folder, name) for name in os.listdir(folder)]
    return os.path.join(folder, "*.txt"), sum(os.path.getsize(p) for p in paths)


def _run_pair(tmp, copies, dupe_factor):
    """The pool and the Beam run on one corpus: two table rows."""
    pattern, size = _corpus(os.path.join(tmp, f"x{copies}"), copies)
    rows = []
    for beam in (False, True):
        out_dir = os.path.join(tmp, "out")
        os.makedirs(out_dir, exist_ok=True)
        measured = _measure(_command(pattern, os.path.join(out_dir, "records"), dupe_factor, beam))
        name = "beam, DirectRunner, 2 processes" if beam else "pool, --num_workers=2"
        rows.append(
            {"run": name, "copies": copies, "mb": size / 1e6, "dupe": dupe_factor, **measured}
        )
        print(_format(rows[-1]), flush=True)
        for name in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, name))
    for name in os.listdir(os.path.dirname(pattern)):
        os.remove(os.path.join(os.path.dirname(pattern), name))
    return rows


HEADER = (
    "| run | corpus | dupe_factor | wall s | CPU s | MB of text per CPU-s "
    "| largest worker, peak RSS MB | coordinating process, peak RSS MB |\n"
    "|---|---|---|---|---|---|---|---|"
)


def _format(row):
    return (
        f"| {row['run']} | Austen x{row['copies']} ({row['mb']:.1f} MB) | {row['dupe']} "
        f"| {row['wall']:.1f} | {row['cpu']:.1f} | {row['mb'] / row['cpu']:.2f} "
        f"| {row['worker']:.0f} | {row['coordinator']:.0f} |"
    )


def _projection(rows):
    """CPU-hours and wall hours for 17 GB and 1 TB at dupe_factor 10, from the measured rate."""
    beam = [r for r in rows if r["run"].startswith("beam") and r["dupe"] == 10]
    if not beam:
        return
    rate = beam[0]["mb"] / beam[0]["cpu"]  # MB of text per CPU-second, Beam, dupe_factor 10
    print(f"\nPROJECTION (not measured): from Beam's {rate:.2f} MB of text per CPU-second at "
          "dupe_factor 10 above, assuming the rate holds per CPU on a cluster and ignoring the "
          "shuffle's own cost:")  # fmt: skip
    print("| corpus | CPU-hours | hours on 10 workers of 8 vCPUs | on 100 workers of 8 vCPUs |")
    print("|---|---|---|---|")
    for name, megabytes in (("BERT's 17 GB (Wikipedia + BookCorpus)", 17e3), ("1 TB", 1e6)):
        cpu_hours = megabytes / rate / 3600
        print(f"| {name} | {cpu_hours:,.0f} | {cpu_hours / 80:,.1f} | {cpu_hours / 800:,.2f} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="1,20,400", help="copies of Austen, dupe_factor 1")
    parser.add_argument(
        "--rate_scale", type=int, default=20, help="copies for the dupe_factor 10 pair"
    )
    parser.add_argument("--quick", action="store_true", help="2.7 MB only")
    args = parser.parse_args()
    if not os.path.exists(AUSTEN):
        sys.exit(f"bench_beam_data: {AUSTEN} is absent (../shared/data); nothing to measure")
    if args.quick:
        args.scales, args.rate_scale = "1", 1
    os.environ["PYTHONPATH"] = REPO_DIR
    print(machine.header(with_tensorflow=False), flush=True)
    print(HEADER, flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for copies in [int(s) for s in args.scales.split(",") if s]:
            rows += _run_pair(tmp, copies, dupe_factor=1)
        rows += _run_pair(tmp, args.rate_scale, dupe_factor=10)
    print(f"\ncreate_pretraining_data, pool vs Beam, {os.cpu_count()} cores, {FLAGS}\n")
    print(HEADER)
    for row in rows:
        print(_format(row))
    _projection(rows)
    print(machine.load_line())


if __name__ == "__main__":
    main()
