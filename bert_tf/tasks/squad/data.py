"""SQuAD 1.1 / 2.0: questions and paragraphs -> windowed features.

The steps are those of google-research/bert `run_squad.py`:
  * reading (bert_tf/tasks/squad/examples.py; this module gives its names too): a paragraph is split
    into words on the original's five whitespace characters (space, tab, CR, LF, U+202F), keeping
    which word each character belongs to (`char_to_word_offset`). A training answer is mapped from
    its characters to words; one whose words do not contain its text is skipped and counted. SQuAD
    2.0 unanswerable questions get word positions -1.
  * features: the question's wordpieces (at most `max_query_length`), then windows over the paragraph's
    wordpieces, `doc_stride` apart: `[CLS] question [SEP] window [SEP]`. An answer is tightened to the
    wordpieces that spell it (`_improve_answer_span`); a window without it, or an unanswerable question,
    points at [CLS] (position 0). Each wordpiece is "max context" in the window where it has the most
    context on its shorter side (`_check_is_max_context`).
  * predictions (bert_tf/tasks/squad/predictions.py): logits back to answer text.

Differences from the original, none of which changes a result it produces:
  * bad input raises `InputError` naming the file and question id (or article and paragraph), where
    the original fails with a KeyError or IndexError, or loops forever (a query longer than the
    sequence, a zero stride);
  * a missing "is_impossible" key reads as False, and prediction-time examples keep their gold answer
    texts (`answer_texts`, for in-process evaluation);
  * a training answer that starts in whitespace before the first word maps to word 0 (the original
    indexed word -1 and skipped it);

S = max_seq_length.
"""

import collections
import dataclasses

import tensorflow as tf
from absl import logging

from bert_tf.data.packing import window_spans
from bert_tf.data.records import serialize_values
from bert_tf.tasks.squad.examples import (  # noqa: F401 (the reading half, named here too)
    SquadExample,
    read_squad_examples,
    read_squad_json,
    read_tfds_squad,
    split_paragraph,
    word_char_spans,
)

FIRST_UNIQUE_ID = 1000000000  # the original's first feature id
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
_LOGGED_EXAMPLES = 3  # examples whose features are logged in full


@dataclasses.dataclass
class SquadFeature:
    """One window of one example, padded to S.

    `tokens` are the unpadded wordpieces; `token_to_orig_map` maps a position of the window's document
    part to its word in the example's `doc_tokens`. Positions are into `tokens` (0 = [CLS]: no answer
    in this window); None outside training.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]
    token_to_orig_map: dict[int, int]
    token_is_max_context: dict[int, bool]
    input_ids: list[int]  # [S]
    input_mask: list[int]  # [S]
    segment_ids: list[int]  # [S]
    start_position: int | None
    end_position: int | None
    is_impossible: bool


# ----------------------------------------------------------------------------------------------
# Features


def convert_examples_to_features(
    examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training
):
    """Windows each example into SquadFeatures (unique ids from 1000000000, in order).

    Args:
      examples: SquadExamples.
      tokenizer: a FullTokenizer.
      max_seq_length: S, tokens per feature including [CLS] and both [SEP]s.
      doc_stride: wordpieces between the starts of consecutive windows.
      max_query_length: question wordpieces kept (the rest are cut).
      is_training: set answer positions.

    Yields:
      SquadFeature, one per window.

    Raises:
      ValueError: if a question of max_query_length leaves no room for the paragraph, or
        doc_stride < 1.
    """
    if max_seq_length <= max_query_length + 3:
        raise ValueError(
            f"max_seq_length ({max_seq_length}) must exceed max_query_length "
            f"({max_query_length}) + 3"
        )
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}")
    unique_id = FIRST_UNIQUE_ID
    counts = collections.Counter()
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
        tok_to_orig_index, orig_to_tok_index, all_doc_tokens = _wordpieces(
            example.doc_tokens, tokenizer
        )
        answer_span = None
        if is_training and not example.is_impossible:
            answer_span = _answer_wordpiece_span(
                example, orig_to_tok_index, all_doc_tokens, tokenizer
            )
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        doc_spans = window_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        counts["examples"] += 1
        for doc_span_index in range(len(doc_spans)):
            feature = _make_feature(
                unique_id=unique_id,
                example_index=example_index,
                doc_span_index=doc_span_index,
                doc_spans=doc_spans,
                query_tokens=query_tokens,
                all_doc_tokens=all_doc_tokens,
                tok_to_orig_index=tok_to_orig_index,
                answer_span=answer_span,
                tokenizer=tokenizer,
                max_seq_length=max_seq_length,
                is_training=is_training,
                is_impossible=example.is_impossible,
            )
            counts["features"] += 1
            if is_training and not example.is_impossible and feature.start_position == 0:
                counts["windows without the answer"] += 1
            if example_index < _LOGGED_EXAMPLES:
                _log_feature(feature)
            yield feature
            unique_id += 1
    logging.info("SQuAD features: %s", ", ".join(f"{n} {name}" for name, n in counts.items()))


def _wordpieces(doc_tokens, tokenizer):
    """(tok_to_orig_index, orig_to_tok_index, all_doc_tokens): the words' wordpieces and the maps."""
    tok_to_orig_index = []
    orig_to_tok_index = []
    all_doc_tokens = []
    for word_index, word in enumerate(doc_tokens):
        orig_to_tok_index.append(len(all_doc_tokens))
        for piece in tokenizer.tokenize(word):
            tok_to_orig_index.append(word_index)
            all_doc_tokens.append(piece)
    return tok_to_orig_index, orig_to_tok_index, all_doc_tokens


def _answer_wordpiece_span(example, orig_to_tok_index, all_doc_tokens, tokenizer):
    """(start, end) wordpiece indexes (inclusive) of a training answer, tightened to its text."""
    start = orig_to_tok_index[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
        end = orig_to_tok_index[example.end_position + 1] - 1
    else:
        end = len(all_doc_tokens) - 1
    return _improve_answer_span(all_doc_tokens, start, end, tokenizer, example.orig_answer_text)


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """The shortest-from-the-left sub-span of [input_start, input_end] that spells the answer.

    Answers are annotated in characters and mapped to whole words first: for "born in (1895-1943)."
    with answer "1895" the word is "(1895-1943).", whose wordpieces "( 1895 - 1943 ) ." contain the
    answer exactly. When no sub-span matches (answer "Japan" inside the wordpiece "japanese"), the
    whole span is kept.
    """
    answer_pieces = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start : new_end + 1]) == answer_pieces:
                return new_start, new_end
    return input_start, input_end


def _check_is_max_context(doc_spans, cur_span_index, position):
    """Whether window `cur_span_index` gives wordpiece `position` its most context.

    A window's score for a wordpiece is the smaller of its left and right context, plus 0.01 of the
    window's length to break ties towards longer windows; the first best window wins.
    """
    best_score = None
    best_span_index = None
    for span_index, doc_span in enumerate(doc_spans):
        end = doc_span.start + doc_span.length - 1
        if position < doc_span.start or position > end:
            continue
        score = min(position - doc_span.start, end - position) + 0.01 * doc_span.length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def _make_feature(
    unique_id,
    example_index,
    doc_span_index,
    doc_spans,
    query_tokens,
    all_doc_tokens,
    tok_to_orig_index,
    answer_span,
    tokenizer,
    max_seq_length,
    is_training,
    is_impossible,
):
    """The feature of one window: [CLS] query [SEP] window [SEP], padded to max_seq_length."""
    doc_span = doc_spans[doc_span_index]
    tokens = [CLS_TOKEN, *query_tokens, SEP_TOKEN]
    segment_ids = [0] * len(tokens)
    token_to_orig_map = {}
    token_is_max_context = {}
    for split_token_index in range(doc_span.start, doc_span.start + doc_span.length):
        token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
        token_is_max_context[len(tokens)] = _check_is_max_context(
            doc_spans, doc_span_index, split_token_index
        )
        tokens.append(all_doc_tokens[split_token_index])
    tokens.append(SEP_TOKEN)
    segment_ids += [1] * (len(tokens) - len(segment_ids))

    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    input_mask = [1] * len(input_ids)
    padding = [0] * (max_seq_length - len(input_ids))

    start_position = end_position = None
    if is_training:
        start_position = end_position = (
            0  # [CLS]: unanswerable, or the answer is not in this window
        )
        doc_end = doc_span.start + doc_span.length - 1
        if answer_span and doc_span.start <= answer_span[0] and answer_span[1] <= doc_end:
            doc_offset = len(query_tokens) + 2
            start_position = answer_span[0] - doc_span.start + doc_offset
            end_position = answer_span[1] - doc_span.start + doc_offset
    return SquadFeature(
        unique_id=unique_id,
        example_index=example_index,
        doc_span_index=doc_span_index,
        tokens=tokens,
        token_to_orig_map=token_to_orig_map,
        token_is_max_context=token_is_max_context,
        input_ids=input_ids + padding,
        input_mask=input_mask + padding,
        segment_ids=segment_ids + padding,
        start_position=start_position,
        end_position=end_position,
        is_impossible=is_impossible,
    )


def _log_feature(feature):
    logging.info(
        "SQuAD feature %d (example %d, window %d): %s",
        feature.unique_id,
        feature.example_index,
        feature.doc_span_index,
        " ".join(feature.tokens),
    )
    if feature.start_position is not None:
        answer = " ".join(feature.tokens[feature.start_position : feature.end_position + 1])
        logging.info(
            "  start_position %d, end_position %d, answer %r, impossible %s",
            feature.start_position,
            feature.end_position,
            answer,
            feature.is_impossible,
        )


def squad_feature_spec(max_seq_length, is_training):
    """{name: tf.io.FixedLenFeature} of the original's SQuAD TFRecords (all int64)."""
    spec = {
        "unique_ids": tf.io.FixedLenFeature([], tf.int64),
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
    }
    if is_training:
        for name in ("start_positions", "end_positions", "is_impossible"):
            spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def serialize_squad_feature(feature, is_training):
    """A SquadFeature as tf.train.Example bytes, with the original's feature names (squad_feature_spec)."""
    values = {
        "unique_ids": feature.unique_id,
        "input_ids": feature.input_ids,
        "input_mask": feature.input_mask,
        "segment_ids": feature.segment_ids,
    }
    if is_training:
        values["start_positions"] = feature.start_position
        values["end_positions"] = feature.end_position
        values["is_impossible"] = int(feature.is_impossible)
    return serialize_values(values, squad_feature_spec(len(feature.input_ids), is_training))
