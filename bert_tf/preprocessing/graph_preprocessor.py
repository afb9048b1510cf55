"""`GraphPreprocessor`: raw strings to `FullTokenizer`'s wordpiece ids and packed model inputs.

Each string of a batch takes one of three paths, all exact:
  * ASCII path: a batch of strings of printable ASCII, tab, newline and carriage return only
    (almost all English text). `tf.strings.lower`, then one `FastWordpieceTokenizer` in end-to-end mode, whose
    whitespace and punctuation split on such text is exactly BERT's (ASCII punctuation is every
    non-alphanumeric printable character) and whose `max_bytes_per_word=200` is the
    200-character rule. A batch of such strings runs nothing else: the other paths sit in the
    other branch of a `tf.cond`.
  * Normalized path (`normalized_path`): the strings of any other batch, ASCII or not, that
    a regex on the string proves safe (usually all). A `FastBertNormalizer` whose model holds
    BERT's own per-character mapping, then the same end-to-end `FastWordpieceTokenizer`: two
    batch kernels, as in tensorflow-text's `FastBertTokenizer`.
  * Code point path (`code_points`): the strings left (a capital sigma that may be final,
    marks that NFD would reorder, invalid UTF-8, a word over 200 bytes), character by character
    with tables from the Python rules; in the other branch of a `tf.cond`, run only for a batch
    that holds such a string.
The ASCII and normalized paths cut their strings into `_SHARDS` slices tokenized by parallel
kernels.

Shape letters: B = batch, S = strings on the normalized path, P = wordpieces, C = code points.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import tokenization
from bert_tf.preprocessing import code_points, graph_packing, normalized_path

# FastWordpieceTokenizer's limit on a vocab token's length, without its "##".
_MAX_WORDPIECE_BYTES = 256
# A string matching this takes the ASCII path.
_ASCII_PATTERN = r"[\t\n\r -~]*"
# Parallel slices of the ASCII and normalized paths: their kernels are single-threaded (with
# both cores of a 2-core machine free, 2 slices tokenized a batch of 1024 lines 1.7x faster).
_SHARDS = 2


def _graph_code(method):
    """Leaves `method` to run as written inside tf.function: it has no tensor-dependent Python
    control flow (tf.cond is explicit), and AutoGraph's conversion would only slow tracing."""
    return tf.autograph.experimental.do_not_convert(method)


class GraphPreprocessor(tf.Module):
    """Raw strings -> BERT wordpiece ids and packed model inputs, inside the graph.

    Gives the ids of `tokenization.FullTokenizer(vocab_file, do_lower_case)` exactly, and packs
    them as the original `run_classifier.py` does ([CLS] a [SEP] b [SEP], `_truncate_seq_pair`).

    Example:
        preprocessor = GraphPreprocessor("vocab.txt", do_lower_case=True, max_seq_length=128)
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
        # End-to-end mode, for the ASCII and normalized paths.
        self._tokenizer = tf_text.FastWordpieceTokenizer(
            tokens, max_bytes_per_word=code_points.MAX_CHARS_PER_WORD, token_out_type=tf.int32
        )
        tables = normalized_path.normalized_path_tables(self.do_lower_case)
        self._normalizer = tf_text.FastBertNormalizer(model_buffer=tables.model_buffer)
        self._normalized_row_pattern = tables.row_pattern
        word_tokenizer = tf_text.FastWordpieceTokenizer(
            tokens,
            max_bytes_per_word=4 * code_points.MAX_CHARS_PER_WORD,  # 200 characters, any script
            token_out_type=tf.int32,
            no_pretokenization=True,
        )
        self._code_point_path = code_points.CodePointPath(
            word_tokenizer, self.unk_id, self.do_lower_case
        )

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
        """Packs one or two segments of ids into BERT's model inputs (see `graph_packing.pack`).

        Args:
          segments: list of 1 or 2 tf.RaggedTensor int [B, (N)] of ids.
          max_seq_length: Python int; defaults to the constructor's.

        Returns:
          dict of int32 [B, L] tensors `input_ids`, `input_mask`, `segment_ids`.
        """
        max_seq_length = self.max_seq_length if max_seq_length is None else int(max_seq_length)
        return graph_packing.pack(segments, max_seq_length, self.cls_id, self.sep_id)

    @_graph_code
    def __call__(self, text_a, text_b=None):
        """`pack` of the ids of `text_a` (and `text_b`): tf.string [B] -> dict of int32 [B, L]."""
        segments = [self.tokenize(text_a)]
        if text_b is not None:
            segments.append(self.tokenize(text_b))
        return self.pack(segments)

    # ----------------------------------------------------------------------------------------
    # Routing between the paths.

    def _tokenize(self, text, with_offsets):
        """(ids,) or (ids, starts, ends): tf.RaggedTensor [B, (P)], int32 ids, int64 offsets."""
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank != 1:
            raise ValueError(f"text must be a tf.string vector [batch], got shape {text.shape}")
        is_ascii = tf.strings.regex_full_match(text, _ASCII_PATTERN)
        row_splits, *values = tf.cond(
            tf.reduce_all(is_ascii),
            lambda: self._ascii_pieces(text, with_offsets),
            lambda: self._other_pieces(text, with_offsets),
        )
        return tuple(
            tf.RaggedTensor.from_row_splits(value, row_splits, validate=False) for value in values
        )

    def _other_pieces(self, text, with_offsets):
        """A batch with some non-ASCII string: the normalized path for every string that its row
        pattern admits (usually all), the code point path for the others and for those with a
        word the normalized path cannot size (see `_normalized_pieces`)."""
        is_safe = tf.strings.regex_full_match(text, self._normalized_row_pattern)
        all_safe = tf.reduce_all(is_safe)
        safe_rows = tf.where(is_safe)[:, 0]
        safe_text = tf.cond(all_safe, lambda: text, lambda: tf.gather(text, safe_rows))
        normalized, is_long = self._normalized_pieces(safe_text, with_offsets)
        return tf.cond(
            all_safe & ~tf.reduce_any(is_long),
            lambda: normalized,
            lambda: self._mixed_pieces(text, is_safe, safe_rows, normalized, is_long, with_offsets),
        )

    def _mixed_pieces(self, text, is_safe, safe_rows, normalized, is_long, with_offsets):
        """Normalized pieces of the safe rows where they hold no long word, code point pieces
        of the others, back in input order.

        Args:
          text: tf.string [B].
          is_safe: bool [B].
          safe_rows: int64 [S], where `is_safe`.
          normalized: `_ascii_pieces`-like tuple of the S safe rows.
          is_long: bool [P], the normalized pieces that are [UNK]s of a word over 200 bytes.
          with_offsets: Python bool.

        Returns:
          As `_ascii_pieces`, for the B rows.
        """
        num_rows = tf.size(text, out_type=tf.int64)
        piece_row = tf.RaggedTensor.from_row_splits(is_long, normalized[0]).value_rowids()
        num_safe = tf.size(safe_rows, out_type=tf.int64)
        has_long_word = tf.math.unsorted_segment_max(
            tf.cast(is_long, tf.int32), piece_row, num_safe
        )
        has_long_word = has_long_word > 0  # [S]
        code_point_rows = tf.concat(
            [tf.where(~is_safe)[:, 0], tf.gather(safe_rows, tf.where(has_long_word)[:, 0])],
            axis=0,
        )
        code_point = self._code_point_path.pieces(tf.gather(text, code_point_rows), with_offsets)
        row_splits, *values = _concat_pieces([normalized, code_point])
        # The input row of each concatenated row; a normalized row with a long word is left out
        # (num_rows), its code point row stands for it.
        part_rows = tf.concat(
            [tf.where(has_long_word, num_rows, safe_rows), code_point_rows], axis=0
        )
        input_order = tf.math.unsorted_segment_min(
            tf.range(tf.size(part_rows, out_type=tf.int64)), part_rows, num_rows + 1
        )[:-1]
        # Gather the rows back into input order, through the positions of their pieces.
        positions = tf.RaggedTensor.from_row_splits(
            tf.range(row_splits[-1]), row_splits, validate=False
        )
        positions = tf.gather(positions, input_order)
        return (
            positions.row_splits,
            *(tf.gather(value, positions.flat_values) for value in values),
        )

    def _ascii_pieces(self, text, with_offsets):
        """ASCII path, for strings matching `_ASCII_PATTERN`.

        Args:
          text: tf.string [B].
          with_offsets: Python bool.

        Returns:
          (row_splits int64 [B + 1], ids int32 [P]) and, with offsets, starts and ends int64 [P].
        """
        if self.do_lower_case:
            text = tf.strings.lower(text)
        shards = []
        for shard in _shards(text):
            ids, starts, ends = self._tokenizer.tokenize_with_offsets(shard)
            pieces = (ids.row_splits, ids.flat_values, starts.flat_values, ends.flat_values)
            shards.append(pieces if with_offsets else pieces[:2])
        return _concat_pieces(shards)

    def _normalized_pieces(self, text, with_offsets):
        """Normalized path, for valid UTF-8 strings that matched its row pattern.

        Args:
          text: tf.string [B].
          with_offsets: Python bool.

        Returns:
          (pieces, is_long): pieces as `_ascii_pieces` returns them; is_long bool [P], whether
          a piece is the [UNK] of a word over 200 bytes (the kernel's limit), which the
          original may have tokenized (its limit is 200 characters).
        """

        def tokenize(shard):
            if with_offsets:
                normalized, source_bytes = self._normalizer.normalize_with_offsets(shard)
            else:
                normalized = self._normalizer.normalize(shard)
            ids, starts, ends = self._tokenizer.tokenize_with_offsets(normalized)
            is_long = (ids.flat_values == self.unk_id) & (
                ends.flat_values - starts.flat_values > code_points.MAX_CHARS_PER_WORD
            )
            if not with_offsets:
                return ids.row_splits, ids.flat_values, is_long
            starts, ends = _source_spans(shard, source_bytes, starts, ends)
            return ids.row_splits, ids.flat_values, starts, ends, is_long

        row_splits, ids, *values, is_long = _concat_pieces([tokenize(s) for s in _shards(text)])
        return (row_splits, ids, *values), is_long


def _source_spans(text, source_bytes, starts, ends):
    """Input byte spans of pieces found in normalized text, as the code point path gives them:
    from the start of the source of the piece's first character to the end of the source of
    its last character.

    Args:
      text: tf.string [B], the input (valid UTF-8).
      source_bytes: tf.RaggedTensor int [B, (normalized bytes + 1)], the input byte that each
        normalized byte came from (FastBertNormalizer's offsets).
      starts, ends: tf.RaggedTensor int64 [B, (P)], piece offsets in the normalized text.

    Returns:
      (starts, ends): int64 [P], offsets into the input strings.
    """
    piece_row = starts.value_rowids()
    map_start = tf.gather(source_bytes.row_starts(), piece_row)
    source_flat = tf.cast(source_bytes.flat_values, tf.int64)
    first_byte = tf.gather(source_flat, map_start + starts.flat_values)
    last_byte = tf.gather(source_flat, map_start + ends.flat_values - 1)
    # The source of a changed character maps each output byte to its first byte; find the end
    # of the input character that holds `last_byte`.
    code_point, char_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
    text_length = tf.cast(tf.strings.length(text), tf.int64)
    text_start = tf.cumsum(text_length, exclusive=True)  # [B]
    char_start = char_starts.flat_values + tf.gather(text_start, char_starts.value_rowids())
    char_end = char_start + code_points.utf8_length(code_point.flat_values)  # [C]
    piece_text_start = tf.gather(text_start, piece_row)
    char = tf.searchsorted(char_start, last_byte + piece_text_start, side="right") - 1
    return first_byte, tf.gather(char_end, char) - piece_text_start


def _shards(text):
    """`text` tf.string [B] cut into `_SHARDS` slices of (nearly) equal size."""
    batch_size = tf.shape(text)[0]
    bounds = [batch_size * shard // _SHARDS for shard in range(1, _SHARDS)]
    sizes = [end - start for start, end in zip([0, *bounds], [*bounds, batch_size], strict=True)]
    return tf.split(text, tf.stack(sizes), num=_SHARDS)


def _concat_pieces(parts):
    """Concatenates the rows of `_ascii_pieces`-like tuples (row_splits first)."""
    row_splits = [parts[0][0]]
    num_pieces = parts[0][0][-1]
    for part in parts[1:]:
        row_splits.append(part[0][1:] + num_pieces)
        num_pieces += part[0][-1]
    values = [
        tf.concat(list(value), axis=0) for value in zip(*(part[1:] for part in parts), strict=True)
    ]
    return (tf.concat(row_splits, axis=0), *values)


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
        piece = token.removeprefix("##")
        too_long = len(piece) > code_points.MAX_CHARS_PER_WORD
        if not piece or too_long or "\ufffd" in token or "\x00" in token:
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
