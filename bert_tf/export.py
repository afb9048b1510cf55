"""THE SavedModel writer: every export (encoder, classifier, SQuAD, tagger, multiple choice) goes through here.

An export is `export_dir/<version>/`, the layout TF Serving watches: a numbered folder holding one SavedModel
that loads with only `tensorflow` and `tensorflow_text` imported. It is written into a temporary folder
beside it and renamed when complete, so a server never sees half a model. A task hands `write_saved_model`
a tf.Module holding its model and `bert_tf.preprocessing.GraphPreprocessor`, and the signatures it serves;
`serving_signatures` builds the ones every export shares from the task's output function:

- `serving_default`: raw strings -> the task's outputs (`text_a`, plus `text_b` for pair tasks);
- `preprocess` (and `preprocess_pair`): raw strings -> int32 `input_ids`, `input_mask`, `segment_ids`;
- `serve_ids`: those three -> the same outputs as `serving_default`.

B = batch, S = sequence length (padded to the longest input of the batch, at most max_seq_length).
"""

import contextlib
import inspect
import os
import re

import keras
import tensorflow as tf
from absl import logging
from tensorflow.python.framework import convert_to_constants

from bert_tf import file_io
from bert_tf.atomic_folder import remove_leftovers
from bert_tf.errors import InputError

ID_FEATURES = ("input_ids", "input_mask", "segment_ids")
_VERSION = re.compile(r"^\d+$")


def _text_spec(name):
    return tf.TensorSpec([None], tf.string, name=name)


def _ids_specs():
    return [tf.TensorSpec([None, None], tf.int32, name=name) for name in ID_FEATURES]


def serving_signatures(preprocessor, outputs_fn, pair=False, serve_pair=False):
    """The signatures every export shares, around the task's `outputs_fn`.

    Args:
      preprocessor: a bert_tf.preprocessing.GraphPreprocessor (tokenizes and packs in the graph).
      outputs_fn: ({input_ids, input_mask, segment_ids}: int32 [B, S]) -> {name: tensor [B, ...]}, the
        task's model outputs (inference mode).
      pair: `serving_default` takes `text_a` and `text_b` (a sentence-pair task).
      serve_pair: also a `serving_pair` signature over `text_a` and `text_b` (the encoder's export,
        whose `serving_default` takes `text_a` alone).

    Returns:
      {signature name: tf.function with an input signature}, ready for `write_saved_model`.
    """

    one, two = [_text_spec("text_a")], [_text_spec("text_a"), _text_spec("text_b")]
    # Each piece is traced once and called by the signatures that share it: a signature that traced
    # the tokenizer and the model anew would make the export slower to write and larger.
    preprocess = tf.function(lambda text_a: preprocessor(text_a), input_signature=one)
    preprocess_pair = tf.function(
        lambda text_a, text_b: preprocessor(text_a, text_b), input_signature=two
    )
    outputs = tf.function(
        outputs_fn, input_signature=[{n: s for n, s in zip(ID_FEATURES, _ids_specs(), strict=True)}]
    )

    def serve(text_a):
        return outputs(preprocess(text_a))

    def serve_two(text_a, text_b):
        return outputs(preprocess_pair(text_a, text_b))

    def serve_ids(input_ids, input_mask, segment_ids):
        return outputs(
            {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        )

    signatures = {
        "serving_default": tf.function(
            serve_two if pair else serve, input_signature=two if pair else one
        ),
        "preprocess": preprocess,
        "preprocess_pair": preprocess_pair,
        "serve_ids": tf.function(serve_ids, input_signature=_ids_specs()),
    }
    if serve_pair:
        signatures["serving_pair"] = tf.function(serve_two, input_signature=two)
    return signatures


def _servable(module, frozen):
    """`module` with each Keras layer or model replaced by the list of its tf.Variables.

    A Keras 3 variable wraps a tf.Variable, and saving the Keras object writes both: the TF2 Python
    loader links them up again, but the C++ loader of TF Serving (and `saved_model_cli run`) restores
    one copy while the signatures read the other ("Could not find variable ..."). Tracking only the
    wrapped tf.Variables, which the signatures capture, gives a SavedModel both loaders serve.
    """
    servable = tf.Module()
    for name, value in vars(module).items():
        if name.startswith("_") or (frozen and isinstance(value, keras.Model)):
            continue  # a frozen model's weights are constants of the signatures' graphs
        if isinstance(value, keras.layers.Layer):
            setattr(servable, f"{name}_variables", [v.value for v in value.variables])
        else:
            setattr(servable, name, value)
    return servable


# A GraphDef (the frozen weights live in saved_model.pb) cannot pass 2 GiB: a model whose weights
# take more than this is exported with its weights as variables.
MAX_FROZEN_BYTES = 1536 * 2**20


def _frozen_call(model):
    """`model.call` for inference with the model's weights folded into constants.

    oneDNN packs a matmul's weight into its blocked layout once and keeps it only when the weight is a
    constant of the graph; a variable is re-read and re-packed on every call, which at one request
    (BERT-base, 1 x 32 word pieces) was about a fifth of the time (docs/serving.md, *One request at
    a time*). The model is traced once per input structure (every dimension left free) and frozen
    (`convert_variables_to_constants_v2`), so the signatures that call the model share one frozen
    function and the SavedModel holds one copy of the weights.
    """
    original, frozen = model.call, {}
    takes_training = "training" in inspect.signature(original).parameters

    def call(inputs, training=None, **kwargs):
        if training or kwargs:
            raise ValueError(f"an export calls its model for inference only, not with {kwargs}")
        specs = tf.nest.map_structure(
            lambda t: tf.TensorSpec([None] * t.shape.rank, t.dtype, name=None), inputs
        )
        key = repr(specs)
        if key not in frozen:
            with tf.init_scope():  # out of the signature being traced: freezing reads the weights
                traced = tf.function(
                    lambda x: original(x, training=False) if takes_training else original(x)
                )
                traced = traced.get_concrete_function(specs)
                frozen[key] = (
                    traced.structured_outputs,
                    (
                        convert_to_constants.convert_variables_to_constants_v2(
                            traced, lower_control_flow=False
                        )
                    ),
                )
        structure, function = frozen[key]
        flat = function(*tf.nest.flatten(inputs, expand_composites=True))
        return tf.nest.pack_sequence_as(structure, flat, expand_composites=True)

    return call


@contextlib.contextmanager
def _frozen_models(module):
    """Within: each Keras model `module` holds is called with frozen weights (`_frozen_call`)."""
    models = [
        value
        for name, value in vars(module).items()
        if not name.startswith("_") and isinstance(value, keras.Model)
    ]
    for model in models:
        object.__setattr__(model, "call", _frozen_call(model))
    try:
        yield models
    finally:
        for model in models:
            object.__delattr__(model, "call")


def _weight_bytes(module):
    return sum(
        v.value.shape.num_elements() * v.value.dtype.size
        for value in vars(module).values()
        if isinstance(value, keras.layers.Layer)
        for v in value.variables
    )


def serving_module(model, info, vocab_file):
    """What every export starts from: a tf.Module holding the model and a GraphPreprocessor of the
    run's vocab, casing and max_seq_length (info: its TaskInfo)."""
    from bert_tf.preprocessing import GraphPreprocessor

    module = tf.Module()
    module.model = model
    module.preprocessor = GraphPreprocessor(vocab_file, info.do_lower_case, info.max_seq_length)
    return module


def next_version(export_dir):
    """The next free version number in export_dir: 1 + the largest numbered folder there (1 if none)."""
    if not tf.io.gfile.isdir(export_dir):
        return 1
    versions = [
        int(name.rstrip("/"))
        for name in tf.io.gfile.listdir(export_dir)
        if _VERSION.match(name.rstrip("/"))
    ]
    return max(versions, default=0) + 1


# The hidden folder a killed export of version N leaves in export_dir (bert_tf.file_io.atomic_path).
_VERSION_LEFTOVER = re.compile(r"^\.(\d+)\.tmp-[0-9a-f]{12}$")


def check_export_dir(export_dir):
    """InputError naming --export_dir when it is a file: it must be a folder, or not exist yet."""
    if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
        raise InputError(f"--export_dir={export_dir} is a file; give a folder (new or existing)")


def remove_export_leftovers(export_dir):
    """Removes the hidden `.<version>.tmp-<12 hex>` folders of killed exports in a local
    export_dir (nothing else); returns their paths."""
    if file_io.is_url(export_dir) or not os.path.isdir(export_dir):
        return []
    removed = []
    for entry in sorted(os.listdir(export_dir)):
        found = _VERSION_LEFTOVER.match(entry)
        if found:
            removed += remove_leftovers(os.path.join(export_dir, found.group(1)))
    return removed


def write_saved_model(export_dir, module, signatures, version=None, assets=None, freeze=False):
    """Writes `module` as export_dir/<version>/, atomically.

    Args:
      export_dir: the folder TF Serving watches (created if missing; gs:// and other gfile URLs work).
      module: a tf.Module tracking everything the signatures use (model, preprocessor, tables).
      signatures: {name: tf.function with an input signature}; must include "serving_default".
      version: the version folder's number; default next_version(export_dir).
      assets: {file name: text} written to the export's assets/ folder (e.g. "labels.txt").
      freeze: the signatures see the weights of the Keras models in `module` as constants
        (`_frozen_call`; the same outputs up to float32 rounding, faster at small batches); False,
        or weights over MAX_FROZEN_BYTES, saves them as variables.

    Returns:
      The path of the finished version folder.

    Raises:
      InputError: if export_dir is a file, the version folder already exists or version is not
        a positive integer.
    """
    if "serving_default" not in signatures:
        raise ValueError(f"an export needs a serving_default signature, got {sorted(signatures)}")
    check_export_dir(export_dir)
    remove_export_leftovers(export_dir)
    version = next_version(export_dir) if version is None else version
    if isinstance(version, bool) or not isinstance(version, int) or version <= 0:
        raise InputError(f"--version must be a positive integer, got {version!r}")
    final_path = os.path.join(export_dir, str(version))
    if tf.io.gfile.exists(final_path):
        raise InputError(
            f"--version={version}: {final_path} already exists; choose another version"
        )
    tf.io.gfile.makedirs(export_dir)
    # TF Serving only loads folders named by a number: the temporary one is invisible to it.
    freeze = freeze and _weight_bytes(module) <= MAX_FROZEN_BYTES
    with file_io.atomic_path(final_path) as temp_path:
        with _frozen_models(module) if freeze else contextlib.nullcontext():
            tf.saved_model.save(_servable(module, freeze), temp_path, signatures=signatures)
        for name, text in (assets or {}).items():
            file_io.write_text(os.path.join(temp_path, "assets", name), text)
    logging.info(
        "Exported SavedModel %s (signatures: %s)", final_path, ", ".join(sorted(signatures))
    )
    return final_path
