"""The feature-based approach's cache: a frozen encoder's chosen layers, computed once, read every epoch.

BERT paper §5.3 trains a small model on fixed contextual features. The encoder runs once over a
split's token features (a feature_cache file of run_ner.py's windows) and its chosen layers are written,
at each window's real length only, as one record per window; later runs with the same settings (the
encoder's weights, the layers, and everything the token features depend on: data file, vocab,
do_lower_case, max_seq_length, ...) read that file instead of running the encoder again
(feature_cache.cached_records keeps the settings beside it).

Size: 4 bytes x K layers x H per real wordpiece, [CLS] and [SEP] included, float32 whatever the
encoder's dtype policy. For CoNLL-2003's training set (14k sentences, 204k words, ~0.3M pieces) and
BERT-base (H = 768): ~0.9 GB for one layer, ~3.8 GB for the last four, ~11 GB for all twelve. Float32,
so a head reading the cache sees what the encoder computes live (its export) up to float32 rounding.

A record: "encoder_features" (bytes: float32 [n, K, H], little-endian), "label_ids", "label_mask",
"word_ids" (int64 [n]), "sentence_index", "is_real_example" (int64 scalars), n = the window's real
length. B = batch, S = sequence length (a batch's longest window), K = layers, H = hidden size.
"""

import hashlib
import json

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.data.feature_cache import cached_records, read_records
from bert_tf.data.records import decode_record, int64_feature, serialize_example

ENCODER_FEATURES = "encoder_features"
_SEQUENCES = ("label_ids", "label_mask", "word_ids")
_SCALARS = ("sentence_index", "is_real_example")


def settings_digest(settings):
    """A short name for a settings dict: runs of other settings write other files, side by side."""
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def weights_fingerprint(named_weights):
    """sha256 of {name: np.ndarray} (names, shapes, float32 bytes): the encoder's identity in a key."""
    digest = hashlib.sha256()
    for name in sorted(named_weights):
        value = np.ascontiguousarray(named_weights[name], np.float32)
        digest.update(f"{name}{list(value.shape)}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _serialize(window, layers):
    """One window (token features at its real length n) and its layers float32 [n, K, H]."""
    features = {name: int64_feature(window[name]) for name in _SEQUENCES}
    features.update({name: int64_feature([window[name]]) for name in _SCALARS})
    features[ENCODER_FEATURES] = _bytes_feature(np.asarray(layers, "<f4").tobytes())
    return serialize_example(features)


def cached_encoder_features(path, settings, token_path, token_spec, token_info, encode, batch_size):
    """Reuses `path` if written with `settings`, else runs `encode` over `token_path`'s windows.

    Args:
      path: the encoder features' TFRecord.
      settings: everything the features depend on (JSON-serializable; see the module docstring).
      token_path, token_spec, token_info: the token features file (written by
        feature_cache.cached_records, fixed length S), its tf.io spec and its info dict.
      encode: ({"input_ids", "input_mask", "segment_ids": int32 [B, S]}) -> float32 [B, S, K, H].
      batch_size: windows per call of `encode`.

    Returns:
      token_info's "num_real_examples" (and the rest), with this file's "num_records".
    """

    def make_examples():
        logging.info("Running the frozen encoder over %s into %s", token_path, path)
        return _encoded(token_path, token_spec, encode, batch_size), {
            key: value for key, value in token_info.items() if key != "num_records"
        }

    return cached_records(path, settings, make_examples)


def _encoded(token_path, token_spec, encode, batch_size):
    """Serialized records of every window of the token file, in its order."""
    windows = tf.data.TFRecordDataset(token_path).map(lambda r: decode_record(r, token_spec))
    for batch in windows.batch(batch_size):
        lengths = tf.reduce_sum(batch["input_mask"], axis=1).numpy()  # [B]
        longest = max(int(lengths.max()), 1)
        inputs = {
            name: batch[name][:, :longest] for name in ("input_ids", "input_mask", "segment_ids")
        }
        layers = np.asarray(encode(inputs))  # [B, longest, K, H]
        batch = {name: value.numpy() for name, value in batch.items()}
        for row, length in enumerate(lengths):
            window = {name: batch[name][row, :length] for name in _SEQUENCES}
            window.update({name: int(batch[name][row]) for name in _SCALARS})
            yield _serialize(window, layers[row, :length])


def _record_spec():
    spec = {
        name: tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True) for name in _SEQUENCES
    }
    spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in _SCALARS})
    spec[ENCODER_FEATURES] = tf.io.FixedLenFeature([], tf.string)
    return spec


def _decode(record, num_layers, hidden_size):
    features = decode_record(record, _record_spec())
    layers = tf.io.decode_raw(features[ENCODER_FEATURES], tf.float32, little_endian=True)
    features[ENCODER_FEATURES] = tf.reshape(layers, [-1, num_layers, hidden_size])  # [n, K, H]
    features["input_mask"] = tf.ones_like(features["label_ids"])  # every stored position is real
    return features


def padding_window(num_layers, hidden_size, length=1):
    """A fake window of `length` masked positions (is_real_example 0): fills a last batch, builds a model."""
    return {
        ENCODER_FEATURES: tf.zeros([length, num_layers, hidden_size], tf.float32),
        "input_mask": tf.zeros([length], tf.int32),
        "label_ids": tf.zeros([length], tf.int32),
        "label_mask": tf.zeros([length], tf.int32),
        "word_ids": tf.fill([length], -1),
        "sentence_index": tf.constant(-1),
        "is_real_example": tf.constant(0),
    }


def make_encoder_feature_dataset(
    path,
    num_layers,
    hidden_size,
    batch_size,
    is_training,
    input_context=None,
    seed=None,
    num_records=None,
):
    """Batches of a cache file, each padded (with zeros, input_mask 0) to its longest window.

    Training repeats and shuffles (seeded) and drops the last partial batch; evaluation and prediction
    read the file once in order and fill the last batch with fake windows (is_real_example 0) so every
    batch is full, as feature_cache.make_feature_dataset does.

    Returns:
      A tf.data.Dataset of {"encoder_features": float32 [B, S, K, H], "input_mask", "label_ids",
      "label_mask", "word_ids": int32 [B, S], "sentence_index", "is_real_example": int32 [B]}.
    """
    records = read_records(path, is_training, input_context, seed)
    dataset = records.map(
        lambda record: _decode(record, num_layers, hidden_size),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    if not is_training and num_records is not None:
        padding = padding_window(num_layers, hidden_size)
        fill = tf.data.Dataset.from_tensors(padding).repeat(-num_records % batch_size)
        dataset = dataset.concatenate(fill)
    return dataset.padded_batch(batch_size, drop_remainder=is_training).prefetch(tf.data.AUTOTUNE)
