"""Token tagging inside the graph: raw text -> one label per word, as run_ner.py's predictions.

The SavedModel of a tagger needs no Python around it: the text is split into words (str.split), each
word tokenized alone, long texts cut into run_ner.py's overlapping windows (bert_tf/tasks/tagging/conll.py),
and each word labelled from its first piece in the window where it has the most context.

B = batch, S = sequence length, L = number of labels, K = windows of a text, W = words of a text.
"""

import tensorflow as tf

from bert_tf.export import ID_FEATURES, serving_module, write_saved_model
from bert_tf.models.networks.task_info import LABELS_FILE, labels_text


def _python_whitespace_pattern():
    """An RE2 class of the characters str.split() splits on (str.isspace), for the graph."""
    spaces = [code for code in range(0x110000) if chr(code).isspace()]
    return "[" + "".join(f"\\x{{{code:x}}}" for code in spaces) + "]"


class TaggingPreprocessor(tf.Module):
    """Whitespace-separated text -> the windows run_ner.py's features hold, inside the graph.

    The words are `text.split()`; each is tokenized on its own by GraphPreprocessor (FullTokenizer's
    ids; [UNK] for a word without pieces; at most S - 2 pieces), and a text longer than S - 2 pieces
    becomes the overlapping windows of bert_tf.tasks.tagging.conll, each word predicted in the window where it
    has the most context. So the export labels every word of any length of text as run_ner.py does.

    Example:
    ```python
    windows = TaggingPreprocessor(GraphPreprocessor("vocab.txt", max_seq_length=128))
    words, features = windows(tf.constant(["Emma visited Hartfield ."]))
    features["word_ids"]  # int32 [1, 1, 7]: [[[-1, 0, 1, 2, -1, 3, -1]]] (hart ##field)
    ```
    """

    def __init__(self, preprocessor, doc_stride=None, name=None):
        """preprocessor: a GraphPreprocessor (its max_seq_length is S); doc_stride as in run_ner.py."""
        super().__init__(name=name)
        self.preprocessor = preprocessor
        self.max_pieces = preprocessor.max_seq_length - 2
        self.doc_stride = doc_stride or max(self.max_pieces // 2, 1)
        self._whitespace = _python_whitespace_pattern()

    def split_words(self, text):
        """tf.string [B] -> tf.RaggedTensor tf.string [B, (W)], the words of str.split()."""
        return tf.strings.split(tf.strings.regex_replace(text, self._whitespace, " "))

    def __call__(self, text):
        """Splits texts into words and their windows.

        Args:
          text: tf.string [B].

        Returns:
          (words, features): words tf.RaggedTensor tf.string [B, (W)]; features {"input_ids",
          "input_mask", "segment_ids", "word_ids"}, int32 [B, K, S'] with S' the longest window.
          word_ids is as in run_ner's features: the word a position predicts, -1 elsewhere. Windows
          past a text's last are zeros (word_ids -1); a text without words has one empty window.
        """
        words = self.split_words(text)
        pieces = self._word_pieces(words.flat_values)  # [TW, (P)]
        counts = words.with_flat_values(pieces.row_lengths()).to_tensor(0)  # [B, Wmax]
        num_words = words.row_lengths()  # [B]
        offsets = tf.pad(tf.cumsum(counts, axis=1), [[0, 0], [1, 0]])  # [B, Wmax + 1]
        starts, ends, valid = _windows(offsets, num_words, self.max_pieces, self.doc_stride)
        owners = _owning_windows(offsets, starts, ends, valid)  # [B, Wmax]
        # The pieces of each window, [B * K, (n)], then packed as [CLS] pieces [SEP].
        row_pieces = tf.gather(pieces.row_splits, words.row_splits)  # [B + 1]: text piece splits
        first = row_pieces[:-1, None] + tf.gather(offsets, starts, batch_dims=1)  # [B, K]
        last = row_pieces[:-1, None] + tf.gather(offsets, ends, batch_dims=1)
        last = tf.where(valid, last, first)
        window_pieces = tf.gather(
            pieces.flat_values, tf.ragged.range(tf.reshape(first, [-1]), tf.reshape(last, [-1]))
        )
        packed = self.preprocessor.pack([window_pieces])  # [B * K, S']
        is_window = tf.cast(tf.reshape(valid, [-1, 1]), tf.int32)
        features = {name: value * is_window for name, value in packed.items()}
        features["word_ids"] = self._word_ids(offsets, starts, owners, num_words, packed)
        shape = tf.concat([tf.shape(starts), tf.shape(packed["input_ids"])[-1:]], axis=0)
        return words, {name: tf.reshape(value, shape) for name, value in features.items()}

    def _word_pieces(self, words):
        """tf.string [TW] -> ragged int32 [TW, (P)]: conll.word_pieces' ids, cut to S - 2 pieces."""
        pieces = self.preprocessor.tokenize(words)
        is_empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(is_empty)], self.preprocessor.unk_id), is_empty
        )
        return tf.concat([pieces, unk], axis=1)[:, : self.max_pieces]

    def _word_ids(self, offsets, starts, owners, num_words, packed):
        """int32 [B * K, S']: the word each position predicts (its first piece in its owning window)."""
        num_windows = tf.shape(starts, out_type=tf.int64)[1]
        word_index = tf.where(
            tf.sequence_mask(num_words, tf.shape(owners, out_type=tf.int64)[1])
        )  # [TW, 2]: (text, word)
        text, word = word_index[:, 0], word_index[:, 1]
        owner = tf.gather_nd(owners, word_index)
        window_start = tf.gather_nd(starts, tf.stack([text, owner], axis=1))
        position = (
            1
            + tf.gather_nd(offsets, word_index)
            - tf.gather_nd(offsets, tf.stack([text, window_start], axis=1))
        )
        window = text * num_windows + owner
        shape = tf.shape(packed["input_ids"], out_type=tf.int64)
        marked = tf.scatter_nd(
            tf.stack([window, position], axis=1), tf.cast(word, tf.int32) + 1, shape
        )
        return marked - 1


def _windows(offsets, num_words, max_pieces, doc_stride):
    """conll._windows for a batch of texts.

    Args:
      offsets: int64 [B, Wmax + 1], the piece offset of each word (0 first; flat past the end).
      num_words: int64 [B].
      max_pieces, doc_stride: Python ints, as conll._windows takes them.

    Returns:
      (starts, ends, valid): [B, K] each, K the most windows of a text; a window is the words
      starts[b, k]:ends[b, k]; valid is False past a text's last window.
    """
    num_words = num_words[:, None]
    positions = tf.range(tf.shape(offsets, out_type=tf.int64)[1])[None, :]  # [1, Wmax + 1]
    # The window starting at each word ends at the last word that fits, one word at least.
    fits = tf.searchsorted(offsets, offsets + max_pieces, side="right", out_type=tf.int64)
    end_of = tf.minimum(num_words, tf.maximum(positions + 1, fits - 1))  # [B, Wmax + 1]
    # The next window starts doc_stride pieces later (never past this one's end), and later still
    # while a window starting there would end where this one does (end_of never decreases).
    strided = tf.searchsorted(offsets, offsets + doc_stride, out_type=tf.int64)
    next_start = tf.minimum(end_of, tf.maximum(positions + 1, strided))
    adds_a_word = tf.searchsorted(end_of, end_of, side="right", out_type=tf.int64)
    next_of = tf.maximum(next_start, adds_a_word)  # [B, Wmax + 1]

    # One iteration per window (a handful per text), all texts at once; each text has at least one.
    # The windows grow by concatenation, not in a TensorArray: a growing TensorArray writes with an
    # op attribute (TensorListSetItem's resize_if_index_out_of_bounds) that TF 2.12's runtime, the
    # one TF Serving 2.19 and earlier build in, refuses.
    def body(start, done, starts, ends, valid):
        end = tf.gather(end_of, start, batch_dims=1)
        starts = tf.concat([starts, start[:, None]], axis=1)
        ends = tf.concat([ends, end[:, None]], axis=1)
        valid = tf.concat([valid, ~done[:, None]], axis=1)
        now_done = done | (end >= num_words[:, 0])
        start = tf.where(now_done, start, tf.gather(next_of, start, batch_dims=1))
        return start, now_done, starts, ends, valid

    batch = tf.shape(offsets)[:1]
    none = tf.zeros(tf.concat([batch, [0]], axis=0), tf.int64)  # [B, 0]
    windows = tf.TensorShape([None, None])
    _, _, starts, ends, valid = tf.while_loop(
        lambda start, done, starts, ends, valid: (tf.shape(starts)[1] == 0) | ~tf.reduce_all(done),
        body,
        (tf.zeros(batch, tf.int64), tf.zeros(batch, tf.bool), none, none, tf.cast(none, tf.bool)),
        shape_invariants=(
            tf.TensorShape([None]),
            tf.TensorShape([None]),
            windows,
            windows,
            windows,
        ),
    )
    return starts, ends, valid


def _owning_windows(offsets, starts, ends, valid):
    """conll._owning_windows for a batch: int64 [B, Wmax], each word's max-context window.

    A word's score in a window is min(pieces before it, pieces after its first piece) + 0.01 * the
    window's length, in float64 as the Python code computes it; ties go to the earlier window.
    """
    words = tf.range(tf.shape(offsets, out_type=tf.int64)[1] - 1)  # [Wmax]
    start_offset = tf.gather(offsets, starts, batch_dims=1)[:, :, None]  # [B, K, 1]
    length = tf.gather(offsets, ends, batch_dims=1)[:, :, None] - start_offset  # [B, K, 1]
    left = offsets[:, None, :-1] - start_offset  # [B, K, Wmax]
    score = tf.cast(tf.minimum(left, length - left - 1), tf.float64)
    score += 0.01 * tf.cast(length, tf.float64)
    inside = (words >= starts[:, :, None]) & (words < ends[:, :, None]) & valid[:, :, None]
    score = tf.where(inside, score, -1.0)
    is_best = score == tf.reduce_max(score, axis=1, keepdims=True)
    window = tf.range(tf.shape(starts, out_type=tf.int64)[1])[None, :, None]  # [1, K, 1]
    return tf.reduce_min(tf.where(is_best, window, tf.int64.max), axis=1)


def tagging_outputs(model, labels, features):
    """Per-word labels from window features ([B, K, S] int32 each, word_ids included).

    Returns:
      {"labels": tf.string [B, W] ("" past a text's words), "probabilities": float32 [B, W, L] (0
      past a text's words), "word_count": int32 [B]}, W = the most words of a text; a word's values
      come from the position word_ids marks for it.
    """
    shape = tf.shape(features["input_ids"])  # [B, K, S]
    flat = {name: tf.reshape(features[name], [-1, shape[2]]) for name in (*ID_FEATURES, "word_ids")}
    # The model runs on the real windows only (a batch's texts may have very different lengths).
    real = tf.where(tf.reduce_any(flat["input_mask"] > 0, axis=1))[:, 0]  # [R]
    model_inputs = {name: tf.gather(flat[name], real) for name in flat if name != "word_ids"}
    logits = model(model_inputs, training=False)["logits"]  # [R, S, L]
    probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
    word_ids = tf.gather(flat["word_ids"], real)  # [R, S]
    marked = tf.where(word_ids >= 0)  # [M, 2]: (real window, position)
    text = tf.gather(real, marked[:, 0]) // tf.cast(shape[1], tf.int64)
    word = tf.cast(tf.gather_nd(word_ids, marked), tf.int64)
    word_count = tf.maximum(
        tf.reduce_max(tf.reshape(features["word_ids"], [shape[0], -1]), axis=1) + 1, 0
    )  # [B]
    max_words = tf.cast(tf.reduce_max(tf.concat([word_count, [0]], axis=0)), tf.int64)
    word_probabilities = tf.scatter_nd(
        tf.stack([text, word], axis=1),
        tf.gather_nd(probabilities, marked),
        tf.stack([tf.cast(shape[0], tf.int64), max_words, len(labels)]),
    )  # [B, W, L]
    best = tf.argmax(word_probabilities, axis=-1, output_type=tf.int32)
    is_word = tf.sequence_mask(word_count, tf.cast(max_words, tf.int32))
    label_strings = tf.where(is_word, tf.gather(tf.constant(labels, tf.string), best), "")
    return {"labels": label_strings, "probabilities": word_probabilities, "word_count": word_count}


def export_model(model, info, vocab_file, export_dir, version=None, freeze_weights=False):
    """Writes the tagger as a SavedModel serving raw text (docs/serving.md's contract).

    serving_default: text [B] (words separated by whitespace) -> "labels" tf.string [B, W] (one per
    word, "" past a text's words), "words" tf.string [B, W] (likewise), "probabilities" float32
    [B, W, L], "word_count" int32 [B]. preprocess: text -> the windows "input_ids", "input_mask",
    "segment_ids", "word_ids" int32 [B, K, S]; serve_ids: those four -> the outputs but "words".
    labels.txt lands in assets/.
    """
    labels = list(info.labels)
    module = serving_module(model, info, vocab_file)
    module.preprocessor = TaggingPreprocessor(module.preprocessor, info.settings.doc_stride)

    text_spec = [tf.TensorSpec([None], tf.string, name="text")]
    ids_specs = [
        tf.TensorSpec([None, None, None], tf.int32, name=name)
        for name in (*ID_FEATURES, "word_ids")
    ]
    # Each part is traced once and called by the signatures that need it (tracing is most of the
    # export's time).
    windows = tf.function(module.preprocessor.__call__, input_signature=text_spec)

    @tf.function(input_signature=ids_specs)
    def serve_ids(input_ids, input_mask, segment_ids, word_ids):
        features = dict(
            input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids, word_ids=word_ids
        )
        return tagging_outputs(model, labels, features)

    @tf.function(input_signature=text_spec)
    def preprocess(text):
        return windows(text)[1]

    @tf.function(input_signature=text_spec)
    def serve(text):
        words, features = windows(text)
        outputs = serve_ids(**features)
        max_words = tf.shape(outputs["labels"])[1]
        return {**outputs, "words": words.to_tensor("", shape=tf.stack([-1, max_words]))}

    signatures = {"serving_default": serve, "preprocess": preprocess, "serve_ids": serve_ids}
    assets = {LABELS_FILE: labels_text(labels)}
    return write_saved_model(
        export_dir, module, signatures, version=version, freeze=freeze_weights, assets=assets
    )
