"""Distillation: a fine-tuned classifier teaches a shallower student, in Keras and in the scripts.

What run_distillation.py (tasks/distillation/) and the Keras way share: the loss (Hinton et al.,
2015: both softmaxes at temperature T, the soft cross-entropy scaled by T^2 so that its gradients
keep their size as T changes, plus the ordinary loss on the true labels, weighted; a multi-label
model softens each label's sigmoid the same way, a regression model matches the teacher's score;
texts without a label have a hard weight of 0) and the student (the teacher's config with fewer
layers and the teacher's weights: embeddings, the chosen layers, pooler and head, as DistilBERT,
Sanh et al., 2019; the layers spread evenly unless a map names them).

The Keras way:
`distil(teacher, student_layers=2)` returns the student: a `BertTextClassifier` of the teacher's
config with fewer layers, starting from the teacher's embeddings, chosen layers, pooler and head
(run_distillation.py's student), and compiled with the distillation loss. Its `fit(x=texts)`
learns the teacher's probabilities of `texts` (unlabelled transfer texts); `fit(x=texts, y=labels)`
learns them and, with `hard_label_weight`, the labels too. Everything else (`predict`, `evaluate`
on true labels, `save`, `export`) is the classifier's.

Example:
```python
teacher = BertTextClassifier.from_preset("teacher_run_dir")
student = distil(teacher, student_layers=2)
student.fit(x=unlabelled_texts, batch_size=32, epochs=3)
student.export("/models/student/1")
```

N = texts, L = labels (1 for regression).
"""

import dataclasses
import re

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import google_variable_names
from bert_tf.errors import InputError
from bert_tf.models import arguments
from bert_tf.models.text_classifier import BertTextClassifier

# ---------------------------------------------------------------------------------- the loss

KINDS = ("single_label", "multi_label", "regression")


def soft_loss(student_logits, teacher_logits, kind, temperature):
    """The per-example loss against the teacher, float32 [B].

    Args:
      student_logits, teacher_logits: float [B, L].
      kind: one of KINDS.
      temperature: T > 0; single- and multi-label divide both logits by it and scale by T^2.
    """
    student = tf.cast(student_logits, tf.float32)
    teacher = tf.cast(teacher_logits, tf.float32)
    if kind == "regression":
        return tf.square(student[:, 0] - teacher[:, 0])
    scale = temperature * temperature
    student, teacher = student / temperature, teacher / temperature
    if kind == "multi_label":
        targets = tf.sigmoid(teacher)
        per_label = tf.nn.sigmoid_cross_entropy_with_logits(targets, student)  # [B, L]
        return scale * tf.reduce_mean(per_label, axis=-1)
    targets = tf.nn.softmax(teacher, axis=-1)
    return scale * tf.nn.softmax_cross_entropy_with_logits(targets, student)


def hard_loss(student_logits, label_ids, kind):
    """The per-example loss against the true labels, float32 [B] (the classifier's own loss)."""
    student = tf.cast(student_logits, tf.float32)
    if kind == "regression":
        return tf.square(student[:, 0] - tf.cast(tf.reshape(label_ids, [-1]), tf.float32))
    if kind == "multi_label":
        labels = tf.cast(label_ids, tf.float32)
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, student), axis=-1)
    labels = tf.cast(tf.reshape(label_ids, [-1]), tf.int32)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels, student)


def distillation_loss(
    student_logits, teacher_logits, label_ids, hard_weights, num_examples, *, kind, temperature,
    hard_label_weight,
):  # fmt: skip
    """sum over the batch of (soft + hard_label_weight * hard_weight * hard) / num_examples.

    Args:
      student_logits, teacher_logits: float [B, L].
      label_ids: the batch's labels: int [B], float [B, L] of 0 and 1 (multi_label) or float [B].
      hard_weights: float [B]: 1 for a labelled text, 0 for a transfer text (its label_ids unused).
      num_examples: the global batch's examples (the loop's normalizer).
      kind, temperature: as soft_loss's.
      hard_label_weight: the weight of the labels' loss beside the teacher's.

    Returns:
      float32 scalar: this replica's part of the global batch's loss.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    per_example = soft_loss(student_logits, teacher_logits, kind, temperature)
    if hard_label_weight:
        weights = hard_label_weight * tf.cast(tf.reshape(hard_weights, [-1]), tf.float32)
        per_example += weights * hard_loss(student_logits, label_ids, kind)
    return tf.reduce_sum(per_example) / num_examples


# ------------------------------------------------------------------------------- the student

# A layer's weights under Google's names: bert/encoder/layer_<index>/...
_LAYER_NAME = re.compile(r"^bert/encoder/layer_(\d+)/")


def spread_layers(num_teacher_layers, num_student_layers):
    """The teacher layers an evenly spread student keeps: the top layer of each of
    `num_student_layers` equal groups (12 into 2: [5, 11]; 6 into 3: [1, 3, 5])."""
    return [
        (index + 1) * num_teacher_layers // num_student_layers - 1
        for index in range(num_student_layers)
    ]


def choose_layers(num_teacher_layers, student_layers=None, student_layer_map=None):
    """The teacher layer each student layer starts from, a list of 0-based indexes.

    Args:
      num_teacher_layers: the teacher's num_hidden_layers.
      student_layers: --student_layers, or None.
      student_layer_map: --student_layer_map ("0,3"), or None.

    Raises:
      InputError: one line naming the flag: a count over the teacher's layers, an index out of
        range, not increasing, or a map whose length is not --student_layers.
    """
    if student_layer_map is None:
        if not 1 <= student_layers <= num_teacher_layers:
            raise InputError(
                f"--student_layers={student_layers}: the teacher has {num_teacher_layers} layers; "
                f"give 1 to {num_teacher_layers}"
            )
        return spread_layers(num_teacher_layers, student_layers)
    try:
        layers = [int(part) for part in student_layer_map.split(",")]
    except ValueError:
        raise InputError(
            f"--student_layer_map={student_layer_map!r}: give layer indexes, e.g. 0,3"
        ) from None
    flag = f"--student_layer_map={student_layer_map}"
    for index in layers:
        if not 0 <= index < num_teacher_layers:
            raise InputError(
                f"{flag}: layer {index} is out of range: the teacher has layers 0 to "
                f"{num_teacher_layers - 1}"
            )
    if layers != sorted(set(layers)):
        raise InputError(f"{flag}: the layers must increase, each once")
    if student_layers is not None and student_layers != len(layers):
        raise InputError(f"{flag} names {len(layers)} layers, --student_layers={student_layers}")
    return layers


def student_config(teacher_config, layers):
    """The teacher's BertConfig with len(layers) layers."""
    return dataclasses.replace(teacher_config, num_hidden_layers=len(layers))


def copy_teacher_weights(teacher_model, student_model, layers):
    """Sets every weight of `student_model` to the teacher's of the same Google name, student layer
    j taking teacher layer layers[j] (both models of one task: same embeddings, pooler, head)."""
    teacher = google_variable_names(teacher_model)
    for name, variable in google_variable_names(student_model).items():
        match = _LAYER_NAME.match(name)
        if match:
            teacher_layer = layers[int(match.group(1))]
            name = f"bert/encoder/layer_{teacher_layer}/{name[match.end() :]}"
        variable.assign(teacher[name])


# ---------------------------------------------------------------------------- the Keras way


def _kind(classifier):
    if classifier.regression:
        return "regression"
    return "multi_label" if classifier.multi_label else "single_label"


@keras.saving.register_keras_serializable(package="bert_tf")
class DistillationLoss(keras.losses.Loss):
    """The loss of tasks/distillation/loss.py on Keras targets: y_true float32 [B, L + K + 1], the
    teacher's logits [L], the labels [K] (K = L for multi-label, else 1) and the hard weight [1] (0:
    an unlabelled text); y_pred the student's logits [B, L]."""

    def __init__(self, kind, num_outputs, temperature=2.0, hard_label_weight=0.0, **kwargs):
        kwargs.setdefault("name", "distillation_loss")
        super().__init__(**kwargs)
        self.kind, self.num_outputs = kind, int(num_outputs)
        self.temperature, self.hard_label_weight = float(temperature), float(hard_label_weight)

    def call(self, y_true, y_pred):
        targets = tf.cast(y_true, tf.float32)
        teacher_logits, labels = targets[:, : self.num_outputs], targets[:, self.num_outputs : -1]
        per_example = soft_loss(y_pred, teacher_logits, self.kind, self.temperature)
        if self.hard_label_weight:
            labels = labels if self.kind == "multi_label" else labels[:, 0]
            hard = hard_loss(y_pred, labels, self.kind)
            per_example += self.hard_label_weight * targets[:, -1] * hard
        return per_example

    def get_config(self):
        return {
            **super().get_config(),
            "kind": self.kind,
            "num_outputs": self.num_outputs,
            "temperature": self.temperature,
            "hard_label_weight": self.hard_label_weight,
        }


@keras.saving.register_keras_serializable(package="bert_tf")
class DistilledTextClassifier(BertTextClassifier):
    """A BertTextClassifier that learns from `teacher` (see the module docstring); saved and
    reloaded, it is a plain classifier (the teacher is not saved with it)."""

    def __init__(self, *args, teacher=None, temperature=2.0, hard_label_weight=0.0, **kwargs):
        if teacher is not None and not isinstance(teacher, BertTextClassifier):
            raise ValueError(f"teacher must be a BertTextClassifier, got {type(teacher).__name__}")
        self._teacher = _Untracked(teacher)  # not the student's weights: Keras must not track it
        self.temperature = arguments.number("temperature", temperature, 0, low_inclusive=False)
        self.hard_label_weight = arguments.number("hard_label_weight", hard_label_weight, 0)
        super().__init__(*args, **kwargs)

    @property
    def teacher(self):
        """The teacher BertTextClassifier, or None (a reloaded student)."""
        return self._teacher.value

    def default_loss(self):
        if self.teacher is None:
            return super().default_loss()
        num_outputs = 1 if self.regression else self.num_classes
        return DistillationLoss(_kind(self), num_outputs, self.temperature, self.hard_label_weight)

    def default_metrics(self):
        # The targets are the teacher's (distillation_targets): evaluate() reports the metrics.
        return [] if self.teacher is not None else super().default_metrics()

    def distillation_targets(self, x, y=None, batch_size=None):
        """float32 [N, L + K + 1]: the teacher's logits of x, y's labels (zeros without) and the
        hard weight (1 with y, else 0)."""
        columns = self.check_training_texts(x)
        num_texts = len(columns[0])
        teacher_logits = np.asarray(self.teacher.predict(x, batch_size=batch_size), np.float32)
        width = self.num_classes if self.multi_label else 1
        if y is None:
            labels, hard = np.zeros([num_texts, width], np.float32), 0.0
        else:
            labels = BertTextClassifier.check_labels(self, y, num_texts).astype(np.float32)
            labels, hard = labels.reshape([num_texts, width]), 1.0
        return np.concatenate(
            [teacher_logits, labels, np.full([num_texts, 1], hard, np.float32)], axis=1
        )

    def check_labels(self, y, num_examples, argument="y"):
        if isinstance(y, _Targets):
            return y.array
        return super().check_labels(y, num_examples, argument)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None, **kwargs):
        """Keras' fit on the teacher's logits of x (and y's labels when given)."""
        if self.teacher is None:
            return super().fit(x, y, batch_size, epochs, validation_data, **kwargs)
        targets = _Targets(self.distillation_targets(x, y, batch_size))
        if validation_data is not None:
            val_x, val_y = validation_data
            validation_data = (val_x, _Targets(self.distillation_targets(val_x, val_y, batch_size)))
        return super().fit(x, targets, batch_size, epochs, validation_data, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, return_dict=False, **kwargs):
        """The classifier's loss and metrics on true labels (BertTextClassifier's)."""
        if self.teacher is None:
            return super().evaluate(x, y, batch_size, return_dict, **kwargs)
        labels = BertTextClassifier.check_labels(self, y, len(self.check_texts(x)[0]))
        logits = self.predict(x, batch_size=batch_size, verbose=0)
        results = {"loss": float(BertTextClassifier.default_loss(self)(labels, logits))}
        for metric in BertTextClassifier.default_metrics(self):
            metric.update_state(labels, logits)
            results[metric.name] = float(metric.result())
        return results if return_dict else list(results.values())

    def get_config(self):
        return {
            **super().get_config(),
            "temperature": self.temperature,
            "hard_label_weight": self.hard_label_weight,
        }


class _Untracked:
    """A value Keras does not track as part of the model that holds it."""

    def __init__(self, value):
        self.value = value


class _Targets:
    """Distillation targets on their way through BertTask.fit (check_labels passes them on)."""

    def __init__(self, array):
        self.array = array


def distil(teacher, student_layers=None, layer_map=None, temperature=2.0, hard_label_weight=0.0):
    """A student of `teacher` (a BertTextClassifier): its config with fewer layers, its weights.

    Args:
      teacher: a fine-tuned BertTextClassifier (single texts or pairs; not windowed).
      student_layers: the student's layers, spread evenly over the teacher's (12 into 2: the
        teacher's layers 5 and 11).
      layer_map: or the teacher layers (0-based) the student's start from, e.g. [0, 3].
      temperature: of both softmaxes (Hinton et al., 2015); the soft loss is scaled by its square.
      hard_label_weight: weight of the labels' loss when fit is given labels.

    Returns:
      A DistilledTextClassifier, compiled with the paper's recipe and the distillation loss.

    Raises:
      ValueError: one line naming the argument (more layers than the teacher's, an index out of
        range, a windowed teacher).
    """
    if not isinstance(teacher, BertTextClassifier):
        raise ValueError(f"teacher must be a BertTextClassifier, got {type(teacher).__name__}")
    if teacher.doc_stride is not None:
        raise ValueError("teacher: distil a teacher that reads texts whole (no doc_stride)")
    if student_layers is None and layer_map is None:
        raise ValueError("give student_layers or layer_map")
    student_layers = arguments.integer("student_layers", student_layers, 1, optional=True)
    if layer_map is not None:
        if not isinstance(layer_map, list | tuple) or not layer_map:
            raise ValueError(f"layer_map must be a list of layer indexes, got {layer_map!r}")
        layer_map = [arguments.integer(f"layer_map[{i}]", j, 0) for i, j in enumerate(layer_map)]
    temperature = arguments.number("temperature", temperature, 0, low_inclusive=False)
    hard_label_weight = arguments.number("hard_label_weight", hard_label_weight, 0)
    num_teacher_layers = teacher.task_model.config.num_hidden_layers
    mapped = None if layer_map is None else ",".join(str(i) for i in layer_map)
    try:
        layers = choose_layers(num_teacher_layers, student_layers, mapped)
    except ValueError as error:  # named as run_distillation.py's flags: name the arguments
        message = str(error).replace("--student_layer_map", "layer_map")
        raise ValueError(message.replace("--student_layers", "student_layers")) from None
    preprocessor = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(teacher.preprocessor)
    )
    student = DistilledTextClassifier(
        preprocessor,
        student_config(teacher.task_model.config, layers),
        num_classes=None if teacher.regression else teacher.num_classes,
        multi_label=teacher.multi_label,
        regression=teacher.regression,
        labels=teacher.labels,
        text_pairs=teacher.text_pairs,
        teacher=teacher,
        temperature=temperature,
        hard_label_weight=hard_label_weight,
    )
    copy_teacher_weights(teacher.task_model, student.task_model, layers)
    return student
