"""In-graph BERT tokenization and packing, id for id the same as `tokenization.FullTokenizer`.

`BertPreprocessor` turns a batch of raw strings into wordpiece ids (with byte offsets) and packs
them into `input_ids` / `input_mask` / `segment_ids`, using only TensorFlow and TensorFlow Text
ops, so a SavedModel that holds it serves raw text with `import tensorflow, tensorflow_text`.

Why not `tensorflow_text.BertTokenizer` / `FastBertTokenizer`: their normalisation differs from
the original Python code (which control and format characters are dropped, which characters are
whitespace, case folding instead of `str.lower`, the original's punctuation set including ASCII
"^", "$" and "`", Python's final-sigma rule, the 200-character word limit counted in characters).
Here every rule of `BasicTokenizer` comes from tables computed at construction time by running
the very predicates of `bert_tf/tokenization.py` and Python's `str.lower` / `unicodedata` on
every code point, so the graph agrees with `FullTokenizer` on this Python's Unicode version.

Each string takes one of two paths:
  * ASCII fast path: a string of printable ASCII, tab, newline and carriage return only (almost
    all English text). Its rules are simple there: `tf.strings.lower`, then one
    `FastWordpieceTokenizer` in end-to-end mode, whose whitespace and punctuation split
    on such text is exactly BERT's (ASCII punctuation is every non-alphanumeric printable
    character) and whose `max_bytes_per_word=200` is the 200-character rule. The batch is cut
    into `_FAST_PATH_SHARDS` slices tokenized by parallel ops. A batch of such strings runs
    nothing else: the general path sits in the other branch of a `tf.cond`.
  * General path, for every other string, code point by code point:
      1. `unicode_decode_with_offsets(errors="ignore")`: the code points Python's
         `bytes.decode("utf-8", "ignore")` keeps, with their byte offsets.
      2. One 32-bit "info" word per code point from a two-level table (blocks of
         2**`_BLOCK_BITS` code points, identical blocks stored once: 143 KB lower-cased, 93 KB
         cased, against 1.7 MB for each WordPiece model of a 30k vocab): its kind (word
         character, CJK ideograph, whitespace, dropped), its punctuation flag, and, when
         lower-casing, its replacement: the characters of `NFD(char.lower())` that are not Mn
         marks, in a small flat table (Hangul syllables are decomposed arithmetically instead).
      3. Context rules of the original: an upper-case sigma becomes final sigma by Python's
         Final_Sigma test (case-ignorable and cased flags probed from `str.lower` itself), and
         canonical reordering of the few kept marks with a non-zero combining class (a stable
         sort, run only when such a mark is present).
      4. Words: runs of word characters between whitespace; each punctuation character and each
         CJK ideograph is a word of its own. Words are encoded back to UTF-8 and tokenized by a
         second `FastWordpieceTokenizer` (no pre-tokenization); a word over 200 characters
         becomes [UNK], as does a word the vocab cannot cover.
    Every output character keeps the byte span of the input character it came from, so a
    wordpiece's offsets are the span of its first and last source characters.

Invalid UTF-8 is handled as `FullTokenizer` handles `bytes`: invalid bytes are skipped.

Shape letters: B = batch, P = wordpieces of a row, C = code points, O = output characters
after lower-casing, W = words.
"""

import functools
import typing
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import tokenization

# Longest word, in characters, that WordPiece splits (longer ones are [UNK]), as in the original.
_MAX_CHARS_PER_WORD = 200
# FastWordpieceTokenizer's limit on a vocab token's length, without its "##".
_MAX_WORDPIECE_BYTES = 256
# A string matching this takes the ASCII fast path.
_ASCII_FAST_PATH_PATTERN = r"[\t\n\r -~]*"
# Parallel slices of the ASCII fast path: its kernel is single-threaded (with both cores of a
# 2-core machine free, 2 slices tokenized a batch of 1024 lines 1.7x faster than 1).
_FAST_PATH_SHARDS = 2
# Code points share a table block when their 2**_BLOCK_BITS info words are identical.
_BLOCK_BITS = 7
_NUM_CODE_POINTS = 0x110000

# Bits of a code point's info word (int32).
_KIND_MASK = 0b11  # one of the kinds below
_NORMAL, _CJK, _SPACE, _DROP = 0, 1, 2, 3
_CASE_IGNORABLE_BIT = 1 << 2  # Python's Final_Sigma test skips it
_CASED_BIT = 1 << 3
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


def _graph_code(method):
    """Leaves `method` to run as written inside tf.function: it has no tensor-dependent Python
    control flow (tf.cond is explicit), and AutoGraph's conversion would only slow tracing."""
    return tf.autograph.experimental.do_not_convert(method)


class BertPreprocessor(tf.Module):
    """Raw strings -> BERT wordpiece ids and packed model inputs, inside the graph.

    Gives the ids of `tokenization.FullTokenizer(vocab_file, do_lower_case)` exactly, and packs
    them as the original `run_classifier.py` does ([CLS] a [SEP] b [SEP], `_truncate_seq_pair`).

    Example:
        preprocessor = BertPreprocessor("vocab.txt", do_lower_case=True, max_seq_length=128)
        ids = preprocessor.tokenize(tf.constant(["Hello, World!"]))  # [[7592, 1010, 2088, 999]]
        features = preprocessor(tf.constant(["Is it?"]), tf.constant(["Yes."]))
        features["input_ids"]  # int32 [1, 8]: [CLS] is it ? [SEP] yes . [SEP]

    Attributes:
      vocab_file: `tf.saved_model.Asset` of the vocab, so a SavedModel carries it in assets/.
      do_lower_case, max_seq_length: as given.
      vocab_size: number of ids (the largest id + 1).
      cls_id, sep_id, unk_id: ids of [CLS], [SEP], [UNK].
      pad_id: id of [PAD], or 0 if absent. Packing pads with 0, as the original does.
    """

    def __init__(self, vocab_file, do_lower_case=True, max_seq_length=128, name=None):
        super().__init__(name=name)
        vocab = tokenization.load_vocab(vocab_file)
        for token in ("[CLS]", "[SEP]", "[UNK]"):
            if token not in vocab:
                raise ValueError(f"vocab file {vocab_file} has no {token} line")
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length must be at least 2, got {max_seq_length}")
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = bool(do_lower_case)
        self.max_seq_length = int(max_seq_length)
        self.vocab_size = max(vocab.values()) + 1
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.unk_id = vocab["[UNK]"]
        self.pad_id = vocab.get("[PAD]", 0)

        tokens = _tokens_by_id(vocab, self.vocab_size, vocab_file)
        self._ascii_tokenizer = tf_text.FastWordpieceTokenizer(
            tokens, max_bytes_per_word=_MAX_CHARS_PER_WORD, token_out_type=tf.int32
        )
        self._word_tokenizer = tf_text.FastWordpieceTokenizer(
            tokens,
            max_bytes_per_word=4 * _MAX_CHARS_PER_WORD,
            token_out_type=tf.int32,
            no_pretokenization=True,
        )
        tables = _code_point_tables(self.do_lower_case)
        self._block_starts = tf.constant(tables.block_starts)
        self._block_info = tf.constant(tables.block_info)
        self._replacements = tf.constant(tables.replacements)
        self._final_sigma_info = tables.final_sigma_info

    # ----------------------------------------------------------------------------------------
    # Public API.

    @_graph_code
    def tokenize(self, text):
        """Wordpiece ids of each string.

        Args:
          text: tf.string [B], UTF-8.

        Returns:
          tf.RaggedTensor int32 [B, (P)]: `FullTokenizer`'s ids of each string.
        """
        return self._tokenize(text, with_offsets=False)[0]

    @_graph_code
    def tokenize_with_offsets(self, text):
        """Wordpiece ids of each string, with the input bytes each piece came from.

        Args:
          text: tf.string [B], UTF-8.

        Returns:
          (ids, start_offsets, end_offsets): tf.RaggedTensor [B, (P)], int32 ids and int64
          byte offsets into each input string (end exclusive). `text[start:end]` spans the
          input characters a piece was made from; from a word's first to its last piece, it is
          the word as written in the input.
        """
        return self._tokenize(text, with_offsets=True)

    @_graph_code
    def pack(self, segments, max_seq_length=None):
        """Packs one or two segments of ids into BERT's model inputs.

        Rows are [CLS] a [SEP] (b [SEP]), truncated as the original's `_truncate_seq_pair`:
        pieces are dropped from the end of the longer segment (of `b` on a tie) until the row
        fits; a single segment is cut to `max_seq_length - 2`. A row whose `b` has no pieces (an
        empty second text) is packed as a single segment, as the original's `if tokens_b:` does.

        Args:
          segments: list of 1 or 2 tf.RaggedTensor int [B, (N)] of ids.
          max_seq_length: Python int; defaults to the constructor's.

        Returns:
          dict of int32 [B, L] tensors `input_ids`, `input_mask`, `segment_ids`, zero-padded,
          L = the longest packed row of the batch (at most `max_seq_length`).

        Raises:
          ValueError: for a number of segments other than 1 or 2, or a `max_seq_length` too
            small for the special tokens.
        """
        max_seq_length = self.max_seq_length if max_seq_length is None else int(max_seq_length)
        if len(segments) not in (1, 2):
            raise ValueError(f"pack takes 1 or 2 segments, got {len(segments)}")
        num_special = len(segments) + 1
        if max_seq_length < num_special:
            raise ValueError(
                f"max_seq_length={max_seq_length} leaves no room for {num_special} special tokens"
            )
        segments = [_as_int32_ragged(segment) for segment in segments]
        kept = _truncated_lengths(
            [segment.row_lengths() for segment in segments], max_seq_length - num_special
        )  # int64 [B] each
        if len(segments) == 1:
            return self._pack_single(segments[0], kept[0])
        has_b = segments[1].row_lengths() > 0  # [B]
        single = _truncated_lengths([segments[0].row_lengths()], max_seq_length - 2)[0]
        kept[0] = tf.where(has_b, kept[0], single)
        return self._pack_pair(segments, kept, tf.cast(has_b, tf.int64))

    def _pack_single(self, segment, kept):
        """[CLS] a [SEP]: a single segment, cut to its kept length (the same budget for every
        row, so one `to_tensor` of that width truncates every row right)."""
        batch_size = segment.nrows()
        width = tf.reduce_max(tf.concat([kept, [0]], axis=0))
        pieces = segment.to_tensor(0, shape=tf.stack([batch_size, width]))  # [B, width]
        columns = tf.stack([batch_size, 1])
        input_ids = tf.concat(
            [tf.fill(columns, self.cls_id), pieces, tf.zeros(columns, tf.int32)], 1
        )
        is_sep = tf.range(width + 2)[tf.newaxis, :] == kept[:, tf.newaxis] + 1
        input_ids = tf.where(is_sep, self.sep_id, input_ids)
        input_mask = tf.sequence_mask(kept + 2, width + 2, dtype=tf.int32)
        return {
            "input_ids": input_ids,
            "input_mask": input_mask,
            "segment_ids": tf.zeros_like(input_mask),
        }

    def _pack_pair(self, segments, kept, has_b):
        """[CLS] a [SEP] b [SEP] ([CLS] a [SEP] where has_b is 0), built flat (the column of each
        token of each packed row) and made dense at the end."""
        row_length = kept[0] + kept[1] + 2 + has_b  # [B]
        row_splits = tf.concat([[0], tf.cumsum(row_length)], axis=0)  # [B + 1]
        total = row_splits[-1]  # N
        # Rows are at least 2 long, so their starts are distinct.
        row_start_marks = tf.scatter_nd(
            row_splits[:-1, tf.newaxis], tf.ones_like(row_length), total[tf.newaxis]
        )
        row = tf.cumsum(row_start_marks) - 1  # [N]
        column = tf.range(total) - tf.gather(row_splits, row)
        input_ids = tf.where(column == 0, self.cls_id, self.sep_id)  # [SEP] unless replaced
        first_column = tf.ones_like(column)  # of a, then of b
        for segment, length in zip(segments, kept, strict=True):
            row_kept = tf.gather(length, row)
            in_segment = (column >= first_column) & (column < first_column + row_kept)
            value_index = tf.gather(segment.row_starts(), row) + column - first_column
            # One padding value, for the index of the tokens outside the segment.
            values = tf.concat([segment.flat_values, [0]], axis=0)
            value_index = tf.where(in_segment, value_index, tf.size(values, tf.int64) - 1)
            input_ids = tf.where(in_segment, tf.gather(values, value_index), input_ids)
            first_column += row_kept + 1
        segment_ids = tf.cast(column >= tf.gather(kept[0], row) + 2, tf.int32)

        def dense(flat):
            return tf.RaggedTensor.from_row_splits(flat, row_splits, validate=False).to_tensor(0)

        return {
            "input_ids": dense(input_ids),
            "input_mask": dense(tf.ones_like(input_ids)),
            "segment_ids": dense(segment_ids),
        }

    @_graph_code
    def __call__(self, text_a, text_b=None):
        """`pack` of the ids of `text_a` (and `text_b`): tf.string [B] -> dict of int32 [B, L]."""
        segments = [self.tokenize(text_a)]
        if text_b is not None:
            segments.append(self.tokenize(text_b))
        return self.pack(segments)

    # ----------------------------------------------------------------------------------------
    # Routing between the two paths.

    def _tokenize(self, text, with_offsets):
        """(ids,) or (ids, starts, ends): tf.RaggedTensor [B, (P)], int32 ids, int64 offsets."""
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank != 1:
            raise ValueError(f"text must be a tf.string vector [batch], got shape {text.shape}")
        is_ascii = tf.strings.regex_full_match(text, _ASCII_FAST_PATH_PATTERN)
        row_splits, *values = tf.cond(
            tf.reduce_all(is_ascii),
            lambda: self._ascii_pieces(text, with_offsets),
            lambda: self._mixed_pieces(text, is_ascii, with_offsets),
        )
        return tuple(
            tf.RaggedTensor.from_row_splits(value, row_splits, validate=False) for value in values
        )

    def _mixed_pieces(self, text, is_ascii, with_offsets):
        """Fast path for the ASCII rows, general path for the others, back in input order."""
        ascii_rows = tf.where(is_ascii)[:, 0]
        other_rows = tf.where(~is_ascii)[:, 0]
        ascii_pieces = self._ascii_pieces(tf.gather(text, ascii_rows), with_offsets)
        other_pieces = self._general_pieces(tf.gather(text, other_rows), with_offsets)
        row_splits, *values = _concat_pieces([ascii_pieces, other_pieces])
        # Gather the rows back into input order, through the positions of their pieces.
        positions = tf.RaggedTensor.from_row_splits(
            tf.range(row_splits[-1]), row_splits, validate=False
        )
        input_order = tf.math.invert_permutation(tf.concat([ascii_rows, other_rows], axis=0))
        positions = tf.gather(positions, input_order)
        return (
            positions.row_splits,
            *(tf.gather(value, positions.flat_values) for value in values),
        )

    def _ascii_pieces(self, text, with_offsets):
        """Fast path for strings matching `_ASCII_FAST_PATH_PATTERN`.

        Args:
          text: tf.string [B].
          with_offsets: Python bool.

        Returns:
          (row_splits int64 [B + 1], ids int32 [P]) and, with offsets, starts and ends int64 [P].
        """
        if self.do_lower_case:
            text = tf.strings.lower(text)
        batch_size = tf.shape(text)[0]
        bounds = [batch_size * shard // _FAST_PATH_SHARDS for shard in range(1, _FAST_PATH_SHARDS)]
        sizes = [
            end - start for start, end in zip([0, *bounds], [*bounds, batch_size], strict=True)
        ]
        shards = []
        for text_shard in tf.split(text, tf.stack(sizes), num=_FAST_PATH_SHARDS):
            ids, starts, ends = self._ascii_tokenizer.tokenize_with_offsets(text_shard)
            shard = (ids.row_splits, ids.flat_values, starts.flat_values, ends.flat_values)
            shards.append(shard if with_offsets else shard[:2])
        return _concat_pieces(shards)

    # ----------------------------------------------------------------------------------------
    # General path.

    def _general_pieces(self, text, with_offsets):
        """Any UTF-8 strings; text: tf.string [B] -> the tuple `_ascii_pieces` returns."""
        code_points, byte_starts = tf.strings.unicode_decode_with_offsets(
            text, "UTF-8", errors="ignore"
        )
        chars = _Chars(
            code_point=code_points.flat_values,
            row=code_points.value_rowids(),
            byte_start=byte_starts.flat_values,
            byte_end=byte_starts.flat_values + _utf8_length(code_points.flat_values),
        )
        info = self._lookup_info(chars.code_point)  # [C]
        if self.do_lower_case:
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
            is_not_ignorable = ~_has(info, _CASE_IGNORABLE_BIT)
            not_ignorable = tf.where(is_not_ignorable)[:, 0]  # [K] int64
            is_cased = _has(info, _CASED_BIT)
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
        """WordPiece over the words of output characters `out` [O]; returns as `_ascii_pieces`."""
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
        too_long = tf.gather(words.row_lengths() > _MAX_CHARS_PER_WORD, piece_word)
        kept = tf.where(~too_long | (piece_in_word == 0))[:, 0]  # [P]
        piece_row = tf.gather(word_row, tf.gather(piece_word, kept))
        row_splits = tf.searchsorted(piece_row, tf.range(num_rows + 1), out_type=tf.int64)
        ids = tf.gather(tf.where(too_long, self.unk_id, ids.flat_values), kept)
        if not with_offsets:
            return row_splits, ids
        # Byte offset, in the concatenated encoded words, of each token character.
        char_bytes = tf.cumsum(_utf8_length(token_code_point), exclusive=True)  # [T] int64
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


def _concat_pieces(parts):
    """Concatenates the rows of `_ascii_pieces`-like tuples (row_splits first)."""
    row_splits = [parts[0][0]]
    for part in parts[1:]:
        row_splits.append(part[0][1:] + row_splits[-1][-1])
    values = [
        tf.concat(list(value), axis=0) for value in zip(*(part[1:] for part in parts), strict=True)
    ]
    return (tf.concat(row_splits, axis=0), *values)


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
        previous_source > 0, tf.gather(breaks_through, tf.maximum(previous_source - 1, 0)), 0
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


def _utf8_length(code_point):
    """Bytes of each code point in UTF-8: int32 [N] -> int64 [N]."""
    length = 1 + tf.cast(code_point >= 0x80, tf.int64)
    length += tf.cast(code_point >= 0x800, tf.int64)
    return length + tf.cast(code_point >= 0x10000, tf.int64)


# --------------------------------------------------------------------------------------------
# Packing helpers.


def _as_int32_ragged(segment):
    """A 2-D ragged (or dense) batch of ids as tf.RaggedTensor int32 [B, (N)]."""
    if not isinstance(segment, tf.RaggedTensor):
        segment = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(segment))
    if segment.ragged_rank != 1:
        raise ValueError(f"a segment must be a [batch, (pieces)] RaggedTensor, got {segment}")
    return tf.cast(segment.with_row_splits_dtype(tf.int64), tf.int32)


def _truncated_lengths(lengths, budget):
    """Lengths after the original's truncation, in closed form.

    `_truncate_seq_pair` pops from the longer segment (from b on a tie) until the pair fits
    `budget`; it ends with a = min(la, max(budget - lb, ceil(budget / 2))) and
    b = min(lb, max(budget - la, floor(budget / 2))).

    Args:
      lengths: list of 1 or 2 int64 [B] segment lengths.
      budget: Python int, room for pieces once special tokens are counted.

    Returns:
      list of int64 [B], the kept lengths.
    """
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], budget)]
    length_a, length_b = lengths
    kept_a = tf.minimum(length_a, tf.maximum(budget - length_b, (budget + 1) // 2))
    kept_b = tf.minimum(length_b, tf.maximum(budget - length_a, budget // 2))
    return [kept_a, kept_b]


# --------------------------------------------------------------------------------------------
# Tables, computed from the Python rules.


def _tokens_by_id(vocab, vocab_size, vocab_file):
    """Token of each id for FastWordpieceTokenizer, which needs one distinct token per id.

    A token repeated in the file keeps its last id, as in `load_vocab`. Ids whose token can never
    be a wordpiece (earlier lines of a repeated token, an empty line, a token with whitespace,
    NUL or U+FFFD, one over the word limit) get a placeholder holding U+FFFD, which no word
    holds. (A token with a space would even change how FastWordpieceTokenizer splits text on
    spaces, and one with NUL cannot be stored in its trie.)

    Raises:
      ValueError: for a token that could match but is too long for FastWordpieceTokenizer.
    """
    tokens = [f"\ufffdunused{index}" for index in range(vocab_size)]
    for token, index in vocab.items():
        piece = token[2:] if token.startswith("##") else token
        if not piece or len(piece) > _MAX_CHARS_PER_WORD or "\ufffd" in token or "\x00" in token:
            continue
        if any(char.isspace() for char in token):
            continue
        if len(piece.encode("utf-8")) > _MAX_WORDPIECE_BYTES:
            raise ValueError(
                f"vocab file {vocab_file}, line {index + 1}: token longer than "
                f"{_MAX_WORDPIECE_BYTES} UTF-8 bytes, more than FastWordpieceTokenizer holds"
            )
        tokens[index] = token
    return tokens


class _Tables:
    """Per-code-point tables of one casing, as numpy arrays (see `_code_point_tables`)."""

    def __init__(self, block_starts, block_info, replacements, final_sigma_info):
        self.block_starts = block_starts  # int32 [0x110000 >> _BLOCK_BITS]
        self.block_info = block_info  # int32 [blocks << _BLOCK_BITS]
        self.replacements = replacements  # int32 [R], output-character words
        self.final_sigma_info = final_sigma_info  # Python int: info word of U+03C2


@functools.lru_cache(maxsize=2)
def _code_point_tables(do_lower_case):
    """Info word of every code point, deduplicated into blocks; replacement characters.

    Unassigned and private-use code points outside the CJK blocks all have their category's
    default properties, so one representative of each stands for the rest (a 5x faster build).
    """
    info = np.zeros(_NUM_CODE_POINTS, np.int64)
    replacements = [0]  # entry 0: the target of the unmapped characters' dummy gather
    replacement_starts = {(): 0}
    default_info = {}
    in_cjk_block = np.zeros(_NUM_CODE_POINTS, bool)
    for first, last in tokenization._CJK_RANGES:
        in_cjk_block[first : last + 1] = True
    in_cjk_block = in_cjk_block.tolist()
    for code_point in range(_NUM_CODE_POINTS):
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
    return _Tables(
        block_starts=(block_of_code_point.reshape(-1) << _BLOCK_BITS).astype(np.int32),
        block_info=blocks.reshape(-1).astype(np.int32),
        replacements=np.array(replacements, np.int32),
        final_sigma_info=int(info[_FINAL_SIGMA]),
    )


def _char_info(char, do_lower_case, replacements, replacement_starts):
    """Info word of one character, by `tokenization`'s predicates; may extend `replacements`."""
    code_point = ord(char)
    if char in ("\x00", "\ufffd") or tokenization._is_control(char):
        return _DROP | _CASE_IGNORABLE_BIT
    # str.split() in whitespace_tokenize also splits on U+2028 and U+2029.
    if tokenization._is_whitespace(char) or char.isspace():
        return _SPACE | _BREAK_BIT
    kind = _CJK if tokenization._is_chinese_char(code_point) else _NORMAL
    if not do_lower_case:
        return kind | (_output_bits(char, combining_class=0) & _OUTPUT_FLAGS_MASK)
    info = kind
    if kind == _NORMAL:
        info |= _final_sigma_flags(char)
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


def _final_sigma_flags(char):
    """Case-ignorable and cased bits of `char`, read off Python's own final-sigma lower-casing.

    "A" is cased and " " is neither, so: "A" + char + "Σ" ends in final sigma iff char is
    case-ignorable or cased; " " + char + "Σ" iff char is cased and not case-ignorable.
    """
    after_cased = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
    after_space = (" " + char + "\u03a3").lower()[-1] == "\u03c2"
    if after_space:
        return _CASED_BIT
    return _CASE_IGNORABLE_BIT if after_cased else 0


def _check_hangul(char):
    """Raises if Python's NFD of a Hangul syllable is not what `_hangul_jamo` computes."""
    index = ord(char) - _HANGUL_FIRST
    jamo = [0x1100 + index // 588, 0x1161 + (index % 588) // 28]
    if index % 28:
        jamo.append(0x11A7 + index % 28)
    if [ord(c) for c in unicodedata.normalize("NFD", char.lower())] != jamo:
        raise ValueError(f"unexpected decomposition of U+{ord(char):04X}")
