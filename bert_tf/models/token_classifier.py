"""`BertTokenClassifier`: run_ner.py's tagger on raw strings: one label per word.

It composes `BertPreprocessor` with the model run_ner.py trains (bert_tf.models.networks.tagger_network.BertTagger)
and reads texts as that task's export does (bert_tf.models.networks.tagging_serving.TaggingPreprocessor): the
words are `text.split()`, each tokenized alone, a word labelled at its first piece, a text longer
than max_seq_length - 2 pieces cut into run_ner.py's overlapping windows, each word read in the
window where it has the most context. It exports with that task's export_model, the one
export_saved_model.py calls.

N = texts, W = the most words of a text, L = labels, K = windows, S = sequence length.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import arguments, presets
from bert_tf.models.networks import tagger_network, tagging_serving
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.models.preprocessor import BertPreprocessor, as_text_batch, preprocessor_argument
from bert_tf.models.task import DEFAULT_BATCH_SIZE, BertTask, doc_stride_argument

# The paper's CoNLL-2003 recipe picks among 5e-5, 3e-5 and 2e-5 (as for the classifier).
DEFAULT_LEARNING_RATE = 5e-5


@keras.saving.register_keras_serializable(package="bert_tf")
def word_cross_entropy(y_true, y_pred):
    """Cross-entropy over the words (y_true >= 0; -1 pads), summed / the batch's words, as
    run_ner.py's loss normalizes by its words."""
    labels = tf.cast(y_true, tf.int32)  # [N, W]
    is_word = tf.cast(labels >= 0, tf.float32)
    per_word = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.maximum(labels, 0), y_pred)
    return tf.reduce_sum(per_word * is_word) / tf.maximum(tf.reduce_sum(is_word), 1.0)


@keras.saving.register_keras_serializable(package="bert_tf")
class WordAccuracy(keras.metrics.Metric):
    """The share of words (y_true >= 0) whose most probable label is the right one."""

    def __init__(self, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.right = self.add_variable((), "zeros", name="right")
        self.words = self.add_variable((), "zeros", name="words")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = tf.cast(y_true, tf.int32)
        is_word = tf.cast(labels >= 0, tf.float32)
        best = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        self.right.assign_add(tf.reduce_sum(tf.cast(best == labels, tf.float32) * is_word))
        self.words.assign_add(tf.reduce_sum(is_word))

    def result(self):
        return self.right / tf.maximum(self.words, 1.0)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(BertTask):
    """Texts (or lists of words) -> per-word label scores: run_ner.py's tagger.

    x is a list of texts (the words are `text.split()`) or a list of word lists; y a list of label
    ids per word. `predict` gives the probabilities float32 [N, W, L] of export's serving_default
    (0 past a text's words); `predict_labels` its label strings per word. `export` writes run_ner.py's
    export: serving_default(text) gives "labels", "words", "probabilities" and "word_count".

    Example:
    ```python
    tagger = BertTokenClassifier.from_preset("cased_L-12_H-768_A-12", labels=["O", "B-PER", "I-PER"])
    tagger.fit(x=["Emma visited Harriet ."], y=[[1, 0, 1, 0]], epochs=3)
    tagger.predict_labels(["Harriet came"])  # [["B-PER", "O"]]
    ```
    """

    default_learning_rate = DEFAULT_LEARNING_RATE
    text_pairs = False

    def __init__(self, preprocessor, bert_config, labels, doc_stride=None, **kwargs):
        """
        Args:
          preprocessor: a BertPreprocessor (or its config).
          bert_config: a BertConfig, or a dict of bert_config.json keys.
          labels: the label strings in id order (at least 2).
          doc_stride: the windows of a long text start this many pieces apart (run_ner.py
            --doc_stride; default (max_seq_length - 2) // 2).
        """
        preprocessor = preprocessor_argument(preprocessor)
        bert_config = arguments.bert_config(bert_config)
        self.labels = _check_labels(labels)
        self.doc_stride = doc_stride_argument(doc_stride)
        arguments.at_most(
            "doc_stride",
            self.doc_stride,
            preprocessor.max_seq_length - 2,
            "max_seq_length - 2 (a window's wordpieces)",
        )
        self.windows = tagging_serving.TaggingPreprocessor(preprocessor.tokenizer, self.doc_stride)
        kwargs.setdefault("name", "bert_token_classifier")
        task_model = tagger_network.BertTagger(bert_config, len(self.labels))
        super().__init__(preprocessor, task_model, **kwargs)

    @classmethod
    def from_preset(
        cls,
        folder,
        labels=None,
        *,
        doc_stride=None,
        vocabulary=None,
        do_lower_case=None,
        max_seq_length=None,
    ):
        """The tagger of a preset folder (bert_tf.models.presets): a release's encoder with a new
        head (labels required), or a run_ner.py output_dir's whole model (its labels and
        doc_stride from task.json).

        Raises:
          ValueError: one line naming the folder or the argument, before any model is built.
        """
        if labels is not None:
            _check_labels(labels)
        doc_stride_argument(doc_stride)
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        heads = "optional"
        if preset.kind == "run":
            info, where = preset.task_info, f"the run in {preset.folder}"
            if info.model_type != tagger_network.MODEL_TYPE:
                raise ValueError(f"{where} trained a {info.model_type} model, not a tagger")
            for name, given, recorded in (
                ("labels", labels, info.labels),
                ("doc_stride", doc_stride, info.settings.doc_stride),
            ):
                if given is not None and list(np.atleast_1d(given)) != list(
                    np.atleast_1d(recorded)
                ):
                    raise ValueError(f"{name}={given}, but {where} has {name}={recorded}")
            labels, doc_stride, heads = info.labels, info.settings.doc_stride, "required"
        _check_labels(labels)
        arguments.at_most(
            "doc_stride",
            doc_stride,
            preset.max_seq_length - 2,
            "max_seq_length - 2 (a window's wordpieces)",
        )
        model = cls(BertPreprocessor.of_preset(preset), preset.bert_config, labels, doc_stride)
        presets.restore(model.task_model, preset, heads=heads)
        return model

    def call(self, inputs, training=None):
        """Windows {"input_ids", "input_mask", "segment_ids", "word_ids"}: int32 [N, K, S] ->
        per-word logits float32 [N, W, L] (0 past a text's words)."""
        shape = tf.shape(inputs["input_ids"])  # [N, K, S]
        flat = {name: tf.reshape(inputs[name], [-1, shape[2]]) for name in inputs}
        features = {name: flat[name] for name in ("input_ids", "input_mask", "segment_ids")}
        logits = self.task_model(features, training=training)["logits"]  # [N * K, S, L]
        marked = tf.where(flat["word_ids"] >= 0)  # [M, 2]: (window, position)
        text = marked[:, 0] // tf.cast(shape[1], tf.int64)
        word = tf.cast(tf.gather_nd(flat["word_ids"], marked), tf.int64)
        max_words = tf.maximum(tf.reduce_max(flat["word_ids"]) + 1, 0)
        size = tf.stack([tf.cast(shape[0], tf.int64), tf.cast(max_words, tf.int64)])
        return tf.scatter_nd(
            tf.stack([text, word], axis=1),
            tf.gather_nd(logits, marked),
            tf.concat([size, [len(self.labels)]], axis=0),
        )  # [N, W, L]

    def check_texts(self, x, argument="x"):
        """(texts,): a numpy object array [N]; word lists are joined with spaces."""
        if isinstance(x, list | tuple):
            x = [
                _joined_words(item, f"{argument}[{index}]")
                if isinstance(item, list | tuple)
                else item
                for index, item in enumerate(x)
            ]
        texts = as_text_batch(x, argument)
        if not len(texts):
            raise ValueError(f"{argument}: no texts")
        self._word_counts = [len(str(text).split()) for text in texts]
        return (texts,)

    def check_labels(self, y, num_examples, argument="y"):
        """A list of label ids per text, one per word -> a ragged int32 [N, (W)] tensor."""
        if y is None or isinstance(y, str | bytes) or len(y) != num_examples:
            count = "no" if y is None else len(y)
            raise ValueError(f"{argument}: {count} label lists for {num_examples} texts")
        rows = []
        for index, (row, count) in enumerate(zip(y, self._word_counts, strict=True)):
            row = np.asarray(row)
            if row.ndim != 1 or len(row) != count:
                raise ValueError(f"{argument}[{index}]: {len(row)} labels for {count} words")
            if count and not np.issubdtype(row.dtype, np.integer):
                raise ValueError(f"{argument}[{index}]: label ids must be integers")
            bad = np.flatnonzero((row < 0) | (row >= len(self.labels)))
            if bad.size:
                raise ValueError(
                    f"{argument}[{index}][{bad[0]}] = {row[bad[0]]} is out of range for "
                    f"{len(self.labels)} labels (0..{len(self.labels) - 1})"
                )
            rows.append(row.astype(np.int32))
        return tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)

    def dataset(self, columns, labels=None, batch_size=DEFAULT_BATCH_SIZE, shuffle=False):
        """Batches of the windows (and the word labels [N, W], -1 past a text's words)."""
        arguments.integer("batch_size", batch_size, 1)
        texts = tf.constant(columns[0].tolist(), tf.string)

        def windows(text):
            return self.windows(text)[1]

        if labels is None:
            dataset = tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)
            dataset = dataset.map(windows, tf.data.AUTOTUNE)
        else:
            dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
            if shuffle:
                dataset = dataset.shuffle(len(texts), reshuffle_each_iteration=True)
            dataset = dataset.batch(batch_size)
            dataset = dataset.map(
                lambda text, y: (windows(text), y.to_tensor(-1)), tf.data.AUTOTUNE
            )
        return dataset.prefetch(tf.data.AUTOTUNE)

    def predict(self, x, batch_size=None, verbose="auto"):
        """Per-word probabilities float32 [N, W, L], 0 past a text's words (serving_default's)."""
        del verbose  # no progress bar
        columns = self.check_texts(x)
        batches = [
            tf.nn.softmax(self(features, training=False), axis=-1).numpy()
            for features in self.dataset(columns, None, self._batch_size(batch_size))
        ]
        width = max(batch.shape[1] for batch in batches)
        padded = [np.pad(b, ((0, 0), (0, width - b.shape[1]), (0, 0))) for b in batches]
        probabilities = np.concatenate(padded, axis=0)
        is_word = np.arange(width)[None, :] < np.array(self._word_counts)[:, None]
        return probabilities * is_word[:, :, None]

    def predict_labels(self, x, batch_size=None):
        """The label string of each word of each text: a list of lists."""
        probabilities = self.predict(x, batch_size=batch_size)
        counts = self._word_counts
        return [
            [self.labels[i] for i in row[:count].argmax(axis=-1)]
            for row, count in zip(probabilities, counts, strict=True)
        ]

    def default_loss(self):
        return word_cross_entropy

    def default_metrics(self):
        return [WordAccuracy()]

    def task_info(self):
        """The TaskInfo run_ner.py records for this model (its task.json)."""
        return TaskInfo(
            model_type=tagger_network.MODEL_TYPE,
            bert_config=self.task_model.config,
            do_lower_case=self.preprocessor.do_lower_case,
            max_seq_length=self.preprocessor.max_seq_length,
            labels=list(self.labels),
            doc_stride=self.doc_stride,
        )

    def write_export(self, export_dir):
        return tagging_serving.export_model(
            self.task_model, self.task_info(), self.preprocessor.vocab_file, export_dir, version=1
        )

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
            "bert_config": self.task_model.config.to_dict(),
            "labels": list(self.labels),
            "doc_stride": self.doc_stride,
        }


def _check_labels(labels):
    return arguments.string_list("labels", labels, 2)


def _joined_words(words, argument):
    """A list of words as one text of them separated by spaces; each word must be one word."""
    words = as_text_batch(words, argument)
    for position, word in enumerate(words):
        if len(str(word).split()) != 1:
            raise ValueError(f"{argument}[{position}] = {word!r} is not one word")
    return " ".join(str(word) for word in words)
