"""The Keras API: raw strings in, the task's outputs out; `from_preset`, `fit`, `predict`, `save`, `export`.

Each public class composes `BertPreprocessor` with the task model the scripts train (the id-level
networks of `networks/`, which bert_tf/tasks' runs import too), so there is one definition of each
task's model. `import bert_tf` imports every module here, which registers every class with Keras, as
`keras.saving.load_model` needs; this package imports its modules on first use of a name, so that
`networks/` (below bert_tf/formats in docs/architecture.md's layers) imports no public class.

Modules:
  presets: the preset folders `from_preset` reads.
  preprocessor: `BertPreprocessor`, the Keras layer of raw strings to ids.
  task: `BertTask`, what every public class shares (data, the paper's compile, export).
  text_classifier: `BertTextClassifier`.
  text_embedder: `BertTextEmbedder`.
  masked_lm: `BertMaskedLM`, with `fill_mask`.
  multiple_choice: `BertMultipleChoice`.
  question_answerer: `BertQuestionAnswerer`.
  token_classifier: `BertTokenClassifier`.
  classifier_windows: long texts in windows for the classifier.
  distillation: `distil`, `DistilledTextClassifier`, the distillation loss (run_distillation.py's too).
  arguments: the checks of every public argument, and label names to ids.
  networks/: the id-level networks, their serving graphs and exports, and task.json (TaskInfo).
"""

import importlib

_PUBLIC = {
    "BertMaskedLM": "bert_tf.models.masked_lm",
    "BertMultipleChoice": "bert_tf.models.multiple_choice",
    "BertPreprocessor": "bert_tf.models.preprocessor",
    "BertQuestionAnswerer": "bert_tf.models.question_answerer",
    "BertTextClassifier": "bert_tf.models.text_classifier",
    "BertTextEmbedder": "bert_tf.models.text_embedder",
    "BertTokenClassifier": "bert_tf.models.token_classifier",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bert_tf.models' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)


def __dir__():
    return sorted(list(globals()) + __all__)
