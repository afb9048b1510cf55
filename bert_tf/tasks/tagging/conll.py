"""CoNLL token tagging (NER) data: reading, labels, WordPiece windows, merging predictions, writing back.

A CoNLL file holds one word per line, `word POS chunk NER` (any number of whitespace-separated columns,
or `word<TAB>label`), a blank line between sentences and `-DOCSTART-` lines between documents. The label
is the last column unless `label_column` says otherwise; a file of words only reads with labels None.

Each word is WordPiece-tokenized on its own; its label sits on its first piece and the other pieces are
ignored by the loss and by prediction:

    words:       Emma      Woodhouse         ,
    tokens:      [CLS]  emma  wood  ##house  ,  [SEP]
    label_mask:  0      1     1     0        1  0

A sentence longer than max_seq_length - 2 pieces becomes several overlapping windows, each a run of whole
words starting `doc_stride` pieces after the last (as run_squad.py splits documents). Every word is
predicted in exactly one window: the one where it has the most context (run_squad.py's max-context rule),
so merging the windows gives every word one prediction.

S = max_seq_length.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from bert_tf.data.packing import pad_to
from bert_tf.data.records import serialize_values
from bert_tf.errors import InputError
from bert_tf.file_io import read_text, write_text

DOCSTART = "-DOCSTART-"
OUTSIDE_LABEL = "O"

# Accepted names of each split's file, in the order they are looked for: ours first, then the
# original CoNLL-2003 release's (eng.train, eng.testa, eng.testb).
CONLL_FILE_NAMES = {
    "train": ("train.txt", "eng.train"),
    "dev": ("dev.txt", "valid.txt", "eng.testa"),
    "test": ("test.txt", "eng.testb"),
}

# The int64 features of one window; all [S] but the two scalars.
_SEQUENCE_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "label_ids",
    "label_mask",
    "word_ids",
)
_SCALAR_FEATURES = ("sentence_index", "is_real_example")


@dataclasses.dataclass
class Sentence:
    """One sentence of a CoNLL file.

    Attributes:
      words: the words, as written in the file.
      labels: one label per word, or None for a file without labels.
      line_numbers: the 1-based line of each word in the file (to write predictions back beside it).
    """

    words: list
    labels: list | None
    line_numbers: list


def _split_line(line, is_tab_separated):
    return line.split("\t") if is_tab_separated else line.split()


def read_conll(path, label_column=-1):
    """Reads a CoNLL file into sentences.

    The first word line fixes the file's layout: tab-separated if it holds a tab (so a word may hold
    spaces), else whitespace-separated, and its number of columns; with one column the file has no
    labels. `-DOCSTART-` lines end a sentence and are otherwise skipped.

    Args:
      path: the file.
      label_column: the column holding the label (Python indexing: -1 is the last); the word is column 0.

    Returns:
      A list of `Sentence`.

    Raises:
      InputError: naming the file and line, for a line whose column count differs from the first word
        line's, a label column the file lacks or invalid UTF-8; naming the file, for a missing file or
        one without words.
    """
    sentences = []
    current = []  # (line number, columns) of the sentence being read
    layout = None  # (is_tab_separated, num_columns, label index or None, first word line)
    for line_number, line in enumerate(read_text(path).split("\n"), start=1):
        line = line.strip()
        if not line or line.split()[0] == DOCSTART:
            if current:
                sentences.append(_sentence(current, layout[2]))
            current = []
            continue
        if layout is None:
            layout = _layout(path, line_number, line, label_column)
        is_tab_separated, num_columns, _, first_line = layout
        columns = [column.strip() for column in _split_line(line, is_tab_separated)]
        if len(columns) != num_columns:
            raise InputError(
                f"{path}:{line_number}: {len(columns)} columns, but the first word line "
                f"({first_line}) has {num_columns}"
            )
        current.append((line_number, columns))
    if current:
        sentences.append(_sentence(current, layout[2]))
    if not sentences:
        raise InputError(f"{path}: no sentences (the file holds no word lines)")
    return sentences


def _sentence(word_lines, label_index):
    """A Sentence from [(line number, columns)]; labels None when label_index is None."""
    return Sentence(
        words=[columns[0] for _, columns in word_lines],
        labels=None if label_index is None else [columns[label_index] for _, columns in word_lines],
        line_numbers=[line_number for line_number, _ in word_lines],
    )


def _layout(path, line_number, line, label_column):
    """(is_tab_separated, num_columns, label index or None, line_number) from the first word line."""
    is_tab_separated = "\t" in line
    num_columns = len(_split_line(line, is_tab_separated))
    if num_columns == 1:
        return is_tab_separated, 1, None, line_number
    if not -num_columns <= label_column < num_columns or label_column % num_columns == 0:
        raise InputError(
            f"{path}:{line_number}: label column {label_column} does not exist or is the word "
            f"column; the file has {num_columns} columns (word first)"
        )
    return is_tab_separated, num_columns, label_column % num_columns, line_number


def labels_from_sentences(sentences):
    """The label list of a training set: "O" first if present, then the others sorted.

    Any scheme (IOB1, IOB2, IOBES, plain tags) works: labels are taken as they are written. Sorting
    makes the ids independent of the order labels first occur in, and "O" first makes it id 0.

    Raises:
      InputError: if no sentence has labels.
    """
    found = {label for sentence in sentences for label in sentence.labels or ()}
    if not found:
        raise InputError(
            "the training sentences have no labels (the file has only the word column)"
        )
    others = sorted(found - {OUTSIDE_LABEL})
    return [OUTSIDE_LABEL, *others] if OUTSIDE_LABEL in found else others


def check_labels(sentences, label_list, path):
    """Raises InputError naming the file and line of the first label not in `label_list`."""
    known = set(label_list)
    for sentence in sentences:
        for label, line_number in zip(sentence.labels or (), sentence.line_numbers, strict=False):
            if label not in known:
                raise InputError(
                    f"{path}:{line_number}: label {label!r} does not occur in the training data "
                    f"(labels: {', '.join(label_list)})"
                )


def word_pieces(tokenizer, word):
    """A word's wordpieces; a word that tokenizes to nothing (a control character) gives ["[UNK]"].

    So every word has a first piece to carry its label and prediction.
    """
    return tokenizer.tokenize(word) or [tokenizer.wordpiece_tokenizer.unk_token]


def tokenize_words(tokenizer, text):
    """Splits whitespace-separated text into words and their wordpieces, as features are made.

    Returns:
      (words, pieces): the words, and one list of wordpieces per word (see `word_pieces`).
    """
    words = text.split()
    return words, [word_pieces(tokenizer, word) for word in words]


def _windows(piece_counts, max_pieces, doc_stride):
    """Overlapping runs of whole words, each at most max_pieces pieces, covering every word.

    Returns:
      [(first word, end word)]: each window after the first starts at the first word at least
      doc_stride pieces after the previous window's start, never after its end (so no word is
      skipped), and later still if a window starting there would add no word.
    """
    offsets = np.concatenate([[0], np.cumsum(piece_counts)])

    def window_end(start):  # as many words as fit, one at least
        end = start + 1
        while end < len(piece_counts) and offsets[end + 1] - offsets[start] <= max_pieces:
            end += 1
        return end

    windows = []
    start = 0
    while True:
        end = window_end(start)
        windows.append((start, end))
        if end == len(piece_counts):
            return windows
        next_start = start + 1
        while next_start < end and offsets[next_start] - offsets[start] < doc_stride:
            next_start += 1
        while window_end(next_start) == end:
            next_start += 1
        start = next_start


def _owning_windows(piece_counts, windows):
    """For each word, the index of the window where it has the most context.

    A word's score in a window is min(pieces before its first piece, pieces after it) + 0.01 * the
    window's length in pieces (run_squad.py's _check_is_max_context); ties go to the earlier window.
    """
    offsets = np.concatenate([[0], np.cumsum(piece_counts)])
    best_scores = [-1.0] * len(piece_counts)
    owners = [None] * len(piece_counts)
    for window_index, (start, end) in enumerate(windows):
        length = offsets[end] - offsets[start]
        for word in range(start, end):
            left = offsets[word] - offsets[start]
            score = min(left, length - left - 1) + 0.01 * length
            if score > best_scores[word]:
                best_scores[word], owners[word] = score, window_index
    return owners


def convert_sentence_to_features(
    sentence, sentence_index, label_map, max_seq_length, tokenizer, doc_stride=None
):
    """One sentence -> the features of its windows (one window if it fits).

    A word of more than max_seq_length - 2 pieces keeps only its first max_seq_length - 2 (its first
    piece, which carries the label, always stays).

    Args:
      sentence: a `Sentence`.
      sentence_index: its index in the file, stored in the features to merge predictions back.
      label_map: {label: id}; ignored for a sentence without labels (its label_ids are all 0).
      max_seq_length: S, the packed length, [CLS] and [SEP] included (at least 3).
      tokenizer: a FullTokenizer.
      doc_stride: pieces between the starts of consecutive windows; None: (S - 2) // 2.

    Returns:
      A list of feature dicts, one per window: int lists "input_ids", "input_mask", "segment_ids",
      "label_ids" (the word's label id on a first piece that label_mask marks, else 0), "label_mask" (1
      on the first piece of each word this window predicts), "word_ids" (that word's index in the
      sentence where label_mask is 1, else -1), all [S]; ints "sentence_index" and "is_real_example" (1).

    Raises:
      InputError: naming the line, for a label missing from label_map.
    """
    max_pieces = max_seq_length - 2
    if max_pieces < 1:
        raise ValueError(f"max_seq_length={max_seq_length}: must be at least 3")
    doc_stride = doc_stride or max(max_pieces // 2, 1)
    pieces = [word_pieces(tokenizer, word)[:max_pieces] for word in sentence.words]
    label_ids = [_label_id(sentence, word, label_map) for word in range(len(pieces))]
    windows = _windows([len(word) for word in pieces], max_pieces, doc_stride)
    owners = _owning_windows([len(word) for word in pieces], windows)
    features = []
    for window_index, (start, end) in enumerate(windows):
        words = [
            (word, pieces[word], label_ids[word] if owners[word] == window_index else None)
            for word in range(start, end)
        ]
        feature = _window_feature(words, max_seq_length, tokenizer)
        features.append({**feature, "sentence_index": sentence_index, "is_real_example": 1})
    return features


def _window_feature(words, max_seq_length, tokenizer):
    """The [S] features of one window: `words` is [(word index, pieces, label id or None)], None for a
    word another window predicts."""
    tokens = ["[CLS]"]
    label_ids, label_mask, word_ids = [0], [0], [-1]
    for word, pieces, label_id in words:
        is_predicted = label_id is not None
        tokens.extend(pieces)
        rest = len(pieces) - 1
        label_ids += [label_id or 0] + [0] * rest
        label_mask += [int(is_predicted)] + [0] * rest
        word_ids += [word if is_predicted else -1] + [-1] * rest
    tokens.append("[SEP]")
    return {
        "input_ids": pad_to(tokenizer.convert_tokens_to_ids(tokens), max_seq_length),
        "input_mask": pad_to([1] * len(tokens), max_seq_length),
        "segment_ids": [0] * max_seq_length,
        "label_ids": pad_to(label_ids, max_seq_length),
        "label_mask": pad_to(label_mask, max_seq_length),
        "word_ids": pad_to(word_ids, max_seq_length, pad_value=-1),
    }


def _label_id(sentence, word, label_map):
    """The id of a word's label; 0 in a sentence without labels."""
    if sentence.labels is None:
        return 0
    label = sentence.labels[word]
    if label not in label_map:
        raise InputError(
            f"line {sentence.line_numbers[word]}: label {label!r} does not occur in the training data"
        )
    return label_map[label]


def convert_sentences_to_features(
    sentences, label_list, max_seq_length, tokenizer, doc_stride=None
):
    """All sentences' window features, in sentence order (see convert_sentence_to_features)."""
    label_map = {label: index for index, label in enumerate(label_list or ())}
    return [
        feature
        for index, sentence in enumerate(sentences)
        for feature in convert_sentence_to_features(
            sentence, index, label_map, max_seq_length, tokenizer, doc_stride
        )
    ]


def tagging_feature_spec(max_seq_length):
    """The TFRecord spec of the window features: int64 [S] sequences and int64 scalars."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in _SEQUENCE_FEATURES}
    spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in _SCALAR_FEATURES})
    return spec


def serialize_tagging_feature(feature):
    """A window feature dict -> serialized tf.train.Example bytes, as tagging_feature_spec says."""
    return serialize_values(feature, tagging_feature_spec(len(feature["input_ids"])))


def merge_window_predictions(sentences, features, predicted_label_ids, label_list=None):
    """Puts the windows' predictions back together: one prediction per word of every sentence.

    Args:
      sentences: the `Sentence` list the features were made from.
      features: the features, as a list of feature dicts or as {name: array} with "sentence_index" [N]
        and "word_ids" [N, S] (what the prediction loop passes through); fake windows
        (sentence_index -1) are skipped.
      predicted_label_ids: int [N, S], the predicted label id at each position of each window.
      label_list: if given, ids become these label strings.

    Returns:
      One list per sentence of one predicted label id (or string) per word.

    Raises:
      ValueError: if a word is predicted by no window or by more than one (features and sentences
        do not match).
    """
    if isinstance(features, dict):
        sentence_indexes = np.asarray(features["sentence_index"]).reshape([-1])
        word_ids = np.asarray(features["word_ids"])
    else:
        sentence_indexes = np.array([feature["sentence_index"] for feature in features])
        word_ids = np.array([feature["word_ids"] for feature in features])
    predicted_label_ids = np.asarray(predicted_label_ids)
    merged = [[None] * len(sentence.words) for sentence in sentences]
    for sentence_index, window_word_ids, window_predictions in zip(
        sentence_indexes, word_ids, predicted_label_ids, strict=True
    ):
        if sentence_index < 0:
            continue
        for position in np.flatnonzero(window_word_ids >= 0):
            word = window_word_ids[position]
            if merged[sentence_index][word] is not None:
                raise ValueError(
                    f"sentence {sentence_index}, word {word}: predicted by two windows"
                )
            merged[sentence_index][word] = int(window_predictions[position])
    for sentence_index, predictions in enumerate(merged):
        if None in predictions:
            raise ValueError(
                f"sentence {sentence_index}, word {predictions.index(None)}: predicted by no window"
            )
    if label_list is not None:
        merged = [[label_list[label_id] for label_id in predictions] for predictions in merged]
    return merged


def write_conll_predictions(input_path, sentences, predicted_labels, output_path):
    """Writes the input file with each word line's predicted label appended as one more column.

    Blank and -DOCSTART- lines stay as they were, so conlleval-style tools read the result (word ...
    gold predicted). The new column is tab-separated in a tab-separated file, else space-separated.
    The file appears complete or not at all (written to a temporary file, then renamed).

    Args:
      input_path: the CoNLL file `sentences` were read from.
      sentences: its `Sentence` list (from read_conll).
      predicted_labels: one list of label strings per sentence, one per word.
      output_path: where to write.

    Raises:
      ValueError: if the predictions do not match the sentences.
    """
    predicted_by_line = {}
    for index, (sentence, labels) in enumerate(zip(sentences, predicted_labels, strict=True)):
        if len(labels) != len(sentence.words):
            raise ValueError(
                f"sentence {index}: {len(labels)} predicted labels for {len(sentence.words)} words"
            )
        predicted_by_line.update(zip(sentence.line_numbers, labels, strict=True))
    lines = read_text(input_path).split("\n")
    for line_number, label in predicted_by_line.items():
        line = lines[line_number - 1]
        body = line.rstrip("\r")
        separator = "\t" if "\t" in body else " "
        lines[line_number - 1] = f"{body.rstrip()}{separator}{label}{line[len(body) :]}"
    write_text(output_path, "\n".join(lines))
