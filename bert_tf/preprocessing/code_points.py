"""The code point path: `FullTokenizer`'s BasicTokenizer rules run character by character.

Every rule of `BasicTokenizer` comes from tables computed at construction time by running the
very predicates of `bert_tf/tokenization.py` and Python's `str.lower` / `unicodedata` on every
code point (code_point_tables.py), so the graph agrees with `FullTokenizer` on this Python's
Unicode version. The
preprocessor sends here only the strings its faster paths cannot take (context rules, invalid
UTF-8, very long words, characters tensorflow-text classifies differently):
  1. `unicode_decode_with_offsets(errors="ignore")`: the code points Python's
     `bytes.decode("utf-8", "ignore")` keeps, with their byte offsets.
  2. One 32-bit "info" word per code point from a two-level table (blocks of
     2**`BLOCK_BITS` code points, identical blocks stored once: 143 KB lower-cased, 93 KB
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

import typing

import tensorflow as tf

from bert_tf.preprocessing.code_point_tables import (
    BLOCK_BITS,
    BREAK_BIT,
    CAPITAL_SIGMA,
    CASE_IGNORABLE_BIT,
    CASED_BIT,
    CJK,
    CODE_POINT_MASK,
    COMBINING_CLASS_SHIFT,
    DROP,
    FINAL_SIGMA,
    HANGUL_FIRST,
    HANGUL_LAST,
    KIND_MASK,
    MAPPED_BIT,
    NUM_CODE_POINTS,
    NUM_MAPPED_SHIFT,
    OUTPUT_FLAGS_MASK,
    PUNCTUATION_BIT,
    REPLACEMENT_START_MASK,
    REPLACEMENT_START_SHIFT,
    SPACE,
    TRAILING_BREAK_BIT,
    code_point_tables,
    final_sigma_flags,
)

# Read as code_points.<name> by the preprocessor and the normalized path.
__all__ = [
    "CASED_BIT",
    "MAX_CHARS_PER_WORD",
    "NUM_CODE_POINTS",
    "CodePointPath",
    "final_sigma_flags",
    "utf8_length",
]

# Longest word, in characters, that WordPiece splits (longer ones are [UNK]), as in the original.
MAX_CHARS_PER_WORD = 200


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
        block_start = tf.gather(self._block_starts, _shift(code_point, BLOCK_BITS))
        return tf.gather(self._block_info, block_start + _bits(code_point, (1 << BLOCK_BITS) - 1))

    def _lower_case_and_strip_accents(self, chars, info):
        """`NFD(token.lower())` without Mn marks, as `_Chars` of output characters [O].

        The output's `code_point` holds the character in its low 21 bits and its punctuation,
        break and combining-class bits above (the layout of `OUTPUT_FLAGS_MASK`).
        """
        is_final_sigma = self._final_sigmas(chars.code_point, chars.row, info)
        code_point = tf.where(is_final_sigma, FINAL_SIGMA, chars.code_point)
        info = tf.where(is_final_sigma, self._final_sigma_info, info)

        kind = _bits(info, KIND_MASK)
        is_mapped = _has(info, MAPPED_BIT)
        hangul_index = code_point - HANGUL_FIRST
        is_hangul = (code_point >= HANGUL_FIRST) & (code_point <= HANGUL_LAST)
        num_out = tf.where(is_mapped, _bits(_shift(info, NUM_MAPPED_SHIFT), 3), 1)
        num_out = tf.where(is_hangul, 2 + tf.cast(hangul_index % 28 != 0, tf.int32), num_out)
        num_out = tf.where(kind == DROP, 0, num_out)

        source = tf.repeat(tf.range(tf.shape(code_point)[0]), num_out)  # [O]
        first_out = tf.cumsum(num_out, exclusive=True)
        nth = tf.range(tf.shape(source)[0]) - tf.gather(first_out, source)  # [O]
        source_info = tf.gather(info, source)
        source_code_point = tf.gather(code_point, source)
        replacement_index = _bits(
            _shift(source_info, REPLACEMENT_START_SHIFT), REPLACEMENT_START_MASK
        )
        source_is_mapped = tf.gather(is_mapped, source)
        replacement = tf.gather(
            self._replacements, tf.where(source_is_mapped, replacement_index + nth, 0)
        )
        value = tf.where(
            source_is_mapped,
            replacement,
            tf.bitwise.bitwise_or(source_code_point, _bits(source_info, OUTPUT_FLAGS_MASK)),
        )
        value = tf.where(
            tf.gather(is_hangul, source),
            tf.bitwise.bitwise_or(_hangul_jamo(tf.gather(hangul_index, source), nth), BREAK_BIT),
            value,
        )
        out = _Chars(
            code_point=value,
            row=tf.gather(chars.row, source),
            byte_start=tf.gather(chars.byte_start, source),
            byte_end=tf.gather(chars.byte_end, source),
            kind=tf.gather(kind, source),
        )
        has_marks_to_order = tf.reduce_any(_shift(value, COMBINING_CLASS_SHIFT) != 0)
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
        is_sigma = code_point == CAPITAL_SIGMA

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
        code_point = _bits(out.code_point, CODE_POINT_MASK)
        is_token = out.kind != SPACE
        is_single = (out.kind == CJK) | _has(out.code_point, PUNCTUATION_BIT)
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

    code_point: tf.Tensor  # int32; output characters also carry the bits of OUTPUT_FLAGS_MASK
    row: tf.Tensor  # int64, the string it belongs to
    byte_start: tf.Tensor  # int64, byte span in its string of the input character it came from
    byte_end: tf.Tensor  # int64
    kind: tf.Tensor = None  # int32, NORMAL, CJK or SPACE (output characters only)


def _keep_undropped(chars, info):
    """Cased mode: every character but the dropped ones, flagged from its own info word."""
    kind = _bits(info, KIND_MASK)
    kept = tf.where(kind != DROP)[:, 0]
    code_point = tf.bitwise.bitwise_or(chars.code_point, _bits(info, PUNCTUATION_BIT))
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
    trailing_break = tf.cast(_has(info, TRAILING_BREAK_BIT), tf.int32)
    breaks_through = tf.cumsum(trailing_break)  # [C]
    previous_source = tf.concat([[-1], source[:-1]], axis=0)
    breaks_between = tf.gather(breaks_through, tf.maximum(source - 1, 0)) - tf.where(
        previous_source > 0,
        tf.gather(breaks_through, tf.maximum(previous_source - 1, 0)),
        0,
    )
    new_row = tf.concat([[True], out.row[1:] != out.row[:-1]], axis=0)
    is_barrier = _has(value, BREAK_BIT) | new_row
    is_barrier |= (source != previous_source) & (breaks_between > 0)
    run = tf.cumsum(tf.cast(is_barrier, tf.int64)) - 1  # [O]
    combining_class = tf.cast(_bits(_shift(value, COMBINING_CLASS_SHIFT), 0xFF), tf.int64)
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
