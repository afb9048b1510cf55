"""Learning a WordPiece vocabulary from raw text: build_vocab.py's engine (one machine; Beam in bert_tf.beam).

The words are those the original's BasicTokenizer makes (bert_tf.tokenization: whitespace, punctuation
and every CJK ideograph split off; lower-cased and accents stripped for uncased vocabularies), counted
while the files stream past, so memory holds the distinct words and their counts, not the corpus. The
counts go to Google's WordPiece learner as tensorflow-text ships it
(`tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib.learn`, the algorithm behind
`bert_vocab_from_dataset`): a binary search on a count threshold for the largest vocabulary within 5%
below --vocab_size, every character of the alphabet kept alone and as a "##" piece.

The file lists the reserved tokens first: [PAD] [UNK] [CLS] [SEP] [MASK], then --num_unused slots
[unused0] ... (Google's releases also hold [unusedN] slots, for tokens a fine-tuning task adds; they put
99 of them between [PAD] and [UNK]), then the characters, then the learned pieces by count.
Counting needs no TensorFlow; the learner's package (tensorflow_text) imports it.
"""

import collections
import dataclasses
import os

from absl import logging

from bert_tf import file_io
from bert_tf.errors import InputError
from bert_tf.settings import setting
from bert_tf.sigterm import doing

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# The learner's own defaults (those bert_vocab_from_dataset uses), named here as build_vocab uses them.
DEFAULT_LEARN_PARAMS = {"lower_thresh": 10, "max_unique_chars": 1000, "max_token_length": 50}


@dataclasses.dataclass(kw_only=True)
class VocabSettings:
    """build_vocab.py's settings."""

    input_file: str | None = setting(
        None,
        "Input raw text file(s): comma-separated, globs allowed (as create_pretraining_data.py "
        "takes them). Any line layout: every line's words are counted.",
    )
    vocab_file: str | None = setting(None, "The vocabulary file to write, one token a line.")
    vocab_size: int = setting(
        30522,
        "Most tokens in the file, reserved ones included; the learner aims for 95% to 100% of it "
        "(fewer when the corpus has few pieces seen 10 times). Default 30522 (Google's English "
        "vocabularies).",
    )
    do_lower_case: bool = setting(
        True, "Lower-case and strip accents (an uncased vocabulary). Default True."
    )
    num_unused: int = setting(
        0,
        "[unusedN] slots after the special tokens, for tokens a task may add later (Google's "
        "vocabularies have 994). Default 0.",
    )
    beam_pipeline_options: str = setting(
        "",
        "Count the words with an Apache Beam pipeline (the [beam] extra) with these comma-separated "
        "KEY=VALUE pipeline options, e.g. runner=DirectRunner,direct_num_workers=2,"
        "direct_running_mode=multi_processing. The file is byte-identical to the one-machine "
        "run's. Default '': one machine.",
    )


def reserved_tokens(num_unused=0):
    """[PAD] [UNK] [CLS] [SEP] [MASK] and `num_unused` [unusedN] slots: the vocabulary's first lines."""
    return [*SPECIAL_TOKENS, *(f"[unused{k}]" for k in range(num_unused))]


def count_words(lines, basic_tokenizer, counts=None):
    """Adds the words of `lines` (BasicTokenizer words) to `counts`, a Counter; returns it."""
    counts = collections.Counter() if counts is None else counts
    tokenize = basic_tokenizer.tokenize
    for line in lines:
        counts.update(tokenize(line))
    return counts


def count_file_words(paths, do_lower_case):
    """The word counts of the files (UTF-8; a BOM and CRLF accepted, ".gz" read through gzip)."""
    from bert_tf.tokenization import BasicTokenizer

    basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    counts = collections.Counter()
    for path in paths:
        count_words((line for _, line in file_io.read_lines(path)), basic_tokenizer, counts)
    return counts


def alphabet(word_counts, learn_params=None):
    """The characters the learner keeps (each becomes a token and a "##" token), as a sorted list."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    params = {**DEFAULT_LEARN_PARAMS, **(learn_params or {})}
    word_counts = word_counts.items() if isinstance(word_counts, dict) else word_counts
    words = learner.get_input_words(word_counts, [], params["max_token_length"])
    allowed = learner.get_allowed_chars(words, params["max_unique_chars"])
    kept = learner.filter_input_words(words, allowed, -1)
    return sorted(learner.extract_char_tokens(kept))


def learn_vocab(word_counts, vocab_size, reserved, learn_params=None):
    """Google's WordPiece learner on word counts.

    Args:
      word_counts: {word: count} or (word, count) pairs; the order does not matter (they are sorted).
      vocab_size: the most tokens, `reserved` included.
      reserved: the tokens that come first (reserved_tokens()).
      learn_params: keyword arguments of `wordpiece_tokenizer_learner_lib.learn` (lower_thresh,
        max_unique_chars, ...); default its own.

    Returns:
      The vocabulary: a list of distinct tokens, `reserved` first.

    Raises:
      InputError: no words, or a vocab_size too small for the reserved tokens and the alphabet.
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    word_counts = sorted(dict(word_counts).items())
    if not word_counts:
        raise InputError("--input_file holds no words: nothing to learn a vocabulary from")
    params = {**DEFAULT_LEARN_PARAMS, **(learn_params or {})}
    characters = alphabet(word_counts, params)
    smallest = len(reserved) + 2 * len(characters)
    if vocab_size < smallest:
        raise InputError(
            f"--vocab_size={vocab_size} is too small: the {len(reserved)} reserved tokens and the "
            f"alphabet of {len(characters)} characters (each alone and as a '##' piece) take "
            f"{smallest}"
        )
    vocab = learner.learn(word_counts, vocab_size, list(reserved), **params)
    return _at_most(vocab, vocab_size, len(reserved), characters)


def _at_most(vocab, vocab_size, num_reserved, characters):
    """The learner's vocabulary, its least frequent pieces dropped if it has more than vocab_size.

    The learner's search on the count threshold can end on a threshold whose vocabulary is a little
    too large (the next threshold's being more than 5% too small); bert_vocab_from_dataset returns
    it as it is. The learned pieces come by count, most frequent first, so the last ones go; never a
    character or its "##" piece (vocab_size was checked to hold them all).
    """
    excess = len(vocab) - vocab_size
    if excess <= 0:
        return vocab
    kept = set(characters) | {"##" + c for c in characters} | set(vocab[:num_reserved])
    dropped = set([t for t in vocab if t not in kept][-excess:])
    logging.info(
        "The learner's vocabulary has %d tokens, more than --vocab_size=%d: dropping its %d least "
        "frequent pieces",
        len(vocab),
        vocab_size,
        excess,
    )
    return [t for t in vocab if t not in dropped]


def write_vocab(path, vocab):
    """Writes the tokens one a line, atomically (the file appears whole or not at all)."""
    file_io.write_text(path, "".join(token + "\n" for token in vocab))


def check_config(settings):
    """The flags' errors, one line each, before any work.

    Returns:
      The input files (each pattern's matches, sorted).
    """
    for name in ("input_file", "vocab_file"):
        if not getattr(settings, name):
            raise InputError(f"--{name} is required")
    if settings.vocab_size <= len(SPECIAL_TOKENS):
        raise InputError(f"--vocab_size must be > {len(SPECIAL_TOKENS)}, got {settings.vocab_size}")
    if settings.num_unused < 0:
        raise InputError(f"--num_unused must be >= 0, got {settings.num_unused}")
    folder = os.path.dirname(os.path.abspath(settings.vocab_file))
    if not file_io.is_url(settings.vocab_file) and not os.path.isdir(folder):
        raise InputError(f"--vocab_file={settings.vocab_file}: the folder {folder} does not exist")
    return file_io.expand_globs(settings.input_file, "--input_file")


def run(settings):
    """build_vocab.py on one machine: counts the words, learns, writes --vocab_file.

    Returns:
      The vocabulary (a list of tokens).
    """
    paths = check_config(settings)
    for path in paths:
        if not file_io.is_url(path):
            file_io.check_utf8(path)  # invalid UTF-8 is named (file and line) before the counting
    with doing(f"counting the words of {len(paths)} file(s)"):
        counts = count_file_words(paths, settings.do_lower_case)
    return learn_and_write(counts, settings)


def learn_and_write(counts, settings):
    """The second half of both runs: the learner on the counts, then the file."""
    logging.info("%d distinct words, %d in all", len(counts), sum(counts.values()))
    with doing("learning the vocabulary"):
        vocab = learn_vocab(counts, settings.vocab_size, reserved_tokens(settings.num_unused))
    write_vocab(settings.vocab_file, vocab)
    logging.info("Wrote %d tokens to %s", len(vocab), settings.vocab_file)
    return vocab
