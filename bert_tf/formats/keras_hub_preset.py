"""keras-hub BERT presets, both ways: convert_checkpoint.py --output_format=keras_hub, and read_preset.

A keras-hub preset folder holds config.json (the BertBackbone's sizes), metadata.json, tokenizer.json
(casing), assets/tokenizer/vocabulary.txt, model.weights.h5 (the backbone's weights) and, for a task,
task.json, preprocessor.json and task.weights.h5 (its head). The weights sit in the .h5 files under the
paths Keras gives the layers of the functional BertBackbone (`layers/transformer_encoder_1/...`):
KERAS_HUB_NAMES maps Google's names onto them, for writing and for reading.

Writing builds the backbone (and BertTextClassifier) with keras-hub and saves it with its own
`save_to_preset`, so the files are keras-hub's, then puts the weights into its .h5 files with h5py.
Reading (`read_preset`) needs only json and h5py: keras-hub is imported on the writing path alone.
keras-hub's BERT computes the original's tanh GELU with LayerNorm epsilon 1e-12, as ours; an encoder
with another activation is refused. Heads: BertTextClassifier (classifier, regression, multi-label:
logits, activation None); BertTextEmbedder (an embedding model's pooling and normalisation); a
pretraining checkpoint goes out as its backbone alone; other heads have no keras-hub class and are
refused.

H = hidden size, N = attention heads, D = H / N.
"""

import json
import os
import tempfile

import numpy as np
from absl import logging

from bert_tf.errors import InputError
from bert_tf.formats.model_out import write_folder
from bert_tf.modeling import BertConfig

# Google's name -> (the .h5 dataset path, whether it is a transposed head kernel). Encoder layer i sits
# under "layers/transformer_encoder" (i = 0) or "layers/transformer_encoder_<i>": LAYER_NAMES.
KERAS_HUB_NAMES = {
    "bert/embeddings/word_embeddings": "layers/reversible_embedding/vars/0",
    "bert/embeddings/position_embeddings": "layers/position_embedding/vars/0",
    "bert/embeddings/token_type_embeddings": "layers/embedding/vars/0",
    "bert/embeddings/LayerNorm/gamma": "layers/layer_normalization/vars/0",
    "bert/embeddings/LayerNorm/beta": "layers/layer_normalization/vars/1",
    "bert/pooler/dense/kernel": "layers/dense/vars/0",
    "bert/pooler/dense/bias": "layers/dense/vars/1",
}
# The kernels are [H, N, D] (query, key, value) and [N, D, H] (attention output) in keras-hub, [H, H]
# in Google's: the same numbers, reshaped (heads are contiguous blocks of D in both).
LAYER_NAMES = {
    "attention/self/query/kernel": "_self_attention_layer/query_dense/vars/0",
    "attention/self/query/bias": "_self_attention_layer/query_dense/vars/1",
    "attention/self/key/kernel": "_self_attention_layer/key_dense/vars/0",
    "attention/self/key/bias": "_self_attention_layer/key_dense/vars/1",
    "attention/self/value/kernel": "_self_attention_layer/value_dense/vars/0",
    "attention/self/value/bias": "_self_attention_layer/value_dense/vars/1",
    "attention/output/dense/kernel": "_self_attention_layer/output_dense/vars/0",
    "attention/output/dense/bias": "_self_attention_layer/output_dense/vars/1",
    "attention/output/LayerNorm/gamma": "_self_attention_layer_norm/vars/0",
    "attention/output/LayerNorm/beta": "_self_attention_layer_norm/vars/1",
    "intermediate/dense/kernel": "_feedforward_intermediate_dense/vars/0",
    "intermediate/dense/bias": "_feedforward_intermediate_dense/vars/1",
    "output/dense/kernel": "_feedforward_output_dense/vars/0",
    "output/dense/bias": "_feedforward_output_dense/vars/1",
    "output/LayerNorm/gamma": "_feedforward_layer_norm/vars/0",
    "output/LayerNorm/beta": "_feedforward_layer_norm/vars/1",
}
# BertTextClassifier's logits layer, in task.weights.h5: kernel [H, L] = output_weights [L, H] transposed.
HEAD_NAMES = {"output_weights": "layers/dense/vars/0", "output_bias": "layers/dense/vars/1"}
_CLASSIFIERS = ("classifier", "multi_label")
_BACKBONE_ONLY = ("encoder", "embedding", "pretraining", "masked_lm")
VOCABULARY = os.path.join("assets", "tokenizer", "vocabulary.txt")


def h5_path(google_name):
    """The model.weights.h5 dataset of an encoder weight (bert/...)."""
    if google_name in KERAS_HUB_NAMES:
        return KERAS_HUB_NAMES[google_name]
    layer, rest = google_name.removeprefix("bert/encoder/layer_").split("/", 1)
    group = "transformer_encoder" if layer == "0" else f"transformer_encoder_{layer}"
    return f"layers/{group}/{LAYER_NAMES[rest]}"


def _check_expressible(model):
    if model.kind not in _CLASSIFIERS + _BACKBONE_ONLY:
        raise InputError(
            f"--init_checkpoint={model.source} cannot be converted: keras-hub has no BERT class for "
            f"a {model.kind} head (it has BertBackbone, BertTextClassifier and BertTextEmbedder); use "
            "--output_format=huggingface"
        )
    if model.bert_config.hidden_act != "gelu":
        raise InputError(
            f"--init_checkpoint={model.source} cannot be converted: hidden_act="
            f"{model.bert_config.hidden_act!r}, but keras-hub's BERT computes the tanh GELU ('gelu')"
        )


def write_preset(model, output_dir, overwrite=False):
    """Writes an OutgoingModel (bert_tf/formats/model_out.py) as a keras-hub preset folder, all or nothing."""
    _check_expressible(model)
    if model.kind in ("pretraining", "masked_lm"):
        logging.warning(
            "keras-hub preset: the pretraining heads are not written (BertBackbone only)"
        )
    with tempfile.TemporaryDirectory() as temp_dir:
        _save_with_keras_hub(model, temp_dir)
        _put_weights(model, temp_dir)
        files = {}
        for folder, _, names in os.walk(temp_dir):
            for name in names:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, temp_dir)] = f.read()
    write_folder(files, output_dir, overwrite)


def _save_with_keras_hub(model, folder):
    """keras-hub's own preset files for the model's sizes, tokenizer and head (weights not yet set)."""
    import keras_hub

    config = model.bert_config
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
    )
    # keras-hub lower-cases and strips accents separately; Google's uncased tokenizer does both.
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=model.vocab_file,
        lowercase=model.do_lower_case,
        strip_accents=model.do_lower_case,
    )
    if model.kind == "embedding":  # no weights of its own: the pooling and normalisation
        keras_hub.models.BertTextEmbedder(
            backbone,
            preprocessor=keras_hub.models.BertTextEmbedderPreprocessor(
                tokenizer, sequence_length=model.max_seq_length
            ),
            pooling_mode=model.embedding["pooling"],
            normalize=model.embedding["normalize"],
        ).save_to_preset(folder)
        return
    if model.kind not in _CLASSIFIERS:
        backbone.save_to_preset(folder)
        tokenizer.save_to_preset(folder)
        return
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=model.max_seq_length
    )
    classifier = keras_hub.models.BertTextClassifier(
        backbone,
        num_classes=1 if model.is_regression else len(model.labels),
        preprocessor=preprocessor,
        activation=None,
        dropout=config.hidden_dropout_prob,
    )
    classifier.save_to_preset(folder)


def _put_weights(model, folder):
    """Writes the model's weights into the preset's .h5 files, each checked against its shape."""
    import h5py

    with h5py.File(os.path.join(folder, "model.weights.h5"), "r+") as h5:
        for name, value in model.weights.items():
            if name.startswith("bert/"):
                _put(h5, h5_path(name), value, name)
    if model.kind in _CLASSIFIERS:
        with h5py.File(os.path.join(folder, "task.weights.h5"), "r+") as h5:
            _put(
                h5,
                HEAD_NAMES["output_weights"],
                model.weights["output_weights"].T,
                "output_weights",
            )
            _put(h5, HEAD_NAMES["output_bias"], model.weights["output_bias"], "output_bias")


def _put(h5, path, value, name):
    dataset = h5[path]
    if dataset.size != value.size:
        raise ValueError(
            f"{name} {list(value.shape)} does not fit keras-hub's {path} {dataset.shape}"
        )
    dataset[...] = np.asarray(value, np.float32).reshape(dataset.shape)


def read_preset(folder):
    """A keras-hub BERT preset folder's encoder: json and h5py only (keras-hub is not needed).

    Args:
      folder: a folder written by keras-hub's save_to_preset (or --output_format=keras_hub) for a
        BertBackbone, alone or under a task.

    Returns:
      (BertConfig, {Google variable name: float32 np.ndarray} of the encoder (bert/*), the path of
      its vocabulary.txt, do_lower_case).

    Raises:
      FileNotFoundError: naming the missing file.
      ValueError: naming the file, for another backbone than BertBackbone or a weight of another
        shape. (A tokenizer that lower-cases without stripping accents, keras-hub's default, is
        do_lower_case=True with a warning: ours strips them too.)
    """
    paths = {
        name: os.path.join(folder, name)
        for name in ("config.json", "tokenizer.json", "model.weights.h5", VOCABULARY)
    }
    for path in paths.values():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} does not exist (a keras-hub preset folder needs it)")
    bert_config = _bert_config(paths["config.json"])
    weights = _read_weights(paths["model.weights.h5"], bert_config)
    return bert_config, weights, paths[VOCABULARY], _do_lower_case(paths["tokenizer.json"])


def is_preset(folder):
    """Whether `folder` looks like a keras-hub preset (metadata.json naming a keras_hub_version)."""
    path = os.path.join(folder, "metadata.json")
    if not os.path.isfile(path):
        return False
    with open(path, encoding="utf-8") as f:
        return "keras_hub_version" in json.load(f)


def _bert_config(path):
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    if saved.get("class_name") != "BertBackbone":
        raise ValueError(f"{path}: class_name {saved.get('class_name')!r} is not BertBackbone")
    config = saved["config"]
    hidden = config["hidden_dim"]
    return BertConfig(
        vocab_size=config["vocabulary_size"],
        hidden_size=hidden,
        num_hidden_layers=config["num_layers"],
        num_attention_heads=config["num_heads"],
        intermediate_size=config["intermediate_dim"],
        hidden_act="gelu",  # keras-hub's BERT: the tanh approximation, the original's "gelu"
        hidden_dropout_prob=config.get("dropout", 0.1),
        attention_probs_dropout_prob=config.get("dropout", 0.1),
        max_position_embeddings=config["max_sequence_length"],
        type_vocab_size=config["num_segments"],
    )


def _read_weights(path, bert_config):
    import h5py

    from bert_tf.checkpoints import google_variable_names
    from bert_tf.modeling import BertModel

    shapes = {
        name: tuple(variable.shape)
        for name, variable in google_variable_names(BertModel(bert_config)).items()
    }
    weights = {}
    with h5py.File(path, "r") as h5:
        for name, shape in shapes.items():
            dataset = h5.get(h5_path(name))
            if dataset is None or dataset.size != int(np.prod(shape)):
                found = None if dataset is None else dataset.shape
                raise ValueError(f"{path}: {h5_path(name)} is {found}, but {name} is {list(shape)}")
            weights[name] = np.asarray(dataset, np.float32).reshape(shape)
    return weights


def _do_lower_case(path):
    with open(path, encoding="utf-8") as f:
        config = json.load(f)["config"]
    lowercase, strip_accents = bool(config.get("lowercase")), bool(config.get("strip_accents"))
    if lowercase and not strip_accents:
        logging.warning(
            "%s lower-cases without stripping accents; do_lower_case=True also strips them", path
        )
    return lowercase
