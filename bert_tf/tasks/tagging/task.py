"""Token tagging (named entities, CoNLL-2003): one label per word from the word's first wordpiece.

The model is BertModel, dropout on the sequence output, then logits = sequence_output @ output_weights^T +
output_bias at every position (a BertHead), with output_weights [L, H] and output_bias [L] under the
Google-format names `cls/tagging/output_weights` and `cls/tagging/output_bias`. Only the first piece of each word
carries a label; the loss and the predictions ignore the other pieces (bert_tf/tasks/tagging/conll.py makes the
features, windows included). eval_results.txt has entity-level precision, recall and F1 as conlleval
counts them, per-type F1 and token accuracy.

B = batch, S = sequence length, H = hidden size, L = number of labels, K = windows of a text,
W = words of a text.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_io, metrics
from bert_tf.data.feature_cache import file_identity
from bert_tf.errors import InputError
from bert_tf.models.networks import tagger_network
from bert_tf.models.networks.task_info import LABELS_FILE
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.tagging import conll, entity_metrics
from bert_tf.tasks.task_parts import Task
from bert_tf.tasks.task_settings import TaggerSettings

PREDICTIONS_FILE = "test_predictions.txt"
# Labels conlleval reads as chunks: O, or a B/I/E/S prefix, a dash and a type. Other label sets (POS
# tags) get token accuracy only.
_CHUNK_PREFIXES = ("B-", "I-", "E-", "S-")


def tagging_loss(outputs, features, num_words):
    """Cross-entropy summed over the labelled pieces (label_mask) / num_words, the global count."""
    logits = tf.cast(outputs["logits"], tf.float32)  # [B, S, L]
    labels = tf.cast(features["label_ids"], tf.int32)  # [B, S]
    mask = tf.cast(features["label_mask"], tf.float32)  # [B, S]
    per_piece = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)  # [B, S]
    # A batch whose windows own no word (possible in the middle of a long sentence) has loss 0.
    return tf.reduce_sum(per_piece * mask) / tf.maximum(num_words, 1.0)


# ---------------------------------------------------------------------------------- the task


SPEC = TaskSpec.of(tagger_network.NETWORK, settings_class=TaggerSettings)


class TaggerTask(Task):
    """run_ner.py's task: features, loss, evaluation and prediction of a label per word."""

    spec = SPEC

    metric_name = "eval_f1"  # entity F1 (token accuracy for labels that are not chunks)
    # A fake window: no word, no sentence.
    padding_values = {"word_ids": -1, "sentence_index": -1}

    def setup(self, settings):
        """The labels (the training file's, else an earlier run's); the settings unchanged."""
        self.labels = self._labels()
        spec = conll.tagging_feature_spec(settings.max_seq_length)
        # label_ids, label_mask and word_ids are [S] too: cut with the ids.
        self.sequence_features = [name for name, s in spec.items() if len(s.shape)]
        return settings

    # ------------------------------------------------------------------ data

    def read_split(self, split):
        """(path, sentences) of a split's CoNLL file ("train", "dev", "test")."""
        path = file_io.require_split_file(self.settings.data_dir, conll.CONLL_FILE_NAMES, split)
        sentences = conll.read_conll(path, self.settings.label_column)
        if split != "test" and sentences[0].labels is None:
            raise InputError(f"{path}: the {split} file has no label column")
        return path, sentences

    def _labels(self):
        """The training file's labels (saved as labels.txt), else those of an earlier run."""
        if file_io.split_files(self.settings.data_dir, conll.CONLL_FILE_NAMES)["train"]:
            return conll.labels_from_sentences(self.run.data("train")[1])
        labels = self.run.earlier_labels()
        if labels is None:
            raise InputError(
                f"{self.settings.data_dir} has no training file to take the labels from, and "
                f"there is no {os.path.join(self.settings.output_dir, LABELS_FILE)} (an earlier "
                "run's) nor an --init_checkpoint run's task.json"
            )
        return labels

    def check_split(self, step, data):
        """The dev labels, and the test file's when it has them, must be among the training labels."""
        if step in ("eval", "predict"):
            conll.check_labels(data[1], self.labels, data[0])

    def test_is_labelled(self):
        """Whether the test file has a label column (then --do_predict scores it)."""
        return all(sentence.labels is not None for sentence in self.run.step_data("predict")[1])

    def feature_settings(self, step):
        settings = self.settings
        return {
            "format": "bert_tf tagging features 2",
            "input": file_identity(self.run.step_data(step)[0]),
            "label_column": settings.label_column,
            "doc_stride": settings.doc_stride,
            "labels": self.labels,
        }

    def make_records(self, step):
        input_path, sentences = self.run.step_data(step)
        if step == "predict" and not self.test_is_labelled():
            sentences = [dataclasses.replace(s, labels=None) for s in sentences]
        else:
            conll.check_labels(sentences, self.labels, input_path)
        settings = self.settings
        features = conll.convert_sentences_to_features(
            sentences, self.labels, settings.max_seq_length, self.tokenizer, settings.doc_stride
        )
        serialized = [conll.serialize_tagging_feature(feature) for feature in features]
        return serialized, {"num_real_examples": len(features), "sentences": len(sentences)}

    def feature_summary(self, info):
        return f"{info['num_records']} windows of {info['sentences']} sentences"

    def feature_spec(self, is_training, path=None):
        return conll.tagging_feature_spec(self.settings.max_seq_length)

    # ------------------------------------------------------------------ model and loop

    def loss(self, outputs, features, normalizers):
        return {"loss": tagging_loss(outputs, features, normalizers["words"])}

    def normalizers(self, features):
        return {"words": tf.reduce_sum(tf.cast(features["label_mask"], tf.float32))}

    def predict_words(self, split, batch_size):
        """Predicted labels of every word of a split's sentences, and the loss over the labelled ones.

        Returns:
          (labels, loss): one list of label strings per sentence; the mean cross-entropy of the gold
          labels (None for a test file without labels).
        """
        path, info = self.features(split)
        result = self.run.predict_features(
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
            self.run.step_data(split)[1],
            {"sentence_index": result["sentence_index"], "word_ids": word_ids},
            logits.argmax(axis=-1),
            self.labels,
        )
        loss = None
        if split == "eval" or self.test_is_labelled():
            log_probs = metrics.log_softmax(logits[label_mask])  # [words, L]
            gold = result["label_ids"][label_mask]
            loss = float(-np.mean(log_probs[np.arange(len(gold)), gold]))
        return predicted, loss

    # ------------------------------------------------------------------ the steps

    def evaluate(self):
        predicted, loss = self.predict_words("eval", self.settings.eval_batch_size)
        gold = [sentence.labels for sentence in self.run.step_data("eval")[1]]
        results = evaluation_results(gold, predicted, self.labels)
        results.update(eval_loss=loss, loss=loss)
        return self.run.evaluation_done(results, [tag for tags in predicted for tag in tags], "tag")

    def predict_test(self):
        predicted, loss = self.predict_words("predict", self.settings.predict_batch_size)
        test_path, sentences = self.run.step_data("predict")
        if not self.test_is_labelled():
            self.run.no_test_labels(test_path)
        else:
            gold = [sentence.labels for sentence in sentences]
            results = evaluation_results(gold, predicted, self.labels)
            results.update(eval_loss=loss, loss=loss, global_step=self.run.trainer().global_step)
            self.run.write_test_results(results, test_path)
        if self.run.is_chief:
            conll.write_conll_predictions(
                test_path,
                sentences,
                predicted,
                os.path.join(self.settings.output_dir, PREDICTIONS_FILE),
            )
        return predicted


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
    scores = entity_metrics.conll_entity_metrics(gold, predicted)
    results = {f"eval_{name}": scores[name] for name in ("precision", "recall", "f1", "accuracy")}
    for entity_type, type_scores in scores["per_type"].items():
        results[f"eval_f1_{entity_type}"] = type_scores["f1"]
    return results


class TaggerRun(FineTuningRun):
    """One run_ner.py invocation: a FineTuningRun of a TaggerTask."""

    def __init__(self, settings):
        super().__init__(settings, TaggerTask)
