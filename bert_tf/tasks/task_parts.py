"""Task: the parts of a fine-tuning task, each declared with its signature, given to one run.

tasks/finetuning.py's FineTuningRun does the work every task shares (the features cache, the
Trainer, the steps, task.json, the export) and calls its task's parts for what is the task's own:
its data, its features, its loss and its steps. A task is a Task subclass (ClassifierTask,
TaggerTask, ...) that fills them; the run makes it with itself as its context
(`FineTuningRun(settings, ClassifierTask)`). docs/adding_a_task.md is the checklist of a new task.
"""

import abc

import numpy as np
import tensorflow as tf

from bert_tf.data.feature_cache import make_feature_dataset
from bert_tf.distribute import resolve_strategy_name
from bert_tf.export import ID_FEATURES


def dummy_batch(feature_spec, feature):
    """One example of `feature` ({name: list}) as [1, ...] tensors of the spec's dtypes (int32 for int64)."""
    return {
        name: tf.constant([feature[name]], tf.float32 if spec.dtype == tf.float32 else tf.int32)
        for name, spec in feature_spec.items()
    }


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


class Task(abc.ABC):
    """The parts of a fine-tuning task: what finetuning.FineTuningRun calls and a task fills.

    A task (a Task subclass) defines every abstract method below (a class that misses one fails
    when it is made, naming them) and overrides the others where the default does not fit. In the
    order a run calls them:
      check_own_settings: the task's own checks of its settings, with the run's shared ones.
      setup: what the task works out before any work (labels, ...); the run's settings, settled.
      check_checkpoint: the task's checks of the run its model comes from.
      read_split, check_split: the data of a split, read and checked (errors name file and line).
      prepare_init_checkpoint: writes the checkpoint --init_checkpoint names, when the task makes it.
      feature_settings, make_records, feature_summary: the step's features file (cached).
      feature_spec, padding_feature: the records' tf.io spec and one fake example (from the spec).
      features, dataset, dummy_batch: the features file, its batches and the fake batch that
        builds the model; a task whose features are of another kind (the feature-based tagger's
        cached encoder layers) overrides the three.
      loss, normalizers: the training loss of a batch (the Trainer's).
      evaluate, predict_test: the --do_eval and --do_predict steps.
      recorded_changes: recorded settings the task changed after setup (task.json's).
      add_to_outcome: what else the run's outcome reports.
    And these attributes: `spec` (its TaskSpec), `labels`, `metric_name`, `splits`,
    `sequence_features`, `padding_values`. The task's part of task.json is its settings class's
    recorded fields (bert_tf.settings.setting(recorded=True)): no part writes it.

    What a task reads of its run is `self.run`, the FineTuningRun that made it, through what
    that class declares: `settings`, `bert_config`, `tokenizer`, `is_chief`; `data`,
    `step_data`, `cached_features`, `feature_info`, `features`, `dataset`, `predict_features`,
    `trainer`, `resumes`, `checkpoint_task_info`, `earlier_labels`, `build_model`, `task_info`,
    `evaluation_done`, `note_collapse`, `write_output`, `write_test_results`, `no_test_labels`.
    """

    # The task's TaskSpec: its name, model and export.
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

    def __init__(self, run):
        """Keeps `run`, the FineTuningRun the task is a part of; reads nothing of it yet."""
        self.run = run

    @property
    def settings(self):
        """The run's settings (checked; after setup, as it settled them)."""
        return self.run.settings

    @property
    def tokenizer(self):
        """The run's FullTokenizer (--vocab_file, --do_lower_case)."""
        return self.run.tokenizer

    def check_own_settings(self, bert_config):  # noqa: B027 (optional: nothing by default)
        """The task's own checks of its settings with the encoder's BertConfig, after the shared
        ones (Run.check_settings), when the run is made; may keep what it works out.

        Raises:
          InputError: naming the flag.
        """

    def setup(self, settings):
        """What the task works out before any work, once the shared checks passed (its labels,
        what it reads of the checkpoint's run, ...), kept on the task; returns `settings` with the
        values the task settles (windows, pooling, thresholds, ...), which the run then holds.
        By default the settings unchanged."""
        return settings

    def check_checkpoint(self):  # noqa: B027 (optional: nothing by default)
        """The task's checks of the run its model comes from (`checkpoint_task_info()`), before
        the data is read.

        Raises:
          InputError: naming the flag and the setting the checkpoint's run disagrees on.
        """

    @abc.abstractmethod
    def read_split(self, split):
        """The data of `split` (one of `splits`' values), read and checked.

        Returns:
          Whatever the task's other parts read (examples, (path, sentences), ...), read once.

        Raises:
          InputError: naming the file and line of bad data, or a split without examples.
        """

    def check_split(self, step, data):  # noqa: B027 (optional: nothing to check by default)
        """What else `step` needs of its data, read by step_data (labels, ...); nothing by default.

        Raises:
          InputError: naming the file and line.
        """

    def prepare_init_checkpoint(self):  # noqa: B027 (optional: nothing by default)
        """Writes the checkpoint --init_checkpoint names when the task makes it (a distillation
        student's first weights), after the data checks and before --init_checkpoint is checked."""

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

    def features(self, step):
        """Writes (or reuses) the step's features file; returns (path, info).

        info holds "num_real_examples" and "num_records" (see feature_cache.cached_records). By
        default the records of make_records, cached (FineTuningRun.cached_features).
        """
        return self.run.cached_features(
            step, self.feature_settings(step), lambda: self.make_records(step)
        )

    def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
        """The features file at `path` as batches (make_feature_dataset with the run's seed).

        Training batches are the original's random ones, cut to their longest input unless
        --cut_batches_to_longest=false, or sorted by length (--length_bucketing). Evaluation and
        prediction sort by length and cut (the padding is masked: the same outputs, put back in file
        order), and pad their last batch with fake examples. On a TPU (one shape) only
        --length_bucketing cuts.
        """
        settings = self.settings
        strategy = resolve_strategy_name(settings.distribution_strategy, settings.use_tpu)
        return make_feature_dataset(
            path,
            self.feature_spec(is_training, path),
            batch_size,
            is_training,
            input_context=input_context,
            seed=settings.seed,
            length_bucketing=settings.length_bucketing if is_training else strategy != "tpu",
            cut_to_longest=settings.cut_batches_to_longest and strategy != "tpu",
            sequence_features=self.sequence_features,
            num_records=num_records,
            padding_features=None if is_training else self.padding_feature(is_training, path),
        )

    def dummy_batch(self):
        """One fake training example, [1, ...] tensors: what builds the model's weights."""
        return dummy_batch(self.feature_spec(True), self.padding_feature(True))

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

    def recorded_changes(self):
        """{name: value} of recorded settings the task changed after setup (the multi-label
        thresholds tuned on dev), which task.json records in place of the settings'; {} by default."""
        return {}

    def add_to_outcome(self, outcome):  # noqa: B027 (optional: nothing to add by default)
        """After the steps: what else the run reports in its outcome ({"train", "eval",
        "predict", "export"}: their results), added to `outcome` in place; nothing by default."""
