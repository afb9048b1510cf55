"""export_saved_model.py's library: any checkpoint (Google's or ours, pretrained or fine-tuned) to an export.

The model type comes from the run's task.json when the checkpoint has one beside it (every run_*.py
writes it), else from the checkpoint's variable names (the original's heads: `output_weights` for a
classifier, `cls/squad/*` for SQuAD, ...), else the checkpoint is exported as an encoder. Each task module
named in MODEL_TYPES provides `build_export_model(bert_config, info)` and `export_model(model, info,
vocab_file, do_lower_case, max_seq_length, export_dir, version, **options)`, and may provide
`head_info_from_google_checkpoint(shapes)`.
"""

import importlib
import os

import tensorflow as tf
from absl import logging

from bert_tf.checkpoints import is_google_checkpoint, resolve_checkpoint, restore_init_checkpoint
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.tasks.finetuning import read_labels, read_task_info

MODEL_TYPES = {
    "encoder": "bert_tf.tasks.encoder",
    "classifier": "bert_tf.tasks.classification",
    "squad": "bert_tf.tasks.squad",
    "tagger": "bert_tf.tasks.tagging",
    "multiple_choice": "bert_tf.tasks.multiple_choice",
}


def task_module(model_type):
    """The bert_tf.tasks module of `model_type` (one of MODEL_TYPES)."""
    if model_type not in MODEL_TYPES:
        raise InputError(f"--model_type must be one of {sorted(MODEL_TYPES)}, got {model_type!r}")
    return importlib.import_module(MODEL_TYPES[model_type])


def _infer_from_google(prefix):
    """(model type, head info) from the head variables of a Google-format checkpoint."""
    shapes = dict(tf.train.list_variables(prefix))
    for model_type in MODEL_TYPES:
        infer = getattr(task_module(model_type), "head_info_from_google_checkpoint", None)
        info = infer(shapes) if infer else None
        if info is not None:
            return model_type, info
    return "encoder", {}


def _bert_config(bert_config_file, info, prefix):
    if bert_config_file:
        return BertConfig.from_json_file(bert_config_file)
    if info.get("bert_config"):
        return BertConfig.from_dict(info["bert_config"])
    beside = os.path.join(os.path.dirname(prefix), "bert_config.json")
    if tf.io.gfile.exists(beside):
        return BertConfig.from_json_file(beside)
    raise InputError(f"--bert_config_file is required: no bert_config.json beside {prefix}")


def export_checkpoint(
    init_checkpoint,
    export_dir,
    vocab_file,
    bert_config_file=None,
    do_lower_case=None,
    max_seq_length=None,
    model_type=None,
    version=None,
    **options,
):
    """Loads a checkpoint into the model its type calls for and exports it; returns the version folder.

    Args:
      init_checkpoint: a checkpoint prefix, or a folder holding bert_model.ckpt.* or our checkpoints.
      export_dir: where export_dir/<version>/ is written.
      vocab_file: the model's vocab.txt (copied into the export's assets).
      bert_config_file: default: the run's task.json, else bert_config.json beside the checkpoint.
      do_lower_case, max_seq_length: default: the run's task.json, else True and 128.
      model_type: one of MODEL_TYPES; default: inferred (see the module docstring).
      version: the version number; default: the next free one.
      **options: passed to the task's export_model (e.g. encoder_layers=True).
    """
    prefix = resolve_checkpoint(init_checkpoint)
    info = read_task_info(init_checkpoint) or {}
    google = is_google_checkpoint(prefix)
    if info:
        inferred = info["model_type"]
    elif google:
        inferred, info = _infer_from_google(prefix)
        if "labels" in info:  # a labelled head: its label strings, when a labels.txt lies beside it
            labels = read_labels(os.path.dirname(prefix))
            if labels is not None and len(labels) != len(info["labels"]):
                raise InputError(
                    f"labels.txt beside {prefix} holds {len(labels)} labels, but the checkpoint's "
                    f"head has {len(info['labels'])}"
                )
            info["labels"] = labels or info["labels"]
    else:
        inferred = "encoder"
    if model_type and model_type not in (inferred, "encoder"):
        raise InputError(f"--model_type={model_type}, but {prefix} holds a {inferred} checkpoint")
    model_type = model_type or inferred
    if options and model_type != "encoder":
        raise InputError(f"{sorted(options)} apply to encoder exports only, not {model_type}")
    module = task_module(model_type)
    bert_config = _bert_config(bert_config_file, info, prefix)
    do_lower_case = info.get("do_lower_case", True) if do_lower_case is None else do_lower_case
    max_seq_length = max_seq_length or info.get("max_seq_length") or 128
    if max_seq_length > bert_config.max_position_embeddings:
        raise InputError(
            f"--max_seq_length={max_seq_length} exceeds max_position_embeddings="
            f"{bert_config.max_position_embeddings}"
        )
    model = module.build_export_model(bert_config, info)
    # A BertModel takes the encoder of any checkpoint; a task model needs its head there too.
    restore_init_checkpoint(model, prefix)
    logging.info("Exporting %s as a %s model", prefix, model_type)
    return module.export_model(
        model, info, vocab_file, do_lower_case, max_seq_length, export_dir, version, **options
    )
