"""SQuAD question answering inside the graph: raw question and context strings -> answer text.

The SavedModel of a SQuAD model needs no Python around it: the steps of `bert_tf/tasks/squad/data.py (the run's features)` run
as TensorFlow ops, batched over every question of a request.

  1. Tokenize: the question (cut to max_query_length wordpieces) and the whole context, with each
     context wordpiece's UTF-8 byte offsets (`GraphPreprocessor.tokenize_with_offsets`). Tokenizing
     the whole context gives the same wordpieces as tokenizing its words one by one, as the features do.
  2. Windows: the context's wordpieces in windows of M = max_seq_length - query - 3, doc_stride apart
     (s = min(M, doc_stride)), the last one reaching the end: window k starts at k * s, and a context
     of N wordpieces gets K = 1 + ceil((N - M) / s) windows (1 if N <= M, 0 if N = 0), exactly the
     original's loop. Every window of every question is packed as [CLS] question [SEP] window [SEP],
     and the model runs once over all of them.
  3. Spans, as `write_predictions` ranks them: in each window the n_best_size best starts and ends
     among its real tokens (ties: the lower position first, as Python's stable sort); a pair is
     valid when both lie in the window's context part, start <= end, the span has at most
     max_answer_length wordpieces and the window is the start's max-context window. The best valid
     pair by start + end logit (summed in float64, as Python sums floats; ties: the earlier window,
     start, end) is the answer; with SQuAD 2.0 the null score is the smallest start + end logit at
     [CLS] over the windows, and the answer is "" when null score - best score > threshold.
  4. Text: the context's bytes from the first wordpiece's start to the last one's end, with each
     run of the original's paragraph whitespace (space, tab, CR, LF, U+202F) made one space, which
     is what the Python path's words joined by spaces and `get_final_text` give in ordinary text.

Where the answer can differ from predictions.json (same checkpoint, same inputs):
  * no valid span at all (or SQuAD 2.0 with n_best_size 1 and the null span ranked first): the
    Python path answers the original's placeholder "empty" (score 0), this graph answers "";
  * `get_final_text` fails to project the wordpieces onto the words (a character whose
    normalisation changes its length, [UNK] pieces): Python falls back to the whole words, this
    graph cuts the exact span; and `get_final_text` projects onto the FIRST occurrence of the
    normalised text within the words, which can differ in case or accents from the span's own
    ("A-a" with the span on the second "a": Python "A", this graph "a");
  * near-ties between spans: the logits of a window padded to another length are summed in another
    order, so they differ in the last float32 bits.

B = questions, W = windows of the batch, T = longest window in tokens, N = context wordpieces,
n = min(n_best_size, T) candidates per window, C = most windows that can hold one wordpiece.
"""

import dataclasses

import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.export import ID_FEATURES

# run_squad.py's --max_seq_length (the original's): the export's too when its task.json has none.
SQUAD_MAX_SEQ_LENGTH = 384

# Runs of the original's paragraph whitespace (bert_tf.tasks.squad.data._PARAGRAPH_WHITESPACE).
_PARAGRAPH_WHITESPACE_RUN = "[ \t\r\n\u202f]+"
# write_predictions' start value for the null score: what an example without windows keeps.
_NO_NULL_SCORE = 1000000.0


def check_windows(settings, max_seq_length):
    """run_squad.py's rules, for its flags, an export's task.json and BertQuestionAnswerer alike.

    Args:
      settings: anything with doc_stride, max_query_length, n_best_size and max_answer_length.
      max_seq_length: S.

    Raises:
      InputError: naming the flag.
    """
    if max_seq_length <= settings.max_query_length + 3:
        raise InputError(
            f"--max_seq_length={max_seq_length} must exceed --max_query_length="
            f"{settings.max_query_length} + 3"
        )
    for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
        if getattr(settings, name) < 1:
            raise InputError(f"--{name} must be positive, got {getattr(settings, name)}")


@dataclasses.dataclass
class QaSettings:
    """The windowing and span-selection settings of the export and of BertQuestionAnswerer: the
    original's defaults, which run_squad.py's flags (task_settings.SquadWindowSettings) and the recorded
    settings of task.json (task_info.RECORDED_SETTINGS) share."""

    max_seq_length: int = SQUAD_MAX_SEQ_LENGTH
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0

    def __post_init__(self):
        """run_squad.py's rules (check_windows).

        Raises:
          InputError: naming the flag.
        """
        check_windows(self, self.max_seq_length)

    @classmethod
    def of(cls, settings, max_seq_length):
        """The settings of `settings`: run_squad.py's, or a TaskInfo's (`info.settings`)."""
        names = [field.name for field in dataclasses.fields(cls) if field.name != "max_seq_length"]
        return cls(
            max_seq_length=max_seq_length, **{name: getattr(settings, name) for name in names}
        )

    @property
    def max_windows_per_piece(self):
        """C: at most floor((M - 1) / s) + 1 windows hold one wordpiece, with M <= S - 3."""
        return (self.max_seq_length - 4) // self.doc_stride + 1


@dataclasses.dataclass
class Windows:
    """The windows of a batch of questions (int64 tensors unless said otherwise).

    Per window [W]: `example_index` (its question), `window_index` (k, 0 for a context's first),
    `doc_start` and `doc_length` (its context wordpieces), `doc_offset` (where they start in the
    packed row: query length + 2). Per question [B]: `query_length`, `num_pieces` (N),
    `max_doc_tokens` (M), `stride` (s), `num_windows` (K). `features`: int32 [W, T] `input_ids`,
    `input_mask`, `segment_ids`. `piece_starts`, `piece_ends`: ragged [B, (N)] byte offsets of the
    context's wordpieces (end exclusive).
    """

    features: dict
    example_index: tf.Tensor
    window_index: tf.Tensor
    doc_start: tf.Tensor
    doc_length: tf.Tensor
    doc_offset: tf.Tensor
    query_length: tf.Tensor
    num_pieces: tf.Tensor
    max_doc_tokens: tf.Tensor
    stride: tf.Tensor
    num_windows: tf.Tensor
    piece_starts: tf.RaggedTensor
    piece_ends: tf.RaggedTensor


def make_windows(preprocessor, settings, question, context):
    """Tokenizes and windows a batch of questions as `convert_examples_to_features` does.

    Args:
      preprocessor: a bert_tf.preprocessing.GraphPreprocessor.
      settings: QaSettings.
      question, context: tf.string [B].

    Returns:
      Windows; its features are the features' input_ids, input_mask and segment_ids, in the same
      order (question by question, window by window), cut to the longest window T.
    """
    # One tokenizer call for both: a SavedModel then holds the (large) tokenizer graph once.
    batch_size = tf.shape(question, out_type=tf.int64)[0]
    ids, starts, ends = preprocessor.tokenize_with_offsets(tf.concat([question, context], axis=0))
    question_ids = ids[:batch_size, : settings.max_query_length]
    doc_ids, piece_starts, piece_ends = ids[batch_size:], starts[batch_size:], ends[batch_size:]
    query_length = question_ids.row_lengths()  # [B]
    num_pieces = doc_ids.row_lengths()  # [B]
    max_doc_tokens = settings.max_seq_length - query_length - 3  # [B]
    stride = tf.minimum(max_doc_tokens, settings.doc_stride)  # [B]
    num_windows = tf.where(
        num_pieces > max_doc_tokens,
        _ceil_div(num_pieces - max_doc_tokens, stride) + 1,
        tf.minimum(num_pieces, 1),
    )  # [B]
    example_index = tf.repeat(tf.range(batch_size), num_windows)  # [W]
    window_index = tf.ragged.range(num_windows).flat_values  # [W]
    doc_start = window_index * tf.gather(stride, example_index)
    doc_length = tf.minimum(
        tf.gather(num_pieces, example_index) - doc_start, tf.gather(max_doc_tokens, example_index)
    )
    first_piece = tf.gather(doc_ids.row_starts(), example_index) + doc_start  # [W]
    doc_windows = tf.gather(
        doc_ids.flat_values, tf.ragged.range(first_piece, first_piece + doc_length)
    )  # ragged [W, (doc_length)]
    question_windows = tf.gather(question_ids, example_index)  # ragged [W, (query_length)]
    # Query + window + 3 <= max_seq_length, so packing cuts nothing.
    features = preprocessor.pack([question_windows, doc_windows], settings.max_seq_length)
    return Windows(
        features=features,
        example_index=example_index,
        window_index=window_index,
        doc_start=doc_start,
        doc_length=doc_length,
        doc_offset=tf.gather(query_length, example_index) + 2,
        query_length=query_length,
        num_pieces=num_pieces,
        max_doc_tokens=max_doc_tokens,
        stride=stride,
        num_windows=num_windows,
        piece_starts=piece_starts,
        piece_ends=piece_ends,
    )


def select_answers(context, windows, start_logits, end_logits, settings):
    """The best span of each question, cut from its context, as `write_predictions` chooses it.

    Args:
      context: tf.string [B], the contexts `windows` were made from.
      windows: Windows of `make_windows`.
      start_logits, end_logits: float32 [W, T], the model's logits over each window's tokens.
      settings: QaSettings.

    Returns:
      {"answer": tf.string [B], "score": float32 [B]: the answer's start + end logit (0 without
      any valid span), and for SQuAD 2.0 "null_score_diff": float32 [B], null score - score (what
      null_odds.json holds; the answer is "" when it exceeds the threshold)}.
    """
    batch_size = tf.shape(context, out_type=tf.int64)[0]
    spans = _best_span_per_window(windows, start_logits, end_logits, settings)
    has_span, best_score, best_window = _best_window_per_example(
        spans["has_span"], spans["score"], windows.example_index, batch_size
    )
    if settings.version_2_with_negative:
        null_score = _null_score(windows, start_logits, end_logits, batch_size)  # [B]
        if settings.n_best_size == 1:
            # The n-best list then holds the null span alone when it ranks first (ties go to spans).
            has_span &= ~(null_score > best_score)
    best_score = tf.where(has_span, best_score, 0.0)  # the placeholder "empty" scores 0
    start_piece = _gather_or_zero(spans["start_piece"], best_window, has_span)  # [B]
    end_piece = _gather_or_zero(spans["end_piece"], best_window, has_span)  # [B]
    text = _cut_text(context, windows, start_piece, end_piece, has_span)
    outputs = {"answer": tf.where(has_span, text, ""), "score": tf.cast(best_score, tf.float32)}
    if settings.version_2_with_negative:
        null_score_diff = null_score - best_score
        answered = null_score_diff <= settings.null_score_diff_threshold
        outputs["answer"] = tf.where(answered, outputs["answer"], "")
        outputs["null_score_diff"] = tf.cast(null_score_diff, tf.float32)
    return outputs


def _null_score(windows, start_logits, end_logits, batch_size):
    """float64 [B]: the smallest start + end logit at [CLS] over each question's windows (1e6 if none)."""
    # [W]; `[:, :1]` rather than `[:, 0]`: a batch without windows has T = 0.
    window_null = tf.reduce_sum(
        tf.cast(start_logits[:, :1], tf.float64) + tf.cast(end_logits[:, :1], tf.float64), axis=1
    )
    null_score = tf.math.unsorted_segment_min(window_null, windows.example_index, batch_size)
    return tf.minimum(null_score, _NO_NULL_SCORE)


def _best_span_per_window(windows, start_logits, end_logits, settings):
    """Each window's best valid (start, end) pair among its n best starts and ends.

    Returns:
      {"has_span": bool [W], "score": float64 [W] (start + end logit; -inf without a valid pair),
      "start_piece", "end_piece": int64 [W], the pair's context wordpieces}.
    """
    length = tf.shape(start_logits)[1]
    positions = tf.range(tf.cast(length, tf.int64))[tf.newaxis, :]  # [1, T]
    doc_begin = windows.doc_offset[:, tf.newaxis]  # [W, 1]
    doc_end = doc_begin + windows.doc_length[:, tf.newaxis]  # [W, 1], exclusive
    is_real = positions < doc_end + 1  # [W, T]: [CLS] question [SEP] window [SEP]
    num_candidates = tf.minimum(settings.n_best_size, length)
    starts = tf.math.top_k(tf.where(is_real, start_logits, -float("inf")), num_candidates)
    ends = tf.math.top_k(tf.where(is_real, end_logits, -float("inf")), num_candidates)
    start_position = tf.cast(starts.indices, tf.int64)  # [W, n]
    end_position = tf.cast(ends.indices, tf.int64)  # [W, n]
    # Context wordpiece of each candidate.
    start_piece = windows.doc_start[:, tf.newaxis] + start_position - doc_begin  # [W, n]
    end_piece = windows.doc_start[:, tf.newaxis] + end_position - doc_begin  # [W, n]

    start_ok = (start_position >= doc_begin) & (start_position < doc_end)
    start_ok &= _is_max_context(start_piece, windows, settings)
    end_ok = (end_position >= doc_begin) & (end_position < doc_end)
    span_length = end_position[:, tf.newaxis, :] - start_position[:, :, tf.newaxis]  # [W, n, n]
    pair_ok = start_ok[:, :, tf.newaxis] & end_ok[:, tf.newaxis, :]
    pair_ok &= (span_length >= 0) & (span_length < settings.max_answer_length)
    pair_score = (
        tf.cast(starts.values, tf.float64)[:, :, tf.newaxis]
        + tf.cast(ends.values, tf.float64)[:, tf.newaxis, :]
    )  # [W, n, n]
    num_windows = tf.shape(pair_ok)[0]
    # Pairs in write_predictions' order: start rank, then end rank.
    pair_ok = tf.reshape(pair_ok, [num_windows, -1])  # [W, n * n]
    pair_score = tf.where(pair_ok, tf.reshape(pair_score, [num_windows, -1]), -float("inf"))
    num_candidates = tf.cast(num_candidates, tf.int64)
    # [W]; a window without a valid pair takes pair 0 (its has_span is False).
    best_pair = tf.minimum(_first_argmax(pair_score, pair_ok), num_candidates**2 - 1)
    best_start = best_pair // num_candidates
    best_end = best_pair % num_candidates
    return {
        "has_span": tf.reduce_any(pair_ok, axis=1),
        "score": tf.reduce_max(pair_score, axis=1),
        "start_piece": tf.gather(start_piece, best_start, batch_dims=1),
        "end_piece": tf.gather(end_piece, best_end, batch_dims=1),
    }


def _is_max_context(piece, windows, settings):
    """Whether each window is the max-context window of the given context wordpieces.

    As `_check_is_max_context`: among the windows holding the wordpiece, the one with the highest
    min(left context, right context) + 0.01 * window length (float64, as in Python), the first on a
    tie. The windows holding wordpiece p are k = ceil((p - M + 1) / s) ... floor(p / s) (clipped to
    0 ... K - 1), at most C of them.

    Args:
      piece: int64 [W, n], context wordpiece indexes (any value; those outside the window are
        answered arbitrarily).
      windows: Windows.
      settings: QaSettings.

    Returns:
      bool [W, n].
    """

    def per_window(values):  # [B] -> [W, 1, 1]
        return tf.gather(values, windows.example_index)[:, tf.newaxis, tf.newaxis]

    max_doc_tokens = per_window(windows.max_doc_tokens)
    stride = per_window(windows.stride)
    num_pieces = per_window(windows.num_pieces)
    last_window = per_window(windows.num_windows) - 1
    piece = piece[:, :, tf.newaxis]  # [W, n, 1]
    first_holder = tf.maximum(_ceil_div(piece - max_doc_tokens + 1, stride), 0)
    last_holder = tf.minimum(piece // stride, last_window)
    candidate = first_holder + tf.range(settings.max_windows_per_piece, dtype=tf.int64)  # [W,n,C]
    start = candidate * stride
    length = tf.minimum(num_pieces - start, max_doc_tokens)
    context = tf.minimum(piece - start, start + length - 1 - piece)
    score = tf.cast(context, tf.float64) + 0.01 * tf.cast(length, tf.float64)
    holds = candidate <= last_holder
    best = _first_argmax(tf.where(holds, score, -float("inf")), holds)  # [W, n]
    return first_holder[:, :, 0] + best == windows.window_index[:, tf.newaxis]


def _best_window_per_example(window_has_span, window_score, example_index, batch_size):
    """(has_span bool [B], best score float64 [B], its window int64 [B]: the first best one)."""
    has_span = (
        tf.math.unsorted_segment_max(tf.cast(window_has_span, tf.int32), example_index, batch_size)
        > 0
    )  # an example without windows gets the int32 minimum
    best_score = tf.math.unsorted_segment_max(window_score, example_index, batch_size)
    window = tf.range(tf.shape(window_score, out_type=tf.int64)[0])
    is_best = window_has_span & (window_score == tf.gather(best_score, example_index))
    no_window = tf.int64.max
    best_window = tf.math.unsorted_segment_min(
        tf.where(is_best, window, no_window), example_index, batch_size
    )
    return has_span, best_score, best_window


def _cut_text(context, windows, start_piece, end_piece, has_span):
    """The context's bytes from start_piece's first to end_piece's last, whitespace runs as one space."""
    row_start = windows.piece_starts.row_starts()  # [B]
    start_byte = _gather_or_zero(
        windows.piece_starts.flat_values, row_start + start_piece, has_span
    )
    end_byte = _gather_or_zero(windows.piece_ends.flat_values, row_start + end_piece, has_span)
    text = tf.strings.substr(context, start_byte, end_byte - start_byte, unit="BYTE")
    return tf.strings.regex_replace(text, _PARAGRAPH_WHITESPACE_RUN, " ")


def _first_argmax(values, valid):
    """Index of the first largest valid value along the last axis (tf.argmax leaves ties open).

    Args:
      values: float [..., X]; valid: bool [..., X].

    Returns:
      int64 [...]; X where no value is valid.
    """
    size = tf.shape(values, out_type=tf.int64)[-1]
    best = tf.reduce_max(values, axis=-1, keepdims=True)
    index = tf.range(size)
    return tf.reduce_min(tf.where(valid & (values == best), index, size), axis=-1)


def _gather_or_zero(values, indexes, valid):
    """values[indexes] where valid, else 0 (also when `values` is empty): int64 [N], [B] -> [B]."""
    padded = tf.concat([values, tf.zeros([1], values.dtype)], axis=0)
    return tf.gather(padded, tf.where(valid, indexes, tf.shape(values, out_type=tf.int64)[0]))


def _ceil_div(numerator, denominator):
    """ceil(numerator / denominator) of integer tensors, negative numerators included."""
    return -((-numerator) // denominator)


# --------------------------------------------------------------------------------------------------
# The export's signatures


def _text_spec(name):
    return tf.TensorSpec([None], tf.string, name=name)


def qa_signatures(preprocessor, logits_fn, settings):
    """The SQuAD export's signatures (docs/serving.md's contract).

    Args:
      preprocessor: a GraphPreprocessor of the model's vocab, casing and max_seq_length.
      logits_fn: ({input_ids, input_mask, segment_ids}: int32 [W, T]) -> (start_logits,
        end_logits), float32 [W, T] each (the model in inference mode).
      settings: QaSettings.

    Returns:
      {name: tf.function with an input signature}:
        serving_default(question, context: string [B]) -> answer string [B], score float32 [B]
          (and null_score_diff float32 [B] for SQuAD 2.0);
        preprocess(question, context) -> int32 input_ids, input_mask, segment_ids [W, T] and
          example_index [W] (the question each window belongs to);
        serve_ids(input_ids, input_mask, segment_ids: int32 [W, T]) -> start_logits, end_logits.
    """

    texts = [_text_spec("question"), _text_spec("context")]

    # Traced once and shared by both signatures (the tokenizer graph is most of an export).
    @tf.function(input_signature=texts)
    def windows_fn(question, context):
        windows = make_windows(preprocessor, settings, question, context)
        return {field.name: getattr(windows, field.name) for field in dataclasses.fields(windows)}

    def serving_default(question, context):
        windows = Windows(**windows_fn(question, context))
        start_logits, end_logits = logits_fn(windows.features)
        return select_answers(context, windows, start_logits, end_logits, settings)

    def preprocess(question, context):
        windows = windows_fn(question, context)
        return {
            **windows["features"],
            "example_index": tf.cast(windows["example_index"], tf.int32),
        }

    def serve_ids(input_ids, input_mask, segment_ids):
        start_logits, end_logits = logits_fn(
            {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        )
        return {"start_logits": start_logits, "end_logits": end_logits}

    ids = [tf.TensorSpec([None, None], tf.int32, name=name) for name in ID_FEATURES]
    return {
        "serving_default": tf.function(serving_default, input_signature=texts),
        "preprocess": tf.function(preprocess, input_signature=texts),
        "serve_ids": tf.function(serve_ids, input_signature=ids),
    }
