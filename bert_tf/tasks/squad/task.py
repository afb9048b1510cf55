"""SQuAD 1.1 / 2.0 extractive question answering: the original run_squad.py's model, loss and steps.

The model is the original's: BertModel, then start and end logits = sequence_output @
output_weights^T + output_bias (a BertHead), with output_weights [2, H] and output_bias [2] named
`cls/squad/output_weights` and `cls/squad/output_bias` in Google's format (so the original's
fine-tuned checkpoints load, for prediction too). The loss is the mean of the start and end
cross-entropies. Reading, windowing and the n-best answer texts are bert_tf/tasks/squad/data.py's; the
export answers raw questions with the same steps in the graph (bert_tf/tasks/squad/serving.py).

One difference from the original in prediction: each window's n best starts and ends are taken
among its real tokens, where the original also ranks its padding positions (never valid answers),
which could push a valid start or end out of the n best. This makes the answers independent of how
much a batch is padded (length bucketing) and is what the export computes. The training loss's
softmax likewise runs over the real tokens, where the original's also spreads probability over the
padding: so an example's loss does not depend on how far its batch is cut (--cut_batches_to_longest).

B = batch, S = sequence length, H = hidden size.
"""

import json
import os
import random

import tensorflow as tf
from absl import logging

from bert_tf import squad_evaluation
from bert_tf.data.feature_cache import file_identity
from bert_tf.errors import InputError
from bert_tf.models.networks import squad_network
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.squad import data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.tasks.task_parts import Task
from bert_tf.tasks.task_settings import SquadSettings

TFDS_SPLITS = {"train": "train", "predict": "validation"}
# The original shuffles the training examples with this seed before writing them.
_TRAIN_SHUFFLE_SEED = 12345


def squad_loss(outputs, features, num_examples):
    """Summed (start + end cross-entropy) / 2 over the batch, / num_examples (the global batch).

    Each cross-entropy is a softmax over the window's real tokens (input_mask): padding positions
    get logit -10000, as in attention, so exp() makes them exactly 0.
    """
    padding = (1.0 - tf.cast(features["input_mask"], tf.float32)) * -10000.0  # [B, S]

    def cross_entropy(positions, logits):  # [B]
        logits = tf.cast(logits, tf.float32) + padding
        return tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(positions, tf.int32), logits)

    start_loss = cross_entropy(features["start_positions"], outputs["start_logits"])
    end_loss = cross_entropy(features["end_positions"], outputs["end_logits"])
    return tf.reduce_sum((start_loss + end_loss) / 2.0) / num_examples


# ---------------------------------------------------------------------------------- the task


SPEC = TaskSpec.of(squad_network.NETWORK, settings_class=SquadSettings)


class SquadTask(Task):
    """run_squad.py's task: windows of questions, the answer spans' loss, predictions and scores."""

    spec = SPEC

    metric_name = "f1"  # the official evaluation's
    # --do_eval scores the predictions of --predict_file.
    splits = {"train": "train", "eval": "predict", "predict": "predict"}

    def __init__(self, run):
        super().__init__(run)
        self._predicted = None
        self._test_scored = False  # test_results.txt written (or said to be without answers)

    # ------------------------------------------------------------------ data

    def read_split(self, split):
        """(examples, stats) of the training ("train") or prediction ("predict") data."""
        settings = self.settings
        is_training = split == "train"
        if settings.tfds_name:
            examples, stats = data.read_tfds_squad(
                settings.tfds_name, TFDS_SPLITS[split], is_training, data_dir=settings.tfds_data_dir
            )
        else:
            path = settings.train_file if is_training else settings.predict_file
            examples, stats = data.read_squad_examples(
                path, is_training, settings.version_2_with_negative
            )
        source = self._source(split)
        if not examples:
            raise InputError(f"{source} holds no usable question")
        if not settings.version_2_with_negative:
            impossible = next((e for e in examples if e.is_impossible), None)
            if impossible is not None:
                raise InputError(
                    f"{source}: question id {impossible.qas_id!r} is unanswerable (SQuAD 2.0): "
                    "pass --version_2_with_negative"
                )
        logging.info(
            "%s: %d questions (%d unanswerable), %d training answers skipped",
            source,
            stats["examples"],
            stats["impossible"],
            stats["skipped"],
        )
        return examples, stats

    def _source(self, split):
        settings = self.settings
        if settings.tfds_name:
            return f"TFDS {settings.tfds_name} split {TFDS_SPLITS[split]!r}"
        return settings.train_file if split == "train" else settings.predict_file

    def _settings(self, split):
        """What the features of `split` depend on, besides the vocab, casing and max_seq_length."""
        settings = self.settings
        if settings.tfds_name:
            inputs = {"tfds_name": settings.tfds_name, "tfds_data_dir": settings.tfds_data_dir}
        else:
            inputs = file_identity(
                settings.train_file if split == "train" else settings.predict_file
            )
        return {
            "format": "bert_tf squad features 2",
            "inputs": inputs,
            "doc_stride": settings.doc_stride,
            "max_query_length": settings.max_query_length,
            "version_2_with_negative": settings.version_2_with_negative,
            "split": split,
        }

    def _features(self, examples, is_training):
        settings = self.settings
        return data.convert_examples_to_features(
            examples,
            self.tokenizer,
            settings.max_seq_length,
            settings.doc_stride,
            settings.max_query_length,
            is_training,
        )

    def feature_settings(self, step):
        """The training features only ("train"): prediction_features makes the others."""
        if step != "train":
            raise ValueError(f"SquadTask.features makes the training features only, not {step!r}")
        return self._settings("train")

    def make_records(self, step):
        """The training windows, of the questions in the original's shuffled order.

        info["num_real_examples"] counts questions, not windows: the original's training steps are
        questions / batch * epochs.
        """
        examples, stats = self.run.data("train")
        examples = list(examples)
        random.Random(_TRAIN_SHUFFLE_SEED).shuffle(examples)
        features = self._features(examples, is_training=True)
        info = {"num_real_examples": len(examples), "skipped": stats["skipped"]}
        return (data.serialize_squad_feature(f, is_training=True) for f in features), info

    def feature_summary(self, info):
        questions = info.get("questions", info["num_real_examples"])  # training: questions
        return f"{info['num_records']} features of {questions} questions"

    def prediction_features(self):
        """(examples, features, path, info): the prediction data, its windows, their TFRecord."""
        examples, _ = self.run.data("predict")
        features = list(self._features(examples, is_training=False))
        path, info = self.run.cached_features(
            "eval",
            self._settings("predict"),
            lambda: (
                (data.serialize_squad_feature(f, is_training=False) for f in features),
                {"num_real_examples": len(features), "questions": len(examples)},
            ),
        )
        if info["num_records"] != len(features):
            raise ValueError(f"{path} holds {info['num_records']} features, not {len(features)}")
        return examples, features, path, info

    def feature_spec(self, is_training, path=None):
        spec = data.squad_feature_spec(self.settings.max_seq_length, is_training)
        if not is_training:
            # The original's SQuAD records have no is_real_example: 1 unless the padding says 0.
            spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64, default_value=1)
        return spec

    # ------------------------------------------------------------------ model and loop

    def loss(self, outputs, features, normalizers):
        return {"loss": squad_loss(outputs, features, normalizers["examples"])}

    # ------------------------------------------------------------------ the steps

    def predict_test(self):
        """Writes predictions.json, nbest_predictions.json (and null_odds.json for SQuAD 2.0).

        Returns:
          {"predictions", "nbest", "null_odds"}: the dicts written (null_odds empty for SQuAD 1.1).
        """
        if self._predicted is None:
            self._predicted = self._predict()
        examples, predictions, nbest, null_odds = self._predicted
        if self.settings.do_predict and not self._test_scored:
            self._test_scored = True
            if any(example.answer_texts or example.is_impossible for example in examples):
                results = self.official_results(examples, predictions, null_odds)
                self.run.write_test_results(results, self._source("predict"))
            else:
                self.run.no_test_labels(self._source("predict"), "answers")
        return {"predictions": predictions, "nbest": nbest, "null_odds": null_odds}

    def _predict(self):
        settings = self.settings
        examples, features, path, info = self.prediction_features()
        result = self.run.predict_features(
            path,
            info,
            settings.predict_batch_size,
            ["start_logits", "end_logits"],
            feature_keys=["unique_ids"],
        )
        if result["unique_ids"].tolist() != [feature.unique_id for feature in features]:
            raise ValueError(f"{path} does not hold the features of the prediction data in order")
        # Each window's logits over its real tokens only (see the module docstring).
        results = [
            squad_predictions.RawResult(
                unique_id=feature.unique_id,
                start_logits=result["start_logits"][index, : len(feature.tokens)],
                end_logits=result["end_logits"][index, : len(feature.tokens)],
            )
            for index, feature in enumerate(features)
        ]

        def output(name):
            return os.path.join(settings.output_dir, name) if self.run.is_chief else None

        predictions, nbest, null_odds = squad_predictions.write_predictions(
            examples,
            features,
            results,
            settings.n_best_size,
            settings.max_answer_length,
            settings.do_lower_case,
            output("predictions.json"),
            output("nbest_predictions.json"),
            output("null_odds.json"),
            settings.version_2_with_negative,
            settings.null_score_diff_threshold,
            verbose_logging=settings.verbose_logging,
        )
        return examples, predictions, nbest, null_odds

    def evaluate(self):
        """The official SQuAD metrics of the predictions (made first if need be) -> eval_results.json."""
        self.predict_test()
        examples, predictions, _, null_odds = self._predicted
        results = self.official_results(examples, predictions, null_odds)
        self.run.write_output("eval_results.json", json.dumps(results, indent=2) + "\n")
        for name, value in results.items():
            logging.info("  %s = %s", name, value)
        self.run.note_collapse(list(predictions.values()), "answer")
        return results

    def official_results(self, examples, predictions, null_odds):
        """The official SQuAD metrics (bert_tf/squad_evaluation.py) of `predictions` against the
        gold answers of the prediction data."""
        settings = self.settings
        if settings.tfds_name:
            dataset_json = dataset_json_of(examples, settings.version_2_with_negative)
        else:
            with tf.io.gfile.GFile(settings.predict_file, "rb") as f:
                dataset_json = json.loads(f.read().decode("utf-8"))
        return squad_evaluation.evaluate(
            dataset_json,
            predictions,
            na_probs=null_odds if settings.version_2_with_negative else None,
            sources=(self._source("predict"), "predictions.json", "null_odds.json"),
        )

    def add_to_outcome(self, outcome):
        """--do_eval scores the predictions of --predict_file: it made them, so they are also
        reported under "predict"."""
        if self._predicted is not None:
            outcome["predict"] = self.predict_test()


def dataset_json_of(examples, version_2_with_negative):
    """A SQuAD json dict of prediction examples (their gold answer texts), for the evaluation."""
    articles = {}
    for example in examples:
        qa = {
            "id": example.qas_id,
            "question": example.question_text,
            "answers": [{"text": text} for text in example.answer_texts],
        }
        if version_2_with_negative:
            qa["is_impossible"] = example.is_impossible
        article = articles.setdefault(example.title, {"title": example.title, "paragraphs": []})
        article["paragraphs"].append({"context": example.context_text, "qas": [qa]})
    return {"version": "2.0" if version_2_with_negative else "1.1", "data": list(articles.values())}


class SquadRun(FineTuningRun):
    """One run_squad.py invocation: a FineTuningRun of a SquadTask."""

    def __init__(self, settings):
        super().__init__(settings, SquadTask)
