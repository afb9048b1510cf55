"""What every outgoing format starts from: a checkpoint's weights, its task, its labels and its tokenizer.

convert_checkpoint.py --output_format=huggingface | keras_hub reads a Google release or fine-tuned
checkpoint, or a run's output_dir, with THE restore path (bert_tf.checkpoints.restore_init_checkpoint)
into the model its task calls for, and hands the writers (bert_tf/formats/huggingface_out.py,
bert_tf/formats/keras_hub_preset.py) an `OutgoingModel`: the weights under Google's names, whatever the
checkpoint's own layout. The task comes from the run's task.json, else from a Google checkpoint's head
variables (each TaskSpec's google_head); a Google checkpoint with both pretraining heads is a pretraining
model. A model no outgoing format can express is refused in one line before anything is read or written.
"""

import dataclasses
import os
import shutil

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.atomic_folder import replace_folder
from bert_tf.checkpoints import (
    google_variable_names,
    is_google_checkpoint,
    resolve_checkpoint,
    restore_init_checkpoint,
)
from bert_tf.errors import InputError
from bert_tf.formats.sentence_transformers_folder import read_embedding_file
from bert_tf.modeling import BertConfig, BertModel, BertPretrainingModel
from bert_tf.models.networks.network_registry import infer_from_google, network_of
from bert_tf.models.networks.task_info import VOCAB_FILE, TaskInfo, read_task_info
from bert_tf.tokenization import check_vocab, validate_case_matches_checkpoint

# The kinds of model that go out: the tasks of bert_tf.tasks that formats elsewhere can express, and
# the pretraining model with both heads ("pretraining") or with the masked-LM head only ("masked_lm").
KINDS = (
    "encoder",
    "pretraining",
    "masked_lm",
    "classifier",
    "multi_label",
    "tagger",
    "squad",
    "multiple_choice",
    "embedding",
)
# Why a model cannot go out (the check runs before anything is read or written).
_REFUSED = {
    "feature_tagger": "the feature-based tagger's BiLSTM over frozen layers has no class in "
    "transformers or keras-hub",
}
_WINDOWS = (
    "it was trained with --doc_stride: a long text is classified from its windows' averaged "
    "outputs, which transformers and keras-hub do not do (they cut the text)"
)
_CAUSAL = (
    "its attention is causal (objective ltr), which the BERT classes of transformers and "
    "keras-hub do not compute"
)
_PRETRAINING_HEADS = ("cls/predictions/output_bias", "cls/seq_relationship/output_weights")


@dataclasses.dataclass
class OutgoingModel:
    """A checkpoint ready to be written in another library's format.

    Attributes:
      kind: one of KINDS.
      bert_config: the encoder's BertConfig.
      weights: {Google variable name: float32 np.ndarray} of every weight, head included.
      vocab_file, do_lower_case: the tokenizer.
      max_seq_length: the longest input the run used (the release's max_position_embeddings).
      labels: the label strings in id order (classifier, multi_label, tagger), else None.
      is_regression: a classifier with one score per example.
      embedding: {"pooling", "normalize", "max_seq_length"} of an embedding model, else None.
      source: the checkpoint prefix read.
    """

    kind: str
    bert_config: BertConfig
    weights: dict
    vocab_file: str
    do_lower_case: bool
    max_seq_length: int
    labels: list | None = None
    is_regression: bool = False
    embedding: dict | None = None
    source: str = ""


def read_checkpoint(init_checkpoint, vocab_file, bert_config_file=None, do_lower_case=None):
    """The OutgoingModel of a checkpoint (prefix, release folder or run output_dir).

    Raises:
      InputError: one line naming the flag or file: a missing file, a bert_config.json that is not
        the checkpoint's, or a model that cannot be expressed (and why).
    """
    if not init_checkpoint:
        raise InputError("--init_checkpoint is required")
    try:
        prefix = resolve_checkpoint(init_checkpoint)
    except FileNotFoundError as error:
        raise InputError(f"--init_checkpoint: {error}") from None
    vocab_file = vocab_file or _vocab_beside(init_checkpoint, prefix)
    task_info = read_task_info(init_checkpoint)
    info = task_info or _google_info(prefix)
    kind = _kind(info, prefix)
    bert_config, config_name = _bert_config(bert_config_file, info, prefix)
    if bert_config.causal_attention:
        raise InputError(f"--init_checkpoint={prefix} cannot be converted: {_CAUSAL}")
    if kind == "pretraining" and bert_config.objective == "mlm":  # no next-sentence head
        kind = "masked_lm"
    check_vocab(vocab_file, vocab_size=bert_config.vocab_size, config_name=config_name)
    embedding = _embedding(kind, info, prefix, task_info is not None)
    if embedding is not None and kind == "encoder":
        kind = "embedding"
    model = _build(kind, bert_config, info)
    try:
        restore_init_checkpoint(model, prefix, heads="required")
    except InputError as error:
        raise InputError(f"--init_checkpoint: {error}") from None
    weights = {
        name: np.array(v.numpy(), np.float32) for name, v in google_variable_names(model).items()
    }
    lower = _do_lower_case(do_lower_case, task_info, embedding, prefix)
    max_seq_length = task_info.max_seq_length if task_info else bert_config.max_position_embeddings
    if embedding is not None:
        max_seq_length = embedding.get("max_seq_length", max_seq_length)
    logging.info("Read %s: a %s model, %d weights", prefix, kind, len(weights))
    return OutgoingModel(
        kind=kind,
        bert_config=bert_config,
        weights=weights,
        vocab_file=vocab_file,
        do_lower_case=lower,
        max_seq_length=max_seq_length,
        labels=list(info.labels) if info.labels and kind != "squad" else None,
        is_regression=bool(getattr(info.settings, "is_regression", False)),
        embedding=embedding,
        source=prefix,
    )


def _google_info(prefix):
    if not is_google_checkpoint(prefix):
        raise InputError(
            f"--init_checkpoint={prefix} is one of our training checkpoints without the task.json "
            "its run writes beside it: copy that file back"
        )
    info = infer_from_google(prefix)
    shapes = dict(tf.train.list_variables(prefix))
    if info.model_type == "encoder" and _PRETRAINING_HEADS[0] in shapes:
        both = _PRETRAINING_HEADS[1] in shapes
        return TaskInfo(model_type="pretraining" if both else "masked_lm")
    return info


def _kind(info, prefix):
    """The KINDS entry of a run's task, or InputError saying why it cannot go out."""
    model_type = info.model_type
    if model_type in _REFUSED:
        raise InputError(f"--init_checkpoint={prefix} cannot be converted: {_REFUSED[model_type]}")
    if model_type == "classifier" and getattr(info.settings, "doc_stride", None):
        raise InputError(f"--init_checkpoint={prefix} cannot be converted: {_WINDOWS}")
    if model_type not in KINDS:
        raise InputError(f"--init_checkpoint={prefix}: no outgoing format for task {model_type!r}")
    return model_type


def _vocab_beside(init_checkpoint, prefix):
    """The vocab.txt of a run's output_dir or a release folder, when --vocab_file is not given."""
    folders = [init_checkpoint] if os.path.isdir(init_checkpoint) else []
    for folder in dict.fromkeys([*folders, os.path.dirname(prefix)]):
        if os.path.isfile(os.path.join(folder, VOCAB_FILE)):
            return os.path.join(folder, VOCAB_FILE)
    raise InputError(f"--vocab_file is required: no {VOCAB_FILE} beside {prefix}")


def _bert_config(bert_config_file, info, prefix):
    """(the BertConfig, where it comes from): --bert_config_file, the task.json, or beside."""
    if bert_config_file:
        try:
            return BertConfig.from_json_file(
                bert_config_file
            ), f"--bert_config_file={bert_config_file}"
        except (OSError, ValueError) as error:
            raise InputError(f"--bert_config_file={bert_config_file}: {error}") from None
    if info.bert_config is not None:
        return info.bert_config, f"the task.json beside {prefix}"
    beside = os.path.join(os.path.dirname(prefix), "bert_config.json")
    if not os.path.isfile(beside):
        raise InputError(f"--bert_config_file is required: no bert_config.json beside {prefix}")
    try:
        return BertConfig.from_json_file(beside), beside
    except ValueError as error:
        raise InputError(f"{beside}: {error}") from None


def _embedding(kind, info, prefix, from_task_json):
    """An embedding run's pooling (task.json), or a converted sentence-transformers folder's."""
    if kind == "embedding" and from_task_json:
        settings = info.settings
        return {"pooling": settings.pooling or "mean", "normalize": settings.normalize is not False}
    if kind != "encoder":
        return None
    return read_embedding_file(os.path.dirname(prefix))


def _build(kind, bert_config, info):
    if kind in ("pretraining", "masked_lm"):
        if (kind == "pretraining") != (bert_config.objective == "mlm_nsp"):
            bert_config = dataclasses.replace(
                bert_config, objective="mlm_nsp" if kind == "pretraining" else "mlm"
            )
        return BertPretrainingModel(bert_config)
    if info.model_type in ("encoder", "pretraining"):  # a release (an embedding.json one too)
        return BertModel(bert_config)
    return network_of(kind).build_model(bert_config, info)  # BertEmbedder for an embedding run


def _do_lower_case(flag, task_info, embedding, prefix):
    """--do_lower_case, else the run's, a converted model's, a Google release's by its folder name
    (cased_L-12_H-768_A-12), else True (the original's default), with a warning."""
    if flag is not None:
        validate_case_matches_checkpoint(flag, prefix)  # the original refuses a contradiction
        return flag
    if task_info is not None:
        return task_info.do_lower_case
    if embedding is not None and "do_lower_case" in embedding:
        return embedding["do_lower_case"]
    try:
        validate_case_matches_checkpoint(True, prefix)
    except InputError:
        return False  # a cased Google release
    logging.warning(
        "No task.json or embedding.json says how to tokenize: do_lower_case=True (the original's "
        "default); pass --do_lower_case=false for a cased model"
    )
    return True


def check_output_dir(output_dir, overwrite):
    """Raises FileExistsError naming --output_dir unless it is absent, empty, or overwrite is set."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise FileExistsError(f"--output_dir={output_dir} exists and is not a folder")
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise FileExistsError(
            f"--output_dir={output_dir} exists and is not empty; pass --overwrite to replace it"
        )


def write_folder(files, output_dir, overwrite):
    """Writes {relative path: str or bytes} into output_dir, all or nothing.

    Everything is written into a temporary folder beside output_dir, which then takes output_dir's
    place whole (atomic_folder.replace_folder): with `overwrite`, nothing of the old folder is left
    (a stale modules.json would make a classifier's folder a sentence-transformers one); a killed
    write leaves the old folder or the new one.

    Raises:
      FileExistsError: naming output_dir, when it is not empty and overwrite is False.
    """
    output_dir = os.path.abspath(output_dir)
    check_output_dir(output_dir, overwrite)
    os.makedirs(os.path.dirname(output_dir), exist_ok=True)
    temp_dir = file_io.temporary_name(output_dir)
    os.mkdir(temp_dir)
    try:
        for name, content in files.items():
            path = os.path.join(temp_dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(content.encode("utf-8") if isinstance(content, str) else content)
        replace_folder(temp_dir, output_dir)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
