"""`BertTask`: what every public model shares. Raw strings become batches of ids in tf.data (the
preprocessor mapped over batches, each padded to its longest row), `compile()` defaults to the
paper's recipe, and `export` writes the task's SavedModel directly at a path.

The paper's recipe (google-research/bert run_classifier.py): the original's AdamW (bert_tf/optimization.py:
no bias correction, weight decay 0.01, global-norm clipping at 1.0), a linear warmup over the first 10%
of the steps, then linear decay to 0 at the last step. `fit` knows the number of steps (its data,
batch size and epochs) and compiles the schedule of that length: each `fit` runs the whole schedule,
from a fresh optimizer. Before any `fit`, the learning rate is the peak one.
"""

import math
import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from bert_tf import adapters, file_io
from bert_tf.models import arguments
from bert_tf.models.preprocessor import as_text_batch
from bert_tf.optimization import AdamWeightDecay, WarmupLinearDecay, create_optimizer

WARMUP_PROPORTION = 0.1
DEFAULT_BATCH_SIZE = 32
# The default compile's peak learning rate once LoRA adapters are on (backbone.enable_lora): only
# the adapters and the head train, which takes a larger rate than full fine-tuning (the LoRA paper
# used 4e-4 to 5e-4 on RoBERTa-base). Chosen among 5e-4, 1e-3 and 2e-3 on MiniLM with
# bench/bench_lora.py (its figures are in bench/results/lora.md).
LORA_LEARNING_RATE = 1e-3
QUANTIZATION_MODES = ("int8",)


class BertTask(keras.Model):
    """A task model of raw strings: `preprocessor` (a BertPreprocessor layer) + `task_model` (the
    ids-level model of bert_tf/tasks that the scripts train).

    Subclasses give `default_learning_rate`, `default_loss()`, `default_metrics()`, `call()`,
    `check_labels()` and `write_export()`.

    `backbone` is the encoder (a BertModel): `model.backbone.enable_lora(rank=8)` trains LoRA
    adapters and the head only; `quantize("int8")` stores the encoder's dense kernels in int8.
    Both survive `save` / `keras.models.load_model` (the config records them), and `export` merges
    the adapters into the kernels.
    """

    default_learning_rate = 5e-5
    # Whether the model reads text pairs: None = either (fixed by the first fit), True, False.
    text_pairs = None

    def __init__(self, preprocessor, task_model, lora=None, quantization=None, **kwargs):
        """`lora` ({"rank", "target_names"}) and `quantization` ("int8") are get_config's record of
        enable_lora and quantize, redone here (quantize first) so that a saved model loads back."""
        super().__init__(**kwargs)
        self.preprocessor = preprocessor
        self.task_model = task_model
        self.task_model.build()
        self.built = True
        self.quantization = None
        if quantization is not None:
            self.quantize(quantization)
        if lora is not None:
            self.backbone.enable_lora(lora["rank"], lora["target_names"])
        self.compile()

    @classmethod
    def from_config(cls, config):
        """The model of a saved config (keras.saving.load_model's); one ValueError saying the
        config was refused when it is not one bert_tf's save writes (arguments.from_saved_config)."""
        return arguments.from_saved_config(cls, config, cls)

    @property
    def backbone(self):
        """The encoder, a bert_tf.modeling.BertModel (the task model itself for the embedder)."""
        return getattr(self.task_model, "bert", self.task_model)

    def get_config(self):
        lora = None
        if self.backbone.lora_rank is not None:
            lora = {
                "rank": self.backbone.lora_rank,
                "target_names": self.backbone.lora_target_names,
            }
        return {**super().get_config(), "lora": lora, "quantization": self.quantization}

    # ------------------------------------------------------------------ compile

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        metrics="auto",
        learning_rate=None,
        warmup_proportion=WARMUP_PROPORTION,
        **kwargs,
    ):
        """Keras' compile; "auto" is the paper's recipe (see the module docstring).

        Args:
          optimizer: "auto" (the original's AdamW with warmup and linear decay over the steps of each
            `fit`) or any Keras optimizer.
          loss, metrics: "auto" (the task's) or Keras'.
          learning_rate: the peak learning rate of "auto"; default the class's
            `default_learning_rate`, or LORA_LEARNING_RATE when fit finds LoRA adapters on.
          warmup_proportion: the steps of "auto"'s linear warmup, a fraction of fit's steps.
          **kwargs: Keras' compile arguments (jit_compile defaults to False: batches differ in
            length).
        """
        kwargs.setdefault("jit_compile", False)
        self._recipe = None
        if optimizer == "auto":
            rate = None
            if learning_rate is not None:
                rate = arguments.number("learning_rate", learning_rate, 0, low_inclusive=False)
            warmup = arguments.number(
                "warmup_proportion", warmup_proportion, 0, 1, high_inclusive=False
            )
            self._recipe = {"learning_rate": rate, "warmup_proportion": warmup}
            optimizer = AdamWeightDecay(WarmupLinearDecay(self._recipe_rate(), None, 0))
        elif learning_rate is not None:
            raise ValueError("learning_rate: set it on the optimizer, or use optimizer='auto'")
        if metrics == "auto":
            kwargs.setdefault("weighted_metrics", self.default_weighted_metrics())
        compile_arguments = {
            "loss": self.default_loss() if loss == "auto" else loss,
            "metrics": self.default_metrics() if metrics == "auto" else metrics,
            **kwargs,
        }
        # Kept out of Keras' state tracking (compile tracks the metrics itself): after quantize,
        # Keras locks the model's tracker, and a tracked new metric would be refused.
        object.__setattr__(self, "_compile_arguments", compile_arguments)
        super().compile(optimizer=optimizer, **self._compile_arguments)

    def get_compile_config(self):
        if self._recipe is not None:
            return {"recipe": dict(self._recipe), "optimizer_built": self.optimizer.built}
        return super().get_compile_config()

    def compile_from_config(self, config):
        if "recipe" in config:
            self.compile(**config["recipe"])
            if config.get("optimizer_built"):
                # Built now, it takes the state the file holds (a later fit starts anew).
                self.optimizer.build(self.trainable_variables)
        else:
            super().compile_from_config(config)

    def _recipe_rate(self):
        """The recipe's peak learning rate: the one given, else the default of the model as it is."""
        if self._recipe["learning_rate"] is not None:
            return self._recipe["learning_rate"]
        if self.backbone.lora_rank is not None:
            return LORA_LEARNING_RATE
        return self.default_learning_rate

    def _compile_schedule(self, num_train_steps):
        """The recipe's optimizer for a fit of `num_train_steps` steps."""
        warmup = int(num_train_steps * self._recipe["warmup_proportion"])
        with self.distribute_strategy.scope():
            optimizer = create_optimizer(self._recipe_rate(), num_train_steps, warmup)
            keras.Model.compile(self, optimizer=optimizer, **self._compile_arguments)

    # ------------------------------------------------------------------ adapters and int8

    def quantize(self, mode=None, **kwargs):
        """Stores the kernels of every keras.layers.Dense (the encoder's projections, the pooler, a
        head's transform) in int8 with one float32 scale per output column (Keras' quantize);
        embeddings, LayerNorms, biases and the task's head stay float32. Before or after fit.

        Raises:
          ValueError: one line, for a mode other than "int8" or a model already quantized.
        """
        if mode not in QUANTIZATION_MODES:
            raise ValueError(
                f"quantize: mode {mode!r} is not supported; use one of {QUANTIZATION_MODES}"
            )
        if self.quantization is not None:
            raise ValueError(f"quantize: this model is already quantized ({self.quantization})")

        def is_dense(layer):
            return isinstance(layer, keras.layers.Dense)

        super().quantize(mode, filters=is_dense, **kwargs)
        self.quantization = mode

    def head_variables(self):
        """The task model's variables outside the encoder (its head), in a fixed order."""
        return adapters.head_variables(self.task_model, self.backbone)

    def save_lora_weights(self, path):
        """Writes the encoder's LoRA adapters and the task's head to `path` (.npz, atomically):
        with the base's folder, all a trained LoRA model needs (see load_lora_weights)."""
        adapters.write_lora_file(path, self.backbone, head=self.head_variables())

    def load_lora_weights(self, path):
        """Loads adapters (and the head, if the file has one) into this model: a from_preset of the
        base the adapters were trained from, of the same task and head shape.

        Raises:
          ValueError: one line naming the mismatch (base, rank, targets or head), before any
            weight changes.
        """
        adapters.load_task_lora_file(path, self.backbone, self.head_variables())

    def _merged_copy(self):
        """A model of the same config and weights without adapters (adapters.merge_weights)."""
        config = self.get_config()
        config["lora"] = None
        merged = self.__class__.from_config(config)
        adapters.merge_weights(self.task_model, merged.task_model)
        return merged

    # ------------------------------------------------------------------ data

    def check_texts(self, x, argument="x"):
        """(texts,) or (texts_a, texts_b), numpy object arrays [N], checked against text_pairs."""
        is_pair = isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], str | bytes)
        columns = (
            (as_text_batch(x[0], f"{argument}[0]"), as_text_batch(x[1], f"{argument}[1]"))
            if is_pair
            else (as_text_batch(x, argument),)
        )
        if is_pair and len(columns[0]) != len(columns[1]):
            raise ValueError(
                f"{argument}: texts_a has {len(columns[0])} texts but texts_b {len(columns[1])}"
            )
        if self.text_pairs is False and is_pair:
            raise ValueError(
                f"{argument}: text pairs (texts_a, texts_b), but this model reads single texts"
            )
        if self.text_pairs and not is_pair:
            raise ValueError(f"{argument}: single texts, but this model reads text pairs (a, b)")
        if not len(columns[0]):
            raise ValueError(f"{argument}: no texts")
        return columns

    def check_training_texts(self, x, argument="x"):
        """The text columns fit and evaluate read: check_texts' (a task of other rows overrides)."""
        return self.check_texts(x, argument)

    def dataset(self, columns, labels=None, batch_size=DEFAULT_BATCH_SIZE, shuffle=False):
        """A tf.data.Dataset of (features, labels) batches (features alone without labels)."""
        arguments.integer("batch_size", batch_size, 1)
        texts = tuple(tf.constant(list(column), tf.string) for column in columns)
        pack = self.preprocessor.features
        if labels is None:
            dataset = tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)
            # A tuple element reaches map's function as one argument per text column.
            dataset = dataset.map(lambda *batch: pack(*batch), tf.data.AUTOTUNE)
        else:
            dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
            if shuffle:
                dataset = dataset.shuffle(len(columns[0]), reshuffle_each_iteration=True)
            dataset = dataset.batch(batch_size)
            dataset = dataset.map(lambda batch, y: (pack(*batch), y), tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def training_dataset(self, columns, labels, batch_size, shuffle):
        """fit's batches: dataset()'s, shuffled on every pass (a task masking on the fly overrides)."""
        return self.dataset(columns, labels, batch_size, shuffle=shuffle)

    def settle_text_pairs(self, columns):
        """A model of either kind reads the kind of its first fit from then on."""
        if self.text_pairs is None:
            self.text_pairs = len(columns) == 2

    def default_weighted_metrics(self):
        """The metrics weighted by the batches' sample weights (None: the task gives none)."""
        return None

    def _batch_size(self, batch_size):
        return DEFAULT_BATCH_SIZE if batch_size is None else batch_size

    # ------------------------------------------------------------------ Keras' methods

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None, **kwargs):
        """Keras' fit on raw strings: x a list of texts or a pair (texts_a, texts_b), y labels.

        validation_data: (x, y) of the same kinds. With the default compile, the learning-rate
        schedule spans this fit's steps: ceil(len(x) / batch_size) * epochs (or steps_per_epoch
        * epochs).
        """
        batch_size = self._batch_size(batch_size)
        columns = self.check_training_texts(x)
        labels = self.check_labels(y, len(columns[0]))
        validation = None
        if validation_data is not None:
            if not isinstance(validation_data, tuple) or len(validation_data) != 2:
                raise ValueError("validation_data: give (x, y)")
            val_columns = self.check_training_texts(validation_data[0], "validation_data[0]")
            val_labels = self.check_labels(
                validation_data[1], len(val_columns[0]), "validation_data[1]"
            )
            validation = self.dataset(val_columns, val_labels, batch_size)
        shuffle = kwargs.pop("shuffle", True)
        steps_per_epoch = kwargs.get("steps_per_epoch") or math.ceil(len(columns[0]) / batch_size)
        self.settle_text_pairs(columns)
        if self.backbone.lora_rank is not None:
            adapters.revive_adapters(self.backbone)
        self.train_function = None  # enable_lora or quantize may have changed what trains
        if self._recipe is not None:
            self._compile_schedule(steps_per_epoch * epochs)
        dataset = self.training_dataset(columns, labels, batch_size, shuffle)
        return super().fit(
            dataset, epochs=epochs, validation_data=validation, shuffle=False, **kwargs
        )

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Keras' evaluate on raw strings (the task's metrics)."""
        columns = self.check_training_texts(x)
        labels = self.check_labels(y, len(columns[0]))
        dataset = self.dataset(columns, labels, self._batch_size(batch_size))
        return super().evaluate(dataset, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Keras' predict on raw strings: the task model's outputs (see the class)."""
        columns = self.check_texts(x)
        return super().predict(self.dataset(columns, None, self._batch_size(batch_size)), **kwargs)

    # ------------------------------------------------------------------ export

    def export(self, path):
        """Writes the SavedModel export_saved_model.py writes for this task, directly at `path`
        (e.g. TF Serving's /models/name/1), atomically; returns `path`. LoRA adapters are merged
        into the kernels (a plain model); an int8 model's kernels stay int8.

        It loads with only tensorflow and tensorflow_text imported:
        `tf.saved_model.load(path).signatures["serving_default"](text_a=...)`.

        Raises:
          ValueError: if `path` exists or is not a local path.
        """
        path = os.fspath(path)
        if file_io.is_url(path):
            raise ValueError(f"export path {path}: export to a local folder, then copy it")
        if os.path.exists(path):
            raise ValueError(f"export path {path} already exists")
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
        exported = self if self.backbone.lora_rank is None else self._merged_copy()
        try:
            written = exported.write_export(staging)
            os.rename(written, path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return path

    def write_export(self, export_dir):
        """Writes the task's export as export_dir/1 (bert_tf.export); returns its path."""
        raise NotImplementedError


def integer_labels(y, num_examples, num_classes, argument="y"):
    """y as int32 [N], each in [0, num_classes); ValueError naming `argument` otherwise."""
    labels = labels_array(y, num_examples, argument)
    if labels.ndim != 1:
        raise ValueError(f"{argument}: one label per text, got an array of shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.issubdtype(labels.dtype, np.floating) or np.any(labels != np.round(labels)):
            raise ValueError(f"{argument}: labels must be integers, got {labels.dtype}")
    bad = np.flatnonzero((labels < 0) | (labels >= num_classes))
    if bad.size:
        raise ValueError(
            f"{argument}[{bad[0]}] = {labels[bad[0]]} is out of range for num_classes="
            f"{num_classes} (labels are 0..{num_classes - 1})"
        )
    return labels.astype(np.int32)


def labels_array(y, num_examples, argument):
    if y is None:
        raise ValueError(f"{argument}: labels are required")
    labels = np.asarray(y)
    if labels.dtype == object or labels.dtype.kind in "USb":
        flat = np.asarray(y, dtype=object).reshape(-1)
        first = next((item for item in flat if not isinstance(item, int | float)), None)
        raise ValueError(
            f"{argument}: labels must be numbers here, got {type(first).__name__} values such as "
            f"{first!r}"
        )
    if len(labels) != num_examples:
        raise ValueError(f"{argument}: {len(labels)} labels for {num_examples} texts")
    return labels


def doc_stride_argument(doc_stride):
    """A `doc_stride` argument as an int, or None when not given.

    Raises:
      ValueError: one line, for anything but a positive integer (a bool included).
    """
    return arguments.integer("doc_stride", doc_stride, 1, optional=True)
