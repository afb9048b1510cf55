"""build_vocab.py's learner: pieces per word on held-out text, and time and peak memory as the corpus grows.

Corpus: Jane Austen's six novels (/work/shared/data/austen_novels, one .txt each). Five are the
training text; the sixth (--held_out, default Persuasion) is the held-out text.

1. Pieces per word: uncased vocabularies learned from the five novels at --sizes (default 8k, 16k and
   30k; the learner returns at most that many tokens, fewer when the corpus has too few pieces above
   its count threshold of 10) against Google's uncased 30k (tests/fixtures/tokenization/
   vocab_uncased.txt), on the held-out novel's BasicTokenizer words: WordPiece pieces per word, the
   share of words kept whole (one piece) and of [UNK] words.
2. Scaling: build_vocab's one-machine run (bert_tf.vocabulary.run) on 1, 2 and 5 novels, and on the
   five novels repeated 4 times (the same distinct words, 4x the text): seconds counting, the
   counting's peak Python heap (tracemalloc: the counts, not the text), seconds learning, and the
   process's peak resident memory (ru_maxrss: mostly TensorFlow, which tensorflow_text imports), each
   size in a fresh process.

    .venv/bin/python -m bench.bench_vocab              # about 20 minutes on 2 busy cores
    .venv/bin/python -m bench.bench_vocab --lower_thresh=1 --parts=pieces   # sizes really 8k/16k/30k
"""

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc

from bench import machine

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("BERT_TF_SHARED_DIR", os.path.join(REPO_DIR, "..", "shared"))
NOVELS_DIR = os.path.join(SHARED_DIR, "data", "austen_novels")
GOOGLE_UNCASED = os.path.join(REPO_DIR, "tests", "fixtures", "tokenization", "vocab_uncased.txt")


def novels(held_out):
    """(training paths, held-out path); exits with a message when the corpus is absent."""
    paths = sorted(glob.glob(os.path.join(NOVELS_DIR, "*.txt")))
    held = os.path.join(NOVELS_DIR, f"{held_out}.txt")
    if len(paths) < 6 or held not in paths:
        sys.exit(
            f"bench_vocab: needs the six Austen novels in {NOVELS_DIR} (with {held_out}.txt; "
            "set BERT_TF_SHARED_DIR to the folder holding data/)"
        )
    return [p for p in paths if p != held], held


def pieces_per_word(vocab_file, held_out):
    """{pieces per word, whole-word share, [UNK] share, words} of the held-out novel."""
    from bert_tf import file_io, tokenization

    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    words = []
    for _, line in file_io.read_lines(held_out):
        words += tokenizer.basic_tokenizer.tokenize(line)
    pieces = [tokenizer.wordpiece_tokenizer.tokenize(word) for word in words]
    return {
        "pieces_per_word": sum(map(len, pieces)) / len(words),
        "whole_words": sum(len(p) == 1 and p != ["[UNK]"] for p in pieces) / len(words),
        "unknown": sum(p == ["[UNK]"] for p in pieces) / len(words),
        "words": len(words),
    }


def measure_one(paths, vocab_size, output):
    """In this process: build_vocab's run on `paths`; prints a JSON line of its times and memory."""
    import bert_tf.tokenization  # noqa: F401 (imported before the heap is traced)
    from bert_tf import vocabulary

    tracemalloc.start()  # the counting's Python heap: the counts, not the text
    start = time.monotonic()
    counts = vocabulary.count_file_words(paths, True)
    counted = time.monotonic()
    count_heap = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    config = vocabulary.VocabSettings(input_file=",".join(paths), vocab_file=output)
    config.vocab_size = vocab_size
    vocab = vocabulary.learn_and_write(counts, config)
    learned = time.monotonic()
    print(
        json.dumps(
            {
                "text_mb": sum(os.path.getsize(p) for p in paths) / 1e6,
                "distinct_words": len(counts),
                "tokens": len(vocab),
                "count_s": counted - start,
                "count_heap_mb": count_heap / 1e6,
                "learn_s": learned - counted,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def measure(paths, vocab_size, work_dir):
    """measure_one in a fresh process (its own peak memory)."""
    output = os.path.join(work_dir, f"scaling-{len(paths)}.txt")
    command = [sys.executable, "-m", "bench.bench_vocab", "--measure_one", output, "--sizes"]
    command += [str(vocab_size), "--paths", *paths]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO_DIR)
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare_sizes(train, held_out, sizes, work_dir, lower_thresh):
    from bert_tf import vocabulary

    counts = vocabulary.count_file_words(train, True)
    print(
        f"\n1. Pieces per word on {os.path.basename(held_out)} (uncased; learner lower_thresh="
        f"{lower_thresh})\n"
    )
    print("| vocabulary | tokens | learn s | pieces / word | words kept whole | [UNK] words |")
    print("|---|---|---|---|---|---|")
    rows = [("Google uncased 30k", GOOGLE_UNCASED, None)]
    for size in sizes:
        start = time.monotonic()
        params = {"lower_thresh": lower_thresh}
        vocab = vocabulary.learn_vocab(counts, size, vocabulary.reserved_tokens(), params)
        seconds = time.monotonic() - start
        path = os.path.join(work_dir, f"learned-{size}.txt")
        vocabulary.write_vocab(path, vocab)
        rows.append((f"learned, --vocab_size={size}", path, seconds))
    for name, path, seconds in rows:
        with open(path, encoding="utf-8") as f:
            tokens = sum(1 for _ in f)
        stats = pieces_per_word(path, held_out)
        print(
            f"| {name} | {tokens} | {'-' if seconds is None else f'{seconds:.1f}'} | "
            f"{stats['pieces_per_word']:.4f} | {100 * stats['whole_words']:.2f}% | "
            f"{100 * stats['unknown']:.3f}% |"
        )
    print(f"\n({stats['words']} held-out words)")


def scaling(train, work_dir, vocab_size):
    print(f"\n2. Time and peak memory as the corpus grows (--vocab_size={vocab_size})\n")
    print(
        "| text | MB | distinct words | tokens | count s | counting's peak heap MB | learn s "
        "| process peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, paths in (
        ("1 novel", train[:1]),
        ("2 novels", train[:2]),
        ("5 novels", train),
        ("5 novels x 4", train * 4),
    ):
        row = measure(paths, vocab_size, work_dir)
        print(
            f"| {name} | {row['text_mb']:.1f} | {row['distinct_words']} | {row['tokens']} | "
            f"{row['count_s']:.1f} | {row['count_heap_mb']:.1f} | {row['learn_s']:.1f} | "
            f"{row['peak_rss_mb']:.0f} |"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--held_out", default="persuasion", help="the held-out novel's file stem")
    parser.add_argument("--sizes", type=int, nargs="+", default=[8000, 16000, 30000])
    parser.add_argument(
        "--lower_thresh",
        type=int,
        default=10,
        help="part 1: the learner's lowest count threshold; 10 (its default, build_vocab's) stops "
        "small corpora short of the size; 1 lets every piece in",
    )
    parser.add_argument("--parts", default="pieces,scaling", help="pieces, scaling or both")
    parser.add_argument("--measure_one", help=argparse.SUPPRESS)
    parser.add_argument("--paths", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_one:
        return measure_one(args.paths, args.sizes[0], args.measure_one)
    train, held_out = novels(args.held_out)
    print(machine.header(with_tensorflow=False))
    with tempfile.TemporaryDirectory() as work_dir:
        if "pieces" in args.parts:
            compare_sizes(train, held_out, args.sizes, work_dir, args.lower_thresh)
        if "scaling" in args.parts:
            scaling(train, work_dir, args.sizes[0])
    print(machine.load_line())
    return None


if __name__ == "__main__":
    main()
