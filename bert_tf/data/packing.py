"""Packing wordpieces into BERT's input layout, as the original scripts do it (one copy for every task).

Python lists, outside the graph; a SavedModel packs ragged id tensors in
bert_tf/preprocessing/graph_packing.py.

tokens:       [CLS] a1 a2 a3 [SEP] b1 b2 [SEP]
segment_ids:  0     0  0  0  0     1  1  1
"""

import collections

# A window of a long text: wordpieces start:start + length.
Span = collections.namedtuple("Span", ["start", "length"])


def window_spans(num_tokens, window, stride):
    """The original run_squad.py's windows: at most `window` pieces each, starting `stride` apart
    (never more than a window), the last one reaching the end. A text of at most `window` pieces is
    one window; an empty one has none.

    Returns:
      A list of Span(start, length).
    """
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, window)
        spans.append(Span(start=start, length=length))
        if start + length == num_tokens:
            break
        start += min(length, stride)
    return spans


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Shortens the pair in place to at most max_length tokens, longest first (the original's rule).

    One token at a time comes off the end of the longer list; of two equally long lists, off `tokens_b`.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def pack_tokens(tokens_a, tokens_b, max_seq_length):
    """[CLS] a [SEP] (b [SEP]), truncated to max_seq_length as the original does.

    Args:
      tokens_a: list of wordpieces of the first text.
      tokens_b: list of the second text's, or None for a single text. An empty list counts as none, as
        in the original (a second text that tokenizes to nothing makes a single-text input).
      max_seq_length: the longest packed sequence; `a` alone is cut to max_seq_length - 2, a pair
        shortened longest-first to max_seq_length - 3.

    Returns:
      (tokens, segment_ids): lists of equal length, unpadded. Tokens are "[CLS]"/"[SEP]" strings
      around the given pieces.
    """
    tokens_a = list(tokens_a)
    if not tokens_b:
        tokens_a = tokens_a[: max(max_seq_length - 2, 0)]
        return ["[CLS]", *tokens_a, "[SEP]"], [0] * (len(tokens_a) + 2)
    tokens_b = list(tokens_b)
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
    return tokens, [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)


def pad_to(values, length, pad_value=0):
    """`values` extended with pad_value to `length` (a new list)."""
    return list(values) + [pad_value] * (length - len(values))
