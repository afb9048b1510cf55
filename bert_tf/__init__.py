"""bert_tf: Google's BERT in TensorFlow 2 / Keras 3.

    from bert_tf import BertConfig, BertModel, BertPretrainingModel, FullTokenizer
    from bert_tf import BertPreprocessor, BertTextClassifier, BertTextEmbedder  # the Keras API (docs/python_api.md)
    from bert_tf import distil  # a shallower student of a fine-tuned BertTextClassifier

`import bert_tf` imports the Keras models (bert_tf/models/), which registers with Keras every class
a saved `.keras` file names: `import keras, bert_tf` then `keras.saving.load_model(path)` loads
one. It loads TensorFlow, but none of the scripts' runs, settings or training loop.
"""

from bert_tf import cli

cli.import_tensorflow_quietly()  # before the models: without TensorFlow's CUDA lines on a CPU machine

from bert_tf.checkpoints import load_google_checkpoint, save_google_checkpoint  # noqa: E402
from bert_tf.modeling import BertConfig, BertModel, BertPretrainingModel, pretraining_loss  # noqa: E402
from bert_tf.models.distillation import DistilledTextClassifier, distil  # noqa: E402
from bert_tf.models.masked_lm import BertMaskedLM  # noqa: E402
from bert_tf.models.multiple_choice import BertMultipleChoice  # noqa: E402
from bert_tf.models.networks import network_registry  # noqa: E402 every task's network: registered too
from bert_tf.models.preprocessor import BertPreprocessor  # noqa: E402
from bert_tf.models.question_answerer import BertQuestionAnswerer  # noqa: E402
from bert_tf.models.text_classifier import BertTextClassifier  # noqa: E402
from bert_tf.models.text_embedder import BertTextEmbedder  # noqa: E402
from bert_tf.models.token_classifier import BertTokenClassifier  # noqa: E402
from bert_tf.tokenization import FullTokenizer  # noqa: E402

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
    "DistilledTextClassifier",
    "FullTokenizer",
    "distil",
    "load_google_checkpoint",
    "pretraining_loss",
    "save_google_checkpoint",
]

del network_registry
