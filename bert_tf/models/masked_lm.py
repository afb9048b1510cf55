"""`BertMaskedLM`: the pretraining model's masked-LM head on raw strings, and `fill_mask`.

It composes `BertPreprocessor` with run_pretraining.py's model (bert_tf.modeling.BertPretrainingModel),
restored with its heads from a release (Google's releases hold cls/predictions) or a pretraining run.
A text marks the pieces to predict with the literal "[MASK]", which the preprocessor's FullTokenizer
rules would split into "[", "mask", "]": `fill_mask` tokenizes the text between the marks and puts
the [MASK] id at each mark.

`fit(x=texts)` trains the masked LM as run_pretraining.py --dynamic_masking=True does, each text
masked afresh on every pass (bert_tf/models/masked_lm_data.py); the loss is the masked-LM
cross-entropy (the mean over the predicted tokens), the metric the masked-LM accuracy. The
next-sentence head is not trained.

B = texts, P = [MASK]s of a text (padded to the batch's most), V = vocabulary, K = k best.
"""

import inspect
import math

import keras
import numpy as np
import tensorflow as tf

from bert_tf.modeling import BertPretrainingModel
from bert_tf.models import arguments, masked_lm_data, presets
from bert_tf.models.preprocessor import BertPreprocessor, preprocessor_argument
from bert_tf.models.task import BertTask

MASK = "[MASK]"
# The constructor's masking arguments (run_pretraining.py's flags of these names).
MASKING_ARGUMENTS = (
    "max_predictions_per_seq",
    "masked_lm_prob",
    "do_whole_word_mask",
    "masking_seed",
)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMaskedLM(BertTask):
    """Texts holding "[MASK]" -> the k best word pieces of each mark (`fill_mask`).

    Example:
    ```python
    masked_lm = BertMaskedLM.from_preset("uncased_L-12_H-768_A-12")
    masked_lm.fill_mask(["The capital of France is [MASK]."], k=3)
    # [[[("paris", -0.3), ("lyon", -2.9), ("lille", -3.8)]]]
    masked_lm.fit(x=domain_texts, batch_size=32, epochs=3)  # masked on the fly
    ```
    """

    def __init__(
        self,
        preprocessor,
        bert_config,
        max_predictions_per_seq=20,
        masked_lm_prob=0.15,
        do_whole_word_mask=False,
        masking_seed=12345,
        **kwargs,
    ):
        """
        Args:
          preprocessor: a BertPreprocessor (or its config).
          bert_config: a BertConfig, or a dict of bert_config.json keys.
          max_predictions_per_seq, masked_lm_prob, do_whole_word_mask: fit's masking, as
            run_pretraining.py's flags of these names (defaults the original's).
          masking_seed: the seed of fit's and evaluate's masks and of fit's order of texts.
        """
        preprocessor = preprocessor_argument(preprocessor)
        bert_config = arguments.bert_config(bert_config)
        for token in (MASK, "[CLS]", "[SEP]"):
            if token not in preprocessor.vocabulary:
                raise ValueError(f"vocabulary: no {token} token")
        self.masking = masked_lm_data.check_masking(
            max_predictions_per_seq, masked_lm_prob, do_whole_word_mask, masking_seed
        )
        kwargs.setdefault("name", "bert_masked_lm")
        task_model = BertPretrainingModel(bert_config)
        # fit trains the masked LM alone: the pooler and next-sentence head keep their values
        # (and Keras does not warn each step that they get no gradient).
        task_model.bert.pooler.trainable = False
        if task_model.next_sentence is not None:
            task_model.next_sentence.trainable = False
        super().__init__(preprocessor, task_model, **kwargs)
        self.batches = masked_lm_data.MaskedBatches(preprocessor, self.masking)

    @classmethod
    def from_preset(
        cls, folder, *, vocabulary=None, do_lower_case=None, max_seq_length=None, **masking
    ):
        """The masked LM of a preset folder, its cls/predictions head required; **masking: the
        constructor's max_predictions_per_seq, masked_lm_prob, do_whole_word_mask, masking_seed.

        Raises:
          ValueError: one line naming the folder, when it holds no checkpoint, vocabulary or
            masked-LM head.
        """
        arguments.known_keywords("BertMaskedLM.from_preset", masking, MASKING_ARGUMENTS)
        parameters = inspect.signature(cls.__init__).parameters
        defaults = {name: parameters[name].default for name in MASKING_ARGUMENTS}
        masked_lm_data.check_masking(**{**defaults, **masking})
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        if preset.kind == "keras_hub":
            raise ValueError(
                f"preset folder {folder}: a keras-hub preset is read for its encoder only, and "
                "a masked LM needs its cls/predictions head"
            )
        model = cls(BertPreprocessor.of_preset(preset), preset.bert_config, **masking)
        presets.restore(model.task_model, preset, heads="required")
        return model

    def call(self, inputs, training=None):
        """Ids and "masked_lm_positions" int32 [B, P] -> masked_lm_log_probs float32 [B, P, V]."""
        return self.task_model(inputs, training=training)["masked_lm_log_probs"]

    def default_loss(self):
        # The original's loss: sum(weights * -log p(id)) / sum(weights), over the batch's
        # predictions (its denominator adds 1e-5, which changes nothing of a batch's mean).
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        )

    def default_metrics(self):
        return None

    def default_weighted_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="masked_lm_accuracy")]

    def check_labels(self, y, num_examples, argument="y"):
        """None: the targets are the masked tokens. Dummy labels [N] for BertTask."""
        if y is not None:
            raise ValueError(f"{argument}: leave it None; fit masks the texts and predicts them")
        return np.zeros([num_examples], np.int32)

    def settle_text_pairs(self, columns):
        """Single texts and pairs alike, in fit as in fill_mask."""

    def dataset(self, columns, labels=None, batch_size=32, shuffle=False):
        """Evaluate's batches: one pass over the texts, in order, masked (see training_dataset)."""
        if labels is None:
            raise ValueError("BertMaskedLM predicts from texts with [MASK] marks: use fill_mask")
        return self.batches.dataset(columns, batch_size, passes=1, shuffle=False)

    def training_dataset(self, columns, labels, batch_size, shuffle):
        """Endless passes over the texts, each masked afresh (and shuffled, with shuffle)."""
        return self.batches.dataset(columns, batch_size, passes=None, shuffle=shuffle)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, **kwargs):
        """Keras' fit on raw texts (or pairs (texts_a, texts_b)), masked on the fly; y None.

        An epoch is one pass over the texts (or steps_per_epoch batches). validation_data: texts
        or pairs, alone or as (x, None), masked once as evaluate masks them.
        """
        count = len(self.check_texts(x)[0])
        kwargs.setdefault("steps_per_epoch", math.ceil(count / self._batch_size(batch_size)))
        validation_data = kwargs.pop("validation_data", None)
        if validation_data is not None and not (
            isinstance(validation_data, tuple)
            and len(validation_data) == 2
            and validation_data[1] is None
        ):
            validation_data = (validation_data, None)
        return super().fit(
            x, y, batch_size=batch_size, epochs=epochs, validation_data=validation_data, **kwargs
        )

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
        arguments.integer("k", k, 1)
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
            "max_predictions_per_seq": self.masking.max_predictions_per_seq,
            "masked_lm_prob": self.masking.masked_lm_prob,
            "do_whole_word_mask": self.masking.do_whole_word_mask,
            "masking_seed": self.masking.seed,
        }
