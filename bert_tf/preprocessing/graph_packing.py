"""Packing wordpiece ids into BERT's model inputs in the graph, as the original `run_classifier.py` does.

Shape letters: B = batch, N = packed tokens of the whole batch, L = the longest packed row.
"""

import tensorflow as tf


def pack(segments, max_seq_length, cls_id, sep_id):
    """Packs one or two segments of ids into BERT's model inputs.

    Rows are [CLS] a [SEP] (b [SEP]), truncated as the original's `_truncate_seq_pair`:
    pieces are dropped from the end of the longer segment (of `b` on a tie) until the row
    fits; a single segment is cut to `max_seq_length - 2`. A row whose `b` has no pieces (an
    empty second text) is packed as a single segment, as the original's `if tokens_b:` does.

    Args:
      segments: list of 1 or 2 tf.RaggedTensor int [B, (N)] of ids.
      max_seq_length: Python int.
      cls_id, sep_id: Python ints.

    Returns:
      dict of int32 [B, L] tensors `input_ids`, `input_mask`, `segment_ids`, zero-padded,
      L = the longest packed row of the batch (at most `max_seq_length`).

    Raises:
      ValueError: for a number of segments other than 1 or 2, or a `max_seq_length` too
        small for the special tokens.
    """
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
        return _pack_single(segments[0], kept[0], cls_id, sep_id)
    has_b = segments[1].row_lengths() > 0  # [B]
    single = _truncated_lengths([segments[0].row_lengths()], max_seq_length - 2)[0]
    kept[0] = tf.where(has_b, kept[0], single)
    return _pack_pair(segments, kept, tf.cast(has_b, tf.int64), cls_id, sep_id)


def _pack_single(segment, kept, cls_id, sep_id):
    """[CLS] a [SEP]: a single segment, cut to its kept length (the same budget for every
    row, so one `to_tensor` of that width truncates every row right)."""
    batch_size = segment.nrows()
    width = tf.reduce_max(tf.concat([kept, [0]], axis=0))
    pieces = segment.to_tensor(0, shape=tf.stack([batch_size, width]))  # [B, width]
    columns = tf.stack([batch_size, 1])
    input_ids = tf.concat([tf.fill(columns, cls_id), pieces, tf.zeros(columns, tf.int32)], 1)
    is_sep = tf.range(width + 2)[tf.newaxis, :] == kept[:, tf.newaxis] + 1
    input_ids = tf.where(is_sep, sep_id, input_ids)
    input_mask = tf.sequence_mask(kept + 2, width + 2, dtype=tf.int32)
    return {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": tf.zeros_like(input_mask),
    }


def _pack_pair(segments, kept, has_b, cls_id, sep_id):
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
    input_ids = tf.where(column == 0, cls_id, sep_id)  # [SEP] unless replaced
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
