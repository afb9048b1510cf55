"""Sentence and sentence-pair classification and regression (GLUE, XNLI, users' TSV/CSV, TFDS): the task.

The model and its export are bert_tf/models/networks/classifier_network.py's (the original
run_classifier.py's); regression (STS-B) has one output and a mean squared error loss.

B = batch, S = sequence length, H = hidden size, L = number of labels (1 for regression).
"""

import dataclasses

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_io, metrics
from bert_tf.data.feature_cache import file_identity
from bert_tf.data.records import serialize_values
from bert_tf.errors import InputError
from bert_tf.models.networks import classifier_network
from bert_tf.models.networks.text_windows import combine_windows
from bert_tf.tasks.classification import data
from bert_tf.tasks.classification.data import features as data_features
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_parts import Task
from bert_tf.tasks.task_settings import ClassifierSettings


def classification_loss(outputs, features, num_examples, is_regression, class_weights=None):
    """Summed per-example loss / num_examples: cross-entropy, or squared error for regression.

    class_weights: None, or float [L]: each example's cross-entropy is multiplied by its label's weight
    (the normalizer stays the number of examples, as Keras' class_weight does).
    """
    logits = tf.cast(outputs["logits"], tf.float32)
    if is_regression:
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.float32)
        per_example = tf.square(logits[:, 0] - labels)
    else:
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        if class_weights is not None:
            per_example *= tf.gather(tf.constant(class_weights, tf.float32), labels)
    return tf.reduce_sum(per_example) / num_examples


# ---------------------------------------------------------------------------------- the task


SPEC = TaskSpec.of(classifier_network.NETWORK, settings_class=ClassifierSettings)

# The classifier's label scheme: the parts its multi-label variant (multi_label.py) fills its own
# way, beside the Task's. ClassifierTask fills them for one label per text.
LABEL_SCHEME = (
    "feature_format",  # the features' format in the cache key
    "make_processor",  # (settings) -> the DataProcessor that reads the run's examples
    "label_value",  # (example) -> the label_ids of its features; InputError outside the label set
    "example_features",  # (example, index) -> its feature dicts: one, or one per window
    "class_weights_of_flags",  # --class_weights as the loss reads them, or None
    "record_spec",  # () -> {name: tf.io.FixedLenFeature} of a text's records
    "label_loss",  # (outputs, features, num_examples) -> the training loss of the labels
)


class ClassifierTask(Task):
    """run_classifier.py's task: features, loss, evaluation and prediction of one label per text.

    Args:
      run: the FineTuningRun the task is a part of.
      distillation: None, or what a distillation run changes in it (the training features carry a
        teacher's logits and the loss is the student's: tasks/distillation/run.py's Distillation).
    """

    spec = SPEC

    # The features' format in the cache key: a change of it makes the features again.
    feature_format = "bert_tf classifier features 1"
    # Several labels per text, a sigmoid each (tasks/classification/multi_label.py).
    multi_label = False

    def __init__(self, run, distillation=None):
        super().__init__(run)
        self.distillation = distillation

    @property
    def metric_name(self):
        """GLUE's metric of the task (MRPC, QQP: F1; CoLA: MCC; STS-B: Pearson; else accuracy)."""
        return "eval_" + metrics.official_glue_metric(self.processor.task_name, self.is_regression)

    def setup(self, settings):
        """The windows (the flags', else the checkpoint's run's), the DataProcessor, the labels and
        the class weights; the settings with the windows and the data's kind (is_pair,
        is_regression) and, for a distillation, the student's first checkpoint."""
        settings, stride_source = self._with_checkpoint_windows(settings)
        if not settings.tfds_name:
            data.check_data_dir(settings.data_dir)
        self.processor = self.make_processor(settings)
        self.windows = settings.doc_stride is not None
        if self.windows and self.processor.is_pair:
            raise InputError(
                f"{stride_source} windows single texts; task {self.processor.task_name} has text "
                "pairs"
            )
        self.is_regression = self.processor.is_regression
        self.labels = self._labels()
        self.label_map = {label: i for i, label in enumerate(self.labels)}
        self.class_weights = self.class_weights_of_flags()
        settings = dataclasses.replace(
            settings, is_pair=self.processor.is_pair, is_regression=self.is_regression
        )
        if self.distillation is not None:
            self.distillation.check_task(self)
            settings = self.distillation.with_student_init(settings, self.run.resumes())
        return settings

    def prepare_init_checkpoint(self):
        if self.distillation is not None:
            self.distillation.write_student_init(self.run)

    def class_weights_of_flags(self):
        """--class_weights as one float per label (logged), or None; read only when training."""
        value = self.settings.class_weights
        if value in (None, "", "none"):
            return None
        if self.is_regression:
            raise InputError("--class_weights is for classification; this task is regression")
        if not self.settings.do_train:
            return None
        weights = data_features.parse_class_weights(
            value, self.labels, lambda: [example.label for example in self.run.step_data("train")]
        )
        shown = ", ".join(f"{label}={w:.4g}" for label, w in zip(self.labels, weights, strict=True))
        logging.info("class weights (--class_weights=%s): %s", value, shown)
        return weights

    def make_processor(self, settings):
        """The DataProcessor that reads the run's examples (data.get_processor)."""
        return data.get_processor(settings)

    def _with_checkpoint_windows(self, settings):
        """(`settings` with its windows settled, where --doc_stride came from).

        A run that does not train, or resumes, goes on with a model: unless the flags say
        otherwise, it reads texts as that model's run did (--doc_stride and --window_combination
        of its task.json), so that its results are its training's and its export's.
        """
        info = None
        if not settings.do_train or self.run.resumes():
            info = self.run.checkpoint_task_info()
        if info is not None and (
            info.model_type != self.spec.name or info.settings.doc_stride is None
        ):
            info = None
        changes, stride_source = {}, f"--doc_stride={settings.doc_stride}"
        if settings.doc_stride is None and info is not None:
            changes["doc_stride"] = info.settings.doc_stride
            stride_source = (
                f"--doc_stride={info.settings.doc_stride} (the task.json of the checkpoint's run)"
            )
        if settings.window_combination is None:
            changes["window_combination"] = (
                info.settings.window_combination if info else "weighted_mean"
            )
        if changes and info is not None:
            logging.info("from the task.json of the checkpoint's run: %s", changes)
            if info.max_seq_length != settings.max_seq_length:
                logging.warning(
                    "the checkpoint's run read windows of --max_seq_length=%d, this run of %d: "
                    "its results differ from that run's and from its export's",
                    info.max_seq_length,
                    settings.max_seq_length,
                )
        return dataclasses.replace(settings, **changes), stride_source

    # ------------------------------------------------------------------ data

    def _labels(self):
        """The label strings: the processor's, else those of an earlier run (labels.txt)."""
        if self.is_regression:
            return []
        try:
            labels = list(self.processor.get_labels())
        except FileNotFoundError:
            labels = self.run.earlier_labels()
            if labels is None:
                raise
        if not labels:
            raise InputError("no labels: the training data holds none (or pass --labels=a,b,c)")
        return labels

    def _processor_split(self, split):
        """(its examples, its source files): the processor's readers of "train", "dev" or "test"."""
        p = self.processor
        return {
            "train": (p.get_train_examples, p.train_source),
            "dev": (p.get_dev_examples, p.dev_source),
            "test": (p.get_test_examples, p.test_source),
        }[split]

    def read_split(self, split):
        """The InputExamples of the "train", "dev" or "test" data."""
        examples = self._processor_split(split)[0](self.settings.data_dir)
        if not examples:
            raise InputError(f"the {split} data holds no example")
        return examples

    def check_split(self, step, examples):
        """The labels of the examples (a test file's too, when it has them) must be in the label set."""
        for example in examples:
            self.label_value(example)

    def test_label_ids(self):
        """The test examples' label ids (scores for regression), or None when they hold no labels."""
        examples = self.run.step_data("predict")
        if any(example.label is None for example in examples):
            return None
        return [self.label_value(example) for example in examples]

    def test_source(self):
        """Where the test examples come from, for messages: the file(s), or the TFDS split."""
        if self.settings.tfds_name:
            return f"--tfds_name={self.settings.tfds_name}'s test split"
        return ", ".join(map(str, self.processor.test_source(self.settings.data_dir)))

    def label_value(self, example):
        """The label_ids of an example's features: its label's id (its score for regression)."""
        return data_features.label_id(example, self.label_map, self.is_regression)

    def feature_settings(self, step):
        settings = self.settings
        sources = self._processor_split(self.splits[step])[1]
        key = {
            "format": self.feature_format,
            "task_name": settings.task_name,
            "tfds_name": settings.tfds_name,
            "inputs": [file_identity(p) if file_io.exists(p) else p for p in sources(settings.data_dir)],
            "labels": self.labels,
            "is_regression": self.is_regression,
            "split": step,
        }  # fmt: skip
        if self.windows:
            windows_format = self.feature_format.replace(" features ", " windows ")
            key.update(format=windows_format, doc_stride=settings.doc_stride)
        if step == "train" and self.distillation is not None:
            return self.distillation.feature_settings(key)
        return key

    def make_records(self, step):
        if step == "train" and self.distillation is not None:
            return self.distillation.make_records(self)
        examples = self.run.step_data(step)
        records = [
            self.serialize(feature)
            for index, example in enumerate(examples)
            for feature in self.example_features(example, index)
        ]
        # With windows, training steps count windows: every epoch sees every window once.
        return records, {"num_real_examples": len(records), "texts": len(examples)}

    def feature_summary(self, info):
        if self.windows:
            summary = f"{info['num_records']} windows of {info['texts']} texts"
        else:
            summary = f"{info['num_real_examples']} examples"
        transfer = info.get("transfer_texts")  # a distillation's training features
        return summary if transfer is None else f"{summary} ({transfer} transfer texts)"

    def example_features(self, example, index):
        """The feature dicts of the example at `index`: one (the original's, truncated and padded),
        or one per window with --doc_stride (each with its text_index)."""
        settings = self.settings
        if self.windows:
            return data_features.convert_example_to_window_features(
                example,
                self.label_map,
                settings.max_seq_length,
                self.tokenizer,
                settings.doc_stride,
                index,
                is_regression=self.is_regression,
            )
        feature = data_features.convert_example_to_feature(
            example,
            self.label_map,
            settings.max_seq_length,
            self.tokenizer,
            is_regression=self.is_regression,
        )
        return [feature]

    def serialize(self, feature):
        """A feature dict as TFRecord bytes, of a text's records (record_spec)."""
        return serialize_values(feature, self.record_spec())

    def record_spec(self):
        """{name: tf.io.FixedLenFeature} of a text's records: the original's, text_index with
        windows."""
        return data_features.classifier_feature_spec(
            self.settings.max_seq_length, self.is_regression, self.windows
        )

    def feature_spec(self, is_training, path=None):
        """A text's records (record_spec); a distillation's training records add the teacher's."""
        spec = self.record_spec()
        if is_training and self.distillation is not None:
            outputs = 1 if self.is_regression else len(self.labels)
            return self.distillation.feature_spec(spec, outputs)
        return spec

    def text_logits(self, path, info, batch_size, feature_keys=()):
        """{"logits" [T, L], features...}: one row per text, its windows combined when windowing."""
        if not self.windows:
            return self.run.predict_features(path, info, batch_size, ["logits"], feature_keys)
        keys = [*feature_keys, "text_index", "input_mask"]  # input_mask: weighted_mean's weights
        result = self.run.predict_features(path, info, batch_size, ["logits"], keys)
        combined = combine_windows(
            result["logits"],
            result["text_index"],
            self.settings.window_combination,
            self.is_regression,
            num_tokens=result["input_mask"].sum(axis=-1),
            multi_label=self.multi_label,
        )
        first = np.unique(result["text_index"], return_index=True)[1]  # a text's first window
        return {"logits": combined, **{name: result[name][first] for name in feature_keys}}

    # ------------------------------------------------------------------ the loss and the steps

    def loss(self, outputs, features, normalizers):
        """The labels' loss (label_loss), or a distillation's student's loss."""
        if self.distillation is not None:
            return {"loss": self.distillation.loss(outputs, features, normalizers, self.settings)}
        return {"loss": self.label_loss(outputs, features, normalizers["examples"])}

    def label_loss(self, outputs, features, num_examples):
        """Cross-entropy of one label per text (each weighed by --class_weights), or squared error."""
        return classification_loss(
            outputs, features, num_examples, self.is_regression, self.class_weights
        )

    def evaluate(self):
        path, info = self.features("eval")
        result = self.text_logits(path, info, self.settings.eval_batch_size, ["label_ids"])
        results = evaluation_results(
            result["logits"], result["label_ids"], self.processor.task_name, self.is_regression
        )
        if self.is_regression:
            return self.run.evaluation_done(results)
        predicted = [self.labels[i] for i in result["logits"].argmax(axis=-1)]
        return self.run.evaluation_done(results, predicted, "label")

    def predict_test(self):
        path, info = self.features("predict")
        logits = self.text_logits(path, info, self.settings.predict_batch_size)["logits"]
        if self.is_regression:
            rows = [f"{value:.6f}" for value in logits[:, 0]]
        else:
            rows = ["\t".join(f"{p:.6f}" for p in row) for row in metrics.softmax(logits)]
        self.run.write_output("test_results.tsv", "".join(f"{row}\n" for row in rows))
        label_ids = self.test_label_ids()
        if label_ids is None:
            self.run.no_test_labels(self.test_source())
        else:
            results = evaluation_results(
                logits, label_ids, self.processor.task_name, self.is_regression
            )
            results["global_step"] = self.run.trainer().global_step
            self.run.write_test_results(results, self.test_source())
        return logits

    def add_to_outcome(self, outcome):
        if self.distillation is not None:
            self.distillation.add_to_outcome(outcome, self.run.bert_config)


class ClassifierRun(FineTuningRun):
    """One run_classifier.py invocation: a FineTuningRun of a ClassifierTask."""

    def __init__(self, settings):
        super().__init__(settings, ClassifierTask)


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
