"""The Keras API: raw strings in, the task's outputs out; `from_preset`, `fit`, `predict`, `save`, `export`.

Each public class composes `BertPreprocessor` with the task model the scripts train (bert_tf/tasks),
so there is one definition of each task's model. Importing this package registers every class with
Keras, which `keras.saving.load_model` needs.

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
  windows: long texts in windows for the classifier.
"""

from bert_tf.models.masked_lm import BertMaskedLM
from bert_tf.models.multiple_choice import BertMultipleChoice
from bert_tf.models.preprocessor import BertPreprocessor
from bert_tf.models.question_answerer import BertQuestionAnswerer
from bert_tf.models.text_classifier import BertTextClassifier
from bert_tf.models.text_embedder import BertTextEmbedder
from bert_tf.models.token_classifier import BertTokenClassifier

__all__ = [
    "BertMaskedLM",
    "BertMultipleChoice",
    "BertPreprocessor",
    "BertQuestionAnswerer",
    "BertTextClassifier",
    "BertTextEmbedder",
    "BertTokenClassifier",
]
