"""SQuAD 1.1 / 2.0 json (or TFDS) -> SquadExamples: the reading half of bert_tf/tasks/squad/data.py.

As the original run_squad.py reads: a paragraph is split into words on the original's five whitespace
characters (space, tab, CR, LF, U+202F), keeping which word each character belongs to
(`char_to_word_offset`). A training answer is mapped from its characters to words; one whose words do
not contain its text is skipped and counted. SQuAD 2.0 unanswerable questions get word positions -1.
Bad input raises `InputError` naming the file and question id (or article and paragraph); a missing
"is_impossible" key reads as False, and prediction-time examples keep their gold answer texts
(`answer_texts`, for in-process evaluation).
"""

import dataclasses

from absl import logging

from bert_tf import tokenization
from bert_tf.errors import InputError
from bert_tf.file_io import read_json

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
