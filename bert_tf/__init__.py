"""bert_tf: Google's BERT in TensorFlow 2 / Keras 3.

    from bert_tf import BertConfig, BertModel, BertPretrainingModel, FullTokenizer
    from bert_tf import BertPreprocessor, BertTextClassifier, BertTextEmbedder  # the Keras API (docs/python_api.md)

`import bert_tf` imports the Keras models (bert_tf/models/), which registers with Keras every class
a saved `.keras` file names: `import keras, bert_tf` then `keras.saving.load_model(path)` loads
one. It loads TensorFlow, but none of the scripts' runs, settings or training loop.
"""

from bert_tf.checkpoints import load_google_checkpoint, save_google_checkpoint
from bert_tf.modeling import BertConfig, BertModel, BertPretrainingModel, pretraining_loss
from bert_tf.models.masked_lm import BertMaskedLM
from bert_tf.models.multiple_choice import BertMultipleChoice
from bert_tf.models.networks import network_registry  # every task's network: registered too
from bert_tf.models.preprocessor import BertPreprocessor
from bert_tf.models.question_answerer import BertQuestionAnswerer
from bert_tf.models.text_classifier import BertTextClassifier
from bert_tf.models.text_embedder import BertTextEmbedder
from bert_tf.models.token_classifier import BertTokenClassifier
from bert_tf.tokenization import FullTokenizer

__version__ = "0.1.0"

__all__ = [
    "BertConfig",
    "BertMaskedLM",
    "BertModel",
    "BertMultipleChoice",
    "BertPreprocessor",
    "BertPretrainingModel",
    "BertQuestionAnswerer",
    "BertTextClassifier",
    "BertTextEmbedder",
    "BertTokenClassifier",
    "FullTokenizer",
    "load_google_checkpoint",
    "pretraining_loss",
    "save_google_checkpoint",
]

del network_registry
