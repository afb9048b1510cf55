"""A sentence-transformers folder's embedding settings: what convert_checkpoint.py records in embedding.json.

A sentence-transformers model is a Hugging Face BERT folder plus modules.json (Transformer, Pooling and
optionally Normalize), 1_Pooling/config.json (which pooling) and sentence_bert_config.json
(max_seq_length). bert_tf/formats/convert.py writes what they say beside bert_config.json as embedding.json:

    {"pooling": "mean" | "cls" | "max",   1_Pooling/config.json's pooling_mode_* that is true
     "normalize": true | false,           whether modules.json has a Normalize module
     "max_seq_length": 256,               sentence_bert_config.json's (longer texts are cut)
     "do_lower_case": true}               tokenizer_config.json's, when it says

and export_saved_model.py --model_type=embedding and run_embedding.py read it back
(bert_tf/tasks/embedding/task.py). Modules this BERT cannot reproduce (a Dense layer, another pooling) are
refused, rather than converted into other embeddings than the model's.
"""

import json
import os

from absl import logging

from bert_tf import file_io
from bert_tf.errors import InputError
from bert_tf.models.networks.task_info import POOLINGS

EMBEDDING_FILE = "embedding.json"
_MODULES = "sentence_transformers.models."
_POOLING_KEYS = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


def sentence_transformers_settings(hf_model_dir, bert_config):
    """embedding.json's content for a sentence-transformers folder, or None without modules.json.

    Raises:
      ValueError: naming the file and module or key, for a module other than Transformer, Pooling
        and Normalize (a Dense layer, ...), a pooling other than one of mean, cls and max, or a
        lower-casing the tokenizer does not do.
    """
    modules_path = os.path.join(hf_model_dir, "modules.json")
    if not os.path.isfile(modules_path):
        return None
    with open(modules_path, encoding="utf-8") as f:
        try:
            modules = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{modules_path} is not valid JSON: {e}") from e
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ValueError(f"{modules_path} must hold a JSON list of modules")
    types = [str(module.get("type", "")).removeprefix(_MODULES) for module in modules]
    for module_type in types:
        if module_type not in ("Transformer", "Pooling", "Normalize"):
            raise ValueError(
                f"{modules_path}: module {module_type!r} is not supported (Transformer, Pooling "
                "and Normalize are): the embeddings would not be the model's"
            )
    if types.count("Pooling") != 1:
        raise ValueError(f"{modules_path}: needs exactly one Pooling module, has {types}")
    pooling_dir = modules[types.index("Pooling")].get("path", "")
    pooling_path = os.path.join(hf_model_dir, pooling_dir, "config.json")
    if not os.path.isfile(pooling_path):
        raise FileNotFoundError(f"{pooling_path} does not exist ({modules_path} names it)")
    settings = {
        "pooling": _st_pooling(
            file_io.read_json_object(pooling_path), pooling_path, bert_config.hidden_size
        ),
        "normalize": "Normalize" in types,
    }
    settings.update(_st_tokenizer_settings(hf_model_dir, bert_config))
    logging.info("sentence-transformers folder: %s", settings)
    return settings


def _st_pooling(config, path, hidden_size):
    """The one of mean, cls and max that a Pooling config.json asks for."""
    dimension = config.get("word_embedding_dimension", hidden_size)
    if dimension != hidden_size:
        raise ValueError(
            f"{path}: word_embedding_dimension={dimension}, but config.json's hidden_size is "
            f"{hidden_size}"
        )
    chosen = sorted(
        key for key, value in config.items() if key.startswith("pooling_mode_") and value
    )
    if len(chosen) != 1 or chosen[0] not in _POOLING_KEYS:
        raise ValueError(
            f"{path}: pooling {chosen} is not supported; exactly one of "
            f"{sorted(_POOLING_KEYS)} must be true"
        )
    return _POOLING_KEYS[chosen[0]]


def _st_tokenizer_settings(hf_model_dir, bert_config):
    """max_seq_length (sentence_bert_config.json) and do_lower_case (tokenizer_config.json)."""
    settings = {}
    tokenizer_path = os.path.join(hf_model_dir, "tokenizer_config.json")
    if os.path.isfile(tokenizer_path):
        do_lower_case = file_io.read_json_object(tokenizer_path).get("do_lower_case")
        if do_lower_case is not None:
            settings["do_lower_case"] = bool(do_lower_case)
    path = os.path.join(hf_model_dir, "sentence_bert_config.json")
    if not os.path.isfile(path):
        return settings
    config = file_io.read_json_object(path)
    if config.get("do_lower_case") and not settings.get("do_lower_case"):
        raise ValueError(
            f"{path}: do_lower_case lower-cases the texts but keeps their accents, which no "
            "tokenizer setting here does"
        )
    max_seq_length = config.get("max_seq_length")
    if max_seq_length is not None:
        if not isinstance(max_seq_length, int) or not (
            2 < max_seq_length <= bert_config.max_position_embeddings
        ):
            raise ValueError(
                f"{path}: max_seq_length={max_seq_length!r} must be an integer in (2, "
                f"max_position_embeddings={bert_config.max_position_embeddings}]"
            )
        settings["max_seq_length"] = max_seq_length
    return settings


def sentence_transformers_files(embedding, hidden_size, max_seq_length):
    """The files that make a Hugging Face BERT folder a sentence-transformers one (the way out).

    Args:
      embedding: {"pooling": one of POOLINGS, "normalize": bool}.
      hidden_size: the encoder's H.
      max_seq_length: the longest input in word pieces (longer texts are cut).

    Returns:
      {relative path: JSON text}: modules.json (Transformer, Pooling and, with normalize, Normalize),
      1_Pooling/config.json and sentence_bert_config.json.
    """
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": f"{_MODULES}Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": f"{_MODULES}Pooling"},
    ]
    if embedding["normalize"]:
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": f"{_MODULES}Normalize"}
        )
    pooling = {"word_embedding_dimension": hidden_size}
    pooling.update({key: embedding["pooling"] == value for key, value in _POOLING_KEYS.items()})
    # sentence-transformers' do_lower_case lower-cases before the tokenizer; the tokenizer's own
    # do_lower_case (tokenizer_config.json) is the one that matches ours.
    sentence_bert = {"max_seq_length": max_seq_length, "do_lower_case": False}
    return {
        "modules.json": _json(modules),
        "1_Pooling/config.json": _json(pooling),
        "sentence_bert_config.json": _json(sentence_bert),
    }


def _json(value):
    return json.dumps(value, indent=2) + "\n"


def read_embedding_file(folder):
    """The embedding.json of a converted sentence-transformers folder (a dict), or None."""
    path = os.path.join(folder, EMBEDDING_FILE)
    if not os.path.isfile(path):
        return None
    try:
        settings = file_io.read_json_object(path)
    except ValueError as error:
        raise InputError(str(error)) from None
    if settings.get("pooling", "mean") not in POOLINGS:
        raise InputError(
            f"{path}: pooling must be one of {list(POOLINGS)}, got {settings['pooling']!r}"
        )
    return settings
