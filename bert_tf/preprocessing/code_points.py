"""The code point path: `FullTokenizer`'s BasicTokenizer rules run character by character.

Every rule of `BasicTokenizer` comes from tables computed at construction time by running the
very predicates of `bert_tf/tokenization.py` and Python's `str.lower` / `unicodedata` on every
code point, so the graph agrees with `FullTokenizer` on this Python's Unicode version. The
preprocessor sends here only the strings its faster paths cannot take (context rules, invalid
UTF-8, very long words, characters tensorflow-text classifies differently):
  1. `unicode_decode_with_offsets(errors="ignore")`: the code points Python's
     `bytes.decode("utf-8", "ignore")` keeps, with their byte offsets.
  2. One 32-bit "info" word per code point from a two-level table (blocks of
     2**`_BLOCK_BITS` code points, identical blocks stored once: 143 KB lower-cased, 93 KB
     cased): its kind (word character, CJK ideograph, whitespace, dropped), its punctuation
     flag, and, when lower-casing, its replacement: the characters of `NFD(char.lower())` that
     are not Mn marks, in a small flat table (Hangul syllables are decomposed arithmetically).
  3. Context rules of the original: an upper-case sigma becomes final sigma by Python's
     Final_Sigma test (case-ignorable and cased flags probed from `str.lower` itself), and
     canonical reordering of the few kept marks with a non-zero combining class (a stable
     sort, run only when such a mark is present).
  4. Words: runs of word characters between whitespace; each punctuation character and each
     CJK ideograph is a word of its own. Words are encoded back to UTF-8 and tokenized by a
     `FastWordpieceTokenizer` without pre-tokenization; a word over 200 characters becomes
     [UNK], as does a word the vocab cannot cover.
Every output character keeps the byte span of the input character it came from, so a
wordpiece's offsets are the span of its first and last source characters.

Shape letters: B = batch, P = wordpieces, C = code points, O = output characters after
lower-casing, T = output characters that are not whitespace, W = words.
"""

import functools
import typing
import unicodedata

import numpy as np
import tensorflow as tf

from bert_tf import tokenization

# Longest word, in characters, that WordPiece splits (longer ones are [UNK]), as in the original.
MAX_CHARS_PER_WORD = 200
# Code points share a table block when their 2**_BLOCK_BITS info words are identical.
_BLOCK_BITS = 7
NUM_CODE_POINTS = 0x110000

# Bits of a code point's info word (int32).
_KIND_MASK = 0b11  # one of the kinds below
_NORMAL, _CJK, _SPACE, _DROP = 0, 1, 2, 3
CASE_IGNORABLE_BIT = 1 << 2  # Python's Final_Sigma test skips it
CASED_BIT = 1 << 3
_MAPPED_BIT = 1 << 4  # lower-casing replaces the character (else it is kept as it is)
_NUM_MAPPED_SHIFT = 5  # 2 bits: how many characters replace it (0 to 3)
_TRAILING_BREAK_BIT = 1 << 7  # its decomposition ends with a dropped starter (reordering)
_REPLACEMENT_START_SHIFT = 8  # 13 bits: where its replacement starts in the flat table
_REPLACEMENT_START_MASK = (1 << 13) - 1
# Bits of an output character, shared by info words (the character itself) and replacements.
_CODE_POINT_MASK = (1 << 21) - 1
_PUNCTUATION_BIT = 1 << 21
_BREAK_BIT = 1 << 22  # combining class 0, or a dropped starter precedes it: a reordering barrier
_COMBINING_CLASS_SHIFT = 23  # 8 bits
_OUTPUT_FLAGS_MASK = _PUNCTUATION_BIT | _BREAK_BIT | (0xFF << _COMBINING_CLASS_SHIFT)

_CAPITAL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C2
_HANGUL_FIRST, _HANGUL_LAST = 0xAC00, 0xD7A3


class CodePointPath(tf.Module):
    """The code point path of one vocab and casing: strings -> wordpieces, exactly.

    Args:
      word_tokenizer: `FastWordpieceTokenizer` over the vocab with `no_pretokenization=True`
        and room for 200-character words.
      unk_id: id of [UNK].
      do_lower_case: as for `FullTokenizer`.
    """

    def __init__(self, word_tokenizer, unk_id, do_lower_case, name=None):
        super().__init__(name=name)
        self._word_tokenizer = word_tokenizer
        self._unk_id = unk_id
        self._do_lower_case = do_lower_case
        tables = code_point_tables(do_lower_case)
        self._block_starts = tf.constant(tables.block_starts)
        self._block_info = tf.constant(tables.block_info)
        self._replacements = tf.constant(tables.replacements)
        self._final_sigma_info = tables.final_sigma_info

    def pieces(self, text, with_offsets):
        """Wordpieces of any UTF-8 strings, flat.

        Args:
          text: tf.string [B].
          with_offsets: Python bool.

        Returns:
          (row_splits int64 [B + 1], ids int32 [P]) and, with offsets, byte starts and ends
          int64 [P] into each string.
        """
        code_points, byte_starts = tf.strings.unicode_decode_with_offsets(
            text, "UTF-8", errors="ignore"
        )
        chars = _Chars(
            code_point=code_points.flat_values,
            row=code_points.value_rowids(),
            byte_start=byte_starts.flat_values,
            byte_end=byte_starts.flat_values + utf8_length(code_points.flat_values),
        )
        info = self._lookup_info(chars.code_point)  # [C]
        if self._do_lower_case:
            out = self._lower_case_and_strip_accents(chars, info)
        else:
            out = _keep_undropped(chars, info)
        return self._wordpieces(out, code_points.nrows(), with_offsets)

    def _lookup_info(self, code_point):
        """Info word of each code point: int32 [C] -> int32 [C]."""
        block_start = tf.gather(self._block_starts, _shift(code_point, _BLOCK_BITS))
        return tf.gather(self._block_info, block_start + _bits(code_point, (1 << _BLOCK_BITS) - 1))

    def _lower_case_and_strip_accents(self, chars, info):
        """`NFD(token.lower())` without Mn marks, as `_Chars` of output characters [O].

        The output's `code_point` holds the character in its low 21 bits and its punctuation,
        break and combining-class bits above (the layout of `_OUTPUT_FLAGS_MASK`).
        """
        is_final_sigma = self._final_sigmas(chars.code_point, chars.row, info)
        code_point = tf.where(is_final_sigma, _FINAL_SIGMA, chars.code_point)
        info = tf.where(is_final_sigma, self._final_sigma_info, info)

        kind = _bits(info, _KIND_MASK)
        is_mapped = _has(info, _MAPPED_BIT)
        hangul_index = code_point - _HANGUL_FIRST
        is_hangul = (code_point >= _HANGUL_FIRST) & (code_point <= _HANGUL_LAST)
        num_out = tf.where(is_mapped, _bits(_shift(info, _NUM_MAPPED_SHIFT), 3), 1)
        num_out = tf.where(is_hangul, 2 + tf.cast(hangul_index % 28 != 0, tf.int32), num_out)
        num_out = tf.where(kind == _DROP, 0, num_out)

        source = tf.repeat(tf.range(tf.shape(code_point)[0]), num_out)  # [O]
        first_out = tf.cumsum(num_out, exclusive=True)
        nth = tf.range(tf.shape(source)[0]) - tf.gather(first_out, source)  # [O]
        source_info = tf.gather(info, source)
        source_code_point = tf.gather(code_point, source)
        replacement_index = _bits(
            _shift(source_info, _REPLACEMENT_START_SHIFT), _REPLACEMENT_START_MASK
        )
        source_is_mapped = tf.gather(is_mapped, source)
        replacement = tf.gather(
            self._replacements, tf.where(source_is_mapped, replacement_index + nth, 0)
        )
        value = tf.where(
            source_is_mapped,
            replacement,
            tf.bitwise.bitwise_or(source_code_point, _bits(source_info, _OUTPUT_FLAGS_MASK)),
        )
        value = tf.where(
            tf.gather(is_hangul, source),
            tf.bitwise.bitwise_or(_hangul_jamo(tf.gather(hangul_index, source), nth), _BREAK_BIT),
            value,
        )
        out = _Chars(
            code_point=value,
            row=tf.gather(chars.row, source),
            byte_start=tf.gather(chars.byte_start, source),
            byte_end=tf.gather(chars.byte_end, source),
            kind=tf.gather(kind, source),
        )
        has_marks_to_order = tf.reduce_any(_shift(value, _COMBINING_CLASS_SHIFT) != 0)
        return tf.cond(
            has_marks_to_order,
            lambda: _canonical_order(out, source, info),
            lambda: out,
        )

    def _final_sigmas(self, code_point, row, info):
        """Whether each code point is a capital sigma that Python lower-cases to final sigma.

        Python's rule: preceded by a cased character and not followed by one, skipping
        case-ignorable characters, within the token. Whitespace and CJK ideographs end tokens and
        are neither cased nor case-ignorable; dropped characters count as case-ignorable (they are
        gone before lower-casing).

        Returns:
          bool [C].
        """
        is_sigma = code_point == _CAPITAL_SIGMA

        def compute():
            is_not_ignorable = ~_has(info, CASE_IGNORABLE_BIT)
            not_ignorable = tf.where(is_not_ignorable)[:, 0]  # [K] int64
            is_cased = _has(info, CASED_BIT)
            count_through = tf.cumsum(tf.cast(is_not_ignorable, tf.int64))
            count_before = count_through - tf.cast(is_not_ignorable, tf.int64)
            num = tf.shape(not_ignorable, out_type=tf.int64)[0]
            previous = tf.gather(not_ignorable, tf.maximum(count_before - 1, 0))
            has_previous = (count_before > 0) & (tf.gather(row, previous) == row)
            following = tf.gather(not_ignorable, tf.minimum(count_through, num - 1))
            has_following = (count_through < num) & (tf.gather(row, following) == row)
            cased_before = has_previous & tf.gather(is_cased, previous)
            cased_after = has_following & tf.gather(is_cased, following)
            return is_sigma & cased_before & ~cased_after

        return tf.cond(tf.reduce_any(is_sigma), compute, lambda: tf.zeros_like(is_sigma))

    def _wordpieces(self, out, num_rows, with_offsets):
        """WordPiece over the words of output characters `out` [O]; returns as `pieces`."""
        code_point = _bits(out.code_point, _CODE_POINT_MASK)
        is_token = out.kind != _SPACE
        is_single = (out.kind == _CJK) | _has(out.code_point, _PUNCTUATION_BIT)
        joins_next = is_token & ~is_single
        same_row_as_previous = tf.concat([[False], out.row[1:] == out.row[:-1]], axis=0)
        follows_join = tf.concat([[False], joins_next[:-1]], axis=0) & same_row_as_previous
        starts_word = is_token & (is_single | ~follows_join)

        token_index = tf.where(is_token)[:, 0]  # [T]
        token_code_point = tf.gather(code_point, token_index)
        word_first = tf.where(tf.gather(starts_word, token_index))[:, 0]  # [W], indices into T
        word_row = tf.gather(out.row, tf.gather(token_index, word_first))  # [W]
        words = tf.RaggedTensor.from_row_starts(token_code_point, word_first, validate=False)
        ids, piece_starts, piece_ends = self._word_tokenizer.tokenize_with_offsets(
            tf.strings.unicode_encode(words, "UTF-8")
        )  # [W, (pieces)]

        piece_word = ids.value_rowids()
        piece_in_word = tf.range(tf.shape(piece_word, out_type=tf.int64)[0]) - tf.gather(
            ids.row_starts(), piece_word
        )
        too_long = tf.gather(words.row_lengths() > MAX_CHARS_PER_WORD, piece_word)
        kept = tf.where(~too_long | (piece_in_word == 0))[:, 0]  # [P]
        piece_row = tf.gather(word_row, tf.gather(piece_word, kept))
        row_splits = tf.searchsorted(piece_row, tf.range(num_rows + 1), out_type=tf.int64)
        ids = tf.gather(tf.where(too_long, self._unk_id, ids.flat_values), kept)
        if not with_offsets:
            return row_splits, ids
        # Byte offset, in the concatenated encoded words, of each token character.
        char_bytes = tf.cumsum(utf8_length(token_code_point), exclusive=True)  # [T] int64
        word_bytes = tf.gather(tf.gather(char_bytes, word_first), piece_word)
        first_char = tf.searchsorted(
            char_bytes, word_bytes + piece_starts.flat_values, out_type=tf.int64
        )
        last_char = (
            tf.searchsorted(char_bytes, word_bytes + piece_ends.flat_values, out_type=tf.int64) - 1
        )
        last_char = tf.where(too_long, tf.gather(words.row_limits() - 1, piece_word), last_char)
        starts = tf.gather(tf.gather(out.byte_start, token_index), tf.gather(first_char, kept))
        ends = tf.gather(tf.gather(out.byte_end, token_index), tf.gather(last_char, kept))
        return row_splits, ids, starts, ends


class _Chars(typing.NamedTuple):
    """Flat per-character tensors of a batch, [C] or [O] each."""

    code_point: tf.Tensor  # int32; output characters also carry the bits of _OUTPUT_FLAGS_MASK
    row: tf.Tensor  # int64, the string it belongs to
    byte_start: tf.Tensor  # int64, byte span in its string of the input character it came from
    byte_end: tf.Tensor  # int64
    kind: tf.Tensor = None  # int32, _NORMAL, _CJK or _SPACE (output characters only)


def _keep_undropped(chars, info):
    """Cased mode: every character but the dropped ones, flagged from its own info word."""
    kind = _bits(info, _KIND_MASK)
    kept = tf.where(kind != _DROP)[:, 0]
    code_point = tf.bitwise.bitwise_or(chars.code_point, _bits(info, _PUNCTUATION_BIT))
    return _Chars(*(tf.gather(value, kept) for value in (code_point, *chars[1:4], kind)))


def _canonical_order(out, source, info):
    """NFD's canonical reordering of the kept marks with a non-zero combining class.

    Between two barriers (a character of class 0, a dropped Mn of class 0, a token or string
    boundary) marks are sorted by combining class, stably. The sorted characters of a run take
    the run's whole byte span, so offsets stay ordered.

    Args:
      out: `_Chars` [O] from `_lower_case_and_strip_accents`, before reordering.
      source: int32 [O], the input character each output character came from.
      info: int32 [C], info words of the input characters.

    Returns:
      `_Chars` [O], reordered.
    """
    value = out.code_point
    trailing_break = tf.cast(_has(info, _TRAILING_BREAK_BIT), tf.int32)
    breaks_through = tf.cumsum(trailing_break)  # [C]
    previous_source = tf.concat([[-1], source[:-1]], axis=0)
    breaks_between = tf.gather(breaks_through, tf.maximum(source - 1, 0)) - tf.where(
        previous_source > 0,
        tf.gather(breaks_through, tf.maximum(previous_source - 1, 0)),
        0,
    )
    new_row = tf.concat([[True], out.row[1:] != out.row[:-1]], axis=0)
    is_barrier = _has(value, _BREAK_BIT) | new_row
    is_barrier |= (source != previous_source) & (breaks_between > 0)
    run = tf.cumsum(tf.cast(is_barrier, tf.int64)) - 1  # [O]
    combining_class = tf.cast(_bits(_shift(value, _COMBINING_CLASS_SHIFT), 0xFF), tf.int64)
    order = tf.argsort(run * 256 + combining_class, stable=True)
    num_runs = run[-1] + 1
    run_start = tf.math.unsorted_segment_min(out.byte_start, run, num_runs)
    run_end = tf.math.unsorted_segment_max(out.byte_end, run, num_runs)
    return _Chars(
        code_point=tf.gather(value, order),
        row=out.row,
        byte_start=tf.gather(run_start, run),
        byte_end=tf.gather(run_end, run),
        kind=tf.gather(out.kind, order),
    )


def _bits(value, mask):
    """Bitwise and of an int32 tensor with a Python int."""
    return tf.bitwise.bitwise_and(value, mask)


def _has(value, bit):
    """Whether `bit` is set in each element of an int32 tensor: bool, same shape."""
    return tf.bitwise.bitwise_and(value, bit) != 0


def _shift(value, count):
    """Right shift of an int32 tensor by a Python int."""
    return tf.bitwise.right_shift(value, count)


def _hangul_jamo(syllable_index, nth):
    """The nth jamo of NFD(Hangul syllable): int32 [O] indices from U+AC00 -> int32 [O]."""
    leading = 0x1100 + syllable_index // 588
    vowel = 0x1161 + (syllable_index % 588) // 28
    trailing = 0x11A7 + syllable_index % 28
    return tf.where(nth == 0, leading, tf.where(nth == 1, vowel, trailing))


def utf8_length(code_point):
    """Bytes of each code point in UTF-8: int32 [N] -> int64 [N]."""
    length = 1 + tf.cast(code_point >= 0x80, tf.int64)
    length += tf.cast(code_point >= 0x800, tf.int64)
    return length + tf.cast(code_point >= 0x10000, tf.int64)


# --------------------------------------------------------------------------------------------
# Tables, computed from the Python rules.


class CodePointTables:
    """Per-code-point tables of one casing, as numpy arrays (see `code_point_tables`)."""

    def __init__(self, block_starts, block_info, replacements, final_sigma_info):
        self.block_starts = block_starts  # int32 [0x110000 >> _BLOCK_BITS]
        self.block_info = block_info  # int32 [blocks << _BLOCK_BITS]
        self.replacements = replacements  # int32 [R], output-character words
        self.final_sigma_info = final_sigma_info  # Python int: info word of U+03C2


@functools.lru_cache(maxsize=2)
def code_point_tables(do_lower_case):
    """Info word of every code point, deduplicated into blocks; replacement characters.

    Unassigned and private-use code points outside the CJK blocks all have their category's
    default properties, so one representative of each stands for the rest (a 5x faster build).
    """
    info = np.zeros(NUM_CODE_POINTS, np.int64)
    replacements = [0]  # entry 0: the target of the unmapped characters' dummy gather
    replacement_starts = {(): 0}
    default_info = {}
    in_cjk_block = np.zeros(NUM_CODE_POINTS, bool)
    for first, last in tokenization._CJK_RANGES:
        in_cjk_block[first : last + 1] = True
    in_cjk_block = in_cjk_block.tolist()
    for code_point in range(NUM_CODE_POINTS):
        char = chr(code_point)
        category = unicodedata.category(char)
        if category in ("Cn", "Co") and not in_cjk_block[code_point]:
            if category not in default_info:
                default_info[category] = _char_info(
                    char, do_lower_case, replacements, replacement_starts
                )
            info[code_point] = default_info[category]
        else:
            info[code_point] = _char_info(char, do_lower_case, replacements, replacement_starts)
    if len(replacements) > _REPLACEMENT_START_MASK:
        raise ValueError(f"{len(replacements)} replacement characters overflow the info word")
    blocks, block_of_code_point = np.unique(
        info.reshape(-1, 1 << _BLOCK_BITS), axis=0, return_inverse=True
    )
    return CodePointTables(
        block_starts=(block_of_code_point.reshape(-1) << _BLOCK_BITS).astype(np.int32),
        block_info=blocks.reshape(-1).astype(np.int32),
        replacements=np.array(replacements, np.int32),
        final_sigma_info=int(info[_FINAL_SIGMA]),
    )


def _char_info(char, do_lower_case, replacements, replacement_starts):
    """Info word of one character, by `tokenization`'s predicates; may extend `replacements`."""
    code_point = ord(char)
    if char in ("\x00", "\ufffd") or tokenization._is_control(char):
        return _DROP | CASE_IGNORABLE_BIT
    # str.split() in whitespace_tokenize also splits on U+2028 and U+2029.
    if tokenization._is_whitespace(char) or char.isspace():
        return _SPACE | _BREAK_BIT
    kind = _CJK if tokenization._is_chinese_char(code_point) else _NORMAL
    if not do_lower_case:
        return kind | (_output_bits(char, combining_class=0) & _OUTPUT_FLAGS_MASK)
    info = kind
    if kind == _NORMAL:
        info |= final_sigma_flags(char)
    if _HANGUL_FIRST <= code_point <= _HANGUL_LAST:
        _check_hangul(char)
        return info  # decomposed in the graph
    kept, trailing_break = _lowered_without_marks(char)
    if kept == [_output_bits(char, unicodedata.combining(char))] and not trailing_break:
        return info | (kept[0] & _OUTPUT_FLAGS_MASK)
    key = tuple(kept)
    if key not in replacement_starts:
        replacement_starts[key] = len(replacements)
        replacements.extend(kept)
    info |= _MAPPED_BIT | (len(kept) << _NUM_MAPPED_SHIFT)
    info |= _TRAILING_BREAK_BIT if trailing_break else 0
    return info | (replacement_starts[key] << _REPLACEMENT_START_SHIFT)


def _lowered_without_marks(char):
    """Output-character words of `NFD(char.lower())` without Mn, and whether it ends in a
    dropped mark of combining class 0 (a reordering barrier that leaves nothing behind)."""
    kept = []
    pending_break = False
    for decomposed in unicodedata.normalize("NFD", char.lower()):
        combining_class = unicodedata.combining(decomposed)
        if unicodedata.category(decomposed) == "Mn":
            pending_break |= combining_class == 0
            continue
        bits = _output_bits(decomposed, combining_class)
        kept.append(bits | (_BREAK_BIT if pending_break else 0))
        pending_break = False
    return kept, pending_break


def _output_bits(char, combining_class):
    """Output-character word: code point, punctuation bit, break bit, combining class."""
    bits = ord(char) | (_PUNCTUATION_BIT if tokenization._is_punctuation(char) else 0)
    bits |= _BREAK_BIT if combining_class == 0 else 0
    return bits | (combining_class << _COMBINING_CLASS_SHIFT)


def final_sigma_flags(char):
    """Case-ignorable and cased bits of `char`, read off Python's own final-sigma lower-casing.

    "A" is cased and " " is neither, so: "A" + char + "Σ" ends in final sigma iff char is
    case-ignorable or cased; " " + char + "Σ" iff char is cased and not case-ignorable.
    """
    after_cased = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
    after_space = (" " + char + "\u03a3").lower()[-1] == "\u03c2"
    if after_space:
        return CASED_BIT
    return CASE_IGNORABLE_BIT if after_cased else 0


def _check_hangul(char):
    """Raises if Python's NFD of a Hangul syllable is not what `_hangul_jamo` computes."""
    index = ord(char) - _HANGUL_FIRST
    jamo = [0x1100 + index // 588, 0x1161 + (index % 588) // 28]
    if index % 28:
        jamo.append(0x11A7 + index % 28)
    if [ord(c) for c in unicodedata.normalize("NFD", char.lower())] != jamo:
        raise ValueError(f"unexpected decomposition of U+{ord(char):04X}")
