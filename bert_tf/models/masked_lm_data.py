"""BertMaskedLM.fit's batches: raw texts masked on the fly by run_pretraining.py --dynamic_masking's rules.

The texts are tokenized and packed as the preprocessor packs them ([CLS] a [SEP] (b [SEP]), each batch
padded to its longest row), then each row is masked by bert_tf.data.pretraining.masking.dynamic_mask,
the function run_pretraining.py --dynamic_masking=True maps over its records: masked_lm_prob of the
tokens (at most max_predictions_per_seq, at least one), never [CLS], [SEP] or padding, whole words
with do_whole_word_mask, each chosen token [MASK] 80% / a random id 10% / kept 10%. The word numbers
it needs are computed in-graph by the rule create_pretraining_data.py --dynamic_masking records them
with (bert_tf.data.pretraining.dynamic.word_ids).

Every draw is keyed on (seed, the text's index, the pass over the texts): a text gets a fresh mask on
every pass (epoch), the same in every run of the same seed; each pass's order is a permutation drawn
from (seed, pass) too.

B = batch, S = sequence length, P = max_predictions_per_seq.
"""

import tensorflow as tf

from bert_tf.models import arguments

MASK, CLS, SEP = "[MASK]", "[CLS]", "[SEP]"


def _masking():
    """bert_tf.data.pretraining.masking, imported on first use: its package's dynamic.py declares a
    flag (bert_tf.settings, absl's flags), which `import bert_tf` must not load."""
    from bert_tf.data.pretraining import masking

    return masking


def check_masking(max_predictions_per_seq, masked_lm_prob, do_whole_word_mask, masking_seed):
    """A MaskingOptions of run_pretraining.py's flags' values; ValueError naming a bad one."""
    return _masking().MaskingOptions(
        max_predictions_per_seq=arguments.integer(
            "max_predictions_per_seq", max_predictions_per_seq, 1
        ),
        masked_lm_prob=arguments.number(
            "masked_lm_prob", masked_lm_prob, 0, 1, low_inclusive=False
        ),
        do_whole_word_mask=arguments.boolean("do_whole_word_mask", do_whole_word_mask),
        seed=arguments.integer("masking_seed", masking_seed),
    )


def word_ids(input_ids, input_mask, special_ids, is_subword):
    """int32 [S]: 0 at [CLS], [SEP] and padding; elsewhere the number (from 1) of the token's word,
    a "##" piece right after a non-special token joining its word (dynamic.word_ids' rule)."""
    special = tf.reduce_any(input_ids[:, None] == special_ids[None, :], axis=-1) | (input_mask == 0)
    previous_special = tf.concat([[True], special[:-1]], axis=0)
    starts = ~special & (previous_special | ~tf.gather(is_subword, input_ids))
    return tf.where(special, 0, tf.cumsum(tf.cast(starts, tf.int32)))


class MaskedBatches:
    """The masked batches of texts for a model's preprocessor and masking options."""

    def __init__(self, preprocessor, options):
        vocabulary = preprocessor.vocabulary
        self.features_of = preprocessor.features
        self.options = options
        self.mask_id = vocabulary.index(MASK)
        self.vocab_size = len(vocabulary)
        self.special_ids = tf.constant([vocabulary.index(CLS), vocabulary.index(SEP)], tf.int32)
        self.is_subword = tf.constant([token.startswith("##") for token in vocabulary])

    def dataset(self, columns, batch_size, passes=None, shuffle=True):
        """(x, masked_lm_ids [B, P], masked_lm_weights [B, P]) batches, x the model's inputs
        {"input_ids", "input_mask", "segment_ids": [B, S], "masked_lm_positions": [B, P]}.

        Args:
          columns: (texts,) or (texts_a, texts_b), each [N].
          batch_size: B.
          passes: the number of passes over the texts; None: endless (fit's steps stop it).
          shuffle: each pass in its own order (else in the texts' order).
        """
        texts = tuple(tf.constant(list(column), tf.string) for column in columns)
        count = len(columns[0])
        pass_numbers = (
            tf.data.Dataset.counter() if passes is None else tf.data.Dataset.range(passes)
        )

        def one_pass(pass_index):
            order = tf.range(count, dtype=tf.int64)
            if shuffle:
                key = _masking().record_seed(self.options.seed, -1, 0, pass_index)
                order = tf.argsort(tf.random.stateless_uniform([count], key, alg="philox"))
                order = tf.cast(order, tf.int64)
            rows = tf.data.Dataset.from_tensor_slices(order)
            rows = rows.map(lambda i: (i, tuple(tf.gather(column, i) for column in texts)))
            rows = rows.batch(batch_size).map(lambda i, batch: (i, self.features_of(*batch)))
            rows = rows.unbatch().map(lambda i, row: self.mask(row, i, pass_index))
            return rows.batch(batch_size)

        dataset = pass_numbers.flat_map(one_pass)
        if passes is not None:  # flat_map hides it from Keras
            batches = passes * -(-count // batch_size)
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
        return dataset.prefetch(tf.data.AUTOTUNE)

    def mask(self, row, index, pass_index):
        """One packed row ([S] ids) masked: (x, masked_lm_ids [P], masked_lm_weights [P])."""
        features = {
            **row,
            "word_ids": word_ids(
                row["input_ids"], row["input_mask"], self.special_ids, self.is_subword
            ),
            "next_sentence_labels": tf.zeros([1], tf.int32),
            "mask_token_id": tf.constant([self.mask_id], tf.int32),
            "vocab_size": tf.constant([self.vocab_size], tf.int32),
        }
        key = _masking().record_seed(self.options.seed, 0, index, pass_index)
        masked = _masking().dynamic_mask(features, key, self.options)
        inputs = {
            name: masked[name]
            for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
        }
        return inputs, masked["masked_lm_ids"], masked["masked_lm_weights"]
