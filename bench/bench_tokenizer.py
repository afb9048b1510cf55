"""Benchmark: in-graph BertPreprocessor against FullTokenizer and tensorflow_text.FastBertTokenizer.

Tokenizes every non-empty line of ../shared/data/austen_sentences.txt to wordpiece ids with:
  * FullTokenizer: this project's pure-Python tokenizer (the reference ids), line by line;
  * BertPreprocessor.tokenize under tf.function([None] strings), called from Python once per batch;
  * the same inside a tf.data pipeline (batch -> map, consumed in a graph loop: no Python per
    batch; sequential map without prefetch, timed after one untimed pass of the same iterator);
  * BertPreprocessor.__call__ (tokenize + pack to input_ids/input_mask/segment_ids);
  * tensorflow_text.FastBertTokenizer(lower_case_nfd_strip_accents=True), the stock peer.
A second, smaller table times the first 5,000 lines with a non-ASCII word appended, which sends
every line through BertPreprocessor's general path (and FullTokenizer's per-character path).
Runs are interleaved and repeated; a row shows the best (and median) tokens per wall-clock
second over the repeats, and the best tokens per CPU second of this process (all its threads),
which load from other jobs on the machine disturbs less. Also prints the rows whose ids differ
from FullTokenizer's, on Austen and on the 950 fixture texts (../shared/fixtures/tokenization).

    .venv/bin/python bench/bench_tokenizer.py                       # batches 256 and 1024, 5 repeats
    .venv/bin/python bench/bench_tokenizer.py --batch_sizes=256 --repeats=2   # quick
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("BERT_TF_SHARED_DIR", os.path.join(REPO_DIR, "..", "shared"))
AUSTEN = os.path.join(SHARED_DIR, "data", "austen_sentences.txt")
FIXTURES = os.path.join(SHARED_DIR, "fixtures", "tokenization")
VOCAB = os.path.join(FIXTURES, "vocab_uncased.txt")


def _read_lines(path):
    with open(path, encoding="utf-8") as reader:
        return [line.strip() for line in reader if line.strip()]


def _runners(lines, batch_sizes, all_rows=True):
    """{name: (batch label, run, to_ids)}: `run()` tokenizes all lines into its natural output
    (lists or tensors; the timed part), `to_ids(output)` turns that into lists of ids (or a
    count of ids for the tf.data row) for the comparison with FullTokenizer. Without `all_rows`:
    FullTokenizer, BertPreprocessor.tokenize and FastBertTokenizer only."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    from bert_tf.preprocessing import BertPreprocessor
    from bert_tf.tokenization import FullTokenizer, load_vocab

    full = FullTokenizer(VOCAB, do_lower_case=True)
    preprocessor = BertPreprocessor(VOCAB, do_lower_case=True, max_seq_length=128)
    fast_bert = tf_text.FastBertTokenizer(
        list(load_vocab(VOCAB)), token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    spec = [tf.TensorSpec([None], tf.string)]
    tokenize = tf.function(preprocessor.tokenize, input_signature=spec)
    pack = tf.function(preprocessor.__call__, input_signature=spec)
    fast_bert_tokenize = tf.function(fast_bert.tokenize, input_signature=spec)

    def full_tokenizer():
        return [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]

    def per_batch(function, batch_size):
        batches = [tf.constant(lines[i : i + batch_size]) for i in range(0, len(lines), batch_size)]

        def run():
            return [function(batch) for batch in batches]

        return run

    def packed(batch_size):
        batches = [tf.constant(lines[i : i + batch_size]) for i in range(0, len(lines), batch_size)]

        def run():
            return [pack(batch) for batch in batches]

        return run

    def in_tf_data(batch_size):
        dataset = tf.data.Dataset.from_tensor_slices(lines).batch(batch_size)
        dataset = dataset.map(lambda text: tf.size(preprocessor.tokenize(text).flat_values))
        # No background work (prefetch, parallel map) that would run on into the other rows.
        options = tf.data.Options()
        options.autotune.enabled = False
        options.experimental_optimization.inject_prefetch = False
        options.experimental_optimization.map_parallelization = False
        dataset = dataset.with_options(options).repeat()
        num_batches = -(-len(lines) // batch_size)

        @tf.function
        def count(iterator):
            total = tf.constant(0)
            for _ in tf.range(num_batches):
                total += next(iterator)
            return total

        def run():
            # A pass untimed first: a new iterator instantiates (and optimizes) the function.
            iterator = iter(dataset)
            count(iterator)
            start, cpu_start = time.perf_counter(), time.process_time()
            total = int(count(iterator))  # a count only: the ids are checked by the other rows
            return total, time.perf_counter() - start, time.process_time() - cpu_start

        return run

    def ragged_ids(outputs):
        return [row for ragged in outputs for row in ragged.to_list()]

    def packed_ids(outputs):
        ids = []
        for features in outputs:
            lengths = features["input_mask"].numpy().sum(axis=1)
            rows = features["input_ids"].numpy().tolist()
            ids.extend(row[1 : length - 1] for row, length in zip(rows, lengths, strict=True))
        return ids

    runners = {"FullTokenizer (pure Python)": ("line by line", full_tokenizer, list)}
    for size in batch_sizes:
        runners[f"BertPreprocessor.tokenize, tf.function [{size}]"] = (
            str(size),
            per_batch(tokenize, size),
            ragged_ids,
        )
        if all_rows:
            runners[f"BertPreprocessor.tokenize in tf.data map [{size}]"] = (
                str(size),
                in_tf_data(size),
                int,
            )
            runners[f"BertPreprocessor(text) (tokenize + pack to 128) [{size}]"] = (
                str(size),
                packed(size),
                packed_ids,
            )
        runners[f"tensorflow_text.FastBertTokenizer, tf.function [{size}]"] = (
            str(size),
            per_batch(fast_bert_tokenize, size),
            ragged_ids,
        )
    return runners


def _fixture_mismatches(tokenize_fast_bert):
    """(mismatching, total) fixture texts of FastBertTokenizer, lower-cased cases only."""
    import tensorflow as tf

    with open(os.path.join(FIXTURES, "cases.jsonl"), encoding="utf-8") as reader:
        cases = [json.loads(line) for line in reader]
    cases = [case for case in cases if case["do_lower_case"]]
    got = tokenize_fast_bert(tf.constant([case["text"] for case in cases]))
    return sum(ids != case["ids"] for ids, case in zip(got, cases, strict=True)), len(cases)


def _measure(lines, runners, repeats):
    """Times every runner `repeats` times, interleaved, after one untimed pass that also checks
    its ids against the first runner's (FullTokenizer's).

    Returns:
      (wall rates, CPU rates, matches, number of wordpieces): rates are {name: [tokens/s]},
      matches {name: share of lines with the reference ids, as text}.
    """
    reference = None
    rates = {name: [] for name in runners}  # tokens per wall-clock second
    cpu_rates = {name: [] for name in runners}  # tokens per CPU second of this process
    matches = {}
    for repeat in range(repeats + 1):
        for name, (_, run, to_ids) in runners.items():
            start, cpu_start = time.perf_counter(), time.process_time()
            output = run()
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
            if isinstance(output, tuple):  # timed by the runner itself
                output, seconds, cpu_seconds = output
            if reference is None:
                reference = to_ids(output)
                num_tokens = sum(map(len, reference))
            if repeat == 0:
                ids = to_ids(output)
                expected = reference
                if "pack" in name:  # rows over 126 pieces are cut, as the original packs them
                    expected = [row[:126] for row in reference]
                if isinstance(ids, int):
                    matches[name] = "(count only)" if ids == num_tokens else f"count {ids}"
                else:
                    same = sum(a == b for a, b in zip(ids, expected, strict=True))
                    matches[name] = f"{same / len(lines):.3%}"
                continue
            rates[name].append(num_tokens / seconds)
            cpu_rates[name].append(num_tokens / cpu_seconds)
    return rates, cpu_rates, matches, num_tokens


def _print_table(runners, rates, cpu_rates, matches):
    full_rate = max(rates["FullTokenizer (pure Python)"])
    full_cpu_rate = max(cpu_rates["FullTokenizer (pure Python)"])
    print(
        "| tokenizer | batch | tokens/s, best (median) | vs FullTokenizer | tokens per CPU-s, best "
        "| vs FullTokenizer | lines with FullTokenizer's ids |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (batch, _, _) in runners.items():
        best, median = max(rates[name]), statistics.median(rates[name])
        cpu_best = max(cpu_rates[name])
        label = name.rsplit(" [", 1)[0]
        print(
            f"| {label} | {batch} | {best / 1e6:.2f} M ({median / 1e6:.2f} M) | "
            f"{best / full_rate:.2f}x | {cpu_best / 1e6:.2f} M | {cpu_best / full_cpu_rate:.2f}x | "
            f"{matches[name]} |"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--batch_sizes", default="256,1024", help="comma-separated; default 256,1024"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed passes per row; default 5")
    args = parser.parse_args()
    batch_sizes = [int(size) for size in args.batch_sizes.split(",") if size]

    lines = _read_lines(AUSTEN)
    runners = _runners(lines, batch_sizes)
    rates, cpu_rates, matches, num_tokens = _measure(lines, runners, args.repeats)
    # Lines with a non-ASCII word take the general (code point) path; FullTokenizer's
    # per-character path is slow, so a fifth of the lines is enough.
    accented = [line + " Caf\u00e9" for line in lines[:5000]]
    accented_runners = _runners(accented, batch_sizes[-1:], all_rows=False)
    accented_results = _measure(accented, accented_runners, args.repeats)

    import tensorflow as tf
    import tensorflow_text as tf_text

    from bert_tf.tokenization import load_vocab

    fast_bert = tf_text.FastBertTokenizer(
        list(load_vocab(VOCAB)), token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    fixture_bad, fixture_total = _fixture_mismatches(
        lambda text: fast_bert.tokenize(text).to_list()
    )

    print(machine.header())
    print(f"Austen: {len(lines)} non-empty lines, {num_tokens} wordpieces; {args.repeats} repeats")
    print()
    _print_table(runners, rates, cpu_rates, matches)
    print()
    print(
        f'The first {len(accented)} lines with " Caf\u00e9" appended ({accented_results[3]} '
        "wordpieces): every line takes BertPreprocessor's general path and FullTokenizer's "
        "per-character path."
    )
    print()
    _print_table(accented_runners, *accented_results[:3])
    print()
    print(
        f"FastBertTokenizer on the fixture texts (lower-cased): {fixture_bad} of {fixture_total} "
        f"({fixture_bad / fixture_total:.1%}) differ from the original's ids."
    )


if __name__ == "__main__":
    main()
