"""LiteRT copies of an export: its `serve_ids` (ids in) as a .tflite, run by ai-edge-litert.

`export_saved_model.py --litert=float32|int8` writes `<export_dir>/<version>_serve_ids_<q>.tflite`
beside the version folder (TF Serving loads only numbered folders, so it ignores the file). float32
keeps the weights as they are; int8 is dynamic-range quantization (`tf.lite.Optimize.DEFAULT`): int8
weights, activations quantized on the fly per call. The file is converted from the SavedModel's
frozen graph (bert_tf/export.py), checked by ai-edge-litert's interpreter, and written atomically.

ai-edge-litert is the `litert` extra (from a checkout, `pip install -e '.[litert]'`): imported on
this path only.
"""

import importlib.util
import os
import re

from bert_tf import file_io
from bert_tf.errors import InputError

QUANTIZATIONS = ("float32", "int8")
SIGNATURE = "serve_ids"
# The export kinds whose serve_ids use ops LiteRT's builtin kernels lack (TensorFlow 2.21's converter;
# ai-edge-litert has no TF-ops fallback): what blocks each.
UNCONVERTIBLE = {
    "tagger": "FloorDiv and a string SelectV2 (the per-word labels)",
    "feature_tagger": "the BiLSTM's TensorList loop (dynamic element shape)",
    "multi_label": "RaggedTensorToTensor and BroadcastTo (the labels over their thresholds)",
    "embedding": "a StridedSlice adding an axis (the mean pooling's mask)",
}


def check_litert(quantization, model_type=None, window_combination=None):
    """Raises InputError (one line, naming --litert) for a bad value, a kind that does not convert
    (UNCONVERTIBLE) or a missing extra: before any work starts."""
    if quantization not in QUANTIZATIONS:
        raise InputError(
            f"--litert must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}"
        )
    if model_type in UNCONVERTIBLE:
        raise InputError(
            f"--litert: a {model_type} export does not convert to LiteRT: its serve_ids needs "
            f"{UNCONVERTIBLE[model_type]}, which LiteRT's builtin ops lack"
        )
    if window_combination in ("max", "mean"):
        raise InputError(
            f"--litert: a classifier trained with --window_combination={window_combination} does "
            f"not convert to LiteRT: its serve_ids needs Segment{window_combination.title()}, "
            "which LiteRT's builtin ops lack (weighted_mean converts)"
        )
    if importlib.util.find_spec("ai_edge_litert") is None:
        raise InputError(
            "--litert needs ai-edge-litert, which is not installed: from a checkout, "
            "pip install -e '.[litert]'"
        )


def tflite_path(saved_model_path, quantization):
    """<export_dir>/<version>_serve_ids_<quantization>.tflite for the version folder given."""
    folder, version = os.path.split(os.path.normpath(saved_model_path))
    return os.path.join(folder, f"{version}_{SIGNATURE}_{quantization}.tflite")


def convert(saved_model_path, quantization):
    """The .tflite bytes of the export's serve_ids (every dimension left free)."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(
        saved_model_path, signature_keys=[SIGNATURE]
    )
    if quantization == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic-range: int8 weights
    try:
        return converter.convert()
    except Exception as error:  # the converter's message is pages of MLIR: name the ops
        ops = sorted(set(re.findall(r"'tf\.(\w+)' op", str(error)))) or [type(error).__name__]
        raise InputError(
            f"--litert: {saved_model_path}'s {SIGNATURE} does not convert to LiteRT: it needs "
            f"{', '.join(ops)}, which LiteRT's builtin ops lack"
        ) from None


def signature_runner(model, num_threads=None):
    """ai-edge-litert's runner of serve_ids for a .tflite path or its bytes: runner(**ids) -> outputs."""
    from ai_edge_litert.interpreter import Interpreter

    if isinstance(model, bytes):
        interpreter = Interpreter(model_content=model, num_threads=num_threads)
    else:
        interpreter = Interpreter(model_path=model, num_threads=num_threads)
    return interpreter.get_signature_runner(SIGNATURE)


def write_tflite(saved_model_path, quantization):
    """Converts the export at `saved_model_path` and writes it beside; returns the file's path."""
    check_litert(quantization)
    model = convert(saved_model_path, quantization)
    signature_runner(model)  # loads in LiteRT's own interpreter before anything is written
    path = tflite_path(saved_model_path, quantization)
    with file_io.atomic_write(path, "wb") as writer:
        writer.write(model)
    return path
