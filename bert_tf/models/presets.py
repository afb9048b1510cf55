"""Preset folders: what `from_preset` reads, checked before any TensorFlow work.

A preset folder is one of:
  * "release": Google's release layout (bert_config.json, bert_model.ckpt.*, vocab.txt), as Google
    published it or as convert_checkpoint.py writes it (plus embedding.json for a sentence-transformers
    model);
  * "run": a fine-tuning run's --output_dir (task.json, its checkpoints, labels.txt), whose task.json
    rebuilds the head and its settings, and whose vocab.txt is the run's --vocab_file (a run written
    before runs kept it: pass `vocabulary=`);
  * "keras_hub": a keras-hub BERT preset folder (metadata.json naming a keras_hub_version, the layout
    keras-hub's save_to_preset and convert_checkpoint.py --output_format=keras_hub write), read by
    bert_tf.keras_hub_preset.read_preset without keras-hub: its BertBackbone's weights, vocabulary and
    casing, its preprocessor's sequence_length where it has one, and a BertTextEmbedder's pooling and
    normalisation (task.json). Its encoder only: a task's head (task.weights.h5) starts new.

`folder_kind` is the one place that tells them apart; a new kind is one more branch there and one more
reader below.
"""

import dataclasses
import json
import os
import tempfile

from bert_tf import file_io
from bert_tf.checkpoints import (
    google_variable_names,
    resolve_checkpoint,
    restore_init_checkpoint,
    save_google_checkpoint,
)
from bert_tf.errors import InputError
from bert_tf.formats import keras_hub_preset
from bert_tf.formats.sentence_transformers_folder import EMBEDDING_FILE
from bert_tf.modeling import BertConfig, BertModel
from bert_tf.models import arguments
from bert_tf.models.networks.task_info import POOLINGS, TASK_FILE, read_task_info
from bert_tf.tokenization import REQUIRED_TOKENS, load_vocab, validate_case_matches_checkpoint

# The original's --max_seq_length default, for folders that do not record one.
DEFAULT_MAX_SEQ_LENGTH = 128


@dataclasses.dataclass(frozen=True)
class Preset:
    """What a preset folder holds.

    Attributes:
      folder: the folder, as given.
      kind: "release", "run" or "keras_hub" (see the module docstring).
      bert_config: the encoder's BertConfig.
      checkpoint: the checkpoint prefix to restore from (None for "keras_hub": see `weights`).
      vocab_file: the vocabulary (vocab.txt).
      do_lower_case: the folder's casing (task.json, embedding.json), else the original's rule.
      max_seq_length: the folder's (task.json, embedding.json), else the original's default 128 (or
        the model's max_position_embeddings, if fewer).
      task_info: a run's TaskInfo (task.json), else None.
      embedding: embedding.json's settings (a converted sentence-transformers model), or a keras-hub
        BertTextEmbedder's ({"pooling", "normalize"}), else None.
      weights: a keras-hub preset's encoder, {Google variable name: float32 array}, else None.
    """

    folder: str
    kind: str
    bert_config: BertConfig
    checkpoint: str
    vocab_file: str
    do_lower_case: bool
    max_seq_length: int
    task_info: object = None
    embedding: dict | None = None
    weights: dict | None = None


def folder_kind(folder):
    """ "keras_hub" (metadata.json of keras-hub), "run" (task.json) or "release" (bert_config.json):
    the kind of a preset folder. (A keras-hub task's folder holds a task.json of its own.)

    Raises:
      ValueError: naming the folder, when it is missing or is no kind.
    """
    if not file_io.exists(folder) or not os.path.isdir(folder):
        raise ValueError(f"preset folder {folder} does not exist")
    if keras_hub_preset.is_preset(folder):
        return "keras_hub"
    if file_io.exists(os.path.join(folder, TASK_FILE)):
        return "run"
    if file_io.exists(os.path.join(folder, "bert_config.json")):
        return "release"
    raise ValueError(
        f"preset folder {folder} holds neither bert_config.json (a release or a converted model), "
        f"nor {TASK_FILE} (a fine-tuning run's output_dir), nor a keras-hub preset's metadata.json"
    )


def read_preset(folder, vocabulary=None, do_lower_case=None, max_seq_length=None):
    """The Preset of `folder`; `vocabulary` (a vocab.txt path), `do_lower_case` and `max_seq_length`
    override what the folder says.

    Raises:
      ValueError: one line naming the argument (bert_tf.models.arguments), before the folder is
        read; or naming the folder or file: no checkpoint, no vocabulary, a bad bert_config.json
        or task.json, a max_seq_length over the model's positions.
    """
    folder = arguments.path("folder", folder)
    vocabulary = arguments.path("vocabulary", vocabulary, optional=True)
    do_lower_case = arguments.boolean("do_lower_case", do_lower_case, optional=True)
    max_seq_length = arguments.integer("max_seq_length", max_seq_length, 2, optional=True)
    kind = folder_kind(folder)
    readers = {"run": _read_run, "release": _read_release, "keras_hub": _read_keras_hub}
    values = readers[kind](folder)
    vocab_file = vocabulary if vocabulary is not None else values.pop("vocab_file")
    values.pop("vocab_file", None)
    _check_vocab(vocab_file, folder, values["bert_config"].vocab_size)
    checkpoint = None
    if kind != "keras_hub":
        try:
            checkpoint = resolve_checkpoint(folder)
        except FileNotFoundError as error:
            raise ValueError(f"preset folder {folder}: {error}") from None
    if do_lower_case is not None:
        values["do_lower_case"] = do_lower_case
    if max_seq_length is not None:
        values["max_seq_length"] = max_seq_length
    positions = values["bert_config"].max_position_embeddings
    if values["max_seq_length"] > positions:
        raise ValueError(
            f"max_seq_length={values['max_seq_length']} exceeds the model's "
            f"max_position_embeddings={positions} ({folder})"
        )
    return Preset(folder=folder, kind=kind, checkpoint=checkpoint, vocab_file=vocab_file, **values)


def restore(task_model, preset, heads="optional"):
    """Fills `task_model` (a model of bert_tf.tasks or modeling) from the preset, as
    bert_tf.checkpoints.restore_init_checkpoint restores a checkpoint (`heads` as there).

    Raises:
      ValueError: naming the folder, when a keras-hub preset is asked for a head (it gives the
        encoder only).
    """
    if preset.weights is None:
        return restore_init_checkpoint(task_model, preset.checkpoint, heads=heads)
    if heads == "required":
        raise ValueError(
            f"preset folder {preset.folder}: a keras-hub preset gives its encoder only, and this "
            "model needs its head too"
        )
    encoder = BertModel(preset.bert_config)
    for name, variable in google_variable_names(encoder).items():
        variable.assign(preset.weights[name])
    with tempfile.TemporaryDirectory(prefix="bert_tf-keras-hub-") as folder:
        prefix = os.path.join(folder, "bert_model.ckpt")
        save_google_checkpoint(encoder, prefix)
        return restore_init_checkpoint(task_model, prefix, heads=heads)


def _read_keras_hub(folder):
    try:
        bert_config, weights, vocab_file, do_lower_case = keras_hub_preset.read_preset(folder)
    except (FileNotFoundError, ValueError) as error:
        raise ValueError(f"preset folder {folder}: {error}") from None
    max_seq_length = min(DEFAULT_MAX_SEQ_LENGTH, bert_config.max_position_embeddings)
    preprocessor_path = os.path.join(folder, "preprocessor.json")
    if file_io.exists(preprocessor_path):
        with open(preprocessor_path, encoding="utf-8") as f:
            recorded = json.load(f).get("config", {}).get("sequence_length")
        max_seq_length = recorded or max_seq_length
    return {
        "bert_config": bert_config,
        "vocab_file": vocab_file,
        "do_lower_case": do_lower_case,
        "max_seq_length": max_seq_length,
        "weights": weights,
        "embedding": _keras_hub_embedding(folder),
    }


def _keras_hub_embedding(folder):
    """A keras-hub BertTextEmbedder's pooling and normalisation (its task.json), else None."""
    path = os.path.join(folder, TASK_FILE)
    if not file_io.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        task = json.load(f)
    if task.get("class_name") != "BertTextEmbedder":
        return None
    config = task.get("config", {})
    pooling = config.get("pooling_mode", "mean")
    if pooling not in POOLINGS:
        raise ValueError(f"{path}: pooling_mode {pooling!r} is not one of {POOLINGS}")
    return {"pooling": pooling, "normalize": bool(config.get("normalize", True))}


def _read_release(folder):
    config_path = os.path.join(folder, "bert_config.json")
    try:
        bert_config = BertConfig.from_json_file(config_path)
    except ValueError as error:
        raise ValueError(f"{config_path}: {error}") from None
    embedding = None
    embedding_path = os.path.join(folder, EMBEDDING_FILE)
    if file_io.exists(embedding_path):
        embedding = file_io.read_json_object(embedding_path)
    recorded = embedding or {}
    return {
        "bert_config": bert_config,
        "vocab_file": os.path.join(folder, "vocab.txt"),
        "do_lower_case": recorded.get("do_lower_case", _release_casing(folder)),
        "max_seq_length": recorded.get(
            "max_seq_length", min(DEFAULT_MAX_SEQ_LENGTH, bert_config.max_position_embeddings)
        ),
        "embedding": embedding,
    }


def _release_casing(folder):
    """The original's rule: lower-cased, unless the folder is named as one of Google's cased
    releases (cased_L-12_H-768_A-12, ...)."""
    try:
        validate_case_matches_checkpoint(True, os.path.join(folder, "bert_model.ckpt"))
    except InputError:
        return False
    return True


def _read_run(folder):
    info = read_task_info(folder)
    if info.bert_config is None:
        raise ValueError(f"{os.path.join(folder, TASK_FILE)} records no bert_config")
    return {
        "bert_config": info.bert_config,
        "vocab_file": os.path.join(folder, "vocab.txt"),
        "do_lower_case": info.do_lower_case,
        "max_seq_length": info.max_seq_length,
        "task_info": info,
    }


def _check_vocab(vocab_file, folder, vocab_size):
    if not file_io.exists(vocab_file):
        remedy = (
            " (a run written before runs kept their vocab.txt: pass vocabulary=<its --vocab_file>)"
        )
        raise ValueError(f"preset folder {folder}: no vocabulary {vocab_file}{remedy}")
    vocab = load_vocab(vocab_file)
    missing = [token for token in REQUIRED_TOKENS if token not in vocab]
    if missing:
        raise ValueError(f"vocabulary {vocab_file} has no {missing[0]} line")
    if max(vocab.values()) + 1 > vocab_size:
        raise ValueError(
            f"vocabulary {vocab_file} has {max(vocab.values()) + 1} ids, more than the model's "
            f"vocab_size={vocab_size} ({folder})"
        )
