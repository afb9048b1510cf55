"""Converting a Hugging Face BERT folder into a Google-format release folder (convert_checkpoint.py).

    python convert_checkpoint.py --hf_model_dir=all-MiniLM-L6-v2 --output_dir=minilm_google

reads config.json, vocab.txt and model.safetensors (with numpy: no torch or transformers needed) and
writes bert_config.json, vocab.txt and bert_model.ckpt.{index,data-00000-of-00001}, which load with
bert_tf.checkpoints.load_google_checkpoint, --init_checkpoint and the original TF1 code. Pretraining
heads (cls.predictions / cls.seq_relationship) are converted when the file has both.

A sentence-transformers folder (with modules.json) also gets embedding.json beside bert_config.json:
its pooling, normalisation, max_seq_length and casing (bert_tf/formats/sentence_transformers_folder.py), which
export_saved_model.py --model_type=embedding and run_embedding.py read.

The Google names come from bert_tf.checkpoints.google_variable_names and the file is written by
save_google_checkpoint: this script only knows how Hugging Face spells each of those names.
"""

import dataclasses
import json
import os
import re
import shutil

import numpy as np
from absl import logging

from bert_tf import file_io
from bert_tf.atomic_folder import remove_leftovers, replace_folder
from bert_tf.checkpoints import google_variable_names, save_google_checkpoint
from bert_tf.errors import InputError
from bert_tf.formats.hf_names import HIDDEN_ACTS, hf_names
from bert_tf.formats.keras_hub_preset import is_preset, read_preset
from bert_tf.formats.sentence_transformers_folder import (
    EMBEDDING_FILE,
    sentence_transformers_settings,
)
from bert_tf.modeling import SIZE_FIELDS, BertConfig, BertModel, BertPretrainingModel
from bert_tf.settings import restated, setting
from bert_tf.shared_settings import BertConfigFileSetting, InitCheckpointSetting, VocabFileSetting

_BERT_CONFIG_KEYS = tuple(field.name for field in dataclasses.fields(BertConfig))
# Tensors with no Google variable by design: the position_ids buffer (0, 1, 2, ...), and the MLM decoder,
# tied to the word embeddings and to cls.predictions.bias.
_NOT_WEIGHTS = re.compile(
    r"(bert\.)?embeddings\.position_ids|cls\.predictions\.decoder\.(weight|bias)"
)
_INPUT_FILES = ("config.json", "vocab.txt", "model.safetensors")


OUTPUT_FORMATS = ("google", "huggingface", "keras_hub")


@dataclasses.dataclass(kw_only=True)
class ConvertSettings(BertConfigFileSetting, InitCheckpointSetting, VocabFileSetting):
    """convert_checkpoint.py's settings."""

    hf_model_dir: str | None = setting(
        None,
        "Hugging Face BERT folder (config.json, vocab.txt, model.safetensors) or keras-hub preset "
        "folder (metadata.json, model.weights.h5) to convert into a Google-format release.",
    )
    output_dir: str | None = setting(
        None,
        "Folder to write (the release, or the --output_format folder); created; must be absent or "
        "empty unless --overwrite.",
    )
    overwrite: bool = setting(
        False,
        "Replace a non-empty --output_dir whole: the new folder is written beside it and swapped "
        "in, so no file of the old one stays. Default False.",
    )
    output_format: str | None = setting(
        None,
        "google: --hf_model_dir into a Google-format release; huggingface or keras_hub: "
        "--init_checkpoint into a transformers folder or a keras-hub preset. Default: google with "
        "--hf_model_dir, huggingface with --init_checkpoint.",
        choices=OUTPUT_FORMATS,
    )
    init_checkpoint: str | None = restated(
        InitCheckpointSetting,
        "init_checkpoint",
        help="--output_format=huggingface|keras_hub: a checkpoint prefix, a release folder or a "
        "fine-tuning run's output_dir (its task.json gives the task and labels).",
    )
    vocab_file: str | None = restated(
        VocabFileSetting,
        "vocab_file",
        help="--output_format=huggingface|keras_hub: vocab.txt. Default: the vocab.txt beside the "
        "checkpoint (a run's output_dir, a release folder).",
    )
    bert_config_file: str | None = restated(
        BertConfigFileSetting,
        "bert_config_file",
        help="Default: the run's task.json, else bert_config.json beside the checkpoint.",
    )
    do_lower_case: bool | None = setting(
        None, "Default: the run's (task.json), a converted model's (embedding.json), else True."
    )


def run(settings):
    """convert_checkpoint.py: converts as `settings` says; bad input is an InputError naming it."""
    if settings.output_format is None:  # the direction the input flag says
        out = settings.init_checkpoint and not settings.hf_model_dir
        settings = dataclasses.replace(settings, output_format="huggingface" if out else "google")
    if settings.output_format not in OUTPUT_FORMATS:
        raise InputError(f"--output_format must be one of {OUTPUT_FORMATS}")
    if not settings.output_dir:
        raise InputError("--output_dir is required")
    remove_leftovers(settings.output_dir)  # of a killed conversion into the same folder
    if settings.output_format != "google":
        from bert_tf.formats.convert_out import convert_out

        return convert_out(settings)
    if not settings.hf_model_dir:
        if settings.init_checkpoint:
            raise InputError(
                "--init_checkpoint converts out: pass --output_format=huggingface or keras_hub "
                "(--output_format=google converts --hf_model_dir in)"
            )
        raise InputError("--hf_model_dir is required")
    try:
        return convert(settings.hf_model_dir, settings.output_dir, overwrite=settings.overwrite)
    except (FileNotFoundError, FileExistsError) as error:
        raise InputError(str(error)) from None


def convert(hf_model_dir, output_dir, overwrite=False):
    """Converts a Hugging Face BERT folder into a Google-format release folder.

    Args:
      hf_model_dir: folder holding config.json, vocab.txt and model.safetensors; or a keras-hub
        BERT preset folder (bert_tf/formats/keras_hub_preset.py), whose encoder is converted.
      output_dir: folder to write bert_config.json, vocab.txt and bert_model.ckpt.* into; written in a
        temporary folder beside it and renamed when complete.
      overwrite: allow a non-empty output_dir, replaced whole (no file of it stays).

    Returns:
      The sorted names of the Hugging Face tensors that were not converted.

    Raises:
      FileNotFoundError: naming the missing input file.
      FileExistsError: if output_dir is not empty and overwrite is False.
      ValueError: naming the file and key or tensor, for a model this BERT cannot represent.
    """
    output_dir = os.path.abspath(output_dir)
    if os.path.isdir(hf_model_dir) and is_preset(hf_model_dir):
        _check_output_dir(output_dir, overwrite)
        return _convert_preset(hf_model_dir, output_dir)
    paths = _input_paths(hf_model_dir)
    _check_output_dir(output_dir, overwrite)
    bert_config = bert_config_from_hf(
        file_io.read_json_object(paths["config.json"]), paths["config.json"]
    )
    _check_vocab(paths["vocab.txt"], bert_config.vocab_size)
    _log_lower_case(hf_model_dir)
    embedding = sentence_transformers_settings(hf_model_dir, bert_config)
    model, unused = _model_from_hf(bert_config, paths["model.safetensors"])
    _write_release(model, bert_config, paths["vocab.txt"], output_dir, embedding)
    logging.info(
        "Converted %s (%s) into %s",
        hf_model_dir,
        "with pretraining heads" if isinstance(model, BertPretrainingModel) else "encoder only",
        output_dir,
    )
    return unused


def _convert_preset(preset_dir, output_dir):
    """A keras-hub preset folder (bert_tf/formats/keras_hub_preset.py) into a Google-format release."""
    bert_config, weights, vocab_path, do_lower_case = read_preset(preset_dir)
    model = BertModel(bert_config)
    for name, variable in google_variable_names(model).items():
        variable.assign(weights[name])
    _write_release(model, bert_config, vocab_path, output_dir)
    if os.path.isfile(os.path.join(preset_dir, "task.weights.h5")):
        logging.warning("%s: the task's head (task.weights.h5) is not converted", preset_dir)
    logging.info(
        "Converted the keras-hub preset %s into %s; tokenize with --do_lower_case=%s",
        preset_dir,
        output_dir,
        do_lower_case,
    )
    return []


def _input_paths(hf_model_dir):
    if not os.path.isdir(hf_model_dir):
        raise FileNotFoundError(f"--hf_model_dir={hf_model_dir} is not a folder")
    paths = {name: os.path.join(hf_model_dir, name) for name in _INPUT_FILES}
    for path in paths.values():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} does not exist (--hf_model_dir={hf_model_dir})")
    return paths


def _model_from_hf(bert_config, safetensors_path):
    """A BertModel (BertPretrainingModel if the file has both heads) holding the file's weights."""
    tensors = _load_tensors(safetensors_path)
    model = BertPretrainingModel(bert_config) if _has_heads(tensors) else BertModel(bert_config)
    targets = google_variable_names(model)
    values, unused = google_values_from_hf(tensors, targets, safetensors_path)
    for name, value in values.items():
        targets[name].assign(value)
    logging.info("Assigned %d variables from %s", len(values), safetensors_path)
    _log_unused(unused, safetensors_path)
    return model, unused


def _write_release(model, bert_config, vocab_path, output_dir, embedding=None):
    """Writes the release (and embedding.json, if `embedding`) into a temporary folder beside
    output_dir, then moves it there."""
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    # Not tempfile.mkdtemp: its folder is private (0700) and would stay so once renamed to output_dir.
    temp_dir = file_io.temporary_name(output_dir)
    os.mkdir(temp_dir)
    try:
        save_google_checkpoint(model, os.path.join(temp_dir, "bert_model.ckpt"))
        with open(os.path.join(temp_dir, "bert_config.json"), "w", encoding="utf-8") as f:
            f.write(bert_config.to_json_string())
        shutil.copyfile(vocab_path, os.path.join(temp_dir, "vocab.txt"))
        if embedding is not None:
            text = json.dumps(embedding, indent=2, sort_keys=True) + "\n"
            file_io.write_text(os.path.join(temp_dir, EMBEDDING_FILE), text)
        _publish(temp_dir, output_dir)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def bert_config_from_hf(hf_config, config_path):
    """A BertConfig from a Hugging Face config.json dict; refuses what our BertModel would compute otherwise.

    Args:
      hf_config: the parsed config.json.
      config_path: its path, for error messages.

    Returns:
      A validated BertConfig; hidden_act is renamed by HIDDEN_ACTS (HF "gelu" -> "gelu_exact").

    Raises:
      ValueError: naming config_path and the key, for another model type, a missing size, a LayerNorm
        epsilon other than 1e-12, relative position embeddings, a decoder or an unknown hidden_act.
    """
    checks = (
        ("model_type", "bert"),
        ("layer_norm_eps", 1e-12),
        ("position_embedding_type", "absolute"),
        ("is_decoder", False),
    )
    for key, supported in checks:
        value = hf_config.get(key, supported)
        if value != supported:
            raise ValueError(
                f"{config_path}: {key}={value!r} is not supported; this BERT needs {supported!r}"
            )
    # The sizes fix the weights' shapes: taken from config.json, never from a default.
    missing = [key for key in SIZE_FIELDS if key not in hf_config]
    if missing:
        raise ValueError(f"{config_path} lacks the BERT sizes {missing}")
    hidden_act = hf_config.get("hidden_act", "gelu")  # Hugging Face's default, the erf form
    if hidden_act not in HIDDEN_ACTS:
        raise ValueError(
            f"{config_path}: hidden_act={hidden_act!r} has no equivalent here; "
            f"supported: {sorted(HIDDEN_ACTS)}"
        )
    config = {key: hf_config[key] for key in _BERT_CONFIG_KEYS if key in hf_config}
    config["hidden_act"] = HIDDEN_ACTS[hidden_act]
    logging.info("hidden_act %r (Hugging Face) -> %r", hidden_act, config["hidden_act"])
    try:
        return BertConfig.from_dict(config)
    except ValueError as e:
        raise ValueError(f"{config_path}: {e}") from e


def google_values_from_hf(tensors, targets, source):
    """Finds, transposes and shape-checks the Hugging Face tensor of every Google variable.

    Args:
      tensors: {Hugging Face name: np.ndarray} of a model.safetensors.
      targets: {Google name: Keras variable}, from google_variable_names.
      source: the file the tensors come from, for error messages.

    Returns:
      ({Google name: float32 np.ndarray}, sorted names of the tensors that were not used).

    Raises:
      ValueError: naming the tensor and `source`, if one is missing or has another shape.
    """
    prefix = "bert." if any(name.startswith("bert.") for name in tensors) else ""
    if "cls/predictions/output_bias" in targets:
        _check_decoder_is_tied(tensors, prefix, source)
    values, missing, used = {}, [], set()
    for google_name, variable in targets.items():
        candidates, is_linear = hf_names(google_name, prefix)
        hf_name = next((name for name in candidates if name in tensors), None)
        if hf_name is None:
            missing.append(candidates[0])
            continue
        # torch.nn.Linear stores its weight [out, in] and computes x @ W.T + b; Google's dense kernels are
        # [in, out] (x @ K + b), so K = W.T.
        value = tensors[hf_name].T if is_linear else tensors[hf_name]
        expected = list(variable.shape)
        if list(value.shape) != expected:
            stored = f" (stored [out, in]: {expected[::-1]})" if is_linear else ""
            raise ValueError(
                f"{source}: tensor {hf_name!r} has shape {list(tensors[hf_name].shape)}, but "
                f"config.json gives {google_name} the shape {expected}{stored}"
            )
        values[google_name] = np.ascontiguousarray(value, dtype=np.float32)
        used.add(hf_name)
    if missing:
        raise ValueError(
            f"{source} lacks {len(missing)} tensor(s) the model needs, first {missing[0]!r}: "
            f"{missing[:5]}"
        )
    return values, sorted(set(tensors) - used)


def _check_decoder_is_tied(tensors, prefix, source):
    """Google's masked-LM output layer is the word-embedding table plus cls/predictions/output_bias.

    A file may store the tied decoder again; a decoder with values of its own (tie_word_embeddings
    false, then trained) has no place in a Google checkpoint, so it is refused rather than dropped.
    """
    tied = {
        "cls.predictions.decoder.weight": f"{prefix}embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }
    for decoder, original in tied.items():
        if (
            decoder in tensors
            and original in tensors
            and not np.array_equal(tensors[decoder], tensors[original])
        ):
            raise ValueError(
                f"{source}: {decoder!r} differs from {original!r}; Google's BERT ties the "
                "masked-LM output layer to the word embeddings, so an untied decoder cannot be converted"
            )


def _has_heads(tensors):
    """Whether the file has both pretraining heads; one alone cannot be written (Google's has both)."""
    heads = {
        head: any(name.startswith(f"cls.{head}.") for name in tensors)
        for head in ("predictions", "seq_relationship")
    }
    if any(heads.values()) and not all(heads.values()):
        present = [head for head, found in heads.items() if found]
        logging.warning(
            "Only the cls.%s head is present: converting the encoder only (Google's format needs both "
            "pretraining heads)",
            present[0],
        )
    return all(heads.values())


def _load_tensors(path):
    """{name: np.ndarray} of a safetensors file.

    float16 and bfloat16 (a numpy dtype once TensorFlow has registered ml_dtypes) are exact in float32.
    """
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
    except ImportError as e:
        raise ImportError(
            "convert_checkpoint needs the safetensors package: pip install safetensors"
        ) from e
    try:
        return load_file(path)
    except (SafetensorError, TypeError) as e:  # TypeError: a dtype numpy does not know
        raise ValueError(f"Cannot read {path} with safetensors.numpy: {e}") from e


def _check_vocab(vocab_path, vocab_size):
    with open(vocab_path, encoding="utf-8") as f:
        num_tokens = sum(1 for _ in f)
    if num_tokens > vocab_size:
        raise ValueError(
            f"{vocab_path} has {num_tokens} tokens but config.json has vocab_size={vocab_size}"
        )
    if num_tokens < vocab_size:
        logging.warning("%s has %d tokens, vocab_size is %d", vocab_path, num_tokens, vocab_size)


def _log_lower_case(hf_model_dir):
    """Google's release keeps do_lower_case in its folder name only: say what the tokenizer used."""
    path = os.path.join(hf_model_dir, "tokenizer_config.json")
    if os.path.isfile(path):
        do_lower_case = file_io.read_json_object(path).get("do_lower_case")
        if do_lower_case is not None:
            logging.info("%s: tokenize with --do_lower_case=%s", path, do_lower_case)


def _log_unused(unused, source):
    expected = [name for name in unused if _NOT_WEIGHTS.fullmatch(name)]
    others = [name for name in unused if name not in expected]
    if expected:
        logging.info("%s: not converted (no Google variable by design): %s", source, expected)
    if others:
        logging.warning("%s: %d tensor(s) not converted: %s", source, len(others), others)


def _check_output_dir(output_dir, overwrite):
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise FileExistsError(f"--output_dir={output_dir} exists and is not a folder")
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise FileExistsError(
            f"--output_dir={output_dir} exists and is not empty; pass --overwrite to replace it"
        )


def _publish(temp_dir, output_dir):
    """Swaps the finished release in temp_dir for output_dir, whole (atomic_folder.replace_folder):
    an --overwrite leaves none of the old folder's files (a stale .meta, shard or embedding.json)."""
    replace_folder(temp_dir, output_dir)
