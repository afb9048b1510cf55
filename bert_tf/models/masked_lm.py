"""`BertMaskedLM`: the pretraining model's masked-LM head on raw strings, and `fill_mask`.

It composes `BertPreprocessor` with run_pretraining.py's model (bert_tf.modeling.BertPretrainingModel),
restored with its heads from a release (Google's releases hold cls/predictions) or a pretraining run.
A text marks the pieces to predict with the literal "[MASK]", which the preprocessor's FullTokenizer
rules would split into "[", "mask", "]": `fill_mask` tokenizes the text between the marks and puts
the [MASK] id at each mark.

B = texts, P = [MASK]s of a text (padded to the batch's most), V = vocabulary, K = k best.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.modeling import BertConfig, BertPretrainingModel
from bert_tf.models import presets
from bert_tf.models.preprocessor import BertPreprocessor
from bert_tf.models.task import BertTask

MASK = "[MASK]"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMaskedLM(BertTask):
    """Texts holding "[MASK]" -> the k best word pieces of each mark (`fill_mask`).

    Example:
    ```python
    masked_lm = BertMaskedLM.from_preset("uncased_L-12_H-768_A-12")
    masked_lm.fill_mask(["The capital of France is [MASK]."], k=3)
    # [[[("paris", -0.3), ("lyon", -2.9), ("lille", -3.8)]]]
    ```
    """

    def __init__(self, preprocessor, bert_config, **kwargs):
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        if isinstance(bert_config, dict):
            bert_config = BertConfig.from_dict(bert_config)
        if MASK not in preprocessor.vocabulary:
            raise ValueError(f"vocabulary: no {MASK} token")
        kwargs.setdefault("name", "bert_masked_lm")
        super().__init__(preprocessor, BertPretrainingModel(bert_config), **kwargs)

    @classmethod
    def from_preset(cls, folder, *, vocabulary=None, do_lower_case=None, max_seq_length=None):
        """The masked LM of a preset folder, its cls/predictions head required.

        Raises:
          ValueError: one line naming the folder, when it holds no checkpoint, vocabulary or
            masked-LM head.
        """
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        model = cls(BertPreprocessor.of_preset(preset), preset.bert_config)
        restore_init_checkpoint(model.task_model, preset.checkpoint, heads="required")
        return model

    def call(self, inputs, training=None):
        """Ids and "masked_lm_positions" int32 [B, P] -> masked_lm_log_probs float32 [B, P, V]."""
        return self.task_model(inputs, training=training)["masked_lm_log_probs"]

    def default_loss(self):
        return None

    def default_metrics(self):
        return None

    def check_labels(self, y, num_examples, argument="y"):
        raise ValueError(f"{argument}: BertMaskedLM is not trained by fit; use run_pretraining.py")

    def export(self, path):
        raise ValueError(
            f"export({path!r}): export_saved_model.py writes no masked-LM SavedModel (it exports "
            "a pretraining checkpoint's encoder)"
        )

    def masked_features(self, texts):
        """The packed ids of texts holding "[MASK]" marks, and the marks' positions.

        Returns:
          {"input_ids", "input_mask", "segment_ids", "masked_lm_positions"}: int32 [B, S] and
          [B, P] (rows with fewer marks repeat position 0), and the number of marks of each text.
        """
        columns = self.check_texts(texts)
        mask_id = self.preprocessor.vocabulary.index(MASK)
        tokenizer = self.preprocessor.tokenizer
        segments = []
        for column in columns:
            rows = []
            for text in column:
                text = text.decode("utf-8", "ignore") if isinstance(text, bytes) else text
                parts = tokenizer.tokenize(tf.constant(text.split(MASK))).to_list()
                ids = parts[0]
                for part in parts[1:]:
                    ids = [*ids, mask_id, *part]
                rows.append(ids)
            segments.append(tf.ragged.constant(rows, tf.int32, ragged_rank=1, inner_shape=()))
        features = tokenizer.pack(segments)
        is_mask = features["input_ids"].numpy() == mask_id
        counts = is_mask.sum(axis=1)
        positions = np.zeros([len(counts), max(counts.max(), 1)], np.int32)
        for row, columns_of_masks in enumerate(is_mask):
            found = np.flatnonzero(columns_of_masks)
            positions[row, : len(found)] = found
        return {**features, "masked_lm_positions": tf.constant(positions)}, counts

    def fill_mask(self, texts, k=5):
        """The k best word pieces of each "[MASK]" of each text.

        Args:
          texts: a list of texts, or a pair (texts_a, texts_b).
          k: pieces per mark.

        Returns:
          For each text, for each mark in order, a list of k (word piece, log-probability),
          best first. A mark past max_seq_length (cut off) is left out.
        """
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        features, counts = self.masked_features(texts)
        log_probs = self(features, training=False).numpy()  # [B, P, V]
        best = np.argsort(-log_probs, axis=-1, kind="stable")[..., :k]  # [B, P, K]
        vocabulary = self.preprocessor.vocabulary
        return [
            [
                [(vocabulary[i], float(log_probs[row, mark, i])) for i in best[row, mark]]
                for mark in range(counts[row])
            ]
            for row in range(len(counts))
        ]

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
            "bert_config": self.task_model.config.to_dict(),
        }
