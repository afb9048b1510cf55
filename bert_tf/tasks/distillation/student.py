"""The student: its encoder config and its first weights, from the teacher's or from another BERT.

From the teacher (DistilBERT's recipe, Sanh et al., 2019): the teacher's config with fewer layers,
and the teacher's weights: its embeddings, the chosen layers, its pooler and its head. The layers are
spread evenly unless a map names them. From another BERT (Turc et al., 2019): that model's config
and encoder, and a new head.
"""

import dataclasses
import os
import re

from absl import logging

from bert_tf.checkpoints import google_variable_names, save_google_checkpoint
from bert_tf.errors import InputError

# A layer's weights under Google's names: bert/encoder/layer_<index>/...
_LAYER_NAME = re.compile(r"^bert/encoder/layer_(\d+)/")


def spread_layers(num_teacher_layers, num_student_layers):
    """The teacher layers an evenly spread student keeps: the top layer of each of
    `num_student_layers` equal groups (12 into 2: [5, 11]; 6 into 3: [1, 3, 5])."""
    return [
        (index + 1) * num_teacher_layers // num_student_layers - 1
        for index in range(num_student_layers)
    ]


def layer_map(num_teacher_layers, student_layers=None, student_layer_map=None):
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


def write_student_init(teacher_model, student_model, layers, folder):
    """Writes the student's first weights (copy_teacher_weights) to folder/bert_model.ckpt in
    Google's format, atomically, with the head under its Google names; returns the prefix."""
    copy_teacher_weights(teacher_model, student_model, layers)
    prefix = save_google_checkpoint(student_model, os.path.join(folder, "bert_model.ckpt"))
    logging.info("the student starts from the teacher's layers %s: %s", layers, prefix)
    return prefix
