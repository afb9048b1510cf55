"""export_saved_model.py's library: any checkpoint (Google's or ours, pretrained or fine-tuned) to an export.

The task comes from the run's task.json when the checkpoint has one beside it (every run_*.py writes
it), else from a Google-format checkpoint's head variables (`output_weights` for a classifier,
`cls/squad/*` for SQuAD, ...: each TaskSpec's `google_head`), else the checkpoint is exported as an
encoder. The model is filled by THE restore path (bert_tf.checkpoints), which for a task export
requires the head: an export never serves an untrained head. With --mixed_precision the model is
rebuilt under that Keras dtype policy (float32 variables, bfloat16 or float16 compute), then its Dense
kernels and embedding tables are stored in the compute dtype (bert_tf.precision.store_in_compute_dtype:
the outputs of casting them on every call, bit for bit, without the casts); the signatures, their
inputs and their float32 outputs are those of the float32 export.
"""

import dataclasses
import os

import keras
import tensorflow as tf
from absl import logging

from bert_tf import litert
from bert_tf.checkpoints import is_google_checkpoint, resolve_checkpoint, restore_init_checkpoint
from bert_tf.errors import InputError
from bert_tf.export import check_export_dir
from bert_tf.modeling import BertConfig
from bert_tf.models.networks.network_registry import infer_from_google
from bert_tf.models.networks.task_info import (
    TaskInfo,
    read_task_info,
)
from bert_tf.models.task import QUANTIZATION_MODES
from bert_tf.precision import MIXED_PRECISION_POLICIES, build_with_policy, store_in_compute_dtype
from bert_tf.settings import restated, setting
from bert_tf.shared_settings import BertConfigFileSetting, InitCheckpointSetting, VocabFileSetting
from bert_tf.tasks import TASKS, get_task
from bert_tf.tasks.run import check_objective_matches
from bert_tf.tokenization import check_vocab


@dataclasses.dataclass(kw_only=True)
class ExportSettings(BertConfigFileSetting, InitCheckpointSetting, VocabFileSetting):
    """export_saved_model.py's settings."""

    init_checkpoint: str | None = restated(
        InitCheckpointSetting,
        "init_checkpoint",
        help="Checkpoint prefix, or a folder holding bert_model.ckpt.* or a run's checkpoints.",
    )
    export_dir: str | None = setting(None, "Folder TF Serving watches; gets <version>/.")
    vocab_file: str | None = restated(
        VocabFileSetting, "vocab_file", help="vocab.txt of the model (copied into the export)."
    )
    bert_config_file: str | None = restated(
        BertConfigFileSetting,
        "bert_config_file",
        help="Default: the run's task.json, or bert_config.json beside the checkpoint.",
    )
    do_lower_case: bool | None = setting(None, "Default: the run's setting (task.json), else True.")
    max_seq_length: int | None = setting(
        None, "Longest input; longer text is cut. Default: the run's, else 128."
    )
    model_type: str | None = setting(
        None, "Default: inferred from the checkpoint.", choices=sorted(TASKS)
    )
    version: int | None = setting(None, "Version folder number; default the next free one.")
    encoder_layers: bool = setting(
        False,
        "Encoder exports: also output encoder_layer_<i> [batch, seq, hidden] for every layer.",
    )
    mixed_precision: str = setting(
        "float32",
        "Keras dtype policy the exported model computes in; same signatures and float32 outputs. "
        "Verified on CPU only. (run_*.py --export_dir exports under the run's own --mixed_precision.)",
        choices=MIXED_PRECISION_POLICIES,
    )
    freeze_weights: bool = setting(
        False,
        "Fold the weights into the serving graphs as constants: faster one request at a time at short "
        "inputs on CPU (about 0.6x the time at 8 word pieces, 0.85x at 32, slower at 128 on AVX-512 "
        "without AMX), but a loaded BERT-base export holds 6-13 GB and each signature's first call "
        "takes about 25 s; TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 in the server gives the same kernels "
        "without it. See docs/serving.md. Default: weights as variables.",
    )
    quantize: str | None = setting(
        None,
        "int8: store every Dense kernel (the encoder's projections, the pooler, a head's "
        "transform) in int8 with one float32 scale per output column, as Keras' "
        'model.quantize("int8"); embeddings, LayerNorms, biases and the output layer stay '
        "float32. A float32 export only. Default: float32 weights.",
        choices=QUANTIZATION_MODES,
    )
    litert: str | None = setting(
        None,
        "Also write serve_ids (ids in) as a LiteRT model beside the version folder: "
        "<export_dir>/<version>_serve_ids_<float32|int8>.tflite; int8 = dynamic-range quantized "
        "weights. Needs the litert extra (from a checkout, pip install -e '.[litert]').",
    )


def _bert_config(bert_config_file, info, prefix):
    """(the BertConfig, where it comes from: for messages)."""
    if bert_config_file:
        bert_config = BertConfig.from_json_file(bert_config_file)
        check_objective_matches(bert_config, bert_config_file, prefix, "--init_checkpoint")
        return bert_config, f"--bert_config_file={bert_config_file}"
    if info.bert_config is not None:
        return info.bert_config, f"the task.json of {prefix}"
    beside = os.path.join(os.path.dirname(prefix), "bert_config.json")
    if tf.io.gfile.exists(beside):
        return BertConfig.from_json_file(beside), beside
    raise InputError(f"--bert_config_file is required: no bert_config.json beside {prefix}")


def _check_flags(settings):
    """One-line errors for missing or bad flags, before any work starts."""
    for name in ("init_checkpoint", "export_dir", "vocab_file"):
        if not getattr(settings, name):
            raise InputError(f"--{name} is required")
    if settings.mixed_precision not in MIXED_PRECISION_POLICIES:
        raise InputError(
            f"--mixed_precision must be one of {', '.join(MIXED_PRECISION_POLICIES)}, "
            f"got {settings.mixed_precision!r}"
        )
    if not tf.io.gfile.exists(settings.vocab_file):
        raise InputError(f"--vocab_file={settings.vocab_file} does not exist")
    check_export_dir(settings.export_dir)
    if settings.quantize is not None:
        _check_quantize(settings)
    if settings.litert is not None:
        litert.check_litert(settings.litert, settings.model_type)
        if settings.mixed_precision != "float32":
            raise InputError(
                f"--litert converts a float32 export, not --mixed_precision={settings.mixed_precision}"
            )


def _check_quantize(settings):
    """--quantize: a mode Keras has, on a float32 export whose weights stay variables."""
    if settings.quantize not in QUANTIZATION_MODES:
        raise InputError(f"--quantize must be one of {', '.join(QUANTIZATION_MODES)}")
    others = {
        "--mixed_precision": settings.mixed_precision != "float32",
        "--freeze_weights": settings.freeze_weights,  # folds the weights into float32 constants
        "--litert": settings.litert is not None,  # LiteRT has its own int8 (--litert=int8)
    }
    for flag, given in others.items():
        if given:
            raise InputError(f"--quantize={settings.quantize} takes a float32 export; drop {flag}")


def quantize_dense_kernels(model, mode):
    """Keras' model.quantize(mode) of every keras.layers.Dense in `model` (BertTask.quantize's)."""
    model.quantize(mode, filters=lambda layer: isinstance(layer, keras.layers.Dense))


def _restored_model(settings, spec, info, prefix):
    """The task's model of `info` filled from `prefix` (a LoRA run's adapters merged by the
    restore), in --mixed_precision's compute dtype or with --quantize's kernels."""
    # The layers keep the policy they were built under; the process's global policy is left as it was.
    model = build_with_policy(
        lambda: spec.build_model(info.bert_config, info), settings.mixed_precision
    )
    try:
        # An encoder takes the encoder of any checkpoint; a task model needs its head there too.
        restore_init_checkpoint(model, prefix, heads="required")
    except InputError as error:
        raise InputError(f"--init_checkpoint: {error}") from None
    if settings.mixed_precision != "float32":  # the same rounding, once here instead of every call
        stored = store_in_compute_dtype(model)
        logging.info("Stored %d kernels and embedding tables in the compute dtype", stored)
    if settings.quantize is not None:
        quantize_dense_kernels(model, settings.quantize)
    return model


def export_checkpoint(settings):
    """Loads a checkpoint into the model its task calls for and exports it; returns the version folder.

    Args:
      settings: an ExportSettings. init_checkpoint: a checkpoint prefix, or a folder holding
        bert_model.ckpt.* or our checkpoints; bert_config_file, do_lower_case, max_seq_length
        default to the run's task.json, else bert_config.json beside the checkpoint, True and 128;
        model_type defaults to the checkpoint's (see the module docstring).
    """
    settings.take_run_files()
    _check_flags(settings)
    try:
        prefix = resolve_checkpoint(settings.init_checkpoint)
    except FileNotFoundError as error:
        raise InputError(f"--init_checkpoint: {error}") from None
    info = read_task_info(settings.init_checkpoint)
    if info is None:
        info = infer_from_google(prefix) if is_google_checkpoint(prefix) else None
    info = info or TaskInfo(model_type="encoder")
    inferred = get_task(info.model_type).name
    model_type = settings.model_type or inferred
    spec = get_task(model_type)
    # An encoder's checkpoint also exports as a task that adds no weights (embeddings).
    from_encoder = inferred == "encoder" and spec.info_from_encoder is not None
    if model_type not in (inferred, "encoder") and not from_encoder:
        raise InputError(f"--model_type={model_type}, but {prefix} holds a {inferred} checkpoint")
    if from_encoder:
        info = spec.info_from_encoder(prefix, info)
    if settings.litert is not None:
        litert.check_litert(
            settings.litert, model_type, getattr(info.settings, "window_combination", None)
        )
    if settings.encoder_layers and model_type != "encoder":
        raise InputError(f"--encoder_layers applies to encoder exports only, not {model_type}")
    options = {"encoder_layers": True} if settings.encoder_layers else {}
    options.update({"freeze_weights": True} if settings.freeze_weights else {})
    bert_config, config_name = _bert_config(settings.bert_config_file, info, prefix)
    check_vocab(settings.vocab_file, vocab_size=bert_config.vocab_size, config_name=config_name)
    info = dataclasses.replace(
        info,
        model_type=model_type,
        bert_config=bert_config,
        do_lower_case=info.do_lower_case
        if settings.do_lower_case is None
        else settings.do_lower_case,
        max_seq_length=settings.max_seq_length or info.max_seq_length,
    )
    if info.max_seq_length > info.bert_config.max_position_embeddings:
        raise InputError(
            f"--max_seq_length={info.max_seq_length} exceeds max_position_embeddings="
            f"{info.bert_config.max_position_embeddings}"
        )
    model = _restored_model(settings, spec, info, prefix)
    logging.info("Exporting %s as a %s model", prefix, model_type)
    path = spec.export_model(
        model, info, settings.vocab_file, settings.export_dir, settings.version, **options
    )
    if settings.litert is not None:
        logging.info("Wrote %s", litert.write_tflite(path, settings.litert))
    return path
