"""A RunInference model handler for this project's exports: raw strings in, any export kind.

Beam's own TensorFlow handler loads through Keras (`tf.keras.models.load_model`), which Keras 3
refuses for SavedModel folders (apache/beam#30616), and it takes tensors, not text. Our exports take
raw strings and load with `tf.saved_model.load` once tensorflow_text has registered its ops, so
`ExportModelHandler` does just that, with no Keras.

The handler knows no export kinds: the export's `serving_default` signature drives it. An example
is a dict with one value per input of the signature (`text_a`, `text_b`, `question`, `context`,
`text`, `choices`, ...): a string for a [B] input, a list of strings for a [B, C] one (multiple
choice's `choices`). A batch becomes one call per group of rows whose lists have the same length
(a [B, C] tensor must be rectangular), and each row's prediction is {output name: numpy value}.

A row's prediction does not depend on the rows it was batched with. Outputs whose axis 1 the
signature leaves open are padded to the batch's longest row, so each row is cut back to its own
extent, which a call on that row alone gives:
  * by the signature's `input_mask` output [B, S], when there is one (the encoder): S = its sum;
  * else by a `word_count` output [B] (the tagger: `labels`, `words`, `probabilities` [B, W, ...]);
  * else, for strings, to the last non-empty one (the multi-label `labels`, padded with "").
An open axis no rule applies to is the row's own (multiple choice's C), so it is left as it is.
Floats may still differ from a call on the row alone in the last bits (padding changes the order
of sums); tests/test_beam_predict.py checks every kind against such calls to 1e-5.

B = rows of a batch, C = choices of a row, S = tokens, W = words.
"""

import dataclasses
import os
import re

import numpy as np
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from bert_tf.errors import InputError

SIGNATURE = "serving_default"
_VERSION = re.compile(r"^\d+$")


@dataclasses.dataclass(frozen=True)
class ServingSignature:
    """An export's `serving_default` as its saved_model.pb declares it.

    inputs: {name: rank}, each a string tensor: 1 for one text per row [B], 2 for a list [B, C].
    outputs: {name: (dtype name, shape)}, shape a tuple with None where the axis is left open;
      axis 0 is the batch.
    """

    inputs: dict
    outputs: dict

    def describe_inputs(self):
        """'text_a, text_b' (list inputs marked), for messages."""
        return ", ".join(f"{n} (a list)" if r == 2 else n for n, r in self.inputs.items())


def version_folder(export_dir, flag="--export_dir"):
    """The SavedModel folder of `export_dir`: itself, or its highest numbered version folder.

    Args:
      export_dir: the folder TF Serving watches (version folders 1, 2, ...), or one version folder.
      flag: the flag it came from, for messages.

    Raises:
      InputError: if neither it nor a numbered folder in it holds a saved_model.pb.
    """
    import tensorflow as tf

    export_dir = os.fspath(export_dir).rstrip("/")
    if tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    if not tf.io.gfile.isdir(export_dir):
        raise InputError(f"{flag}={export_dir}: no such folder")
    versions = sorted(
        (int(name.rstrip("/")) for name in tf.io.gfile.listdir(export_dir)
         if _VERSION.match(name.rstrip("/"))),
        reverse=True,
    )  # fmt: skip
    for version in versions:
        folder = os.path.join(export_dir, str(version))
        if tf.io.gfile.exists(os.path.join(folder, "saved_model.pb")):
            return folder
    raise InputError(
        f"{flag}={export_dir}: no SavedModel, neither saved_model.pb in it nor a numbered "
        "version folder holding one"
    )


def read_signature(folder):
    """The `serving_default` of the SavedModel in `folder`, read from its saved_model.pb.

    The names, dtypes and shapes are those `structured_input_signature` and `structured_outputs`
    of the loaded signature give, without loading the model: the main process checks the input
    files against them in a moment, whatever the model's size.

    Raises:
      InputError: if the SavedModel has no serving_default, or an input that is not a string
        tensor [B] or [B, C].
    """
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(folder, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    graphs = [g for g in saved_model.meta_graphs if "serve" in g.meta_info_def.tags]
    if not graphs or SIGNATURE not in graphs[0].signature_def:
        raise InputError(f"{folder}: the SavedModel has no {SIGNATURE} signature to serve")
    signature = graphs[0].signature_def[SIGNATURE]

    def spec(info):
        shape = tuple(None if d.size < 0 else d.size for d in info.tensor_shape.dim)
        return tf.dtypes.as_dtype(info.dtype).name, shape

    inputs = {}
    for name, info in sorted(signature.inputs.items()):
        dtype, shape = spec(info)
        if dtype != "string" or len(shape) not in (1, 2) or info.tensor_shape.unknown_rank:
            raise InputError(
                f"{folder}: {SIGNATURE} input {name!r} is {dtype} {list(shape)}, not raw text"
            )
        inputs[name] = len(shape)
    outputs = {name: spec(info) for name, info in sorted(signature.outputs.items())}
    return ServingSignature(inputs=inputs, outputs=outputs)


class ExportModelHandler(ModelHandler):
    """RunInference over an export's `serving_default`: examples of raw text -> its outputs.

    Example:
    ```python
    handler = ExportModelHandler("exports/sentiment", max_batch_size=64)
    predictions = examples | RunInference(handler)  # examples: {"text_a": "..."}
    # each a PredictionResult(example, {"probabilities": array([0.1, 0.9]), "label": b"pos"})
    ```
    """

    def __init__(self, export_dir, *, min_batch_size=8, max_batch_size=64):
        """export_dir: the folder TF Serving watches (its highest version is used), or one version
        folder. min_batch_size, max_batch_size: the rows Beam's BatchElements puts in one call."""
        if not 1 <= min_batch_size <= max_batch_size:
            raise InputError(
                f"batch sizes must satisfy 1 <= min ({min_batch_size}) <= max ({max_batch_size})"
            )
        super().__init__(min_batch_size=min_batch_size, max_batch_size=max_batch_size)
        self.folder = version_folder(export_dir)
        self.signature = read_signature(self.folder)

    def load_model(self):
        """The SavedModel, loaded as TF Serving loads it: TensorFlow and tensorflow_text only."""
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (registers the tokenizer ops the graph uses)

        return tf.saved_model.load(self.folder)

    def run_inference(self, batch, model, inference_args=None):
        """[example] -> [PredictionResult(example, {output name: numpy value})], in batch order."""
        if inference_args:
            raise ValueError(f"{SIGNATURE} takes no inference_args, got {sorted(inference_args)}")
        serve = model.signatures[SIGNATURE]
        results = [None] * len(batch)
        for indexes in _groups_of_equal_lists(batch, self.signature.inputs):
            rows = [batch[i] for i in indexes]
            for index, prediction in zip(indexes, self._predict(serve, rows), strict=True):
                results[index] = PredictionResult(batch[index], prediction)
        return results

    def get_metrics_namespace(self):
        return "bert_tf_export"

    def _predict(self, serve, rows):
        """One call of `serve` on `rows` -> one {output name: value} per row, cut to its extent."""
        import tensorflow as tf

        inputs = {}
        for name in self.signature.inputs:
            missing = next((row for row in rows if name not in row), None)
            if missing is not None:
                raise ValueError(f"an example lacks the input {name!r}: {missing!r}")
            inputs[name] = tf.constant([row[name] for row in rows], tf.string)
        outputs = {name: value.numpy() for name, value in serve(**inputs).items()}
        return split_rows(outputs, self.signature.outputs)


def _groups_of_equal_lists(batch, inputs):
    """The batch's row indexes, grouped by the lengths of their list inputs, in first-seen order."""
    list_inputs = [name for name, rank in inputs.items() if rank == 2]
    groups = {}
    for index, example in enumerate(batch):
        groups.setdefault(tuple(len(example[name]) for name in list_inputs), []).append(index)
    return list(groups.values())


def split_rows(outputs, specs):
    """A batch's outputs -> one {name: value} per row, each cut to the row's own extent.

    Args:
      outputs: {name: numpy array [B, ...]}, a signature call's result.
      specs: {name: (dtype name, shape)}, the signature's outputs (ServingSignature.outputs).

    Returns:
      [{name: numpy value}] of length B; see the module docstring for the cuts.
    """
    batch_size = len(next(iter(outputs.values())))
    lengths = _own_lengths(outputs)
    rows = [{} for _ in range(batch_size)]
    for name, value in outputs.items():
        dtype, shape = specs[name]
        open_axis = len(shape) >= 2 and shape[1] is None
        for i in range(batch_size):
            row = value[i]
            if open_axis and lengths is not None and value.shape[1] == max(lengths, default=0):
                row = row[: lengths[i]]
            elif open_axis and dtype == "string":
                row = row[: _last_non_empty(row) + 1]
            rows[i][name] = row
    return rows


def _own_lengths(outputs):
    """Each row's own length of the padded axis: [B] ints from `input_mask` or `word_count`, or None."""
    mask = outputs.get("input_mask")
    if mask is not None and mask.ndim == 2:
        return [int(n) for n in (mask != 0).sum(axis=1)]
    count = outputs.get("word_count")
    if count is not None and count.ndim == 1:
        return [int(n) for n in count]
    return None


def _last_non_empty(row):
    """The index of the last entry along axis 0 of a string row holding a non-empty string; -1 if
    none (a [B, K, ...] row: an entry is empty when all its strings are)."""
    for index in range(len(row) - 1, -1, -1):
        if any(np.asarray(row[index], dtype=object).reshape(-1)):
            return index
    return -1
