"""Benchmark: in-graph BertPreprocessor against FullTokenizer and tensorflow_text.FastBertTokenizer.

Three tables, from runners taking turns round by round (an untimed round that also checks ids,
then --repeats timed ones), TensorFlow's pools pinned to --threads:
  1. English: every non-empty line of ../shared/data/austen_sentences.txt with the uncased vocab
     (../shared/fixtures/tokenization), through FullTokenizer (pure Python, line by line: the
     reference ids), BertPreprocessor.tokenize under tf.function, the same in a tf.data map and
     with packing, and FastBertTokenizer(lower_case_nfd_strip_accents=True).
  2. Multilingual: bench/multilingual_sentences.jsonl, one row per language (French, German,
     Greek, Russian, Chinese, control and format characters, all shuffled together), repeated to
     --multilingual_lines lines, with the uncased fixture vocab and bench/vocab_multilingual_cased.txt
     (cased; learned by build_vocab.py's learner at threshold 1 from those sentences and
     sample_data/sample_text.txt). The table says how many lines took the normalized path and how
     many the code point path, and times the code point path alone too.
  3. FullTokenizer's own time on Austen (one pass, and the original algorithm it speeds up).

Speed is given per wall-clock second and per CPU second of this process (all its threads):
BertPreprocessor tokenizes a batch in two parallel slices, FullTokenizer and FastBertTokenizer on one
core, so CPU ratios compare work and wall ratios latency on this machine.

    .venv/bin/python -m bench.bench_tokenizer                       # the tables of bench/results/tokenizer.md
    .venv/bin/python -m bench.bench_tokenizer --batch_sizes=256 --repeats=1   # quick
"""

import argparse
import json
import os
import random
import statistics
import time

from bench import REPO_DIR, SHARED_DIR, machine

AUSTEN = os.path.join(SHARED_DIR, "data", "austen_sentences.txt")
FIXTURES = os.path.join(SHARED_DIR, "fixtures", "tokenization")
VOCAB = os.path.join(FIXTURES, "vocab_uncased.txt")
MULTILINGUAL_VOCAB = os.path.join(REPO_DIR, "bench", "vocab_multilingual_cased.txt")
SENTENCES = os.path.join(REPO_DIR, "bench", "multilingual_sentences.jsonl")
LANGUAGES = {
    "fr": "French",
    "de": "German",
    "el": "Greek",
    "ru": "Russian",
    "zh": "Chinese",
    "control": "control and format characters",
}
FULL = "FullTokenizer (pure Python)"
OURS = "BertPreprocessor.tokenize, tf.function"
FAST_BERT = "tensorflow_text.FastBertTokenizer, tf.function"
CODE_POINT = "BertPreprocessor's code point path alone"


def _read_lines(path):
    with open(path, encoding="utf-8") as reader:
        return [line.strip() for line in reader if line.strip()]


def _spec():
    import tensorflow as tf

    return [tf.TensorSpec([None], tf.string)]


def _batches(lines, batch_size):
    import tensorflow as tf

    return [tf.constant(lines[i : i + batch_size]) for i in range(0, len(lines), batch_size)]


def _per_batch(function, lines, batch_size, passes=1):
    """run(): `function` over every batch of `lines`, `passes` times; the last pass's outputs."""
    batches = _batches(lines, batch_size)

    def run():
        for _ in range(passes - 1):
            for batch in batches:
                function(batch)
        return [function(batch) for batch in batches]

    return run


def _ragged_ids(outputs):
    return [row for ragged in outputs for row in ragged.to_list()]


def _tokenizers(vocab_file, do_lower_case):
    """(FullTokenizer, BertPreprocessor, traced tokenize, traced FastBertTokenizer.tokenize)."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    from bert_tf import BertPreprocessor
    from bert_tf.tokenization import FullTokenizer, load_vocab

    full = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    # The Keras layer's in-graph tokenizer: what an export and BertTextClassifier tokenize with.
    preprocessor = BertPreprocessor(vocab_file, do_lower_case, max_seq_length=128).tokenizer
    fast_bert = tf_text.FastBertTokenizer(
        list(load_vocab(vocab_file)),
        token_out_type=tf.int32,
        lower_case_nfd_strip_accents=do_lower_case,
    )
    tokenize = tf.function(preprocessor.tokenize, input_signature=_spec())
    return full, preprocessor, tokenize, tf.function(fast_bert.tokenize, input_signature=_spec())


def _english_runners(lines, batch_sizes, all_rows=True):
    """{name: (batch label, run, to_ids)}: `run()` tokenizes all lines into its natural output
    (the timed part), `to_ids(output)` turns that into lists of ids (or a count of ids for the
    tf.data row) for the comparison with FullTokenizer. Without `all_rows`: FullTokenizer,
    BertPreprocessor.tokenize and FastBertTokenizer only."""
    import tensorflow as tf

    full, preprocessor, tokenize, fast_bert_tokenize = _tokenizers(VOCAB, True)
    pack = tf.function(preprocessor.__call__, input_signature=_spec())

    def full_tokenizer():
        return [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]

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

    def packed_ids(outputs):
        ids = []
        for features in outputs:
            lengths = features["input_mask"].numpy().sum(axis=1)
            rows = features["input_ids"].numpy().tolist()
            ids.extend(row[1 : length - 1] for row, length in zip(rows, lengths, strict=True))
        return ids

    runners = {FULL: ("line by line", full_tokenizer, list)}
    for size in batch_sizes:
        runners[f"{OURS} [{size}]"] = (str(size), _per_batch(tokenize, lines, size), _ragged_ids)
        if all_rows:
            runners[f"BertPreprocessor.tokenize in tf.data map [{size}]"] = (
                str(size),
                in_tf_data(size),
                int,
            )
            runners[f"BertPreprocessor(text) (tokenize + pack to 128) [{size}]"] = (
                str(size),
                _per_batch(pack, lines, size),
                packed_ids,
            )
        runners[f"{FAST_BERT} [{size}]"] = (
            str(size),
            _per_batch(fast_bert_tokenize, lines, size),
            _ragged_ids,
        )
    return runners


def _measure(lines, runners, repeats, passes=None):
    """Times every runner `repeats` times, taking turns round by round, after one untimed round
    that also checks its ids against the first runner's (FullTokenizer's).

    Args:
      passes: {name: passes per timed run} for runners that repeat their pass (default 1).

    Returns:
      (wall rates, CPU rates, matches, number of wordpieces): rates are {name: [tokens/s]},
      matches {name: share of lines with the reference ids, as text}.
    """
    passes = passes or {}
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
                    matches[name] = f"{same / len(lines):.1%}"
                continue
            work = num_tokens * passes.get(name, 1)
            rates[name].append(work / seconds)
            cpu_rates[name].append(work / cpu_seconds)
    return rates, cpu_rates, matches, num_tokens


def _print_table(runners, rates, cpu_rates, matches):
    """English table: every runner against FullTokenizer, per wall second and per CPU second."""
    full_rate = statistics.median(rates[FULL])
    full_cpu_rate = statistics.median(cpu_rates[FULL])
    print(
        "| tokenizer | batch | tokens/s (wall), median (best) | vs FullTokenizer | tokens per "
        "CPU-s, median | vs FullTokenizer | lines with FullTokenizer's ids |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (batch, _, _) in runners.items():
        median, best = statistics.median(rates[name]), max(rates[name])
        cpu = statistics.median(cpu_rates[name])
        label = name.rsplit(" [", 1)[0]
        print(
            f"| {label} | {batch} | {median / 1e6:.2f} M ({best / 1e6:.2f} M) | "
            f"{median / full_rate:.2f}x | {cpu / 1e6:.2f} M | {cpu / full_cpu_rate:.2f}x | "
            f"{matches[name]} |"
        )


def _multilingual_lines(num_lines):
    """{label: lines}: each language's sentences repeated to `num_lines`, and all of them
    shuffled together (seed 0) to as many."""
    with open(SENTENCES, encoding="utf-8") as reader:
        records = [json.loads(line) for line in reader]
    by_language = {
        label: [r["text"] for r in records if r["language"] == code]
        for code, label in LANGUAGES.items()
    }
    every = [r["text"] for r in records]
    random.Random(0).shuffle(every)
    by_language["all of the above, shuffled"] = every
    return {
        label: (texts * (num_lines // len(texts) + 1))[:num_lines]
        for label, texts in by_language.items()
    }


def _multilingual_table(vocab_file, do_lower_case, lines_by_language, batch_size, repeats, passes):
    """Table 2 for one vocab: rows per language, ours against FastBertTokenizer and FullTokenizer."""
    import tensorflow as tf

    full, preprocessor, tokenize, fast_bert_tokenize = _tokenizers(vocab_file, do_lower_case)
    code_point_pieces = tf.function(
        lambda text: preprocessor._code_point_path.pieces(text, with_offsets=False),
        input_signature=_spec(),
    )

    def code_point_ids(outputs):
        return [
            row
            for row_splits, ids in outputs
            for row in tf.RaggedTensor.from_row_splits(ids, row_splits).to_list()
        ]

    print(
        "| text | lines on the normalized / code point path | wordpieces | ours, tokens/s wall "
        "(median) | ours, tokens per CPU-s | FastBertTokenizer, wall | FastBertTokenizer, CPU | "
        "FullTokenizer, wall | FullTokenizer, CPU | ours / FastBert, wall | ours / FastBert, CPU "
        "| ours / FullTokenizer, CPU | code point path alone, CPU | lines with FullTokenizer's "
        "ids: ours / FastBert / code point path |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, lines in lines_by_language.items():
        runners = {
            FULL: (
                "",
                lambda lines=lines: [full.convert_tokens_to_ids(full.tokenize(x)) for x in lines],
                list,
            ),
            OURS: ("", _per_batch(tokenize, lines, batch_size, passes), _ragged_ids),
            FAST_BERT: ("", _per_batch(fast_bert_tokenize, lines, batch_size, passes), _ragged_ids),
            CODE_POINT: ("", _per_batch(code_point_pieces, lines, batch_size), code_point_ids),
        }
        rates, cpu_rates, matches, num_tokens = _measure(
            lines, runners, repeats, passes={OURS: passes, FAST_BERT: passes}
        )
        wall = {name: statistics.median(rates[name]) for name in runners}
        cpu = {name: statistics.median(cpu_rates[name]) for name in runners}
        # Which path each line takes (the pattern BertPreprocessor matches before tokenizing).
        normalized = int(
            tf.reduce_sum(
                tf.cast(
                    tf.strings.regex_full_match(
                        tf.constant(lines), preprocessor._normalized_row_pattern
                    ),
                    tf.int32,
                )
            )
        )
        print(
            f"| {label} | {normalized} / {len(lines) - normalized} | {num_tokens} | "
            f"{wall[OURS] / 1e6:.2f} M | {cpu[OURS] / 1e6:.2f} M | {wall[FAST_BERT] / 1e6:.2f} M | "
            f"{cpu[FAST_BERT] / 1e6:.2f} M | {wall[FULL] / 1e6:.3f} M | {cpu[FULL] / 1e6:.3f} M | "
            f"{wall[OURS] / wall[FAST_BERT]:.0%} | {cpu[OURS] / cpu[FAST_BERT]:.0%} | "
            f"{cpu[OURS] / cpu[FULL]:.1f}x | {cpu[CODE_POINT] / 1e6:.2f} M | "
            f"{matches[OURS]} / {matches[FAST_BERT]} / {matches[CODE_POINT]} |"
        )


def _original_wordpiece(vocab, words, unk_token="[UNK]", max_chars=200):
    """The original `WordpieceTokenizer.tokenize` loop (no cache, every substring length tried)."""
    output = []
    for word in words:
        chars = list(word)
        if len(chars) > max_chars:
            output.append(unk_token)
            continue
        pieces, start, is_bad = [], 0, False
        while start < len(chars):
            end, piece = len(chars), None
            while start < end:
                candidate = "".join(chars[start:end])
                if start > 0:
                    candidate = "##" + candidate
                if candidate in vocab:
                    piece = candidate
                    break
                end -= 1
            if piece is None:
                is_bad = True
                break
            pieces.append(piece)
            start = end
        output.extend([unk_token] if is_bad else pieces)
    return output


def _full_tokenizer_times(lines, repeats):
    """Table 3: seconds for one pass over `lines` (median of `repeats` + 1 rounds, taking turns)."""
    from bert_tf.tokenization import FullTokenizer

    full = FullTokenizer(VOCAB, do_lower_case=True)
    basic = full.basic_tokenizer
    runs = {
        "FullTokenizer.tokenize + convert_tokens_to_ids (table 1's row)": lambda: [
            full.convert_tokens_to_ids(full.tokenize(line)) for line in lines
        ],
        "FullTokenizer.tokenize only": lambda: [full.tokenize(line) for line in lines],
        "BasicTokenizer.tokenize only (words, no WordPiece)": lambda: [
            basic.tokenize(line) for line in lines
        ],
        "the original algorithm: per-character BasicTokenizer, uncached WordPiece": lambda: [
            _original_wordpiece(full.vocab, basic._tokenize_per_char(line)) for line in lines
        ],
    }
    seconds = {name: [] for name in runs}
    cpu_seconds = {name: [] for name in runs}
    for _ in range(repeats + 1):
        for name, run in runs.items():
            start, cpu_start = time.perf_counter(), time.process_time()
            run()
            seconds[name].append(time.perf_counter() - start)
            cpu_seconds[name].append(time.process_time() - cpu_start)
    print("| what runs over every Austen line | wall s, median | CPU s, median |")
    print("|---|---|---|")
    for name in runs:
        wall = statistics.median(seconds[name][1:] or seconds[name])
        cpu = statistics.median(cpu_seconds[name][1:] or cpu_seconds[name])
        print(f"| {name} | {wall:.3f} | {cpu:.3f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--batch_sizes", default="256,1024", help="comma-separated; default 256,1024"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per table; default 5")
    parser.add_argument(
        "--threads", type=int, default=0, help="TF intra- and inter-op threads; 0 (default): cores"
    )
    parser.add_argument(
        "--multilingual_lines", type=int, default=2048, help="lines per language; default 2048"
    )
    parser.add_argument(
        "--passes",
        type=int,
        default=5,
        help="passes over the lines per timed run of a TF runner in table 2; default 5",
    )
    args = parser.parse_args()
    batch_sizes = [int(size) for size in args.batch_sizes.split(",") if size]
    threads = machine.set_threads(args.threads)

    import tensorflow as tf
    import tensorflow_text as tf_text

    from bert_tf.tokenization import load_vocab

    print(machine.header())
    print(machine.threads_line(threads))
    print()
    lines = _read_lines(AUSTEN)
    runners = _english_runners(lines, batch_sizes)
    rates, cpu_rates, matches, num_tokens = _measure(lines, runners, args.repeats)
    print(
        f"1. Austen: {len(lines)} non-empty lines, {num_tokens} wordpieces; {args.repeats} rounds"
    )
    print()
    _print_table(runners, rates, cpu_rates, matches)
    print()
    print(machine.load_line())
    print()
    lines_by_language = _multilingual_lines(args.multilingual_lines)
    for vocab_file, do_lower_case in ((VOCAB, True), (MULTILINGUAL_VOCAB, False)):
        print(
            f"2. Multilingual, {os.path.basename(vocab_file)}, do_lower_case={do_lower_case}: "
            f"{args.multilingual_lines} lines per row, batch {batch_sizes[-1]}, "
            f"{args.repeats} rounds, {args.passes} passes per TF run"
        )
        print()
        _multilingual_table(
            vocab_file,
            do_lower_case,
            lines_by_language,
            batch_sizes[-1],
            args.repeats,
            args.passes,
        )
        print()
        print(machine.load_line())
        print()
    print(f"3. FullTokenizer's own time on the {len(lines)} Austen lines ({num_tokens} wordpieces)")
    print()
    _full_tokenizer_times(lines, max(args.repeats // 2, 1))
    print()
    fast_bert = tf_text.FastBertTokenizer(
        list(load_vocab(VOCAB)), token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    fixture_bad, fixture_total = _fixture_mismatches(
        lambda text: fast_bert.tokenize(text).to_list()
    )
    print(
        f"FastBertTokenizer on the fixture texts (lower-cased): {fixture_bad} of {fixture_total} "
        f"({fixture_bad / fixture_total:.1%}) differ from the original's ids."
    )
    print(machine.load_line())


def _fixture_mismatches(tokenize_fast_bert):
    """(mismatching, total) fixture texts of FastBertTokenizer, lower-cased cases only."""
    import tensorflow as tf

    with open(os.path.join(FIXTURES, "cases.jsonl"), encoding="utf-8") as reader:
        cases = [json.loads(line) for line in reader]
    cases = [case for case in cases if case["do_lower_case"]]
    got = tokenize_fast_bert(tf.constant([case["text"] for case in cases]))
    return sum(ids != case["ids"] for ids, case in zip(got, cases, strict=True)), len(cases)


if __name__ == "__main__":
    main()
