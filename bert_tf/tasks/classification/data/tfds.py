"""Classification data from TensorFlow Datasets: GLUE configs with GLUE's labels, other datasets by feature."""

import os

import numpy as np

from bert_tf.errors import InputError
from bert_tf.tasks.classification.data.processor import DataProcessor, InputExample

STANDARD_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
MNLI_MATCHED = {"train": "train", "dev": "validation_matched", "test": "test_matched"}
MNLI_MISMATCHED = {"train": "train", "dev": "validation_mismatched", "test": "test_mismatched"}
EVAL_ONLY = {"train": None, "dev": "validation", "test": "test"}

# tfds glue config -> (GLUE task, text features, splits)
TFDS_GLUE = {
    "cola": ("cola", ("sentence",), STANDARD_SPLITS),
    "sst2": ("sst-2", ("sentence",), STANDARD_SPLITS),
    "mrpc": ("mrpc", ("sentence1", "sentence2"), STANDARD_SPLITS),
    "qqp": ("qqp", ("question1", "question2"), STANDARD_SPLITS),
    "stsb": ("sts-b", ("sentence1", "sentence2"), STANDARD_SPLITS),
    "mnli": ("mnli", ("premise", "hypothesis"), MNLI_MATCHED),
    "mnli_matched": ("mnli", ("premise", "hypothesis"), EVAL_ONLY),
    "mnli_mismatched": ("mnli-mm", ("premise", "hypothesis"), EVAL_ONLY),
    "qnli": ("qnli", ("question", "sentence"), STANDARD_SPLITS),
    "rte": ("rte", ("sentence1", "sentence2"), STANDARD_SPLITS),
    "wnli": ("wnli", ("sentence1", "sentence2"), STANDARD_SPLITS),
    "ax": ("ax", ("premise", "hypothesis"), {"train": None, "dev": None, "test": "test"}),
}


class TfdsProcessor(DataProcessor):
    """Reads a dataset of TensorFlow Datasets, prepared in `tfds_data_dir` (`data_dir` is unused).

    For a GLUE config the labels are the GLUE files' (ClassLabel names where they are GLUE's, as for
    MNLI; the class index as a string where GLUE writes 0 / 1, as for CoLA), so a model trained on either
    source reads the other. Other datasets keep their ClassLabel names in their id order. Test sets have
    no labels (TFDS writes -1).
    """

    def __init__(
        self,
        tfds_name,
        tfds_data_dir=None,
        *,
        task_name="tfds",
        text_a_feature,
        text_b_feature=None,
        label_feature="label",
        glue_labels=None,
        splits=None,
    ):
        """
        Args:
          tfds_name: "name" or "name/config" ("glue/mrpc").
          tfds_data_dir: where it is prepared (TFDS's default, ~/tensorflow_datasets, when None).
          task_name: the GLUE task it holds ("mrpc"), or "tfds".
          text_a_feature, text_b_feature, label_feature: feature names.
          glue_labels: the GLUE task's labels, for a GLUE config.
          splits: {"train" / "dev" / "test": TFDS split name or None}.
        """
        import tensorflow_datasets as tfds  # only here: it is slow to import

        try:
            self._builder = tfds.builder(tfds_name, data_dir=tfds_data_dir)
        except ValueError as error:  # DatasetNotFoundError, an unknown config
            reason = str(error).splitlines()[0]
            raise InputError(f"--tfds_name={tfds_name}: {reason}") from None
        self.tfds_name = tfds_name
        self.task_name = task_name
        self.text_features = (text_a_feature, text_b_feature)
        self.label_feature = label_feature
        self.is_pair = text_b_feature is not None
        self.splits = splits or STANDARD_SPLITS
        features = self._builder.info.features
        for feature in (text_a_feature, text_b_feature, label_feature):
            if feature is not None and feature not in features:
                raise InputError(
                    f"--tfds_name={tfds_name} has no feature {feature!r}; it has {list(features)}"
                )
        self._class_names = getattr(features[label_feature], "names", None)
        self.is_regression = self._class_names is None
        if self.is_regression and not np.issubdtype(features[label_feature].np_dtype, np.floating):
            raise InputError(
                f"--tfds_name={tfds_name}: feature {label_feature!r} is neither a ClassLabel nor a "
                "float score"
            )
        self._labels = [] if self.is_regression else list(glue_labels or self._class_names)
        self._label_names = self._class_names  # names as they are (MNLI, QNLI, RTE, non-GLUE)
        if not self.is_regression and not set(self._class_names) <= set(self._labels):
            self._label_names = [str(index) for index in range(len(self._class_names))]

    def get_labels(self):
        return list(self._labels)

    def _split(self, split):
        name = self.splits[split]
        if name is None:
            available = [s for s, n in self.splits.items() if n]
            raise InputError(f"--tfds_name={self.tfds_name} has no {split} set (only {available})")
        return name

    def _source(self, data_dir, split):
        split_info = self._builder.info.splits.get(self._split(split))  # None until prepared
        return [os.fspath(path) for path in split_info.filepaths] if split_info else []

    def _load(self, split):
        try:
            return self._builder.as_dataset(split=split, shuffle_files=False)
        except ValueError as error:  # a split the dataset lacks
            reason = str(error).splitlines()[0]
            raise InputError(f"--tfds_name={self.tfds_name}: {reason}") from None
        except AssertionError:
            if self._builder.is_prepared():
                raise
            root = os.fspath(self._builder.data_dir_root)
            raise InputError(
                f"TFDS dataset {self.tfds_name} is not prepared in {root}: prepare it once with "
                f"`tfds build {self.tfds_name} --data_dir={root}` (or tfds.builder("
                f"{self.tfds_name!r}, data_dir={root!r}).download_and_prepare()), then pass "
                f"--tfds_data_dir={root}"
            ) from None

    def _examples(self, data_dir, split):
        tfds_split = self._split(split)
        examples = []
        for index, row in enumerate(self._load(tfds_split).as_numpy_iterator()):
            source = f"{self.tfds_name}:{tfds_split}[{index}]"
            text_a, text_b = (
                None if feature is None else row[feature].decode("utf-8")
                for feature in self.text_features
            )
            label = None if split == "test" else self._label(row[self.label_feature], source)
            name = row["idx"] if "idx" in row else index
            examples.append(InputExample(f"{tfds_split}-{name}", text_a, text_b, label, source))
        if not examples:
            raise InputError(f"--tfds_name={self.tfds_name}: split {tfds_split} is empty")
        return examples

    def _label(self, value, source):
        if self.is_regression:
            return str(value)  # numpy's shortest form: float32 3.8 -> "3.8"
        if value < 0:
            raise InputError(f"{source}: the example has no label ({value})")
        return self._label_names[value]
