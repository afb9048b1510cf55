"""WordPiece tokenization, token for token the same as google-research/bert `tokenization.py`.

`FullTokenizer` runs `BasicTokenizer` (clean text, split CJK characters, lower-case and strip
accents, split punctuation) and then `WordpieceTokenizer` (greedy longest-match-first over the
vocab, with "##" marking a continuation piece).

Two speed-ups keep the original's results exactly:
  * Pure-ASCII text (almost all English corpora) takes a fast path: one `str.translate` over the
    whole string, with a table built from the same per-character rules, then `str.split`.
    Anything else takes the original per-character algorithm.
  * Each word's wordpieces are cached, and the greedy match never tries a substring longer than
    the longest vocab entry.

Example:
    tokenizer = FullTokenizer("vocab.txt", do_lower_case=True)
    tokens = tokenizer.tokenize("Hello, World!")  # ["hello", ",", "world", "!"]
    ids = tokenizer.convert_tokens_to_ids(tokens)  # [7592, 1010, 2088, 999]
"""

import collections
import re
import unicodedata

from bert_tf.errors import InputError
from bert_tf.file_io import read_lines

# Code point blocks the original treats as CJK ideographs (each becomes a word of its own).
# Hangul, Hiragana and Katakana are not in these blocks and are split by whitespace as usual.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Words whose wordpieces are remembered; the cache is emptied when it reaches this size.
_WORD_CACHE_SIZE = 1 << 17


# Google's released checkpoints by folder name, and whether their vocab is lower-cased.
_LOWER_CASED_RELEASES = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_RELEASES = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12")
_RELEASE_FOLDER = re.compile(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Refuses a --do_lower_case that contradicts a known Google release, as the original does.

    Only checkpoints inside a folder named as Google released them are checked (e.g.
    .../uncased_L-12_H-768_A-12/bert_model.ckpt); any other path passes.

    Raises:
      InputError: naming both flags and the release.
    """
    match = _RELEASE_FOLDER.match(init_checkpoint or "")
    if match is None:
        return
    release = match.group(1)
    if release in _LOWER_CASED_RELEASES and not do_lower_case:
        actual, case_name, opposite = "False", "uncased", "True"
    elif release in _CASED_RELEASES and do_lower_case:
        actual, case_name, opposite = "True", "cased", "False"
    else:
        return
    raise InputError(
        f"--do_lower_case={actual} but --init_checkpoint={init_checkpoint} is the {case_name} "
        f"release {release}: pass --do_lower_case={opposite} (the original refuses this too)"
    )


def convert_to_unicode(text):
    """Returns `text` as `str`, decoding `bytes` as UTF-8 (dropping invalid bytes).

    Raises:
      ValueError: if `text` is neither `str` nor `bytes`.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError(f"Unsupported string type: {type(text)}")


def printable_text(text):
    """Returns `text` as a `str` fit for logging (the original's name for `convert_to_unicode`)."""
    return convert_to_unicode(text)


def load_vocab(vocab_file):
    """Loads a vocab file (one token per line, UTF-8; a local path or a tf.io.gfile URL such as
    gs://...) into an ordered token -> id dict.

    Ids follow line order; each line is stripped of surrounding whitespace, as in the original.

    Raises:
      MissingFileError (a FileNotFoundError): if `vocab_file` does not exist.
      InputError: naming the file and line, for a line that is not UTF-8, or both lines of a token
        that is there twice (the later id would win silently, and the earlier be unreachable).
    """
    vocab = collections.OrderedDict()
    for number, line in read_lines(vocab_file):
        token = line.strip()
        if token in vocab:
            raise InputError(
                f"{vocab_file}:{number}: the token {token!r} is already on line {vocab[token] + 1}; "
                "a vocabulary holds each token once"
            )
        vocab[token] = number - 1
    return vocab


# The tokens every BERT input holds; create_pretraining_data.py and pretraining also need "[MASK]".
REQUIRED_TOKENS = ("[CLS]", "[SEP]", "[UNK]")


def check_vocab(vocab_file, required=REQUIRED_TOKENS, vocab_size=None, config_name=None):
    """Refuses a vocab that would go wrong silently on a GPU, before any work; returns it (load_vocab).

    A vocab longer than the model's embedding table gives ids past its end: a CPU raises at the
    first step, a GPU gathers zeros and trains on them. A vocab without the special tokens fails
    deep inside the tokenizer.

    Args:
      vocab_file: the --vocab_file.
      required: the tokens it must hold.
      vocab_size: the model's vocab_size (bert_config.json), if the caller has one.
      config_name: where vocab_size comes from, for the message ("--bert_config_file=...").

    Raises:
      InputError: one line naming the file and the missing tokens, or both files and both sizes.
    """
    vocab = load_vocab(vocab_file)
    missing = [token for token in required if token not in vocab]
    if missing:
        raise InputError(
            f"--vocab_file={vocab_file} lacks {', '.join(missing)} (a line each): BERT's inputs "
            f"need {', '.join(required)}"
        )
    entries = max(vocab.values(), default=-1) + 1
    if vocab_size is not None and entries > vocab_size:
        raise InputError(
            f"--vocab_file={vocab_file} has {entries} entries but {config_name} has vocab_size="
            f"{vocab_size}: ids from {vocab_size} on have no embedding (a vocab of another model?)"
        )
    return vocab


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab` (a token -> id or id -> token dict); KeyError if absent."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    """Returns the ids of `tokens` in `vocab`."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """Returns the tokens of `ids` in `inv_vocab` (an id -> token dict)."""
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Splits `text` on whitespace, dropping empty pieces."""
    return text.split()


class FullTokenizer:
    """Basic tokenization followed by WordPiece; the tokenizer BERT's data pipelines use."""

    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def tokenize(self, text):
        """Returns the wordpieces of `text` (`str` or UTF-8 `bytes`) as a list of `str`."""
        words = self.basic_tokenizer.tokenize(text)
        return self.wordpiece_tokenizer.tokenize_words(words)

    def convert_tokens_to_ids(self, tokens):
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return convert_by_vocab(self.inv_vocab, ids)


class BasicTokenizer:
    """Splits text into words and punctuation; optionally lower-cases and strips accents."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case
        self._ascii_table = _ascii_translation_table(do_lower_case)

    def tokenize(self, text):
        """Returns the words and punctuation marks of `text` as a list of `str`."""
        text = convert_to_unicode(text)
        if text.isascii():
            return text.translate(self._ascii_table).split()
        return self._tokenize_per_char(text)

    def _tokenize_per_char(self, text):
        """The original algorithm, character by character; exact for any Unicode text."""
        text = _clean_text(text)
        text = _tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = _strip_accents(token.lower())
            split_tokens.extend(_split_on_punctuation(token))
        return whitespace_tokenize(" ".join(split_tokens))


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece tokenization over a fixed vocab."""

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        # No substring longer than the longest vocab entry can match, so none is tried.
        self._max_piece_chars = max((len(token) for token in vocab), default=0)
        self._cache = {}

    def tokenize(self, text):
        """Returns the wordpieces of `text`, already split into words by `BasicTokenizer`.

        For example, "unaffable" gives ["un", "##aff", "##able"]. A word longer than
        `max_input_chars_per_word`, or one the vocab cannot cover, becomes `unk_token`.
        """
        return self.tokenize_words(whitespace_tokenize(convert_to_unicode(text)))

    def tokenize_words(self, words):
        """Returns the wordpieces of a list of words (each free of whitespace)."""
        output_tokens = []
        for word in words:
            pieces = self._cache.get(word)
            if pieces is None:
                pieces = self._tokenize_word(word)
                if len(self._cache) >= _WORD_CACHE_SIZE:
                    self._cache.clear()
                self._cache[word] = pieces
            output_tokens.extend(pieces)
        return output_tokens

    def _tokenize_word(self, word):
        """Returns the wordpieces of one word as a tuple."""
        if len(word) > self.max_input_chars_per_word:
            return (self.unk_token,)
        pieces = []
        start = 0
        while start < len(word):
            piece, start = self._longest_piece_at(word, start)
            if piece is None:
                return (self.unk_token,)
            pieces.append(piece)
        return tuple(pieces)

    def _longest_piece_at(self, word, start):
        """Returns (longest vocab piece starting at `start`, its end), or (None, start)."""
        prefix = "##" if start > 0 else ""
        end = min(len(word), start + self._max_piece_chars - len(prefix))
        while start < end:
            piece = prefix + word[start:end]
            if piece in self.vocab:
                return piece, end
            end -= 1
        return None, start

    def __getstate__(self):
        # The cache is cheap to rebuild; leave it out of pickles sent to worker processes.
        state = self.__dict__.copy()
        state["_cache"] = {}
        return state


def _clean_text(text):
    """Drops NUL, U+FFFD and control characters; turns whitespace into " "."""
    output = []
    for char in text:
        if char in ("\x00", "\ufffd") or _is_control(char):
            continue
        output.append(" " if _is_whitespace(char) else char)
    return "".join(output)


def _tokenize_chinese_chars(text):
    """Puts spaces around every CJK ideograph, so each becomes a word."""
    return "".join(f" {char} " if _is_chinese_char(ord(char)) else char for char in text)


def _strip_accents(text):
    """Removes combining marks (category Mn) after canonical decomposition (NFD)."""
    text = unicodedata.normalize("NFD", text)
    return "".join(char for char in text if unicodedata.category(char) != "Mn")


def _split_on_punctuation(text):
    """Splits `text` so that every punctuation character is a piece of its own."""
    pieces = []
    current = []
    for char in text:
        if _is_punctuation(char):
            if current:
                pieces.append("".join(current))
                current = []
            pieces.append(char)
        else:
            current.append(char)
    if current:
        pieces.append("".join(current))
    return pieces


def _is_chinese_char(cp):
    """Whether code point `cp` is in one of the CJK ideograph blocks."""
    return any(first <= cp <= last for first, last in _CJK_RANGES)


def _is_whitespace(char):
    """Whether `char` counts as whitespace: space, tab, newline, CR, or category Zs."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """Whether `char` is a control character (Cc or Cf); tab, newline and CR are whitespace."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    """Whether `char` is punctuation: any non-alphanumeric printable ASCII, or category P*.

    "^", "$" and "`" are not Unicode punctuation, but BERT treats them as such.
    """
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _ascii_translation_table(do_lower_case):
    """A `str.translate` table that does the whole BasicTokenizer on ASCII text, before split().

    It is built from the per-character rules above, so it cannot drift from them. Every ASCII
    code point has an entry, which keeps `translate` off its slower missing-key path. ASCII has no
    CJK characters and NFD leaves it unchanged, so those steps are no-ops here.
    """
    table = {}
    for cp in range(128):
        char = chr(cp)
        if cp == 0 or _is_control(char):
            table[cp] = ""
        elif _is_whitespace(char):
            table[cp] = " "
        elif _is_punctuation(char):
            table[cp] = f" {char} "
        else:
            table[cp] = char.lower() if do_lower_case else char
    return table
