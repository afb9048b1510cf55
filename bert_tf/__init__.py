"""bert_tf: Google's BERT in TensorFlow 2 / Keras 3.

    from bert_tf import BertConfig, BertModel, BertPretrainingModel, FullTokenizer
    from bert_tf import BertPreprocessor, BertTextClassifier, BertTextEmbedder  # the Keras API (docs/python_api.md)

Names are imported on first use, so `import bert_tf` (and the TF-free data tools) stay fast.
"""

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "BertConfig": "bert_tf.modeling",
    "BertModel": "bert_tf.modeling",
    "BertPretrainingModel": "bert_tf.modeling",
    "pretraining_loss": "bert_tf.modeling",
    "FullTokenizer": "bert_tf.tokenization",
    "load_google_checkpoint": "bert_tf.checkpoints",
    "save_google_checkpoint": "bert_tf.checkpoints",
    "BertPreprocessor": "bert_tf.models",
    "BertTextClassifier": "bert_tf.models",
    "BertTextEmbedder": "bert_tf.models",
    "BertMaskedLM": "bert_tf.models",
    "BertMultipleChoice": "bert_tf.models",
    "BertTokenClassifier": "bert_tf.models",
    "BertQuestionAnswerer": "bert_tf.models",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
