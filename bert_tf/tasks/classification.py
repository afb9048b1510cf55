"""Sentence and sentence-pair classification and regression (GLUE, XNLI, users' TSV/CSV, TFDS).

The model is the original run_classifier.py's: BertModel, dropout 0.1 on the pooled output, then logits
= pooled @ output_weights^T + output_bias, with output_weights [num_labels, H] and output_bias
[num_labels] under those very names in Google's format (so the original's fine-tuned checkpoints load).
Regression (STS-B) has one output and a mean squared error loss.

B = batch, S = sequence length, H = hidden size, L = number of labels (1 for regression).
"""

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import metrics
from bert_tf.checkpoints import encoder_variable_names
from bert_tf.data import classification as data
from bert_tf.data.classification import features as data_features
from bert_tf.data.feature_cache import cached_records, file_identity
from bert_tf.errors import InputError
from bert_tf.export import serving_signatures, write_saved_model
from bert_tf.modeling import BertModel, _SavesBertConfig
from bert_tf.tasks import finetuning
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import Task, write_eval_results

MODEL_TYPE = "classifier"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(_SavesBertConfig, keras.Model):
    """BertModel + dropout + a dense layer over the pooled output.

    Inputs: BertModel's ("input_ids", "input_mask", "segment_ids", int32 [B, S]); other keys are ignored.
    Outputs: {"logits": float32 [B, L]} plus, for classification, "probabilities" (softmax) [B, L].

    Example:
    ```python
    model = BertClassifier(BertConfig.from_preset("bert_tiny"), num_labels=3)
    model({"input_ids": tf.constant([[101, 7592, 102]])})["probabilities"]  # [1, 3]
    ```
    """

    def __init__(self, config, num_labels, is_regression=False, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        super().__init__(**kwargs)
        self.bert = BertModel(config, dtype=self.dtype_policy)
        self.config = self.bert.config
        self.num_labels = 1 if is_regression else num_labels
        self.is_regression = is_regression
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
        pooled_output = self.bert(inputs, training=training)["pooled_output"]  # [B, H]
        pooled_output = self.dropout(pooled_output, training=training)
        weights = tf.cast(self.output_weights, self.compute_dtype)
        logits = tf.matmul(pooled_output, weights, transpose_b=True)  # [B, L]
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        if self.is_regression:
            return {"logits": logits}
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    def dummy_inputs(self):
        return self.bert.dummy_inputs()

    def google_variables(self):
        """{Google checkpoint name: variable}: the original's names, bert/* plus output_weights/bias."""
        if not self.built:
            self(self.dummy_inputs(), training=False)
        return {
            **encoder_variable_names(self.bert),
            "output_weights": self.output_weights,
            "output_bias": self.output_bias,
        }

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "is_regression": self.is_regression,
        }


def classification_loss(outputs, features, num_examples, is_regression):
    """Summed per-example loss / num_examples: cross-entropy, or squared error for regression."""
    logits = tf.cast(outputs["logits"], tf.float32)
    if is_regression:
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.float32)
        per_example = tf.square(logits[:, 0] - labels)
    else:
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    return tf.reduce_sum(per_example) / num_examples


@dataclasses.dataclass
class ClassifierConfig(finetuning.FineTuningConfig, data.DataSource):
    """run_classifier.py's settings: the shared fine-tuning ones plus where the data comes from."""


class ClassifierRun(finetuning.FineTuningRun):
    """One run_classifier.py invocation: features, training, evaluation, prediction and export."""

    model_type = MODEL_TYPE

    def __init__(self, config):
        super().__init__(config)
        self.processor = data.get_processor(config)
        self.is_regression = self.processor.is_regression
        self.labels = self._labels()
        self.label_map = {label: i for i, label in enumerate(self.labels)}
        self.tokenizer = FullTokenizer(config.vocab_file, do_lower_case=config.do_lower_case)
        self.feature_spec = data_features.classifier_feature_spec(
            config.max_seq_length, self.is_regression
        )

    # ------------------------------------------------------------------ data

    def _labels(self):
        """The label strings: the processor's, else labels.txt of an earlier run in output_dir."""
        if self.is_regression:
            return []
        try:
            labels = list(self.processor.get_labels())
        except FileNotFoundError:
            labels = finetuning.read_labels(self.config.output_dir)
            if labels is None:
                raise
        if not labels:
            raise InputError("no labels: the training data holds none (or pass --labels=a,b,c)")
        if self.is_chief:
            finetuning.write_labels(self.config.output_dir, labels)
        return labels

    def features(self, split):
        """Writes (or reuses) output_dir/{train,eval,predict}.tf_record; returns (path, info)."""
        processor, config = self.processor, self.config
        get_examples, sources = {
            "train": (processor.get_train_examples, processor.train_source),
            "eval": (processor.get_dev_examples, processor.dev_source),
            "predict": (processor.get_test_examples, processor.test_source),
        }[split]
        path = os.path.join(config.output_dir, f"{split}.tf_record")
        settings = {
            "format": "bert_tf classifier features 1",
            "task_name": config.task_name,
            "tfds_name": config.tfds_name,
            "inputs": [
                file_identity(p) if tf.io.gfile.exists(p) else p for p in sources(config.data_dir)
            ],
            "vocab": file_identity(config.vocab_file),
            "do_lower_case": config.do_lower_case,
            "max_seq_length": config.max_seq_length,
            "labels": self.labels,
            "is_regression": self.is_regression,
            "split": split,
        }

        def make_examples():
            examples = get_examples(config.data_dir)
            if not examples:
                raise InputError(f"the {split} data {sources(config.data_dir)} holds no example")
            serialized = [
                data_features.serialize_classifier_feature(
                    data_features.convert_example_to_feature(
                        example,
                        self.label_map,
                        config.max_seq_length,
                        self.tokenizer,
                        is_regression=self.is_regression,
                    ),
                    is_regression=self.is_regression,
                )
                for example in examples
            ]
            return serialized, {"num_real_examples": len(examples)}

        info = cached_records(path, settings, make_examples)
        logging.info("%s: %d examples", path, info["num_real_examples"])
        return path, info

    def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
        return self.feature_dataset(
            path,
            self.feature_spec,
            batch_size,
            is_training,
            data_features.padding_feature(self.config.max_seq_length, self.is_regression),
            input_context=input_context,
            num_records=num_records,
        )

    # ------------------------------------------------------------------ model and loop

    def task(self, train_path=None):
        config = self.config
        is_regression = self.is_regression

        def dataset_fn(input_context, batch_size, is_training):
            if train_path is None:
                raise ValueError("no training features")
            return self.dataset(train_path, batch_size, is_training, input_context)

        return Task(
            build_model=lambda: BertClassifier(
                self.bert_config, len(self.labels), is_regression=is_regression
            ),
            loss_fn=lambda outputs, features, normalizers: {
                "loss": classification_loss(
                    outputs, features, normalizers["examples"], is_regression
                )
            },
            normalizer_fn=lambda features: {
                "examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)
            },
            metric_fn=lambda outputs, features: {},
            dataset_fn=dataset_fn,
            dummy_batch_fn=lambda: finetuning.dummy_batch(
                self.feature_spec,
                data_features.padding_feature(config.max_seq_length, is_regression),
            ),
        )

    # ------------------------------------------------------------------ the steps

    def evaluate(self):
        path, info = self.features("eval")
        result = self.predict_features(
            path, info, self.config.eval_batch_size, ["logits"], ["label_ids"]
        )
        results = evaluation_results(
            result["logits"], result["label_ids"], self.processor.task_name, self.is_regression
        )
        results["global_step"] = self.trainer().global_step
        if self.is_chief:
            write_eval_results(os.path.join(self.config.output_dir, "eval_results.txt"), results)
        return results

    def predict_test(self):
        path, info = self.features("predict")
        logits = self.predict_features(path, info, self.config.predict_batch_size, ["logits"])[
            "logits"
        ]
        if self.is_regression:
            rows = [f"{value:.6f}" for value in logits[:, 0]]
        else:
            rows = ["\t".join(f"{p:.6f}" for p in row) for row in metrics.softmax(logits)]
        if self.is_chief:
            finetuning.write_text_atomically(
                os.path.join(self.config.output_dir, "test_results.tsv"),
                "".join(f"{row}\n" for row in rows),
            )
        return logits

    def task_info(self):
        return {
            "labels": self.labels,
            "is_pair": self.processor.is_pair,
            "is_regression": self.is_regression,
            "do_lower_case": self.config.do_lower_case,
            "max_seq_length": self.config.max_seq_length,
        }


def run(config):
    """Runs run_classifier.py's steps as `config` says; returns {"train", "eval", "predict", "export"}."""
    return ClassifierRun(config).run()


def evaluation_results(logits, label_ids, task_name, is_regression):
    """eval_results.txt's values: eval_loss, eval_accuracy (not for regression) and the task's metric."""
    logits = np.asarray(logits, np.float64)
    if is_regression:
        predictions = logits[:, 0]
        labels = np.asarray(label_ids, np.float64).reshape(-1)
        results = {"eval_loss": float(np.mean((predictions - labels) ** 2))}
    else:
        labels = np.asarray(label_ids).reshape(-1).astype(np.int64)
        log_probs = metrics.log_softmax(logits)
        results = {"eval_loss": float(-np.mean(log_probs[np.arange(len(labels)), labels]))}
        predictions = logits.argmax(axis=-1)
    for name, value in metrics.glue_metrics(task_name, predictions, labels, is_regression).items():
        results[f"eval_{name}"] = value
    results["loss"] = results["eval_loss"]
    return results


# ---------------------------------------------------------------------------------- the export


def head_info_from_google_checkpoint(shapes):
    """The head settings a Google-format fine-tuned classifier checkpoint implies, or None if not one.

    The original's run_classifier.py names its head output_weights [num_labels, H] and output_bias.
    """
    if "output_weights" not in shapes:
        return None
    num_labels = shapes["output_weights"][0]
    return {"labels": [str(i) for i in range(num_labels)], "is_pair": True, "is_regression": False}


def build_export_model(bert_config, info):
    """The model export_saved_model.py loads a classifier checkpoint into."""
    return BertClassifier(
        bert_config, max(len(info.get("labels") or []), 1), is_regression=info["is_regression"]
    )


def export_model(model, info, vocab_file, do_lower_case, max_seq_length, export_dir, version=None):
    """Writes the classifier as a SavedModel serving raw text (DESIGN.md's serving contract).

    serving_default: text_a (and text_b for pair tasks) -> "probabilities" [B, L] and "label" [B]
    (the label string); for regression, "predictions" [B]. labels.txt lands in assets/.
    """
    from bert_tf.preprocessing import BertPreprocessor

    labels = list(info.get("labels") or [])
    module = tf.Module()
    module.model = model
    module.preprocessor = BertPreprocessor(vocab_file, do_lower_case, max_seq_length)
    label_strings = tf.constant(labels or [""], tf.string)

    def outputs_fn(features):
        outputs = model(features, training=False)
        if model.is_regression:
            return {"predictions": outputs["logits"][:, 0]}
        probabilities = outputs["probabilities"]
        best = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities, "label": tf.gather(label_strings, best)}

    signatures = serving_signatures(module.preprocessor, outputs_fn, pair=info["is_pair"])
    assets = {finetuning.LABELS_FILE: "".join(f"{label}\n" for label in labels)} if labels else None
    return write_saved_model(export_dir, module, signatures, version=version, assets=assets)
