"""Builds bench/vocab_multilingual_cased.txt, a cased WordPiece vocab for the tokenizer benchmark.

No multilingual BERT vocab (such as the release's 119,547-entry multi_cased_L-12_H-768_A-12) is
on this machine, and no model hub can be reached, so this one is learned here, from text in the
repo only:
  * bench/multilingual_sentences.jsonl: 275 sentences written for the benchmark (French,
    German, Greek, Russian, Chinese, and lines with control and format characters);
  * sample_data/sample_text.txt: the English sample text of the original BERT release.
Words are `FullTokenizer`'s BasicTokenizer(do_lower_case=False) words, so the vocab is cased and
splits as the original does (every CJK ideograph a word of its own). Their counts go to
tensorflow-text's WordPiece learner (`wordpiece_tokenizer_learner_lib.learn`, the algorithm of
`bert_vocab_from_dataset`, through bert_tf.vocabulary as build_vocab.py runs it) with a frequency threshold of 1, which keeps every character alone
and as a "##" piece, and frequent words and word pieces. The special tokens come first, as in
the release: [PAD] [UNK] [CLS] [SEP] [MASK].

The vocab is small (a few thousand entries against mBERT's 119,547) and learned from the very
sentences the benchmark tokenizes, so words split into fewer pieces than with mBERT; the
benchmark compares tokenizers on the same vocab, so that favours none of them.

    .venv/bin/python -m bench.make_multilingual_vocab    # writes bench/vocab_multilingual_cased.txt
"""

import argparse
import json
import os

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCES = os.path.join(REPO_DIR, "bench", "multilingual_sentences.jsonl")
ENGLISH = os.path.join(REPO_DIR, "sample_data", "sample_text.txt")
VOCAB = os.path.join(REPO_DIR, "bench", "vocab_multilingual_cased.txt")


def read_sentences(path=SENTENCES):
    """[(language, text)] of the benchmark's sentences file."""
    with open(path, encoding="utf-8") as reader:
        return [(record["language"], record["text"]) for record in map(json.loads, reader)]


def learn_vocab(texts, vocab_size):
    """Cased WordPiece vocab (a list of tokens, special tokens first) learned from `texts`."""
    from bert_tf import vocabulary
    from bert_tf.tokenization import BasicTokenizer

    counts = vocabulary.count_words(texts, BasicTokenizer(do_lower_case=False))
    learn_params = {"lower_thresh": 1, "max_unique_chars": 5000}
    return vocabulary.learn_vocab(counts, vocab_size, vocabulary.reserved_tokens(), learn_params)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab_size", type=int, default=8000, help="at most; default 8000")
    parser.add_argument("--output", default=VOCAB, help="vocab file to write")
    args = parser.parse_args()
    texts = [text for _, text in read_sentences()]
    with open(ENGLISH, encoding="utf-8") as reader:
        texts += [line.strip() for line in reader if line.strip()]
    vocab = learn_vocab(texts, args.vocab_size)
    with open(args.output, "w", encoding="utf-8") as writer:
        writer.write("".join(token + "\n" for token in vocab))
    print(f"wrote {len(vocab)} tokens from {len(texts)} lines to {args.output}")


if __name__ == "__main__":
    main()
