"""LoRA adapters on the encoder's dense projections, and the file that carries them.

LoRA (Hu et al., 2021) adds to a frozen kernel W [I, U] a trained low-rank update: the layer computes
x @ (W + A @ B * alpha / rank), with A [I, rank] and B [rank, U] (Keras' `Dense.enable_lora`, which
starts B at zero, so a fresh adapter leaves the outputs unchanged). `LoraBackbone` is what BertModel
takes from here: `enable_lora`, `save_lora_weights`, `load_lora_weights`.

The adapter file is a numpy .npz: per adapted projection `lora/<block>/<target>/a` and `.../b` (named
by block and target, never by position in a list of layers), a task model's head as `head/<index>`,
and `metadata`, a JSON string: the rank, alpha and targets, the encoder's BertConfig keys and a
fingerprint of its frozen weights, so that adapters never load into another base.
"""

import hashlib
import json
import math
import os
import tempfile

import keras
import numpy as np

from bert_tf import file_io

FILE_FORMAT = "bert_tf lora adapters 1"

# The projections of a transformer block LoRA can adapt, by the names of HF peft's and the paper's
# weights (W_q, W_k, W_v, W_o, then the feed-forward's two), with keras-hub's spelling accepted.
LORA_TARGETS = ("query", "key", "value", "attention_output", "intermediate", "output")
DEFAULT_LORA_TARGETS = ("query", "value")
_TARGET_ALIASES = {
    "query_dense": "query",
    "key_dense": "key",
    "value_dense": "value",
    "attention_output_dense": "attention_output",
    "intermediate_dense": "intermediate",
    "output_dense": "output",
}


def target_dense(block, target):
    """The keras.layers.Dense of TransformerBlock `block` that target name `target` adapts."""
    return {
        "query": block.attention.query,
        "key": block.attention.key,
        "value": block.attention.value,
        "attention_output": block.attention_output,
        "intermediate": block.intermediate,
        "output": block.output_dense,
    }[target]


def check_lora_arguments(rank, target_names):
    """(rank, target names as a tuple in LORA_TARGETS' order), or one ValueError line."""
    if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or rank <= 0:
        raise ValueError(f"enable_lora: rank must be a positive integer, got {rank!r}")
    if target_names is None:
        return int(rank), DEFAULT_LORA_TARGETS
    if isinstance(target_names, str):
        target_names = [target_names]
    names = [_TARGET_ALIASES.get(name, name) for name in target_names]
    unknown = [name for name in names if name not in LORA_TARGETS]
    if unknown or not names:
        raise ValueError(
            f"enable_lora: unknown target_names {unknown or list(target_names)}; "
            f"the allowed names are {list(LORA_TARGETS)}"
        )
    return int(rank), tuple(name for name in LORA_TARGETS if name in names)


def adapted_layers(backbone):
    """{"layer_<i>/<target>": Dense} of the adapted projections, in block then target order."""
    return {
        f"layer_{i}/{target}": target_dense(block, target)
        for i, block in enumerate(backbone.encoder_layers)
        for target in backbone.lora_target_names or ()
    }


def adapter_variables(backbone):
    """The adapters' variables (A and B of every adapted projection)."""
    return [
        variable
        for dense in adapted_layers(backbone).values()
        for variable in (dense.lora_kernel_a, dense.lora_kernel_b)
    ]


def base_fingerprint(backbone):
    """sha256 of the encoder's weights other than the adapters (shapes, dtypes and values)."""
    adapters = {id(variable) for variable in adapter_variables(backbone)}
    digest = hashlib.sha256()
    for variable in backbone.weights:
        if id(variable) in adapters:
            continue
        value = np.ascontiguousarray(keras.ops.convert_to_numpy(variable))
        digest.update(f"{value.shape}{value.dtype}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def revive_adapters(backbone):
    """Gives A new random values where A and B are both zero, so that training moves them.

    Keras saves a LoRA layer with its adapters merged into the kernel and loads it back with A = B
    = 0 (`Dense.load_own_variables`): the outputs are right, but no gradient reaches zero factors.
    A fresh draw of A (B stays zero) keeps the outputs and lets training go on.
    """
    for dense in adapted_layers(backbone).values():
        a, b = dense.lora_kernel_a, dense.lora_kernel_b
        if not np.any(keras.ops.convert_to_numpy(a)) and not np.any(keras.ops.convert_to_numpy(b)):
            # Keras' initializer of A in Dense.enable_lora.
            initializer = keras.initializers.VarianceScaling(
                scale=math.sqrt(5), mode="fan_in", distribution="uniform"
            )
            a.assign(initializer(a.shape, dtype=a.dtype))


class LoraBackbone:
    """LoRA for BertModel: adapters on chosen projections of every block, the rest frozen."""

    lora_rank = None
    lora_target_names = None

    def enable_lora(self, rank=8, target_names=None):
        """Freezes the encoder (kernels, biases, LayerNorms, embeddings, pooler) and adds rank-`rank`
        adapters to `target_names` of every block (default: query and value, as the LoRA paper).

        Args:
          rank: the adapters' rank r (alpha = r: the update is A @ B unscaled).
          target_names: names among LORA_TARGETS ("query", "key", "value", "attention_output",
            "intermediate", "output"); keras-hub's "query_dense" spellings are accepted.

        Raises:
          ValueError: one line, for a bad rank or target name, or adapters already on.
        """
        rank, targets = check_lora_arguments(rank, target_names)
        if self.lora_rank is not None:
            raise ValueError(
                f"enable_lora: adapters of rank {self.lora_rank} on {list(self.lora_target_names)} "
                "are already on this encoder"
            )
        if not self.built:
            self.build()
        for variable in self.weights:
            variable.trainable = False  # Keras' Dense.enable_lora would leave the biases trainable
        self.lora_rank, self.lora_target_names = rank, targets
        for dense in adapted_layers(self).values():
            dense.enable_lora(rank)

    def lora_metadata(self):
        """What an adapter file records of this encoder and its adapters (a JSON-able dict)."""
        return {
            "format": FILE_FORMAT,
            "rank": self.lora_rank,
            "alpha": self.lora_rank,
            "target_names": list(self.lora_target_names),
            "bert_config": self.config.to_dict(),
            "base_fingerprint": base_fingerprint(self),
        }

    def save_lora_weights(self, path):
        """Writes the adapters alone to `path` (.npz; atomically). See the module docstring."""
        write_lora_file(path, self, head=None)

    def load_lora_weights(self, path):
        """Loads a file of save_lora_weights (or a task model's, whose head it leaves) into this
        encoder, enabling its rank and targets first if no adapters are on.

        Raises:
          ValueError: one line naming the mismatch (another base, rank or targets), before any
            weight changes.
        """
        arrays, metadata = read_lora_file(path)
        check_lora_file(self, path, metadata)
        if self.lora_rank is None:
            self.enable_lora(metadata["rank"], metadata["target_names"])
        for name, dense in adapted_layers(self).items():
            dense.lora_kernel_a.assign(arrays[f"lora/{name}/a"])
            dense.lora_kernel_b.assign(arrays[f"lora/{name}/b"])
        return arrays


def write_lora_file(path, backbone, head):
    """Writes `backbone`'s adapters and, if given, `head` (a list of variables) to `path`."""
    if backbone.lora_rank is None:
        raise ValueError("save_lora_weights: no adapters on this encoder; call enable_lora first")
    arrays = {}
    for name, dense in adapted_layers(backbone).items():
        arrays[f"lora/{name}/a"] = keras.ops.convert_to_numpy(dense.lora_kernel_a)
        arrays[f"lora/{name}/b"] = keras.ops.convert_to_numpy(dense.lora_kernel_b)
    metadata = backbone.lora_metadata()
    if head is not None:
        metadata["head"] = [[head_name(v), list(v.shape)] for v in head]
        for i, variable in enumerate(head):
            arrays[f"head/{i}"] = keras.ops.convert_to_numpy(variable)
    arrays["metadata"] = np.array(json.dumps(metadata))
    with file_io.atomic_write(os.fspath(path), "wb") as file:
        np.savez(file, **arrays)


def head_name(variable):
    """A head variable's path without its model's (possibly numbered) name."""
    return variable.path.split("/", 1)[-1]


def read_lora_file(path):
    """({name: array}, metadata) of an adapter file; one-line errors for a missing or foreign file."""
    path = os.fspath(path)
    if not file_io.exists(path):
        raise FileNotFoundError(f"load_lora_weights: {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        metadata = json.loads(str(arrays.pop("metadata")))
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"load_lora_weights: {path} is not an adapter file ({e})") from None
    if metadata.get("format") != FILE_FORMAT:
        raise ValueError(f"load_lora_weights: {path} is not a {FILE_FORMAT!r} file")
    return arrays, metadata


def check_lora_file(backbone, path, metadata):
    """One ValueError line if the file's adapters do not belong on `backbone` as it is."""
    config = backbone.config.to_dict()
    differing = sorted(
        key
        for key in set(config) | set(metadata["bert_config"])
        if config.get(key) != metadata["bert_config"].get(key)
    )
    if differing:
        details = ", ".join(
            f"{key} {metadata['bert_config'].get(key)} (file) vs {config.get(key)}"
            for key in differing
        )
        raise ValueError(f"load_lora_weights: {path} holds adapters of another encoder: {details}")
    if backbone.lora_rank is not None:
        mine = {"rank": backbone.lora_rank, "target_names": list(backbone.lora_target_names)}
        for name, value in mine.items():
            if metadata[name] != value:
                raise ValueError(
                    f"load_lora_weights: {path} has {name}={metadata[name]}, but this encoder's "
                    f"enable_lora has {name}={value}"
                )
    if metadata["base_fingerprint"] != base_fingerprint(backbone):
        raise ValueError(
            f"load_lora_weights: {path} was trained on another base: its frozen weights differ "
            "from this encoder's (load it into from_preset of the folder the adapters were trained "
            "from, before any fit or quantize)"
        )


def head_variables(task_model, backbone):
    """The variables of `task_model` outside its encoder `backbone` (its head), in a fixed order."""
    encoder = {id(variable) for variable in backbone.weights}
    return [v for v in task_model.weights if id(v) not in encoder]


def load_task_lora_file(path, backbone, head):
    """Loads a file's adapters into `backbone` and, if the file keeps a head, into `head` (a list
    of variables, head_variables' order); one ValueError line on any mismatch, before any change."""
    arrays, metadata = read_lora_file(path)
    if "head" in metadata:
        mine = [[head_name(v), list(v.shape)] for v in head]
        if mine != metadata["head"]:
            raise ValueError(
                f"load_lora_weights: {path} holds a head {metadata['head']}, but this model's "
                f"head is {mine}"
            )
    backbone.load_lora_weights(path)
    for i, variable in enumerate(head if "head" in metadata else []):
        variable.assign(arrays[f"head/{i}"])


def merge_weights(source, plain):
    """Gives `plain` (the same model built without adapters, quantized alike) the weights of
    `source` with each adapter merged into its kernel: W + A @ B * alpha / rank, as Keras' save
    writes it (an int8 kernel: that sum quantized again)."""
    with tempfile.TemporaryDirectory() as folder:
        weights = os.path.join(folder, "merged.weights.h5")
        source.save_weights(weights)
        plain.load_weights(weights)
