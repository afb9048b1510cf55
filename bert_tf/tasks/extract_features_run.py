"""The bare encoder as a task: contextual embeddings of chosen layers (extract_features.py).

Input: one text per line, or a pair written `text_a ||| text_b`, as the original reads it. Output: the
original's JSON lines (`linex_index`, then per token `token` and `layers` [{`index`, `values`}], values
rounded to 6 decimals), or with output_format="npz" one NumPy archive for large inputs. Both stream:
memory stays flat whatever the input size.

B = batch, S = sequence length, H = hidden size, T = tokens in all.
"""

import collections
import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
import zipfile

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.data.packing import pack_tokens
from bert_tf.distribute import describe, get_strategy
from bert_tf.errors import InputError
from bert_tf.modeling import BertModel
from bert_tf.settings import setting
from bert_tf.shared_settings import BertConfigFileSetting, InitCheckpointSetting, VocabFileSetting
from bert_tf.tasks.run import load_bert_config
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tokenization import (
    FullTokenizer,
    check_vocab,
    validate_case_matches_checkpoint,
)

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")
OUTPUT_FORMATS = ("json", "npz")


def read_sentences(input_file):
    """Yields (line index, text_a, text_b or None) for each line, as the original's read_examples.

    Raises:
      InputError: naming the file and line, for a line that is not UTF-8.
    """
    for number, line in file_io.read_lines(input_file):
        line = line.strip()
        match = _PAIR.match(line)
        index = number - 1
        yield (index, line, None) if match is None else (index, match.group(1), match.group(2))


def parse_layers(layers, num_hidden_layers):
    """ "-1,-2,-3,-4" -> [-1, -2, -3, -4], checked against the model's depth."""
    try:
        indexes = [int(x) for x in layers.split(",")]
    except ValueError:
        raise InputError(f"--layers={layers!r} must be comma-separated integers") from None
    for index in indexes:
        if not -num_hidden_layers <= index < num_hidden_layers:
            raise InputError(
                f"--layers={layers!r}: layer {index} does not exist in a model of "
                f"{num_hidden_layers} layers (use -{num_hidden_layers}..{num_hidden_layers - 1})"
            )
    return indexes


def _batches(sentences, tokenizer, max_seq_length, batch_size):
    """Yields lists of (line index, tokens, ids, segment ids) of batch_size lines."""
    batch = []
    for index, text_a, text_b in sentences:
        tokens, segment_ids = pack_tokens(
            tokenizer.tokenize(text_a),
            None if text_b is None else tokenizer.tokenize(text_b),
            max_seq_length,
        )
        batch.append((index, tokens, tokenizer.convert_tokens_to_ids(tokens), segment_ids))
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _padded(rows):
    longest = max(len(row) for row in rows)
    return np.array([row + [0] * (longest - len(row)) for row in rows], np.int32)


class _JsonWriter:
    """The original's output: one JSON object per line."""

    def __init__(self, path, layer_indexes):
        self.layer_indexes = layer_indexes
        self.file = tf.io.gfile.GFile(path, "w")

    def write(self, line_index, tokens, layer_values):
        """layer_values: one [len(tokens), H] float32 array per layer index."""
        features = []
        for position, token in enumerate(tokens):
            layers = [
                collections.OrderedDict(
                    index=layer_index,
                    values=[round(x, 6) for x in values[position].tolist()],
                )
                for layer_index, values in zip(self.layer_indexes, layer_values, strict=True)
            ]
            features.append(collections.OrderedDict(token=token, layers=layers))
        record = collections.OrderedDict(linex_index=line_index, features=features)
        self.file.write(json.dumps(record) + "\n")

    def close(self):
        self.file.close()

    def abort(self):
        self.file.close()


class _NpzWriter:
    """One .npz: `linex_index` [N], `token_offsets` [N+1], `tokens` [T] str, `layer_<i>` [T, H] float32.

    The tokens of line n are rows token_offsets[n]:token_offsets[n+1]. Values are streamed to temporary
    files and copied into the archive at the end, so memory does not grow with the input.
    """

    def __init__(self, path, layer_indexes):
        self.path = path
        self.layer_indexes = layer_indexes
        self.temp_dir = tempfile.mkdtemp(prefix="extract_features_")
        self.values = [open(os.path.join(self.temp_dir, f"{i}.f32"), "wb") for i in layer_indexes]  # noqa: SIM115
        self.tokens = open(os.path.join(self.temp_dir, "tokens.txt"), "w", encoding="utf-8")  # noqa: SIM115
        self.line_indexes, self.offsets = [], [0]
        self.longest_token, self.hidden_size = 1, 0

    def write(self, line_index, tokens, layer_values):
        self.line_indexes.append(line_index)
        self.offsets.append(self.offsets[-1] + len(tokens))
        for token in tokens:
            self.tokens.write(token.replace("\n", " ") + "\n")
            self.longest_token = max(self.longest_token, len(token))
        for file, values in zip(self.values, layer_values, strict=True):
            self.hidden_size = values.shape[-1]
            file.write(np.ascontiguousarray(values, "<f4").tobytes())

    def close(self):
        for file in (*self.values, self.tokens):
            file.close()
        num_tokens = self.offsets[-1]
        # zipfile needs a seekable file: build the archive locally, then copy it (gs:// works too).
        local_path = os.path.join(self.temp_dir, "features.npz")
        try:
            with zipfile.ZipFile(local_path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                _add_array(archive, "linex_index", np.array(self.line_indexes, np.int64))
                _add_array(archive, "token_offsets", np.array(self.offsets, np.int64))
                self._add_tokens(archive, num_tokens)
                for layer_index in self.layer_indexes:
                    _add_file_as_array(
                        archive,
                        f"layer_{layer_index}",
                        os.path.join(self.temp_dir, f"{layer_index}.f32"),
                        np.dtype("<f4"),
                        (num_tokens, self.hidden_size),
                    )
            tf.io.gfile.copy(local_path, self.path, overwrite=True)
        finally:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def abort(self):
        for file in (*self.values, self.tokens):
            file.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _add_tokens(self, archive, num_tokens):
        dtype = np.dtype(f"<U{self.longest_token}")
        with archive.open("tokens.npy", "w", force_zip64=True) as member:
            _write_npy_header(member, dtype, (num_tokens,))
            with open(os.path.join(self.temp_dir, "tokens.txt"), encoding="utf-8") as tokens:
                for line in tokens:
                    member.write(np.array(line[:-1], dtype).tobytes())


def _write_npy_header(file, dtype, shape):
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_2_0(file, header)


def _add_array(archive, name, array):
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array(member, array)


def _add_file_as_array(archive, name, path, dtype, shape):
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        _write_npy_header(member, dtype, shape)
        with open(path, "rb") as source:
            shutil.copyfileobj(source, member, 1 << 22)


def extract_features(
    model,
    tokenizer,
    input_file,
    output_file,
    layer_indexes,
    max_seq_length=128,
    batch_size=32,
    output_format="json",
):
    """Writes the chosen layers' outputs for every token of every line of input_file.

    Args:
      model: a BertModel (inference only).
      tokenizer: a FullTokenizer of the model's vocab.
      input_file: one text (or `a ||| b`) per line.
      output_file: written under a temporary name and renamed when complete.
      layer_indexes: encoder layers to write, e.g. [-1, -2, -3, -4] (negative counts from the top).
      max_seq_length: texts are cut as the original cuts them ([CLS] and [SEP] included).
      batch_size: lines per forward pass; each batch is padded to its longest line only.
      output_format: "json" (the original's JSON lines) or "npz".

    Returns:
      The number of lines written.
    """
    if output_format not in OUTPUT_FORMATS:
        raise InputError(f"--output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}")

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3, reduce_retracing=True)
    def layers_of(input_ids, input_mask, segment_ids):
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        encoder_outputs = model(features, training=False)["encoder_outputs"]
        return [tf.cast(encoder_outputs[i], tf.float32) for i in layer_indexes]

    num_lines, start, last_log = 0, time.time(), time.time()
    with file_io.atomic_path(output_file) as temp_path:
        writer = (_JsonWriter if output_format == "json" else _NpzWriter)(temp_path, layer_indexes)
        try:
            sentences = read_sentences(input_file)
            for batch in _batches(sentences, tokenizer, max_seq_length, batch_size):
                ids = _padded([ids for _, _, ids, _ in batch])
                mask, segments = _real(batch, ids.shape[1]), _padded([s for *_, s in batch])
                outputs = [output.numpy() for output in layers_of(ids, mask, segments)]
                for row, (line_index, tokens, _, _) in enumerate(batch):
                    values = [output[row, : len(tokens)] for output in outputs]
                    writer.write(line_index, tokens, values)
                num_lines += len(batch)
                if time.time() - last_log > 10:
                    last_log = time.time()
                    logging.info(
                        "%d lines, %.1f lines/s", num_lines, num_lines / (last_log - start)
                    )
            writer.close()
        finally:
            writer.abort()
    logging.info("Wrote %s: %d lines in %.1f s", output_file, num_lines, time.time() - start)
    return num_lines


def _real(batch, length):
    """[B, S] int32 input mask: 1 over each line's tokens, 0 over the batch padding."""
    lengths = np.array([len(tokens) for _, tokens, _, _ in batch])
    return (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)


# ---------------------------------------------------------------------------------- the script


@dataclasses.dataclass(kw_only=True)
class ExtractSettings(BertConfigFileSetting, InitCheckpointSetting, VocabFileSetting):
    """extract_features.py's settings: the original's flags, plus --output_format."""

    input_file: str | None = setting(None, "Text to encode: one text, or `a ||| b`, per line.")
    output_file: str | None = setting(None, "Where to write the features.")
    layers: str = setting("-1,-2,-3,-4", "Encoder layers to write (negative: from the top).")
    max_seq_length: int = setting(128, "Longest WordPiece sequence; longer lines are cut.")
    do_lower_case: bool = setting(True, "Lower-case the input (True for uncased models).")
    batch_size: int = setting(32, "Lines per forward pass.")
    use_tpu: bool = setting(False, "Not supported: runs on the first GPU, else the CPU.")
    master: str | None = setting(None, "Accepted for compatibility; unused.")
    num_tpu_cores: int = setting(8, "Accepted for compatibility; unused.")
    use_one_hot_embeddings: bool = setting(False, "Accepted for compatibility; unused.")
    output_format: str = setting(
        "json", "json (the original's JSON lines) or npz.", choices=OUTPUT_FORMATS
    )


def run_extract_features(settings):
    """extract_features.py: checks every input first, then writes --output_file; returns the lines."""
    if settings.use_tpu:
        raise InputError(
            "--use_tpu: extract_features.py runs on this machine's first GPU, else its CPU, not on "
            "a TPU; run it without --use_tpu"
        )
    settings.take_run_files()  # a run dir: its vocab.txt and bert_config.json
    for name in ("input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file"):
        if not getattr(settings, name):
            raise InputError(f"--{name} is required")
    validate_case_matches_checkpoint(settings.do_lower_case, settings.init_checkpoint)
    for name in ("input_file", "vocab_file"):
        if not file_io.exists(getattr(settings, name)):
            raise InputError(f"--{name}={getattr(settings, name)} does not exist")
    bert_config = load_bert_config(
        settings.bert_config_file, settings.max_seq_length, settings.init_checkpoint
    )
    if settings.batch_size <= 0:
        raise InputError(f"--batch_size must be positive, got {settings.batch_size}")
    folder = os.path.dirname(os.path.abspath(settings.output_file))
    if not file_io.is_url(settings.output_file) and not os.path.isdir(folder):
        raise InputError(
            f"--output_file={settings.output_file}: the folder {folder} does not exist"
        )
    check_vocab(
        settings.vocab_file,
        vocab_size=bert_config.vocab_size,
        config_name=f"--bert_config_file={settings.bert_config_file}",
    )
    layer_indexes = parse_layers(settings.layers, bert_config.num_hidden_layers)
    for _ in read_sentences(settings.input_file):  # a bad line is an error before any work
        pass
    tokenizer = FullTokenizer(settings.vocab_file, do_lower_case=settings.do_lower_case)
    # One device reads the lines in order: the first GPU if there is one, as TF placed the original's.
    strategy = get_strategy("one_device")
    logging.info("Devices: %s", describe(strategy, {"predict": settings.batch_size}))
    with tf.device(strategy.extended.worker_devices[0]):
        model = BertModel(bert_config)
        try:
            restore_init_checkpoint(model, settings.init_checkpoint)
        except (InputError, FileNotFoundError) as error:
            raise InputError(f"--init_checkpoint: {error}") from None
        return extract_features(
            model,
            tokenizer,
            settings.input_file,
            settings.output_file,
            layer_indexes,
            max_seq_length=settings.max_seq_length,
            batch_size=settings.batch_size,
            output_format=settings.output_format,
        )


# ---------------------------------------------------------------------------------- the export

MODEL_TYPE = "encoder"


def build_model(bert_config, info):
    """The encoder alone (any checkpoint's encoder loads into it)."""
    del info
    return BertModel(bert_config)


def export_model(
    model, info, vocab_file, export_dir, version=None, freeze_weights=False, encoder_layers=False
):
    """Writes the encoder as a SavedModel serving raw text (docs/serving.md's contract).

    serving_default: text_a -> "pooled_output" [B, H], "sequence_output" [B, S, H], "input_mask"
    [B, S]; serving_pair: text_a, text_b -> the same; with encoder_layers, also "encoder_layer_<i>"
    [B, S, H] for every layer i.
    """
    from bert_tf.export import serving_module, serving_signatures, write_saved_model

    module = serving_module(model, info, vocab_file)

    def outputs_fn(features):
        outputs = model(features, training=False)
        result = {
            "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
            "input_mask": tf.cast(features["input_mask"], tf.int32),
        }
        if encoder_layers:
            for i, layer_output in enumerate(outputs["encoder_outputs"]):
                result[f"encoder_layer_{i}"] = tf.cast(layer_output, tf.float32)
        return result

    signatures = serving_signatures(module.preprocessor, outputs_fn, serve_pair=True)
    return write_saved_model(export_dir, module, signatures, version=version, freeze=freeze_weights)


SPEC = TaskSpec(name=MODEL_TYPE, build_model=build_model, export_model=export_model)
