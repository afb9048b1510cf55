"""The fine-tuning feature cache: features written once as TFRecords, reused while their settings match.

Every fine-tuning script writes its features once (`train.tf_record`, `eval.tf_record`, ...) in the
original's format (int64 / float features, fixed lengths) and records the settings that made them in
`<file>.settings.json` beside it; a later run with the same settings reads the file instead of making it
again, and one with other settings (flags, vocab, input file) makes it anew. `make_feature_dataset`
reads such a file for every epoch, cutting each batch to its longest input or batching inputs of similar
length together when asked.

B = batch, S = max_seq_length.
"""

import json
import os

import tensorflow as tf

from bert_tf import file_io
from bert_tf.data.records import decode_record, reading_records, serialize_values
from bert_tf.progress_log import ProgressLog

SETTINGS_SUFFIX = ".settings.json"


def file_identity(path):
    """What identifies an input file's content cheaply: its absolute path, size and modification time."""
    stat = tf.io.gfile.stat(path)
    return {"path": os.path.abspath(path), "size": stat.length, "mtime_nsec": stat.mtime_nsec}


def write_records(path, serialized_examples):
    """Writes serialized examples to `path` atomically (bert_tf.file_io.atomic_path); returns the count.

    A progress line (count, rate) comes every 30 s while it writes."""
    progress = ProgressLog(f"features written to {path}:", every=None, unit="features", first=False)
    with file_io.atomic_path(path) as temp_path, tf.io.TFRecordWriter(temp_path) as writer:
        for serialized in serialized_examples:
            writer.write(serialized)
            progress.add()
    progress.finish()
    return progress.done


def cached_records(path, settings, make_examples):
    """Reuses `path` if it was written with `settings`, else writes it from `make_examples()`.

    Args:
      path: the TFRecord file.
      settings: a JSON-serializable dict of everything the features depend on (flags, vocab, input files).
      make_examples: () -> (iterable of serialized examples, info dict). It runs only when the file is
        (re)made; the info dict (e.g. {"num_real_examples": n}) is saved and returned with later reuses.

    Returns:
      The info dict, plus "num_records".
    """
    settings = json.loads(
        json.dumps(settings)
    )  # the form it takes once saved (tuples become lists)
    settings_path = path + SETTINGS_SUFFIX
    if tf.io.gfile.exists(path) and tf.io.gfile.exists(settings_path):
        with tf.io.gfile.GFile(settings_path) as f:
            try:
                saved = json.load(f)
            except json.JSONDecodeError:
                saved = {}
        if saved.get("settings") == settings:
            return saved["info"]
    examples, info = make_examples()
    # The old settings go first: a run killed between the two writes then makes the file again.
    if tf.io.gfile.exists(settings_path):
        tf.io.gfile.remove(settings_path)
    info = {**info, "num_records": write_records(path, examples)}
    file_io.write_text(
        settings_path, json.dumps({"settings": settings, "info": info}, indent=2, sort_keys=True)
    )
    return info


def read_records(path, is_training, input_context=None, seed=None):
    """The serialized records of a TFRecord file; for training, this input pipeline's shard of them,
    repeated and shuffled (seeded when `seed` is given)."""
    records = tf.data.TFRecordDataset(path)
    if is_training:
        if input_context and input_context.num_input_pipelines > 1:
            records = records.shard(
                input_context.num_input_pipelines, input_context.input_pipeline_id
            )
        records = records.repeat().shuffle(10000, seed=seed)
    return records


def make_feature_dataset(
    path,
    feature_spec,
    batch_size,
    is_training,
    input_context=None,
    seed=None,
    drop_remainder=None,
    length_bucketing=False,
    cut_to_longest=False,
    sequence_features=("input_ids", "input_mask", "segment_ids"),
    bucket_window=32,
    num_records=None,
    padding_features=None,
):
    """Reads a features TFRecord written by `write_records` into batches of int32 / float32 features.

    Training repeats and shuffles (seeded when `seed` is given); evaluation and prediction read the file
    once and shard nothing, so every example is seen exactly once.

    Args:
      path: the TFRecord file.
      feature_spec: {name: tf.io.FixedLenFeature}.
      batch_size: examples per batch of this pipeline (per replica under tf.distribute when training).
      is_training: shuffle, repeat and shard by `input_context`.
      input_context: a tf.distribute.InputContext (training only).
      seed: fixes the shuffle order.
      drop_remainder: defaults to `is_training`.
      length_bucketing: batch examples of similar length together and cut the `sequence_features` of
        each batch to its longest input, rounded up to a multiple of 8: the model sees the same tokens,
        but padding positions, which the attention mask hides, are not computed. Examples are sorted by
        length within windows of `bucket_window` batches; training then shuffles the batches, and
        prediction adds an int32 "example_index" feature (the position in the file) so the caller can
        put the results back in file order.
      cut_to_longest: cut the `sequence_features` of each batch to its longest input, rounded up to a
        multiple of 8, as `length_bucketing` does, but leave the batches as they are: the same
        examples in the same order, only narrower.
      sequence_features: the features whose last axis is the sequence (cut by `length_bucketing` and
        `cut_to_longest`).
      bucket_window: batches per sorting window.
      num_records, padding_features: evaluation and prediction only: the file's record count, and one
        fake example ({name: list}, is_real_example 0) appended as often as it takes to fill the last
        batch, so every batch is full (and splits evenly over replicas) and no example is dropped.

    Returns:
      A tf.data.Dataset of feature dicts, [B, ...] each.
    """
    drop_remainder = is_training if drop_remainder is None else drop_remainder
    records = read_records(path, is_training, input_context, seed)
    dataset = records.map(
        lambda record: decode_record(record, feature_spec),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    if padding_features is not None and not is_training:
        num_padding = -num_records % batch_size
        padding = decode_record(serialize_values(padding_features, feature_spec), feature_spec)
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(padding).repeat(num_padding))
    if not length_bucketing:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        if cut_to_longest:
            dataset = dataset.map(lambda batch: _cut_to_longest(batch, sequence_features))
        return dataset.prefetch(tf.data.AUTOTUNE)
    if not is_training:
        dataset = dataset.enumerate().map(
            lambda index, features: {**features, "example_index": tf.cast(index, tf.int32)}
        )
    dataset = _sorted_in_windows(dataset, batch_size, bucket_window, drop_remainder)
    if is_training:
        dataset = dataset.shuffle(bucket_window, seed=seed)
    dataset = dataset.map(lambda batch: _cut_to_longest(batch, sequence_features))
    return dataset.prefetch(tf.data.AUTOTUNE)


def _lengths(features):
    mask = features["input_mask"]
    return tf.reduce_sum(tf.reshape(mask, [tf.shape(mask)[0], -1]), axis=-1)


def _sorted_in_windows(dataset, batch_size, bucket_window, drop_remainder):
    """Batches of similar lengths: windows of bucket_window batches are sorted by length and cut up."""

    def sort_window(window):
        order = tf.argsort(_lengths(window), stable=True)
        return tf.data.Dataset.from_tensor_slices(
            tf.nest.map_structure(lambda x: tf.gather(x, order), window)
        )

    dataset = dataset.batch(batch_size * bucket_window, drop_remainder=drop_remainder)
    return dataset.flat_map(sort_window).batch(batch_size, drop_remainder=drop_remainder)


def _cut_to_longest(batch, sequence_features):
    """Cuts each sequence feature to the batch's longest input (rounded up to a multiple of 8).

    The batch's length dimension is then unknown (None) to tf.function, so a training loop traces
    once for every width; the rounding keeps the widths few (S / 8 at most) for what compiles per
    shape (XLA under --jit_compile, oneDNN's kernels), and wastes at most 7 positions per batch.
    """
    mask = batch["input_mask"]
    longest = tf.reduce_max(tf.reduce_sum(mask, axis=-1))
    length = tf.minimum((longest + 7) // 8 * 8, tf.shape(mask)[-1])
    return {
        name: value[..., :length] if name in sequence_features else value
        for name, value in batch.items()
    }


def reading_cached_records(paths):
    """reading_records for files of this cache: a corrupt one is made again once deleted."""
    return reading_records(paths, remedy="delete it (and its .settings.json) to have it made again")
