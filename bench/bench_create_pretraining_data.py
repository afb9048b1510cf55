"""Benchmark: create_pretraining_data.py against the original algorithm, same machine, same run.

The peer is a faithful single-process, all-in-memory reimplementation of google-research/bert's
create_pretraining_data.py (`_original_*`: every instance in memory, a global shuffle,
tf.train.Example objects); the TF1 original cannot run on TF 2.21, and the peer uses our faster
FullTokenizer, so the ratios printed are lower bounds.

Each command runs as a child process, the commands taking turns repeat by repeat; wall time is
measured around it and peak memory by sampling its process tree every 20 ms: the sum of RSS and of
PSS (which counts pages forked workers share once).

    .venv/bin/python -m bench.bench_create_pretraining_data   # Austen 3 repeats; 5x, 20x corpus
    .venv/bin/python -m bench.bench_create_pretraining_data --repeats=1 --scales=   # quick
"""

import argparse
import collections
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench import REPO_DIR, SHARED_DIR, machine

AUSTEN = os.path.join(SHARED_DIR, "data", "austen_sentences.txt")
VOCAB = os.path.join(REPO_DIR, "sample_data", "vocab.txt")
FLAGS = dict(max_seq_length=128, max_predictions_per_seq=20, random_seed=12345, dupe_factor=10)


# --------------------------------------------- the peer: the original algorithm, reimplemented

MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])
TrainingInstance = collections.namedtuple(
    "TrainingInstance",
    ["tokens", "segment_ids", "masked_lm_positions", "masked_lm_labels", "is_random_next"],
)


def _original_main(input_file, output_file):
    import tensorflow as tf

    from bert_tf import tokenization

    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    rng = random.Random(FLAGS["random_seed"])
    all_documents = [[]]
    with open(input_file, encoding="utf-8") as reader:
        for line in reader:
            line = line.strip()
            if not line:
                all_documents.append([])
            tokens = tokenizer.tokenize(line)
            if tokens:
                all_documents[-1].append(tokens)
    all_documents = [x for x in all_documents if x]
    rng.shuffle(all_documents)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(FLAGS["dupe_factor"]):
        for document_index in range(len(all_documents)):
            instances.extend(_original_instances(all_documents, document_index, vocab_words, rng))
    rng.shuffle(instances)

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    max_seq_length, max_predictions = FLAGS["max_seq_length"], FLAGS["max_predictions_per_seq"]
    with tf.io.TFRecordWriter(output_file) as writer:
        for instance in instances:
            input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
            input_mask = [1] * len(input_ids)
            segment_ids = list(instance.segment_ids)
            while len(input_ids) < max_seq_length:
                input_ids.append(0)
                input_mask.append(0)
                segment_ids.append(0)
            positions = list(instance.masked_lm_positions)
            ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
            weights = [1.0] * len(ids)
            while len(positions) < max_predictions:
                positions.append(0)
                ids.append(0)
                weights.append(0.0)
            features = collections.OrderedDict()
            features["input_ids"] = int_feature(input_ids)
            features["input_mask"] = int_feature(input_mask)
            features["segment_ids"] = int_feature(segment_ids)
            features["masked_lm_positions"] = int_feature(positions)
            features["masked_lm_ids"] = int_feature(ids)
            features["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=weights)
            )
            features["next_sentence_labels"] = int_feature([1 if instance.is_random_next else 0])
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
    print(f"instances {len(instances)}")


def _original_instances(all_documents, document_index, vocab_words, rng):
    document = all_documents[document_index]
    max_num_tokens = FLAGS["max_seq_length"] - 3
    target_seq_length = max_num_tokens
    if rng.random() < 0.1:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances, current_chunk, current_length, i = [], [], 0, 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = rng.randint(1, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
            tokens_a = [t for s in current_chunk[:a_end] for t in s]
            tokens_b = []
            if len(current_chunk) == 1 or rng.random() < 0.5:
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                for _ in range(10):
                    random_document_index = rng.randint(0, len(all_documents) - 1)
                    if random_document_index != document_index:
                        break
                random_document = all_documents[random_document_index]
                random_start = rng.randint(0, len(random_document) - 1)
                for j in range(random_start, len(random_document)):
                    tokens_b.extend(random_document[j])
                    if len(tokens_b) >= target_b_length:
                        break
                i -= len(current_chunk) - a_end
            else:
                is_random_next = False
                tokens_b = [t for s in current_chunk[a_end:] for t in s]
            while len(tokens_a) + len(tokens_b) > max_num_tokens:
                trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
                if rng.random() < 0.5:
                    del trunc_tokens[0]
                else:
                    trunc_tokens.pop()
            tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
            segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            tokens, positions, labels = _original_masking(tokens, vocab_words, rng)
            instances.append(
                TrainingInstance(tokens, segment_ids, positions, labels, is_random_next)
            )
            current_chunk, current_length = [], 0
        i += 1
    return instances


def _original_masking(tokens, vocab_words, rng):
    cand_indexes = [[i] for i, token in enumerate(tokens) if token not in ("[CLS]", "[SEP]")]
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(FLAGS["max_predictions_per_seq"], max(1, int(round(len(tokens) * 0.15))))
    masked_lms, covered_indexes = [], set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        if any(index in covered_indexes for index in index_set):
            continue
        for index in index_set:
            covered_indexes.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
    masked_lms.sort(key=lambda x: x.index)
    return output_tokens, [p.index for p in masked_lms], [p.label for p in masked_lms]


# ------------------------------------------------------------------------------- measurement


def _tree_memory_bytes(root_pid):
    """(sum of Rss, sum of Pss) over root_pid and all its descendants.

    Forked workers share their parent's pages, which the Rss sum counts once per process; Pss
    divides each shared page among its sharers, so its sum is the memory the tree really uses.
    """
    rss, pss, stack = 0, 0, [root_pid]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                fields = dict(line.split()[:2] for line in f if line.endswith("kB\n"))
            rss += int(fields["Rss:"]) * 1024
            pss += int(fields["Pss:"]) * 1024
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    stack.extend(int(child) for child in f.read().split())
        except (FileNotFoundError, ProcessLookupError, KeyError):
            continue
    return rss, pss


def run_sampled(command, sample):
    """Runs command, calling sample(pid) every 20 ms meanwhile; returns (wall s, CPU s).

    "CPU" is the user + system time of the child and of every descendant it waited for (the
    workers): unlike wall time, it does not grow when other work on the machine takes the cores.
    """
    start, cpu_start = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(
        command, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    done = threading.Event()

    def sample_until_done():
        while not done.is_set():
            sample(process.pid)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample_until_done)
    sampler.start()
    output = process.communicate()[0].decode()
    seconds = time.monotonic() - start
    cpu_end = resource.getrusage(resource.RUSAGE_CHILDREN)
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"{command} failed:\n{output[-3000:]}")
    cpu = (cpu_end.ru_utime + cpu_end.ru_stime) - (cpu_start.ru_utime + cpu_start.ru_stime)
    return seconds, cpu


def _measure(command):
    """Runs command; returns {"wall", "cpu"} seconds and {"rss", "pss"} peak MB of its process tree."""
    peaks = {"rss": 0, "pss": 0}

    def sample(pid):
        rss, pss = _tree_memory_bytes(pid)
        peaks["rss"], peaks["pss"] = max(peaks["rss"], rss), max(peaks["pss"], pss)

    seconds, cpu = run_sampled(command, sample)
    return {"wall": seconds, "cpu": cpu, "rss": peaks["rss"] / 2**20, "pss": peaks["pss"] / 2**20}


def _ours(input_file, output_file, workers):
    flags = [f"--{k}={v}" for k, v in FLAGS.items()]
    return [sys.executable, "create_pretraining_data.py", f"--input_file={input_file}",
            f"--output_file={output_file}", f"--vocab_file={VOCAB}", f"--num_workers={workers}",
            "--progress_interval_s=1000", *flags]  # fmt: skip


def _stats(path):
    """{"instances", "mean length", "predictions/instance", "random next"} (read with tf.data)."""
    code = f"""
import numpy as np, tensorflow as tf
# The original run_pretraining.py's record format (max_seq_length 128, 20 predictions).
ints = lambda n: tf.io.FixedLenFeature([n], tf.int64)
spec = dict(input_ids=ints(128), input_mask=ints(128), segment_ids=ints(128),
            masked_lm_positions=ints(20), masked_lm_ids=ints(20), next_sentence_labels=ints(1),
            masked_lm_weights=tf.io.FixedLenFeature([20], tf.float32))
n = length = predictions = random_next = 0
for batch in tf.data.TFRecordDataset({path!r}).batch(4096).map(lambda r: tf.io.parse_example(r, spec)):
    n += len(batch["input_ids"]); length += batch["input_mask"].numpy().sum()
    predictions += batch["masked_lm_weights"].numpy().sum(); random_next += batch["next_sentence_labels"].numpy().sum()
print(n, length / n, predictions / n, random_next / n)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_DIR, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": REPO_DIR}, check=True).stdout.split()  # fmt: skip
    return dict(zip(STATS, [int(out[0]), *map(float, out[1:])], strict=True))


def scaled_corpus(path, copies):
    """The corpus `copies` times, each copy's documents in a different shuffled order."""
    documents = open(AUSTEN, encoding="utf-8").read().strip().split("\n\n")
    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(copies):
            rng.shuffle(documents)
            f.write("\n\n".join(documents) + "\n\n")


# The original TF1 script, measured once on another 2-core machine (../shared/fixtures/README.md):
# context for the reader, never a ratio.
ORIGINAL_SCRIPT_ELSEWHERE = "28.4 s wall and 782 MB peak RSS for 69,246 instances"

ORIGINAL = "original algorithm (reimplementation, 1 process)"
STATS = ("instances", "mean length", "predictions/instance", "random next")


def _row(name, input_file, measured, output_file):
    """A table row: best and median wall and CPU seconds, peak memory, the output's statistics."""
    walls, cpus = [m["wall"] for m in measured], [m["cpu"] for m in measured]
    return {
        "run": name, "input MB": os.path.getsize(input_file) / 2**20, "wall best": min(walls),
        "wall median": statistics.median(walls), "cpu median": statistics.median(cpus),
        "rss": max(m["rss"] for m in measured), "pss": max(m["pss"] for m in measured),
        **_stats(output_file),
    }  # fmt: skip


def _austen_rows(tmp, repeats):
    """One row per command on Austen; the commands take turns, repeat by repeat."""
    commands = {
        ORIGINAL: lambda out: [
            sys.executable,
            "-m",
            "bench.bench_create_pretraining_data",
            "--_original",
            AUSTEN,
            out,
        ],
        "ours, --num_workers=1": lambda out: _ours(AUSTEN, out, 1),
        "ours, --num_workers=2": lambda out: _ours(AUSTEN, out, 2),
    }
    outputs = {name: os.path.join(tmp, f"austen_{i}.tfrecord") for i, name in enumerate(commands)}
    measured = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            measured[name].append(_measure(command(outputs[name])))
    return [_row(name, AUSTEN, measured[name], outputs[name]) for name in commands]


def _print_table(rows):
    print("| run | input | wall s (best) | wall s (median) | CPU s (median) | peak RSS MB (sum) "
          "| peak PSS MB (sum) | instances | mean length | predictions/instance | random next |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['run']} | {row['input MB']:.1f} MB | {row['wall best']:.2f} | {row['wall median']:.2f} "
              f"| {row['cpu median']:.2f} | {row['rss']:.0f} | {row['pss']:.0f} "
              f"| {row['instances']:,} | {row['mean length']:.1f} "
              f"| {row['predictions/instance']:.2f} | {row['random next']:.3f} |")  # fmt: skip


def _print_summary(rows):
    """The same-run ratios: the reimplemented original's time and memory over ours."""
    by_name = {row["run"]: row for row in rows}
    original = by_name[ORIGINAL]
    for workers in (1, 2):
        ours = by_name[f"ours, --num_workers={workers}"]
        ratios = ", ".join(
            f"{original[key] / ours[key]:.1f}x {what}"
            for key, what in (("wall median", "less wall time (median)"),
                              ("wall best", "(best)"), ("cpu median", "less CPU time (median)"),
                              ("rss", "less peak RSS"), ("pss", "less peak PSS"))
        )  # fmt: skip
        print(f"ours --num_workers={workers} vs the original algorithm, same run: {ratios}")
    ours = by_name["ours, --num_workers=1"]
    differences = ", ".join(f"{key} {ours[key] / original[key] - 1:+.1%}" for key in STATS)
    print(f"ours vs the original algorithm, same run: {differences}")
    print(
        f"Context only, not measured in this run: the original TF1 script took "
        f"{ORIGINAL_SCRIPT_ELSEWHERE} on another 2-core machine (../shared/fixtures/README.md)."
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command on Austen")
    parser.add_argument(
        "--scales", default="5,20", help="Austen copies of the memory runs; '': none"
    )
    parser.add_argument("--_original", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._original:
        _original_main(*args._original)
        return
    os.environ["PYTHONPATH"] = REPO_DIR
    print(machine.header(with_tensorflow=False), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        rows = _austen_rows(tmp, args.repeats)
        out = os.path.join(tmp, "big.tfrecord")
        for scale in [int(s) for s in args.scales.split(",") if s]:
            big = os.path.join(tmp, f"austen_x{scale}.txt")
            scaled_corpus(big, scale)
            name = f"ours, --num_workers=2, Austen x{scale} (1 run)"
            rows.append(_row(name, big, [_measure(_ours(big, out, 2))], out))
            os.remove(big)

    print(f"\ncreate_pretraining_data, {os.cpu_count()} cores, {FLAGS}, {args.repeats} repeat(s)\n")
    _print_table(rows)
    print()
    _print_summary(rows)
    print(machine.load_line())


if __name__ == "__main__":
    main()
