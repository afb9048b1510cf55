"""`BertPreprocessor`: the Keras layer of raw strings to BERT's model inputs, exactly as FullTokenizer.

It holds `bert_tf.preprocessing.GraphPreprocessor` (the in-graph tokenizer and packer every export
serves) and the vocabulary itself as a list of tokens in its config, so that a `.keras` file carries
its vocabulary and loads under `safe_mode=True` anywhere.

B = batch, S = the longest packed row of the batch (at most max_seq_length).
"""

import os
import shutil
import tempfile
import weakref

import keras
import numpy as np
import tensorflow as tf

from bert_tf import preprocessing
from bert_tf.models import arguments, presets
from bert_tf.tokenization import load_vocab


def _vocabulary_tokens(vocabulary):
    """The tokens in id order, from a vocab.txt path or a list of tokens."""
    vocabulary = arguments.vocabulary(vocabulary)
    if isinstance(vocabulary, str):
        return list(load_vocab(vocabulary))
    return vocabulary


def preprocessor_argument(preprocessor):
    """A task model's `preprocessor` argument: a BertPreprocessor, or its config (a saved model's).

    Raises:
      ValueError: naming the argument, for anything else (a saved file's config that names
        another class, e.g. one tampered with, included).
    """
    if isinstance(preprocessor, dict):
        preprocessor = keras.saving.deserialize_keras_object(preprocessor)
    if not isinstance(preprocessor, BertPreprocessor):
        raise ValueError(
            f"preprocessor must be a BertPreprocessor (or its config), got {preprocessor!r}"
        )
    return preprocessor


def as_text_batch(texts, argument):
    """A list or 1-D array of strings as a numpy object array [B]; ValueError naming `argument`."""
    if isinstance(texts, str | bytes):
        raise ValueError(f"{argument}: give a list of strings, not one string")
    array = np.asarray(texts, dtype=object)
    if array.ndim != 1:
        raise ValueError(f"{argument}: a list of strings, got an array of shape {array.shape}")
    for index, text in enumerate(array):
        if not isinstance(text, str | bytes):
            raise ValueError(f"{argument}[{index}] is a {type(text).__name__}, not a string")
    return array


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPreprocessor(keras.layers.Layer):
    """Raw strings -> {"input_ids", "input_mask", "segment_ids"}: int32 [B, S].

    The ids are `FullTokenizer(vocab, do_lower_case)`'s, packed as the original run_classifier.py
    packs them: [CLS] a [SEP] (b [SEP]), cut by its `_truncate_seq_pair`, zero-padded to the
    longest row of the batch.

    Example:
    ```python
    preprocessor = BertPreprocessor.from_preset("uncased_L-12_H-768_A-12", max_seq_length=64)
    preprocessor(tf.constant(["Is it?"]), tf.constant(["Yes."]))["input_ids"]  # int32 [1, 8]
    ```
    """

    def __init__(self, vocabulary, do_lower_case=True, max_seq_length=128, **kwargs):
        """
        Args:
          vocabulary: a vocab.txt path, or its tokens in id order.
          do_lower_case: lower-case and strip accents (uncased models).
          max_seq_length: longest packed row; longer texts are cut.
        """
        kwargs.setdefault("trainable", False)
        tokens = _vocabulary_tokens(vocabulary)
        do_lower_case = arguments.boolean("do_lower_case", do_lower_case)
        max_seq_length = arguments.integer("max_seq_length", max_seq_length, 2)
        super().__init__(**kwargs)
        self.vocabulary, self.do_lower_case = tokens, do_lower_case
        self.max_seq_length = max_seq_length
        # The in-graph tokenizer and an export's assets/ read a file: this layer's own copy.
        self._folder = tempfile.mkdtemp(prefix="bert_tf_vocab_")
        weakref.finalize(self, shutil.rmtree, self._folder, True)
        self.vocab_file = os.path.join(self._folder, "vocab.txt")
        with open(self.vocab_file, "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in self.vocabulary))
        self.tokenizer = preprocessing.GraphPreprocessor(
            self.vocab_file, self.do_lower_case, self.max_seq_length
        )
        # Traced once and called by every dataset of fit, evaluate and predict (tracing the
        # tokenizer's graph is most of their start-up); AutoGraph has nothing to convert in it.
        spec = tf.TensorSpec([None], tf.string)
        self._features_of = [
            tf.function(self.tokenizer.__call__, input_signature=[spec], autograph=False),
            tf.function(self.tokenizer.__call__, input_signature=[spec] * 2, autograph=False),
        ]
        self.built = True

    @classmethod
    def from_config(cls, config):
        """The layer of a saved config, whose vocabulary is the list of tokens get_config writes:
        a path there (which would read a file of the loading machine) is refused, as any config
        bert_tf's save does not write (arguments.from_saved_config)."""

        def build(vocabulary=None, **settings):
            if not isinstance(vocabulary, list):
                raise ValueError(f"vocabulary must be the list of tokens, got {vocabulary!r:.80}")
            return cls(vocabulary, **settings)

        return arguments.from_saved_config(cls, config, build)

    def features(self, *texts):
        """text_a (and text_b): tf.string [B] -> {"input_ids", "input_mask", "segment_ids"}: int32
        [B, S]; the same as calling the layer, through one graph traced once per layer."""
        return self._features_of[len(texts) - 1](*texts)

    @classmethod
    def from_preset(cls, folder, vocabulary=None, do_lower_case=None, max_seq_length=None):
        """The preprocessor of a preset folder (see bert_tf.models.presets): its vocabulary, casing
        and max_seq_length, each overridable here."""
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        return cls.of_preset(preset)

    @classmethod
    def of_preset(cls, preset):
        return cls(preset.vocab_file, preset.do_lower_case, preset.max_seq_length)

    def call(self, text_a, text_b=None):
        """text_a (and text_b): tf.string [B] -> {"input_ids", "input_mask", "segment_ids"}."""
        text_a = tf.convert_to_tensor(text_a, tf.string)
        if text_b is not None:
            text_b = tf.convert_to_tensor(text_b, tf.string)
        return self.tokenizer(text_a, text_b)

    def compute_output_spec(self, text_a, text_b=None):
        spec = keras.KerasTensor((None, None), dtype="int32")
        return {"input_ids": spec, "input_mask": spec, "segment_ids": spec}

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary": self.vocabulary,
            "do_lower_case": self.do_lower_case,
            "max_seq_length": self.max_seq_length,
        }
