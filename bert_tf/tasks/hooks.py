"""TaskHooks: the contract of a fine-tuning task, every hook declared with its signature.

tasks/finetuning.py's FineTuningRun does the work every task shares (the features cache, the
Trainer, the steps, task.json, the export) and calls these hooks for what is the task's own: its
data, its features, its loss and its steps. A task's run subclasses FineTuningRun and fills them;
docs/adding_a_task.md is the checklist of a new task.
"""

import abc

import numpy as np
import tensorflow as tf

from bert_tf.export import ID_FEATURES


def padding_of(feature_spec, **values):
    """One fake example of `feature_spec` ({name: tf.io.FixedLenFeature}): zeros of each feature's
    shape and dtype (so is_real_example 0), with `values` ({name: number}) in place of some.

    Returns:
      {name: number or nested list}, what `serialize_values` and `dummy_batch` take.
    """
    unknown = sorted(set(values) - set(feature_spec))
    if unknown:
        raise ValueError(f"padding values {unknown} are not in the feature spec")
    return {
        name: np.full(spec.shape, values.get(name, 0), spec.dtype.as_numpy_dtype).tolist()
        for name, spec in feature_spec.items()
    }


class TaskHooks(abc.ABC):
    """The hooks of a fine-tuning task's run: what finetuning.FineTuningRun calls and a task fills.

    A task's run (a FineTuningRun subclass) defines every abstract method below (a class that misses
    one fails when it is instantiated, naming them) and overrides the others where the default
    does not fit. In the order a run calls them:
      read_split, check_split: the data of a split, read and checked (errors name file and line).
      feature_settings, make_records, feature_summary: the step's features file (cached).
      feature_spec, padding_feature: the records' tf.io spec and one fake example (from the spec).
      loss, normalizers: the training loss of a batch (the Trainer's).
      evaluate, predict_test: the --do_eval and --do_predict steps.
      add_to_outcome: what else the run's outcome reports.
    And these attributes: `spec` (its TaskSpec, assigned by the task module), `labels`,
    `metric_name`, `splits`, `sequence_features`, `padding_values`. The task's part of task.json is
    its config's recorded settings (bert_tf.settings.setting(recorded=True)): no hook writes it.
    """

    # The task's TaskSpec: its name, model and export. The task module assigns it after SPEC.
    spec = None
    # The label strings in id order (labels.txt), or None for a task without labels.
    labels = None
    # Features whose last axis is the sequence: length bucketing cuts them to a batch's longest input.
    sequence_features = ID_FEATURES
    # The key of evaluate()'s results that ranks runs (a sweep's best/, --eval_every_steps' best).
    metric_name = "eval_accuracy"
    # The data each step reads: the split names of the task's files.
    splits = {"train": "train", "eval": "dev", "predict": "test"}
    # Values of the fake example other than 0 (padding_feature), {feature name: number}.
    padding_values = {}

    def __new__(cls, *args, **kwargs):
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise TypeError(
                f"{cls.__name__} does not fill the FineTuningRun hooks {', '.join(missing)} "
                "(docs/adding_a_task.md)"
            )
        if cls.spec is None:
            raise TypeError(f"{cls.__name__}.spec is not set: its task module assigns its TaskSpec")
        return super().__new__(cls)

    @abc.abstractmethod
    def read_split(self, split):
        """The data of `split` (one of `splits`' values), read and checked.

        Returns:
          Whatever the task's other hooks read (examples, (path, sentences), ...), read once.

        Raises:
          InputError: naming the file and line of bad data, or a split without examples.
        """

    def check_split(self, step, data):  # noqa: B027 (optional: nothing to check by default)
        """What else `step` needs of its data, read by step_data (labels, ...); nothing by default.

        Raises:
          InputError: naming the file and line.
        """

    @abc.abstractmethod
    def feature_settings(self, step):
        """What the features of `step` ("train", "eval", "predict") depend on, besides the vocab,
        casing and max_seq_length: a JSON-able dict (format, input files, ...); the cache key."""

    @abc.abstractmethod
    def make_records(self, step):
        """The features of `step`, made: (serialized tf.train.Example records, an iterable; info,
        a JSON-able dict with "num_real_examples", the examples that count for training steps)."""

    def feature_summary(self, info):
        """What the log says of a features file, from its info."""
        return f"{info['num_records']} records"

    @abc.abstractmethod
    def feature_spec(self, is_training, path=None):
        """{name: tf.io.FixedLenFeature} of the records: of the features file at `path`, or (None)
        of one example to build the model with. The last axis of `sequence_features` is the
        sequence."""

    def padding_feature(self, is_training, path=None):
        """One fake example ({name: list}): fills the last evaluation and prediction batch, or
        builds the model's weights. Zeros of feature_spec (is_real_example 0), `padding_values`."""
        return padding_of(self.feature_spec(is_training, path), **self.padding_values)

    @abc.abstractmethod
    def loss(self, outputs, features, normalizers):
        """The training loss of a batch.

        Args:
          outputs: the model's outputs ({name: tensor [B, ...]}).
          features: the batch's features, as feature_spec says.
          normalizers: `normalizers(features)`, summed over the replicas.

        Returns:
          {"loss": float32 scalar}: this replica's part of the global batch's loss.
        """

    def normalizers(self, features):
        """The loss's denominators: the examples of the batch (summed over replicas by the loop)."""
        return {"examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    @abc.abstractmethod
    def evaluate(self):
        """--do_eval: the dev metrics, written (evaluation_done) and returned as {name: value},
        with `metric_name` among them."""

    @abc.abstractmethod
    def predict_test(self):
        """--do_predict: the predictions of the test data, written to --output_dir and returned."""

    def add_to_outcome(self, outcome):  # noqa: B027 (optional: nothing to add by default)
        """After the steps: what else the run reports in its outcome ({"train", "eval",
        "predict", "export"}: their results), added to `outcome` in place; nothing by default."""
