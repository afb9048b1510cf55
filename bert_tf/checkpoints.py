"""Google TF1 checkpoints <-> our Keras weights, and THE restore path every script uses.

Google's names (`bert/encoder/layer_0/attention/self/query/kernel`, `cls/predictions/output_bias`,
`output_weights`, ...) map one to one onto our weights, with the same shapes: dense kernels are [in, out]
in both. `restore_init_checkpoint` fills a model from any checkpoint a user hands `--init_checkpoint`:
a Google release or fine-tuned checkpoint, or one of our training checkpoints (`tf.train.Checkpoint`
object graphs, read by the path of each weight in the model). It restores every part of the model the
checkpoint holds: the encoder always, and a head when the checkpoint is a trained model of the same
kind (a task head of the same task, or the pretraining heads).
"""

import collections
import dataclasses
import functools
import os

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf import file_io
from bert_tf.checkpoint_adapters import adapter_restores, stored_adapters
from bert_tf.checkpoint_reading import open_checkpoint, read_tensor
from bert_tf.errors import InputError
from bert_tf.modeling import BertModel, BertPretrainingModel

# Checkpoint entries that are training state, not weights: never reported as unused.
_TRAINING_STATE_SUFFIXES = ("/adam_m", "/adam_v", "/Momentum", "/Adam", "/Adam_1")
_TRAINING_STATE_NAMES = ("global_step",)
# The file next to our training checkpoints that names the task of their head (bert_tf/models/networks/task_info.py).
_TASK_FILE = "task.json"
# How `restore_init_checkpoint` treats a model's heads.
HEADS = ("optional", "required", "skip")
POSITION_EMBEDDINGS = "bert/embeddings/position_embeddings"


def _dense(prefix, layer):
    # With LoRA on, Dense.kernel is the merged tensor; the checkpoint's kernel is the frozen base.
    kernel = layer._kernel if getattr(layer, "lora_enabled", False) else layer.kernel
    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": layer.bias}


def _layer_norm(prefix, layer):
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def encoder_variable_names(bert):
    """{Google checkpoint name: Keras variable} of a BertModel's weights (bert/*), built if needed."""
    if not bert.built:
        bert(bert.dummy_inputs(), training=False)
    embeddings = bert.embeddings
    names = {
        "bert/embeddings/word_embeddings": embeddings.word_embeddings,
        "bert/embeddings/token_type_embeddings": embeddings.token_type_embeddings,
        POSITION_EMBEDDINGS: embeddings.position_embeddings,
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


def _pretraining_head_names(model):
    masked_lm, next_sentence = model.masked_lm, model.next_sentence
    names = {
        **_dense("cls/predictions/transform/dense", masked_lm.transform),
        **_layer_norm("cls/predictions/transform/LayerNorm", masked_lm.layer_norm),
        "cls/predictions/output_bias": masked_lm.output_bias,
    }
    if next_sentence is not None:  # objectives mlm and ltr have no next-sentence head
        names["cls/seq_relationship/output_weights"] = next_sentence.output_weights
        names["cls/seq_relationship/output_bias"] = next_sentence.output_bias
    return names


@dataclasses.dataclass
class _Part:
    """One part of a model as a checkpoint holds it: the encoder, or a head."""

    name: str  # for messages: "encoder", "classifier head", "pretraining heads"
    variables: dict  # {Google name: Keras variable}
    is_head: bool


def _parts(model):
    """The parts of a BertModel, a BertPretrainingModel, or a task model (`.bert` and `.head`)."""
    if not model.built:
        model(model.dummy_inputs(), training=False)
    if isinstance(model, BertModel):
        return [_Part("encoder", encoder_variable_names(model), False)]
    parts = [_Part("encoder", encoder_variable_names(model.bert), False)]
    if isinstance(model, BertPretrainingModel):
        parts.append(_Part("pretraining heads", _pretraining_head_names(model), True))
    elif hasattr(model, "head"):
        parts.append(_Part(f"{model.task_name} head", model.head.google_variables(), True))
    else:
        raise TypeError(f"{type(model).__name__} has neither a BertModel's weights nor a .head")
    return parts


def google_variable_names(model):
    """{Google checkpoint name: Keras variable} of a BertModel, a BertPretrainingModel or a task model.

    A task model's head has the names the original gave it (`output_weights` for run_classifier.py,
    `cls/squad/output_weights` for run_squad.py, ...; see bert_tf.models.networks.task_head.BertHead).
    """
    return {name: v for part in _parts(model) for name, v in part.variables.items()}


def _is_training_state(name):
    return name in _TRAINING_STATE_NAMES or name.endswith(_TRAINING_STATE_SUFFIXES)


def resolve_checkpoint(path):
    """A checkpoint prefix from a prefix, or a folder holding bert_model.ckpt.* or our checkpoints.

    Raises:
      MissingFileError: naming the path, when it holds no checkpoint.
    """
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        google = os.path.join(path, "bert_model.ckpt")
        if tf.io.gfile.exists(google + ".index"):
            return google
        if tf.io.gfile.isdir(os.path.join(path, "best")):  # a sweep's output_dir: its best run
            return resolve_checkpoint(os.path.join(path, "best"))
        raise file_io.MissingFileError(
            f"{path} holds neither bert_model.ckpt.* nor a training checkpoint"
        )
    if not tf.io.gfile.exists(path + ".index"):
        raise file_io.MissingFileError(f"no checkpoint at {path} (no {path}.index)")
    return path


def is_google_checkpoint(ckpt_prefix):
    """Whether the checkpoint names its weights as the original does (bert/..., not an object graph)."""
    names = open_checkpoint(ckpt_prefix).get_variable_to_shape_map()
    return any(name.startswith("bert/") for name in names)


def _object_paths(root):
    """{id(object): [path, ...]}: every path of object names from `root` to each object it tracks."""
    view = tf.train.TrackableView(root)
    paths = collections.defaultdict(list)

    def visit(parent, parent_path, ancestors):
        for name, child in view.children(parent).items():
            if id(child) not in ancestors:
                path = f"{parent_path}/{name}" if parent_path else name
                paths[id(child)].append(path)
                visit(child, path, ancestors | {id(child)})

    visit(root, "", {id(root)})
    return paths


def _checkpoint_paths(reader, prefix):
    """{path below the checkpoint's "model": tensor key} of one of our training checkpoints."""
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(read_tensor(reader, prefix, "_CHECKPOINTABLE_OBJECT_GRAPH"))
    keys = {}

    def visit(node_id, node_path, ancestors):
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                keys[node_path] = attribute.checkpoint_key
        for child in node.children:
            if child.node_id not in ancestors:
                path = f"{node_path}/{child.local_name}" if node_path else child.local_name
                visit(child.node_id, path, ancestors | {child.node_id})

    for child in graph.nodes[0].children:
        if child.local_name == "model":
            visit(child.node_id, "", {0, child.node_id})
    return keys


def _checkpoint_task(prefix):
    """The model_type of the task.json beside one of our checkpoints, or None."""
    path = os.path.join(os.path.dirname(prefix), _TASK_FILE)
    if not tf.io.gfile.exists(path):
        return None
    info = file_io.read_json(path)
    return info.get("model_type") if isinstance(info, dict) else None


class _Checkpoint:
    """A checkpoint's weights under the names of one model: {Google name: checkpoint key}."""

    def __init__(self, prefix, model, resuming):
        self.prefix = prefix
        self.reader = open_checkpoint(prefix)
        self.shapes = self.reader.get_variable_to_shape_map()
        self.is_google = any(name.startswith("bert/") for name in self.shapes)
        self.task = None
        if not self.is_google:
            # A run's own checkpoint holds its own model; another's task is in its task.json.
            self.task = getattr(model, "task_name", None) if resuming else _checkpoint_task(prefix)
        self.keys = {}
        self.adapter_keys = {}  # {Google prefix of a Dense: (key of A, key of B)}: LoRA adapters
        if self.is_google:
            self.keys = {name: name for name in google_variable_names(model) if name in self.shapes}
        else:
            self._map_object_paths(model)

    def _map_object_paths(self, model):
        stored = _checkpoint_paths(self.reader, self.prefix)
        parts = _parts(model)  # builds the model: its object paths then lead to every weight
        paths = _object_paths(model)
        self.adapter_keys = stored_adapters(model, stored, paths)
        for part in parts:
            for name, variable in part.variables.items():
                for path in paths[id(variable)]:
                    candidates = [path]
                    if isinstance(model, BertModel):  # a task or pretraining model's encoder
                        candidates.insert(0, f"bert/{path}")
                    if path.startswith("head/"):  # heads written before BertHead: model/<weight>
                        candidates.append(path.removeprefix("head/"))
                    key = next((stored[c] for c in candidates if c in stored), None)
                    if key is not None:
                        self.keys[name] = key
                        break

    def why_no_head(self, part, model):
        """Why the checkpoint gives `part` (a head) nothing, or None if it holds that head."""
        found = [name for name in part.variables if name in self.keys]
        if self.is_google:
            return None if found else f"the checkpoint has no {next(iter(part.variables))}"
        if isinstance(model, BertPretrainingModel):
            return None if found else "the checkpoint holds no pretraining heads"
        if self.task != model.task_name:
            if self.task is None:
                return f"no {_TASK_FILE} beside it says which task its head is for"
            return f"the checkpoint is a {self.task} model"
        return None if found else f"the checkpoint holds no {part.name}"

    def unused(self, model):
        """Google checkpoints: the names of weights nothing in `model` reads (training state aside)."""
        if not self.is_google:
            return []
        used = set(google_variable_names(model))
        return sorted(n for n in self.shapes if n not in used and not _is_training_state(n))


@dataclasses.dataclass
class RestoreReport:
    """What `restore_init_checkpoint` did.

    Attributes:
      prefix: the checkpoint read.
      restored: the parts it restored ("encoder", "classifier head", ...).
      new: the parts that keep their initial values, each with the reason.
      unused: Google checkpoints: the names of weights nothing in the model read.
    """

    prefix: str
    restored: list
    new: list
    unused: list

    def summary(self):
        """One line: what was restored from where, and what starts new."""
        line = f"Initialized from {self.prefix}: restored the {' and the '.join(self.restored)}"
        return line + (f"; starts new: the {', the '.join(self.new)}" if self.new else "")


def restore_init_checkpoint(model, path, heads="optional", dry_run=False, resuming=False):
    """Fills `model` with every part of it that a checkpoint holds; THE restore path of every script.

    Args:
      model: a BertModel, a BertPretrainingModel or a task model of bert_tf.tasks (built if need be).
      path: a checkpoint prefix, or a folder holding bert_model.ckpt.* or our checkpoints (the latest
        training checkpoint wins over bert_model.ckpt).
      heads: "optional": a head the checkpoint holds (the same task's, or the pretraining heads) is
        restored, else it starts new; "required": a head the checkpoint lacks is an error (an export,
        a resumed run); "skip": heads start new (--restore_head=false).
      dry_run: check names and shapes only; change and log nothing.
      resuming: `path` is a checkpoint of this very run (its heads are this model's).

    Returns:
      A RestoreReport.

    Raises:
      MissingFileError: if there is no checkpoint at `path`.
      DamagedCheckpoint: naming the file that is truncated or altered.
      InputError: naming the checkpoint, the weight and both shapes, if the encoder is incomplete or a
        weight's shape is not the model's (a head's mismatch names --restore_head=false).
    """
    if heads not in HEADS:
        raise ValueError(f"heads must be one of {HEADS}, got {heads!r}")
    prefix = resolve_checkpoint(path)
    checkpoint = _Checkpoint(prefix, model, resuming)
    values, restored, new = {}, [], []
    for part in _parts(model):
        if part.is_head:
            why = "--restore_head=false" if heads == "skip" else checkpoint.why_no_head(part, model)
            if why is not None:
                if heads == "required":
                    raise InputError(f"{prefix}: no {part.name} to restore: {why}")
                new.append(f"{part.name} ({why})")
                continue
        missing = [name for name in part.variables if name not in checkpoint.keys]
        if missing:
            raise InputError(
                f"{prefix} lacks {len(missing)} weight(s) of the {part.name}, first {missing[0]!r}"
                + ("" if part.is_head else ": is it a BERT checkpoint?")
            )
        for name, variable in part.variables.items():
            key = checkpoint.keys[name]
            shape, expected = list(checkpoint.shapes[key]), list(variable.shape)
            if shape != expected:
                remedy = (
                    "; pass --restore_head=false to start a fresh head instead"
                    if part.is_head
                    else " (is the BERT config the checkpoint's own?)"
                )
                if name == POSITION_EMBEDDINGS and shape[0] < expected[0]:
                    # Pretraining's phase 2 (longer sequences) from a phase 1 built too short.
                    remedy = (
                        f": it was pretrained with max_position_embeddings={shape[0]}, so it cannot "
                        f"read sequences of {expected[0]} positions; the first phase of a two-phase "
                        "schedule must be built with max_position_embeddings at least the second's"
                        " --max_seq_length"
                    )
                raise InputError(
                    f"{prefix}: {name} of the {part.name} has shape {shape} in the checkpoint but "
                    f"{expected} in the model{remedy}"
                )
            values[name] = (variable, key)
        restored.append(part.name)
    merges = adapter_restores(model, checkpoint, values, restored, new, resuming)
    report = RestoreReport(prefix, restored, new, checkpoint.unused(model))
    _assign(checkpoint, values, merges, dry_run)
    if dry_run:
        return report
    unused_encoder = [name for name in report.unused if name.startswith("bert/")]
    if unused_encoder:
        # Unused heads are normal (a BertModel from a pretraining checkpoint); unused encoder
        # weights mean the config is not the checkpoint's (e.g. fewer layers).
        logging.warning(
            "%d encoder variables of %s were not loaded, first %s: is the BERT config the "
            "checkpoint's own?",
            len(unused_encoder),
            prefix,
            unused_encoder[0],
        )
    logging.info(report.summary())
    return report


def _assign(checkpoint, values, merges, dry_run):
    """Assigns `values`, then adds each merge's A @ B to its kernel (alpha = rank, adapters.py);
    a dry run reads each value and assigns none (a damaged file is found before any work)."""
    read = functools.partial(read_tensor, checkpoint.reader, checkpoint.prefix)
    if dry_run:
        for key in [key for _, key in values.values()] + [k for m in merges for k in m[1:]]:
            read(key)
        return
    for variable, key in values.values():
        variable.assign(read(key))
    for kernel, key_a, key_b in merges:
        kernel.assign(kernel + tf.cast(tf.matmul(read(key_a), read(key_b)), kernel.dtype))


def load_google_checkpoint(model, ckpt_prefix, allow_missing_heads=False):
    """Assigns the weights of a Google-format checkpoint to `model` by name and shape.

    Args:
      model: a BertModel (reads bert/*), a BertPretrainingModel (bert/* and cls/*) or a task model.
      ckpt_prefix: checkpoint prefix, e.g. ".../uncased_L-12_H-768_A-12/bert_model.ckpt".
      allow_missing_heads: keep the initial head weights when the checkpoint has none (an
        encoder-only checkpoint, e.g. one converted from Hugging Face) instead of failing.

    Returns:
      The sorted names of checkpoint weights that nothing in `model` used (optimizer slots excluded).

    Raises:
      FileNotFoundError: if no checkpoint exists at `ckpt_prefix`.
      InputError (a ValueError): naming the weight, if one is missing or has another shape.
    """
    if not tf.io.gfile.exists(ckpt_prefix + ".index") or not is_google_checkpoint(ckpt_prefix):
        raise file_io.MissingFileError(f"no Google-format checkpoint at {ckpt_prefix}")
    report = restore_init_checkpoint(
        model, ckpt_prefix, heads="optional" if allow_missing_heads else "required"
    )
    return report.unused


def save_google_checkpoint(model, ckpt_prefix):
    """Writes `model`'s weights under Google's names, readable by the original TF1 code and other tools.

    Writes `ckpt_prefix.index` and `ckpt_prefix.data-00000-of-00001` atomically (bert_tf.file_io.atomic_files).
    Works for models built under any tf.distribute strategy (values are read in cross-replica context).
    Returns `ckpt_prefix`.
    """
    names = google_variable_names(model)
    tf.io.gfile.makedirs(os.path.dirname(ckpt_prefix) or ".")
    tensor_names = sorted(names)
    with file_io.atomic_files(ckpt_prefix) as temp_prefix, tf.device("CPU:0"):
        tensors = [
            tf.constant(np.asarray(names[name].numpy(), np.float32)) for name in tensor_names
        ]
        tf.raw_ops.SaveV2(
            prefix=temp_prefix,
            tensor_names=tensor_names,
            shape_and_slices=[""] * len(tensor_names),
            tensors=tensors,
        )
    logging.info("Wrote %d variables to %s", len(tensor_names), ckpt_prefix)
    return ckpt_prefix


def export_google_checkpoint(model, bert_config, output_dir):
    """Writes output_dir/bert_model.ckpt.* and bert_config.json in Google's format, each atomically."""
    save_google_checkpoint(model, os.path.join(output_dir, "bert_model.ckpt"))
    file_io.write_text(os.path.join(output_dir, "bert_config.json"), bert_config.to_json_string())
    logging.info("Wrote Google-format checkpoint %s", os.path.join(output_dir, "bert_model.ckpt"))


def copy_checkpoint(prefix, folder, extra_files=()):
    """Copies the checkpoint `prefix` into `folder` as that folder's only checkpoint.

    The folder (replaced whole, atomically: bert_tf.file_io.atomic_path) gets the checkpoint's files
    under their own names, a `checkpoint` state file naming it (so tf.train.latest_checkpoint and
    --init_checkpoint=folder find it), and copies of `extra_files` (e.g. eval_results.txt).
    Returns the new prefix.
    """
    name = os.path.basename(prefix)
    with file_io.atomic_path(folder) as temp:
        tf.io.gfile.makedirs(temp)
        for path in [*tf.io.gfile.glob(prefix + ".*"), *extra_files]:
            tf.io.gfile.copy(path, os.path.join(temp, os.path.basename(path)), overwrite=True)
        state = f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n'
        file_io.write_text(os.path.join(temp, "checkpoint"), state)
    return os.path.join(folder, name)
