"""Token tagging (named entities, CoNLL-2003): one label per word from the word's first wordpiece.

The model is BertModel, dropout on the sequence output, then logits = sequence_output @ output_weights^T +
output_bias at every position, with output_weights [L, H] and output_bias [L] under the Google-format
names `cls/tagging/output_weights` and `cls/tagging/output_bias`. Only the first piece of each word
carries a label; the loss and the predictions ignore the other pieces (bert_tf/data/conll.py makes the
features, windows included). eval_results.txt has entity-level precision, recall and F1 as conlleval
counts them, per-type F1 and token accuracy.

B = batch, S = sequence length, H = hidden size, L = number of labels, K = windows of a text,
W = words of a text.
"""

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import io, metrics
from bert_tf.checkpoints import encoder_variable_names
from bert_tf.data import conll
from bert_tf.data.feature_cache import cached_records, file_identity
from bert_tf.errors import InputError
from bert_tf.export import write_saved_model
from bert_tf.modeling import BertModel, _SavesBertConfig
from bert_tf.tasks import finetuning
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import Task, write_eval_results

MODEL_TYPE = "tagger"
PREDICTIONS_FILE = "test_predictions.txt"
_WEIGHTS_NAME = "cls/tagging/output_weights"
_BIAS_NAME = "cls/tagging/output_bias"
# Labels conlleval reads as chunks: O, or a B/I/E/S prefix, a dash and a type. Other label sets (POS
# tags) get token accuracy only.
_CHUNK_PREFIXES = ("B-", "I-", "E-", "S-")


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTagger(_SavesBertConfig, keras.Model):
    """BertModel + dropout + a dense layer over the sequence output: one label distribution per piece.

    Inputs: BertModel's ("input_ids", "input_mask", "segment_ids", int32 [B, S]); other keys are ignored.
    Outputs: {"logits": float32 [B, S, L]}.

    Example:
    ```python
    model = BertTagger(BertConfig.from_preset("bert_tiny"), num_labels=9)
    model({"input_ids": tf.constant([[101, 5616, 102]])})["logits"]  # [1, 3, 9]
    ```
    """

    def __init__(self, config, num_labels, **kwargs):
        kwargs.setdefault("name", "bert_tagger")
        super().__init__(**kwargs)
        self.bert = BertModel(config, dtype=self.dtype_policy)
        # Tagging reads the sequence output only: the pooler stays as loaded (no gradient to train it).
        self.bert.pooler.trainable = False
        self.config = self.bert.config
        self.num_labels = num_labels
        self.dropout = keras.layers.Dropout(
            self.config.hidden_dropout_prob, dtype=self.dtype_policy
        )

    def build(self, input_shape=None):
        self.bert.build()
        self.output_weights = self.add_weight(
            shape=(self.num_labels, self.config.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            name="output_weights",
        )
        self.output_bias = self.add_weight(
            shape=(self.num_labels,), initializer="zeros", name="output_bias"
        )
        self.built = True

    def call(self, inputs, training=None):
        sequence_output = self.bert(inputs, training=training)["sequence_output"]  # [B, S, H]
        sequence_output = self.dropout(sequence_output, training=training)
        weights = tf.cast(self.output_weights, self.compute_dtype)
        logits = tf.einsum("bsh,lh->bsl", sequence_output, weights)  # [B, S, L]
        return {"logits": tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)}

    def dummy_inputs(self):
        return self.bert.dummy_inputs()

    def google_variables(self):
        """{Google checkpoint name: variable}: bert/* plus cls/tagging/output_weights and _bias."""
        if not self.built:
            self(self.dummy_inputs(), training=False)
        return {
            **encoder_variable_names(self.bert),
            _WEIGHTS_NAME: self.output_weights,
            _BIAS_NAME: self.output_bias,
        }

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels}


def tagging_loss(outputs, features, num_words):
    """Cross-entropy summed over the labelled pieces (label_mask) / num_words, the global count."""
    logits = tf.cast(outputs["logits"], tf.float32)  # [B, S, L]
    labels = tf.cast(features["label_ids"], tf.int32)  # [B, S]
    mask = tf.cast(features["label_mask"], tf.float32)  # [B, S]
    per_piece = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)  # [B, S]
    # A batch whose windows own no word (possible in the middle of a long sentence) has loss 0.
    return tf.reduce_sum(per_piece * mask) / tf.maximum(num_words, 1.0)


@dataclasses.dataclass
class TaggerConfig(finetuning.FineTuningConfig):
    """run_ner.py's settings: the shared fine-tuning ones plus the data and the window stride."""

    data_dir: str | None = None
    label_column: int = -1
    doc_stride: int | None = None


class TaggerRun(finetuning.FineTuningRun):
    """One run_ner.py invocation: features, training, evaluation, prediction and export."""

    model_type = MODEL_TYPE

    def __init__(self, config):
        super().__init__(config)
        if not config.data_dir:
            raise InputError("--data_dir is required")
        if config.max_seq_length < 3:
            raise InputError(f"--max_seq_length={config.max_seq_length}: must be at least 3")
        if config.doc_stride is not None and config.doc_stride <= 0:
            raise InputError(f"--doc_stride must be positive, got {config.doc_stride}")
        self._sentences = {}
        self.labels = self._labels()
        self.tokenizer = FullTokenizer(config.vocab_file, do_lower_case=config.do_lower_case)
        self.feature_spec = conll.tagging_feature_spec(config.max_seq_length)

    # ------------------------------------------------------------------ data

    def sentences(self, split):
        """(path, sentences) of a split's CoNLL file ("train", "dev", "test"), read once."""
        if split not in self._sentences:
            path = io.require_split_file(self.config.data_dir, conll.CONLL_FILE_NAMES, split)
            sentences = conll.read_conll(path, self.config.label_column)
            if split != "test" and sentences[0].labels is None:
                raise InputError(f"{path}: the {split} file has no label column")
            self._sentences[split] = path, sentences
        return self._sentences[split]

    def _labels(self):
        """The training file's labels (saved as labels.txt), else labels.txt of an earlier run."""
        if io.split_files(self.config.data_dir, conll.CONLL_FILE_NAMES)["train"]:
            labels = conll.labels_from_sentences(self.sentences("train")[1])
            if self.is_chief:
                finetuning.write_labels(self.config.output_dir, labels)
            return labels
        labels = finetuning.read_labels(self.config.output_dir)
        if labels is None:
            raise InputError(
                f"{self.config.data_dir} has no training file to take the labels from, and "
                f"{os.path.join(self.config.output_dir, finetuning.LABELS_FILE)} (an earlier "
                "run's) does not exist"
            )
        return labels

    def features(self, split):
        """Writes (or reuses) output_dir/{train,eval,predict}.tf_record; returns (path, info)."""
        source_split = {"train": "train", "eval": "dev", "predict": "test"}[split]
        input_path, sentences = self.sentences(source_split)
        if split == "predict":
            # Gold labels of the test file are not needed to predict; unseen ones are no error.
            sentences = [dataclasses.replace(s, labels=None) for s in sentences]
        else:
            conll.check_labels(sentences, self.labels, input_path)
        config = self.config
        path = os.path.join(config.output_dir, f"{split}.tf_record")
        settings = {
            "format": "bert_tf tagging features 1",
            "input": file_identity(input_path),
            "label_column": config.label_column,
            "vocab": file_identity(config.vocab_file),
            "do_lower_case": config.do_lower_case,
            "max_seq_length": config.max_seq_length,
            "doc_stride": config.doc_stride,
            "labels": self.labels,
        }

        def make_examples():
            features = conll.convert_sentences_to_features(
                sentences, self.labels, config.max_seq_length, self.tokenizer, config.doc_stride
            )
            serialized = [conll.serialize_tagging_feature(feature) for feature in features]
            return serialized, {"num_real_examples": len(features), "sentences": len(sentences)}

        info = cached_records(path, settings, make_examples)
        logging.info("%s: %d windows of %d sentences", path, info["num_records"], len(sentences))
        return path, info

    def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
        return self.feature_dataset(
            path,
            self.feature_spec,
            batch_size,
            is_training,
            conll.tagging_padding_feature(self.config.max_seq_length),
            input_context=input_context,
            num_records=num_records,
            # label_ids, label_mask and word_ids are [S] too: cut with the ids.
            sequence_features=[name for name, s in self.feature_spec.items() if len(s.shape)],
        )

    # ------------------------------------------------------------------ model and loop

    def task(self, train_path=None):
        def dataset_fn(input_context, batch_size, is_training):
            if train_path is None:
                raise ValueError("no training features")
            return self.dataset(train_path, batch_size, is_training, input_context)

        return Task(
            build_model=lambda: BertTagger(self.bert_config, len(self.labels)),
            loss_fn=lambda outputs, features, normalizers: {
                "loss": tagging_loss(outputs, features, normalizers["words"])
            },
            normalizer_fn=lambda features: {
                "words": tf.reduce_sum(tf.cast(features["label_mask"], tf.float32))
            },
            metric_fn=lambda outputs, features: {},
            dataset_fn=dataset_fn,
            dummy_batch_fn=lambda: finetuning.dummy_batch(
                self.feature_spec, conll.tagging_padding_feature(self.config.max_seq_length)
            ),
        )

    def predict_words(self, split, batch_size):
        """Predicted labels of every word of a split's sentences, and the loss over the labelled ones.

        Returns:
          (labels, loss): one list of label strings per sentence; the mean cross-entropy of the gold
          labels (None for the test split).
        """
        path, info = self.features(split)
        result = self.predict_features(
            path,
            info,
            batch_size,
            output_keys=["logits"],
            feature_keys=["label_ids", "label_mask", "word_ids", "sentence_index"],
        )
        logits, label_mask = result["logits"], result["label_mask"] > 0  # [N, S, L], [N, S]
        # Sequence features of shorter batches were zero-padded: word id 0 there is no word.
        word_ids = np.where(label_mask, result["word_ids"], -1)
        predicted = conll.merge_window_predictions(
            self.sentences({"eval": "dev", "predict": "test"}[split])[1],
            {"sentence_index": result["sentence_index"], "word_ids": word_ids},
            logits.argmax(axis=-1),
            self.labels,
        )
        loss = None
        if split == "eval":
            log_probs = metrics.log_softmax(logits[label_mask])  # [words, L]
            gold = result["label_ids"][label_mask]
            loss = float(-np.mean(log_probs[np.arange(len(gold)), gold]))
        return predicted, loss

    # ------------------------------------------------------------------ the steps

    def evaluate(self):
        predicted, loss = self.predict_words("eval", self.config.eval_batch_size)
        gold = [sentence.labels for sentence in self.sentences("dev")[1]]
        results = evaluation_results(gold, predicted, self.labels)
        results.update(eval_loss=loss, loss=loss, global_step=self.trainer().global_step)
        if self.is_chief:
            write_eval_results(os.path.join(self.config.output_dir, "eval_results.txt"), results)
        return results

    def predict_test(self):
        predicted, _ = self.predict_words("predict", self.config.predict_batch_size)
        if self.is_chief:
            test_path, sentences = self.sentences("test")
            conll.write_conll_predictions(
                test_path,
                sentences,
                predicted,
                os.path.join(self.config.output_dir, PREDICTIONS_FILE),
            )
        return predicted

    def task_info(self):
        return {
            "labels": self.labels,
            "do_lower_case": self.config.do_lower_case,
            "max_seq_length": self.config.max_seq_length,
            "doc_stride": self.config.doc_stride,
        }


def run(config):
    """Runs run_ner.py's steps as `config` says; returns {"train", "eval", "predict", "export"}."""
    return TaggerRun(config).run()


def evaluation_results(gold, predicted, labels):
    """eval_results.txt's scores of word-level labels (one list per sentence).

    Returns:
      {"eval_accuracy"} (token accuracy) and, when every label is O or a chunk label (B-, I-, E-, S-
      and a type), conlleval's "eval_precision", "eval_recall", "eval_f1" and "eval_f1_<TYPE>" per type.
    """
    if not all(label == "O" or label.startswith(_CHUNK_PREFIXES) for label in labels):
        logging.info("Labels are not chunk labels (B-X, I-X, ...): token accuracy only")
        flat_gold = [label for sentence in gold for label in sentence]
        flat_predicted = [label for sentence in predicted for label in sentence]
        return {"eval_accuracy": metrics.accuracy(flat_predicted, flat_gold)}
    scores = metrics.conll_entity_metrics(gold, predicted)
    results = {f"eval_{name}": scores[name] for name in ("precision", "recall", "f1", "accuracy")}
    for entity_type, type_scores in scores["per_type"].items():
        results[f"eval_f1_{entity_type}"] = type_scores["f1"]
    return results


# ---------------------------------------------------------------------------------- the export


def head_info_from_google_checkpoint(shapes):
    """The head settings of a Google-format tagger checkpoint (label names unknown: "0", "1", ...),
    or None if `shapes` ({name: shape}) has no cls/tagging head."""
    if _WEIGHTS_NAME not in shapes:
        return None
    return {"labels": [str(i) for i in range(shapes[_WEIGHTS_NAME][0])]}


def build_export_model(bert_config, info):
    """The model export_saved_model.py loads a tagger checkpoint into."""
    return BertTagger(bert_config, len(info["labels"]))


def _python_whitespace_pattern():
    """An RE2 class of the characters str.split() splits on (str.isspace), for the graph."""
    spaces = [code for code in range(0x110000) if chr(code).isspace()]
    return "[" + "".join(f"\\x{{{code:x}}}" for code in spaces) + "]"


class TaggingPreprocessor(tf.Module):
    """Whitespace-separated text -> the windows run_ner.py's features hold, inside the graph.

    The words are `text.split()`; each is tokenized on its own by BertPreprocessor (FullTokenizer's
    ids; [UNK] for a word without pieces; at most S - 2 pieces), and a text longer than S - 2 pieces
    becomes the overlapping windows of bert_tf.data.conll, each word predicted in the window where it
    has the most context. So the export labels every word of any length of text as run_ner.py does.

    Example:
    ```python
    windows = TaggingPreprocessor(BertPreprocessor("vocab.txt", max_seq_length=128))
    words, features = windows(tf.constant(["Emma visited Hartfield ."]))
    features["word_ids"]  # int32 [1, 1, 7]: [[[-1, 0, 1, 2, -1, 3, -1]]] (hart ##field)
    ```
    """

    def __init__(self, preprocessor, doc_stride=None, name=None):
        """preprocessor: a BertPreprocessor (its max_seq_length is S); doc_stride as in run_ner.py."""
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
    def body(k, start, done, arrays):
        end = tf.gather(end_of, start, batch_dims=1)
        arrays = [a.write(k, v) for a, v in zip(arrays, (start, end, ~done), strict=True)]
        now_done = done | (end >= num_words[:, 0])
        start = tf.where(now_done, start, tf.gather(next_of, start, batch_dims=1))
        return k + 1, start, now_done, arrays

    batch = tf.shape(offsets)[:1]
    arrays = [
        tf.TensorArray(dtype, 0, dynamic_size=True) for dtype in (tf.int64, tf.int64, tf.bool)
    ]
    _, _, _, arrays = tf.while_loop(
        lambda k, start, done, arrays: (k == 0) | ~tf.reduce_all(done),
        body,
        (0, tf.zeros(batch, tf.int64), tf.zeros(batch, tf.bool), arrays),
    )
    return tuple(tf.transpose(a.stack()) for a in arrays)  # [K, B] -> [B, K]


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
    flat = {
        name: tf.reshape(features[name], [-1, shape[2]])
        for name in ("input_ids", "input_mask", "segment_ids", "word_ids")
    }
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


def export_model(model, info, vocab_file, do_lower_case, max_seq_length, export_dir, version=None):
    """Writes the tagger as a SavedModel serving raw text (DESIGN.md's serving contract).

    serving_default: text [B] (words separated by whitespace) -> "labels" tf.string [B, W] (one per
    word, "" past a text's words), "words" tf.string [B, W] (likewise), "probabilities" float32
    [B, W, L], "word_count" int32 [B]. preprocess: text -> the windows "input_ids", "input_mask",
    "segment_ids", "word_ids" int32 [B, K, S]; serve_ids: those four -> the outputs but "words".
    labels.txt lands in assets/.
    """
    from bert_tf.preprocessing import BertPreprocessor

    labels = list(info["labels"])
    module = tf.Module()
    module.model = model
    module.preprocessor = TaggingPreprocessor(
        BertPreprocessor(vocab_file, do_lower_case, max_seq_length), info.get("doc_stride")
    )

    text_spec = [tf.TensorSpec([None], tf.string, name="text")]
    ids_specs = [
        tf.TensorSpec([None, None, None], tf.int32, name=name)
        for name in ("input_ids", "input_mask", "segment_ids", "word_ids")
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
    assets = {finetuning.LABELS_FILE: "".join(f"{label}\n" for label in labels)}
    return write_saved_model(export_dir, module, signatures, version=version, assets=assets)
