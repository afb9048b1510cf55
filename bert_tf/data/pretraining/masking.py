"""Dynamic masking in the input pipeline: the original's masking rules, in-graph, with stateless random ops.

Records of `create_pretraining_data.py --dynamic_masking=True` (dynamic.py) hold unmasked instances.
`dynamic_mask` turns one into the seven features of a masked record, as
instances.create_masked_lm_predictions would:
  * num_to_predict = min(max_predictions_per_seq, max(1, round(length * masked_lm_prob))), where
    length counts [CLS] and [SEP] and `round` goes half to even, as Python's;
  * never [CLS], [SEP] or padding;
  * words (whole-word masking: a token and its "##" pieces) in a uniformly random order, each taken
    unless it would overshoot num_to_predict (without whole-word masking, every token is a word);
  * each chosen position: [MASK] with probability 0.8, else a uniform id of [0, vocab_size) with
    probability 0.5, else kept.
Every draw comes from tf.random.stateless_* ops keyed on (--seed, file index, record index in the
file, pass over the data), so a record gets a fresh mask on every pass, the same one in every run
(and in a run resumed from a checkpoint), whatever the number of workers or the shuffle order.

S = max_seq_length, P = max_predictions_per_seq.
"""

import dataclasses

import tensorflow as tf

from bert_tf.data.pretraining import dynamic

_ALG = "philox"  # the same numbers on every device


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    """run_pretraining.py's masking flags."""

    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    do_whole_word_mask: bool = False
    seed: int = 12345


def feature_spec(max_seq_length):
    """The `tf.io.parse_single_example` spec of a dynamic-masking record."""
    seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    one = tf.io.FixedLenFeature([1], tf.int64)
    return {
        name: seq if name in ("input_ids", "input_mask", "segment_ids", "word_ids") else one
        for name in dynamic.FEATURE_NAMES
    }


def record_seed(seed, file_index, record_index, pass_index):
    """[2] int64: the stateless seed of one record on one pass."""
    key = tf.constant([seed, 0x6D61736B], tf.int64)  # 0x6D61736B: "mask"
    for data in (file_index, record_index, pass_index):
        key = tf.random.experimental.stateless_fold_in(key, tf.cast(data, tf.int64), alg=_ALG)
    return key


def dynamic_mask(features, key, options):
    """Masks one decoded dynamic record.

    Args:
      features: int32 "input_ids", "input_mask", "segment_ids", "word_ids" [S];
        "next_sentence_labels", "mask_token_id", "vocab_size" [1].
      key: [2] int64, the record's record_seed.
      options: a MaskingOptions.

    Returns:
      The seven features of a masked record: "input_ids" (masked), "input_mask", "segment_ids" [S];
      "masked_lm_positions", "masked_lm_ids" [P] int32 (positions increasing, zero padded);
      "masked_lm_weights" [P] float32; "next_sentence_labels" [1] int32.
    """
    input_ids = features["input_ids"]
    seq_length = tf.shape(input_ids)[0]
    order_seed, mask_seed, random_seed, id_seed = tf.unstack(
        tf.random.experimental.stateless_split(key, 4, alg=_ALG)
    )
    chosen = _chosen_positions(features, order_seed, options)  # [S] bool
    masked = tf.random.stateless_uniform([seq_length], mask_seed, alg=_ALG) < 0.8
    replaced = tf.random.stateless_uniform([seq_length], random_seed, alg=_ALG) >= 0.5
    random_ids = tf.random.stateless_uniform(
        [seq_length], id_seed, minval=0, maxval=features["vocab_size"][0], dtype=tf.int32, alg=_ALG
    )
    output_ids = tf.where(chosen & masked, features["mask_token_id"][0], input_ids)
    output_ids = tf.where(chosen & ~masked & replaced, random_ids, output_ids)

    positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)  # [M] increasing, M <= P
    padding = [[0, options.max_predictions_per_seq - tf.shape(positions)[0]]]
    return {
        "input_ids": output_ids,
        "input_mask": features["input_mask"],
        "segment_ids": features["segment_ids"],
        "masked_lm_positions": _pad(positions, padding, options),
        "masked_lm_ids": _pad(tf.gather(input_ids, positions), padding, options),
        "masked_lm_weights": _pad(tf.ones_like(positions, tf.float32), padding, options),
        "next_sentence_labels": features["next_sentence_labels"],
    }


def _pad(values, padding, options):
    return tf.ensure_shape(tf.pad(values, padding), [options.max_predictions_per_seq])


def _num_to_predict(features, options):
    """min(P, max(1, round(length * masked_lm_prob))), Python's rounding (half to even)."""
    length = tf.cast(tf.reduce_sum(features["input_mask"]), tf.float64)
    wanted = tf.cast(tf.round(length * options.masked_lm_prob), tf.int32)
    return tf.minimum(options.max_predictions_per_seq, tf.maximum(1, wanted))


def _chosen_positions(features, seed, options):
    """[S] bool: the positions to predict (whole words in a random order, none overshooting)."""
    word_ids = features["word_ids"]
    seq_length = tf.shape(word_ids)[0]
    if not options.do_whole_word_mask:  # every maskable token a word of its own
        word_ids = tf.where(word_ids > 0, tf.range(1, seq_length + 1), 0)
    num_words = seq_length + 1  # word numbers are in [1, S]; 0 = not maskable
    lengths = tf.math.unsorted_segment_sum(tf.cast(word_ids > 0, tf.int32), word_ids, num_words)
    keys = tf.random.stateless_uniform([num_words], seed, alg=_ALG)
    keys = tf.where(lengths > 0, keys, 2.0)  # absent words (and 0) last
    order = tf.argsort(keys, stable=True)
    ordered_lengths = tf.gather(lengths, order)
    limit = _num_to_predict(features, options)
    if options.do_whole_word_mask:
        taken = _greedy_take(ordered_lengths, limit)
    else:  # words of one token: the first `limit` of them
        taken = (tf.cumsum(ordered_lengths) <= limit) & (ordered_lengths > 0)
    chosen_words = tf.scatter_nd(order[:, None], taken, [num_words])
    return tf.gather(chosen_words, word_ids) & (word_ids > 0)


def _greedy_take(lengths, limit):
    """[W] bool: in order, each word with length > 0 taken if the total stays <= limit.

    Up to the first word that would overshoot, every word is taken: a cumulative sum finds that run
    at once (all of it without whole words). From there a loop takes what still fits; it ends when
    the total reaches the limit (nothing fits after that), usually within a few words.
    """
    num_words = tf.shape(lengths)[0]
    prefix = (
        tf.cumsum(lengths) <= limit
    )  # True, ..., True, False, ...: the run before the overshoot
    start = tf.reduce_sum(tf.cast(prefix, tf.int32))
    total = tf.reduce_sum(tf.where(prefix, lengths, 0))

    def body(k, total, taken):
        fits = (lengths[k] > 0) & (total + lengths[k] <= limit)
        total += tf.where(fits, lengths[k], 0)
        return k + 1, total, taken.write(k - start, fits)

    _, _, taken = tf.while_loop(
        lambda k, total, _: (k < num_words) & (total < limit),
        body,
        (start, total, tf.TensorArray(tf.bool, size=0, dynamic_size=True, element_shape=[])),
    )
    after = taken.stack()  # words start, start + 1, ... while the loop ran
    rest = tf.zeros([num_words - start - tf.shape(after)[0]], tf.bool)
    return tf.concat([prefix[:start] & (lengths[:start] > 0), after, rest], 0)
