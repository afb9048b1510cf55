"""SQuAD 1.1 / 2.0: questions and paragraphs -> windowed features.

The steps are those of google-research/bert `run_squad.py`:
  * reading: a paragraph is split into words on the original's five whitespace characters (space, tab,
    CR, LF, U+202F), keeping which word each character belongs to (`char_to_word_offset`). A training
    answer is mapped from its characters to words; one whose words do not contain its text is skipped
    and counted. SQuAD 2.0 unanswerable questions get word positions -1.
  * features: the question's wordpieces (at most `max_query_length`), then windows over the paragraph's
    wordpieces, `doc_stride` apart: `[CLS] question [SEP] window [SEP]`. An answer is tightened to the
    wordpieces that spell it (`_improve_answer_span`); a window without it, or an unanswerable question,
    points at [CLS] (position 0). Each wordpiece is "max context" in the window where it has the most
    context on its shorter side (`_check_is_max_context`).
  * predictions (bert_tf/data/squad_predictions.py): logits back to answer text.

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

from bert_tf import tokenization
from bert_tf.data.packing import window_spans
from bert_tf.data.records import int64_feature, serialize_example
from bert_tf.errors import InputError
from bert_tf.io import read_json

FIRST_UNIQUE_ID = 1000000000  # the original's first feature id
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
_LOGGED_EXAMPLES = 3  # examples whose features are logged in full

# The original's paragraph whitespace: narrower than str.split() (U+00A0, U+2009, ... stay in words).
_PARAGRAPH_WHITESPACE = frozenset(" \t\r\n\u202f")


@dataclasses.dataclass
class SquadExample:
    """One question about one paragraph.

    Positions are word indexes into `doc_tokens` (inclusive), set for training only: -1 for an
    unanswerable question. `context_text[c]` belongs to word `char_to_word_offset[c]` (whitespace to
    the word before it, -1 before the first word).
    """

    qas_id: str
    question_text: str
    doc_tokens: list[str] = dataclasses.field(repr=False)
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False
    context_text: str = dataclasses.field(default="", repr=False)
    char_to_word_offset: list[int] = dataclasses.field(default_factory=list, repr=False)
    answer_texts: list[str] = dataclasses.field(default_factory=list)  # every gold answer
    title: str = ""


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
# Reading


def split_paragraph(text):
    """Splits a paragraph into words as the original does.

    Returns:
      (doc_tokens, char_to_word_offset): the words, and for each character of `text` the index of the
      word it is in (a whitespace character: the word before it, or -1 before the first word).
    """
    doc_tokens = []
    char_to_word_offset = []
    previous_is_whitespace = True
    for char in text:
        if char in _PARAGRAPH_WHITESPACE:
            previous_is_whitespace = True
        else:
            if previous_is_whitespace:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            previous_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def word_char_spans(text):
    """[(start, end)] character span of each word of `split_paragraph(text)`: text[start:end] is it."""
    spans = []
    previous_is_whitespace = True
    for index, char in enumerate(text):
        if char in _PARAGRAPH_WHITESPACE:
            previous_is_whitespace = True
            continue
        if previous_is_whitespace:
            spans.append([index, index + 1])
        else:
            spans[-1][1] = index + 1
        previous_is_whitespace = False
    return [tuple(span) for span in spans]


def read_squad_examples(input_file, is_training, version_2_with_negative):
    """Reads a SQuAD json file (local path or tf.io.gfile URL).

    Returns:
      (examples, stats): a list of SquadExample, and {"examples", "skipped", "impossible"} counts
      ("skipped": training answers not found in their paragraph).

    Raises:
      MissingFileError: if `input_file` does not exist.
      InputError: if the file is not SQuAD json; the message names the file and the question id.
    """
    data = read_json(input_file)
    return read_squad_json(data, is_training, version_2_with_negative, source=input_file)


def read_squad_json(data, is_training, version_2_with_negative, source="<json>"):
    """Reads SQuAD examples from an already parsed json dict ({"data": [articles]}).

    Args:
      data: the parsed file.
      is_training: read one answer per answerable question into word positions.
      version_2_with_negative: read "is_impossible" (SQuAD 2.0).
      source: the name error messages give the data (a file name).

    Returns:
      (examples, stats), as `read_squad_examples`.
    """
    examples = []
    stats = {"examples": 0, "skipped": 0, "impossible": 0}
    articles = _field(data, "data", list, source)
    for article_index, article in enumerate(articles):
        title = article.get("title", "") if isinstance(article, dict) else ""
        article_where = f"{source}: article {article_index} (title {title!r})"
        for paragraph_index, paragraph in enumerate(
            _field(article, "paragraphs", list, article_where)
        ):
            where = f"{article_where}, paragraph {paragraph_index}"
            context = _field(paragraph, "context", str, where)
            paragraph_qas = _field(paragraph, "qas", list, where)
            if not context.strip():
                raise InputError(f"{where}: empty context")
            paragraph_words = split_paragraph(context)
            for qa_index, qa in enumerate(paragraph_qas):
                qas_id = str(_field(qa, "id", (str, int), f"{where}, question {qa_index}"))
                qa_where = f"{source}: question id {qas_id!r}"
                is_impossible = False
                if version_2_with_negative:
                    is_impossible = qa.get("is_impossible", False)
                    if not isinstance(is_impossible, bool):
                        raise InputError(f'{qa_where}: "is_impossible" should be true or false')
                if "answers" in qa or (is_training and not is_impossible):
                    answers = [
                        (
                            _field(answer, "text", str, qa_where),
                            _field(answer, "answer_start", int, qa_where) if is_training else 0,
                        )
                        for answer in _field(qa, "answers", list, qa_where)
                    ]
                else:
                    answers = []
                example = _make_example(
                    qas_id=qas_id,
                    question_text=_field(qa, "question", str, qa_where),
                    title=title,
                    context=context,
                    paragraph_words=paragraph_words,
                    answers=answers,
                    is_impossible=is_impossible,
                    is_training=is_training,
                    where=qa_where,
                )
                _count(examples, stats, example)
    return examples, stats


def read_tfds_squad(tfds_name, split, is_training, data_dir=None):
    """Reads SQuAD examples from a prepared tensorflow_datasets dataset ("squad/v1.1", "squad/v2.0").

    SQuAD 2.0 is recognised by its "is_impossible" feature. Questions come in the dataset's order.

    Returns:
      (examples, stats), as `read_squad_examples`.

    Raises:
      InputError: the dataset is unknown or not prepared (the message says how to prepare it), or an
        example is bad (the message names its id).
    """
    import tensorflow_datasets as tfds  # only here: slow to import, and only this reader needs it

    source = f"TFDS {tfds_name} split {split!r}"
    try:
        builder = tfds.builder(tfds_name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError as error:
        raise InputError(f"{source}: {str(error).splitlines()[0]}") from error
    version_2_with_negative = "is_impossible" in builder.info.features
    try:
        dataset = builder.as_dataset(split=split, shuffle_files=False)
    except AssertionError as error:
        raise InputError(
            f"{source}: not prepared in {builder.data_dir_root}; prepare it once (it downloads) with "
            f"`tfds build {tfds_name} --data_dir={builder.data_dir_root}` or "
            f"tfds.builder({tfds_name!r}, data_dir=...).download_and_prepare()"
        ) from error
    except ValueError as error:  # an unknown split
        raise InputError(f"{source}: {str(error).splitlines()[0]}") from error

    examples = []
    stats = {"examples": 0, "skipped": 0, "impossible": 0}
    paragraphs = {}  # context -> its words, shared by the questions about it as the original does
    for record in tfds.as_numpy(dataset):
        qas_id = _decode(record["id"])
        where = f"{source}: question id {qas_id!r}"
        context = _decode(record["context"])
        if not context.strip():
            raise InputError(f"{where}: empty context")
        if context not in paragraphs:
            paragraphs[context] = split_paragraph(context)
        texts = [_decode(text) for text in record["answers"]["text"]]
        starts = [int(start) for start in record["answers"]["answer_start"]]
        if not is_training:  # answer_start is only needed (and checked) for training
            starts = [0] * len(texts)
        if len(starts) != len(texts):
            raise InputError(f"{where}: {len(texts)} answer texts but {len(starts)} answer_starts")
        example = _make_example(
            qas_id=qas_id,
            question_text=_decode(record["question"]),
            title=_decode(record["title"]),
            context=context,
            paragraph_words=paragraphs[context],
            answers=list(zip(texts, starts, strict=True)),
            is_impossible=version_2_with_negative and bool(record["is_impossible"]),
            is_training=is_training,
            where=where,
        )
        _count(examples, stats, example)
    return examples, stats


def _decode(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _field(container, key, expected_type, where):
    """container[key], checked to be an `expected_type`; InputError saying `where` otherwise."""
    if not isinstance(container, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(container).__name__}")
    if key not in container:
        raise InputError(f'{where}: missing key "{key}"')
    value = container[key]
    if not isinstance(value, expected_type) or isinstance(value, bool):
        raise InputError(f'{where}: "{key}" has the wrong type ({type(value).__name__})')
    return value


def _count(examples, stats, example):
    if example is None:
        stats["skipped"] += 1
        return
    examples.append(example)
    stats["examples"] += 1
    stats["impossible"] += int(example.is_impossible)


def _make_example(
    qas_id,
    question_text,
    title,
    context,
    paragraph_words,
    answers,
    is_impossible,
    is_training,
    where,
):
    """A SquadExample, or None for a training answer its paragraph's words do not contain.

    `answers` is a list of (text, answer_start in characters); `paragraph_words` is
    `split_paragraph(context)`.
    """
    doc_tokens, char_to_word_offset = paragraph_words
    example = SquadExample(
        qas_id=qas_id,
        question_text=question_text,
        doc_tokens=doc_tokens,
        is_impossible=is_impossible,
        context_text=context,
        char_to_word_offset=char_to_word_offset,
        answer_texts=[text for text, _ in answers],
        title=title,
    )
    if not is_training:
        return example
    if is_impossible:
        example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
        return example
    if len(answers) != 1:
        raise InputError(
            f"{where}: for training, each question should have exactly 1 answer, got {len(answers)}"
        )
    answer_text, answer_start = answers[0]
    if not answer_text.strip():
        raise InputError(f"{where}: empty answer text")
    answer_end = answer_start + len(answer_text)  # exclusive, in characters
    if answer_start < 0 or answer_end > len(context):
        raise InputError(
            f"{where}: answer {answer_text!r} at answer_start {answer_start} runs outside its "
            f"context ({len(context)} characters)"
        )
    start_position = max(char_to_word_offset[answer_start], 0)
    end_position = char_to_word_offset[answer_end - 1]
    # Unicode oddities can make an answer's characters unrecoverable from the words; skip those.
    actual_text = " ".join(doc_tokens[start_position : end_position + 1])
    cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(answer_text))
    if actual_text.find(cleaned_answer_text) == -1:
        logging.warning(
            "%s: could not find answer %r in %r; skipped", where, cleaned_answer_text, actual_text
        )
        return None
    example.orig_answer_text = answer_text
    example.start_position, example.end_position = start_position, end_position
    return example


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
    """A SquadFeature as tf.train.Example bytes, with the original's feature names."""
    features = {
        "unique_ids": int64_feature([feature.unique_id]),
        "input_ids": int64_feature(feature.input_ids),
        "input_mask": int64_feature(feature.input_mask),
        "segment_ids": int64_feature(feature.segment_ids),
    }
    if is_training:
        features["start_positions"] = int64_feature([feature.start_position])
        features["end_positions"] = int64_feature([feature.end_position])
        features["is_impossible"] = int64_feature([int(feature.is_impossible)])
    return serialize_example(features)
