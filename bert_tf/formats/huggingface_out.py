"""Writing a checkpoint as a Hugging Face folder: convert_checkpoint.py --output_format=huggingface.

    python convert_checkpoint.py --init_checkpoint=$RUN_DIR --vocab_file=vocab.txt \\
      --output_format=huggingface --output_dir=model_hf

writes what transformers' `from_pretrained` reads: config.json (the architecture, hidden_act by its
numerics, id2label / label2id, problem_type), model.safetensors (numpy + safetensors: no torch),
vocab.txt, tokenizer_config.json (casing, model_max_length) and special_tokens_map.json. An embedding
model is a sentence-transformers folder besides (bert_tf/formats/sentence_transformers_folder.py). Every tensor
name is the one bert_tf/formats/convert.py reads, from the same table (convert.hf_names), and every dense kernel
is transposed back into torch's [out, in].
"""

import json

import numpy as np

from bert_tf.formats.hf_names import HIDDEN_ACTS, hf_names
from bert_tf.formats.model_out import write_folder
from bert_tf.formats.sentence_transformers_folder import sentence_transformers_files
from bert_tf.tokenization import load_vocab

# bert_tf's kinds of model (bert_tf/formats/model_out.py) -> transformers' class.
ARCHITECTURES = {
    "encoder": "BertModel",
    "embedding": "BertModel",
    "pretraining": "BertForPreTraining",
    "masked_lm": "BertForMaskedLM",
    "classifier": "BertForSequenceClassification",
    "multi_label": "BertForSequenceClassification",
    "tagger": "BertForTokenClassification",
    "squad": "BertForQuestionAnswering",
    "multiple_choice": "BertForMultipleChoice",
}
# Ours -> Hugging Face's, the first HIDDEN_ACTS name of each: our "gelu" (the original's tanh form) is
# HF's "gelu_new", our "gelu_exact" HF's "gelu".
HF_HIDDEN_ACTS = {}
for _hf, _ours in HIDDEN_ACTS.items():
    HF_HIDDEN_ACTS.setdefault(_ours, _hf)
SPECIAL_TOKENS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}
# transformers builds these without the [CLS] pooler (add_pooling_layer=False), which they do not read.
_NO_POOLER = ("tagger", "squad", "masked_lm")
_SAFETENSORS_METADATA = {"format": "pt"}  # what transformers' loader expects of a torch file


def hf_tensors(model):
    """{Hugging Face name: float32 np.ndarray} of an OutgoingModel's weights.

    A bare encoder (BertModel, sentence-transformers) has no "bert." prefix, as transformers saves
    it; every model with a head has. The masked-LM decoder is tied to the word embeddings and
    cls.predictions.bias, as in Google's model: transformers ties it on loading, so it is not written.
    """
    prefix = "" if model.kind in ("encoder", "embedding") else "bert."
    tensors = {}
    for google_name, value in model.weights.items():
        if model.kind in _NO_POOLER and google_name.startswith("bert/pooler/"):
            continue
        names, is_linear = hf_names(google_name, prefix)
        # Google's dense kernels are [in, out] (x @ K + b); torch.nn.Linear's weight is [out, in].
        tensors[names[0]] = np.ascontiguousarray(value.T if is_linear else value, np.float32)
    return tensors


def hf_config(model):
    """config.json's dict for an OutgoingModel."""
    bert_config = model.bert_config
    config = {
        "architectures": [ARCHITECTURES[model.kind]],
        "model_type": "bert",
        **{
            key: value
            for key, value in bert_config.to_dict().items()
            if key not in ("hidden_act", "objective")
        },
        "hidden_act": HF_HIDDEN_ACTS[bert_config.hidden_act],
        "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute",
        "pad_token_id": load_vocab(model.vocab_file).get("[PAD]", 0),
        "tie_word_embeddings": True,
        "dtype": "float32",
    }
    if model.labels is not None:
        config["id2label"] = {str(i): label for i, label in enumerate(model.labels)}
        config["label2id"] = {label: i for i, label in enumerate(model.labels)}
    if model.kind == "classifier" and model.is_regression:
        config["num_labels"] = 1
        config["problem_type"] = "regression"
    elif model.kind == "multi_label":
        config["problem_type"] = "multi_label_classification"
    elif model.kind == "classifier":
        config["problem_type"] = "single_label_classification"
    return config


def tokenizer_files(model):
    """{file name: text}: vocab.txt, tokenizer_config.json and special_tokens_map.json.

    transformers' BertTokenizer with do_lower_case (and strip_accents None: it strips accents when it
    lower-cases) splits text as bert_tf.tokenization.FullTokenizer does: on the 475 texts of
    tests/fixtures/tokenization, for either casing, all but a word of 101 to 200 characters (one
    [UNK] in transformers, word pieces in the original) and one text of random control characters.
    """
    with open(model.vocab_file, encoding="utf-8") as f:
        vocab = f.read()
    tokens = load_vocab(model.vocab_file)
    special = {key: token for key, token in SPECIAL_TOKENS.items() if token in tokens}
    tokenizer_config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": model.do_lower_case,
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "do_basic_tokenize": True,
        "model_max_length": model.max_seq_length,
        "clean_up_tokenization_spaces": False,
        # A "[SEP]" written in the text is text, as in the original's tokenizer and ours.
        "split_special_tokens": True,
        **special,
    }
    return {
        "vocab.txt": vocab,
        "tokenizer_config.json": _json(tokenizer_config),
        "special_tokens_map.json": _json(special),
    }


def huggingface_files(model):
    """{relative path: str or bytes} of the whole folder."""
    from safetensors.numpy import save

    files = {
        "config.json": _json(hf_config(model)),
        "model.safetensors": save(hf_tensors(model), metadata=_SAFETENSORS_METADATA),
        **tokenizer_files(model),
    }
    if model.kind == "embedding":
        files.update(
            sentence_transformers_files(
                model.embedding, model.bert_config.hidden_size, model.max_seq_length
            )
        )
    return files


def write_huggingface(model, output_dir, overwrite=False):
    """Writes an OutgoingModel (bert_tf/formats/model_out.py) as a Hugging Face folder, all or nothing."""
    write_folder(huggingface_files(model), output_dir, overwrite)


def _json(value):
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
