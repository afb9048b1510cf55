"""Writes sample_data/word_order/: a small labelled task, in GLUE's layout, made from Jane Austen's novels.

Each sentence appears twice: as Austen wrote it (`original`) and with its words shuffled (`shuffled`).
Punctuation keeps its place and only the words move, so the two rows hold the same words: neither the
words nor remembering a training sentence tells the classes apart, only word order does. Word order
is what masked-LM pretraining teaches a model, so the task shows what pretraining adds (the demo
fine-tunes from the pretrained checkpoint and from random weights, side by side).

Source: tests/fixtures/austen_sentences.txt.xz (one sentence per line, a blank line between chapters;
Emma, Mansfield Park, Northanger Abbey, Sense and Sensibility). Its first six chapters are
sample_data/sample_text.txt, the pretraining corpus; they are left out, so no sentence of the task was
seen in pretraining. Chapters, not sentences, are dealt to the splits (counting from the seventh
chapter: index % 5 == 3 -> dev, == 4 -> test, else train), so no two splits share a chapter.

    python scripts/make_sample_tasks.py            # rewrites sample_data/word_order/
    python scripts/make_sample_tasks.py --check    # exit status 1 if the shipped files differ

Output (tab-separated, UTF-8, one header line, as GLUE's SST-2):
    train.tsv, dev.tsv: sentence <TAB> label     (label: original | shuffled; 1,500 / 400 sentences)
    test.tsv:           index <TAB> sentence     (no label, as GLUE's test sets; 100 sentences)
The same source gives the same bytes: one seeded random.Random and string operations only.
"""

import argparse
import lzma
import os
import random
import re
import sys

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The corpus, xz-packed: tests/fixtures/README.md says where it comes from.
DEFAULT_SOURCE = os.path.join(REPO_DIR, "tests", "fixtures", "austen_sentences.txt.xz")
DEFAULT_OUTPUT = os.path.join(REPO_DIR, "sample_data", "word_order")

SEED = 12345
PRETRAINING_CHAPTERS = 6  # sample_data/sample_text.txt: the source's first six chapters
SPLIT_SIZES = {"train": 1500, "dev": 400, "test": 100}  # sentences; two rows each
MIN_WORDS, MAX_WORDS = 6, 25  # whitespace-separated words per sentence
# The source splits sentences after these titles ("Mr." / "Knightley came in."); such lines are rejoined.
TITLES = ("Mr.", "Mrs.", "Dr.", "St.", "Messrs.")
# A word with its punctuation: leading punctuation, the word, trailing punctuation ('"Emma,' -> '"', 'Emma', ',').
_WORD = re.compile(r"^(\W*)(.*?)(\W*)$")


def read_chapters(path):
    """The source's chapters, each a list of sentences (title-split lines rejoined)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is absent: pass --source")
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        blocks = f.read().split("\n\n")
    chapters = []
    for block in blocks:
        sentences = []
        for line in block.splitlines():
            line = " ".join(line.split())  # tabs and runs of spaces -> one space
            if not line:
                continue
            if sentences and sentences[-1].split()[-1].lstrip("\"'(") in TITLES:
                sentences[-1] += " " + line
            else:
                sentences.append(line)
        if sentences:
            chapters.append(sentences)
    return chapters


def split_of(chapter_index):
    """train, dev or test for a chapter counted from the first one after the pretraining corpus."""
    return {3: "dev", 4: "test"}.get(chapter_index % 5, "train")


def shuffle_words(sentence, rng):
    """The sentence with its words in another order and its punctuation in place, or None if impossible.

    The model is uncased, so the order must differ in lower case: "the" swapped with "The" is no change.
    """
    parts = [_WORD.match(token).groups() for token in sentence.split()]
    slots = [i for i, (_, word, _) in enumerate(parts) if word]
    words = [parts[i][1] for i in slots]
    if len({word.lower() for word in words}) < 2:
        return None
    shuffled = list(words)
    while [w.lower() for w in shuffled] == [w.lower() for w in words]:
        rng.shuffle(shuffled)
    for slot, word in zip(slots, shuffled, strict=True):
        before, _, after = parts[slot]
        parts[slot] = (before, word, after)
    return " ".join("".join(part) for part in parts)


def make_examples(chapters, rng):
    """{split: [(sentence, label)]}: SPLIT_SIZES[split] sentences, each as written and shuffled.

    Both versions of a sentence go into the same split, so a model cannot tell the classes apart by
    remembering which words a training sentence had: only their order separates the two rows.
    """
    candidates = {split: [] for split in SPLIT_SIZES}
    for index, sentences in enumerate(chapters[PRETRAINING_CHAPTERS:]):
        candidates[split_of(index)].extend(
            s for s in sentences if MIN_WORDS <= len(s.split()) <= MAX_WORDS
        )
    examples = {}
    for split, size in SPLIT_SIZES.items():
        pool = candidates[split]
        rng.shuffle(pool)
        rows = []
        for sentence in pool:
            if len(rows) == 2 * size:
                break
            shuffled = shuffle_words(sentence, rng)
            if shuffled is not None:
                rows += [(sentence, "original"), (shuffled, "shuffled")]
        if len(rows) < 2 * size:
            raise ValueError(
                f"{split}: {len(rows) // 2} sentences of {MIN_WORDS}-{MAX_WORDS} words, need {size}"
            )
        rng.shuffle(rows)
        examples[split] = rows
    return examples


def render(examples):
    """{file name: text} in GLUE's SST-2 layout (test without labels)."""
    files = {}
    for split in ("train", "dev"):
        lines = ["sentence\tlabel"] + [f"{s}\t{label}" for s, label in examples[split]]
        files[f"{split}.tsv"] = "\n".join(lines) + "\n"
    lines = ["index\tsentence"] + [f"{i}\t{s}" for i, (s, _) in enumerate(examples["test"])]
    files["test.tsv"] = "\n".join(lines) + "\n"
    return files


def build(source=DEFAULT_SOURCE):
    """{file name: text} of the task, from the source file."""
    return render(make_examples(read_chapters(source), random.Random(SEED)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="austen_sentences.txt")
    parser.add_argument("--output_dir", default=DEFAULT_OUTPUT, help="where the .tsv files go")
    parser.add_argument(
        "--check", action="store_true", help="compare with the files there instead of writing"
    )
    args = parser.parse_args(argv)
    files = build(args.source)
    if args.check:
        stale = []
        for name, text in files.items():
            path = os.path.join(args.output_dir, name)
            if not os.path.exists(path) or open(path, encoding="utf-8", newline="").read() != text:
                stale.append(path)
        for path in stale:
            print(f"differs from what {args.source} gives: {path}", file=sys.stderr)
        return 1 if stale else 0
    os.makedirs(args.output_dir, exist_ok=True)
    for name, text in files.items():
        path = os.path.join(args.output_dir, name)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        print(f"{path}: {text.count(chr(10)) - 1} examples, {len(text.encode('utf-8'))} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
