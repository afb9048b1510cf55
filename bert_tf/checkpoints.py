"""Google TF1 checkpoints (bert_model.ckpt.*) <-> our Keras weights, and --init_checkpoint loading.

Google's names (`bert/encoder/layer_0/attention/self/query/kernel`, `cls/predictions/output_bias`, ...) map
one to one onto our weights, with the same shapes: dense kernels are [in, out] in both.
"""

import os
import uuid

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.modeling import BertModel, BertPretrainingModel

# Checkpoint entries that are training state, not weights: never reported as unused.
_TRAINING_STATE_SUFFIXES = ("/adam_m", "/adam_v", "/Momentum", "/Adam", "/Adam_1")
_TRAINING_STATE_NAMES = ("global_step",)


def _dense(prefix, layer):
    return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def _layer_norm(prefix, layer):
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def _encoder_variables(bert):
    embeddings = bert.embeddings
    names = {
        "bert/embeddings/word_embeddings": embeddings.word_embeddings,
        "bert/embeddings/token_type_embeddings": embeddings.token_type_embeddings,
        "bert/embeddings/position_embeddings": embeddings.position_embeddings,
        **_layer_norm("bert/embeddings/LayerNorm", embeddings.layer_norm),
    }
    for i, block in enumerate(bert.encoder_layers):
        prefix = f"bert/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            names.update(_dense(f"{prefix}/attention/self/{part}", getattr(block.attention, part)))
        names.update(_dense(f"{prefix}/attention/output/dense", block.attention_output))
        names.update(
            _layer_norm(f"{prefix}/attention/output/LayerNorm", block.attention_layer_norm)
        )
        names.update(_dense(f"{prefix}/intermediate/dense", block.intermediate))
        names.update(_dense(f"{prefix}/output/dense", block.output_dense))
        names.update(_layer_norm(f"{prefix}/output/LayerNorm", block.output_layer_norm))
    names.update(_dense("bert/pooler/dense", bert.pooler))
    return names


def _head_variables(model):
    masked_lm, next_sentence = model.masked_lm, model.next_sentence
    return {
        **_dense("cls/predictions/transform/dense", masked_lm.transform),
        **_layer_norm("cls/predictions/transform/LayerNorm", masked_lm.layer_norm),
        "cls/predictions/output_bias": masked_lm.output_bias,
        "cls/seq_relationship/output_weights": next_sentence.output_weights,
        "cls/seq_relationship/output_bias": next_sentence.output_bias,
    }


def encoder_variable_names(bert):
    """{Google checkpoint name: Keras variable} of a BertModel's weights (bert/*), built if needed."""
    if not bert.built:
        bert(bert.dummy_inputs(), training=False)
    return _encoder_variables(bert)


def google_variable_names(model):
    """{Google checkpoint name: Keras variable} for a BertModel, a BertPretrainingModel, or a task model.

    A task model (classifier, SQuAD, tagger, ...) names its own weights in a `google_variables()` method:
    its encoder's bert/* names plus the names the original gave its head (e.g. `output_weights`).
    """
    if hasattr(model, "google_variables"):
        return model.google_variables()
    if not isinstance(model, BertModel | BertPretrainingModel):
        raise TypeError(f"Expected a BertModel or BertPretrainingModel, got {type(model).__name__}")
    if not model.built:
        model(model.dummy_inputs(), training=False)
    if isinstance(model, BertModel):
        return _encoder_variables(model)
    return {**_encoder_variables(model.bert), **_head_variables(model)}


def _is_training_state(name):
    return name in _TRAINING_STATE_NAMES or name.endswith(_TRAINING_STATE_SUFFIXES)


def load_google_checkpoint(model, ckpt_prefix, allow_missing_heads=False):
    """Assigns the weights of a Google-format checkpoint to `model` by name and shape.

    Args:
      model: a BertModel (reads bert/*) or BertPretrainingModel (bert/* and cls/*).
      ckpt_prefix: checkpoint prefix, e.g. ".../uncased_L-12_H-768_A-12/bert_model.ckpt".
      allow_missing_heads: keep the initial cls/* weights of a BertPretrainingModel when the checkpoint has
        none (an encoder-only checkpoint, e.g. one converted from Hugging Face) instead of failing.

    Returns:
      The sorted names of checkpoint weights that nothing in `model` used (optimizer slots excluded).

    Raises:
      FileNotFoundError: if no checkpoint exists at `ckpt_prefix`.
      ValueError: naming the variable, if one is missing from the checkpoint or has another shape.
    """
    reader = _reader(ckpt_prefix)
    shapes = reader.get_variable_to_shape_map()
    targets = google_variable_names(model)
    missing = [name for name in targets if name not in shapes]
    skipped = []
    if missing and allow_missing_heads and all(name.startswith("cls/") for name in missing):
        skipped, missing = missing, []
    if missing:
        raise ValueError(
            f"Checkpoint {ckpt_prefix} lacks {len(missing)} variable(s) the model needs, "
            f"first {missing[0]!r}: {missing[:5]}"
        )
    values = {}
    for name, variable in targets.items():
        if name in skipped:
            continue
        if list(shapes[name]) != list(variable.shape):
            raise ValueError(
                f"Checkpoint {ckpt_prefix}: variable {name!r} has shape {shapes[name]} but the model "
                f"expects {list(variable.shape)} (is bert_config.json the checkpoint's own?)"
            )
        values[name] = reader.get_tensor(name)
    for name, value in values.items():
        targets[name].assign(value)
    if skipped:
        logging.warning(
            "Checkpoint %s has no pretraining heads: %d cls/* variables keep their initial values",
            ckpt_prefix,
            len(skipped),
        )
    unused = sorted(name for name in shapes if name not in targets and not _is_training_state(name))
    unused_encoder = [name for name in unused if name.startswith("bert/")]
    if unused_encoder:
        # Unused heads are normal (a BertModel from a pretraining checkpoint); unused encoder
        # weights mean the config is not the checkpoint's (e.g. fewer layers).
        logging.warning(
            "%d encoder variables of %s were not loaded, first %s: is the BertConfig the "
            "checkpoint's own?",
            len(unused_encoder),
            ckpt_prefix,
            unused_encoder[0],
        )
    logging.info(
        "Loaded %d variables from %s%s",
        len(values),
        ckpt_prefix,
        f"; unused: {unused}" if unused else "",
    )
    return unused


def save_google_checkpoint(model, ckpt_prefix):
    """Writes `model`'s weights under Google's names, readable by the original TF1 code and other tools.

    Writes `ckpt_prefix.index` and `ckpt_prefix.data-00000-of-00001` under temporary names first and
    renames them when complete. Works for models built under any tf.distribute strategy (values are read
    in cross-replica context). Returns `ckpt_prefix`.
    """
    names = google_variable_names(model)
    directory = os.path.dirname(ckpt_prefix) or "."
    tf.io.gfile.makedirs(directory)
    # tempfile cannot make folders on gs:// and other tf.io.gfile file systems.
    temp_dir = os.path.join(directory, f".save-{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(temp_dir)
    try:
        temp_prefix = os.path.join(temp_dir, os.path.basename(ckpt_prefix))
        tensor_names = sorted(names)
        with tf.device("CPU:0"):
            tensors = [
                tf.constant(np.asarray(names[name].numpy(), np.float32)) for name in tensor_names
            ]
            tf.raw_ops.SaveV2(
                prefix=temp_prefix,
                tensor_names=tensor_names,
                shape_and_slices=[""] * len(tensor_names),
                tensors=tensors,
            )
        for path in tf.io.gfile.glob(temp_prefix + ".*"):
            target = ckpt_prefix + path[len(temp_prefix) :]
            tf.io.gfile.rename(path, target, overwrite=True)
    finally:
        tf.io.gfile.rmtree(temp_dir)
    logging.info("Wrote %d variables to %s", len(tensor_names), ckpt_prefix)
    return ckpt_prefix


def _reader(ckpt_prefix):
    try:
        return tf.train.load_checkpoint(ckpt_prefix)
    except (tf.errors.NotFoundError, ValueError) as e:
        raise FileNotFoundError(f"No checkpoint found at {ckpt_prefix}: {e}") from e


def resolve_checkpoint(path):
    """A checkpoint prefix from a prefix, or a folder holding bert_model.ckpt.* or our checkpoints."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        google = os.path.join(path, "bert_model.ckpt")
        if tf.io.gfile.exists(google + ".index"):
            return google
        raise FileNotFoundError(f"{path} holds neither bert_model.ckpt.* nor a tf.train checkpoint")
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(f"No checkpoint found at {path} (no {path}.index)")
    return path


def _saved_model_children(prefix):
    """Names of the children of `model` in a tf.train checkpoint's object graph.

    The object graph, not the tensor keys: a variable is keyed by its shortest path, which for a
    fine-tuned model's encoder runs through the optimizer's variable list, not through model/bert/.
    """
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(
        tf.train.load_checkpoint(prefix).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH")
    )
    for child in graph.nodes[0].children:
        if child.local_name == "model":
            return {grandchild.local_name for grandchild in graph.nodes[child.node_id].children}
    return set()


def is_google_checkpoint(ckpt_prefix):
    return any(name.startswith("bert/") for name, _ in tf.train.list_variables(ckpt_prefix))


def restore_init_checkpoint(model, path):
    """Initializes `model` from a Google release checkpoint or a checkpoint of our training loop.

    Args:
      model: a BertModel or BertPretrainingModel.
      path: a checkpoint prefix or a folder holding one (the latest tf.train checkpoint wins over
        bert_model.ckpt).

    Returns:
      The checkpoint prefix that was read.
    """
    prefix = resolve_checkpoint(path)
    if is_google_checkpoint(prefix):
        load_google_checkpoint(model, prefix, allow_missing_heads=True)
    else:
        if not model.built:
            model(model.dummy_inputs(), training=False)
        # Our training checkpoints hold tf.train.Checkpoint(model=..., optimizer=...); a BertModel takes
        # the encoder of a pretraining or fine-tuned model's checkpoint, which holds it as model.bert.
        root = tf.train.Checkpoint(model=model)
        if isinstance(model, BertModel) and "bert" in _saved_model_children(prefix):
            root = tf.train.Checkpoint(model=tf.train.Checkpoint(bert=model))
        root.restore(prefix).expect_partial().assert_existing_objects_matched()
    logging.info("Initialized %s from %s", model.name, prefix)
    return prefix


def export_google_checkpoint(model, bert_config, output_dir):
    """Writes output_dir/bert_model.ckpt.* + bert_config.json in Google's format, via a temp dir + rename."""
    temp_dir = os.path.join(output_dir, f".export-{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(temp_dir)
    save_google_checkpoint(model, os.path.join(temp_dir, "bert_model.ckpt"))
    with tf.io.gfile.GFile(os.path.join(temp_dir, "bert_config.json"), "w") as f:
        f.write(bert_config.to_json_string())
    for name in tf.io.gfile.listdir(temp_dir):
        # A TF1 Saver also writes a "checkpoint" state file: it must not replace the training one.
        if name.startswith(("bert_model.ckpt.", "bert_config.json")):
            target = os.path.join(output_dir, name)
            tf.io.gfile.rename(os.path.join(temp_dir, name), target, overwrite=True)
    tf.io.gfile.rmtree(temp_dir)
    logging.info("Wrote Google-format checkpoint %s", os.path.join(output_dir, "bert_model.ckpt"))
