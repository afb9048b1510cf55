"""tf.data input for masked-LM + next-sentence pretraining TFRecords.

Reads the files `create_pretraining_data.py` writes, and those of the original google-research
script (the same seven features, int64 / float, fixed lengths). Letters in shapes: B = batch size
of this pipeline, S = max_seq_length, P = max_predictions_per_seq.

Example:
    dataset = make_pretraining_dataset("out/*.tfrecord", batch_size=32, max_seq_length=128,
                                       max_predictions_per_seq=20, is_training=True)
    features = next(iter(dataset))  # features["input_ids"]: [32, 128] int32
"""

import tensorflow as tf
from google.protobuf.message import DecodeError

from bert_tf.data.records import decode_record, detect_compression
from bert_tf.errors import InputError
from bert_tf.io import expand_globs


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
    """Returns the original's `tf.io.parse_single_example` spec for one pretraining example."""
    seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    predictions = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    return {
        "input_ids": seq,
        "input_mask": seq,
        "segment_ids": seq,
        "masked_lm_positions": predictions,
        "masked_lm_ids": predictions,
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def check_records(input_files, max_seq_length, max_predictions_per_seq, vocab_size, config_name):
    """Reads the first record of each file: its lengths must be the flags', its ids within vocab_size.

    Cheap (one record a file) and before any work: records of another --max_seq_length (phase 1's
    128 read by phase 2's 512) fail to parse only once training has started, and ids past the
    embedding table are zeros on a GPU, not an error.

    Raises:
      InputError: one line naming the file, what it holds and the flags (or config) given.
    """
    for path in input_files:
        example = _first_example(path)
        if example is None:
            continue  # empty, or unreadable: the reader names the bad record when it gets there
        feature = example.features.feature
        for name in ("input_ids", "masked_lm_positions"):
            if name not in feature:
                raise InputError(f"--input_file: {path} is not pretraining data: no {name} feature")
        ids = feature["input_ids"].int64_list.value
        predictions = len(feature["masked_lm_positions"].int64_list.value)
        if (len(ids), predictions) != (max_seq_length, max_predictions_per_seq):
            raise InputError(
                f"--input_file: {path} holds records of max_seq_length={len(ids)}, "
                f"max_predictions_per_seq={predictions}, but the flags give --max_seq_length="
                f"{max_seq_length} --max_predictions_per_seq={max_predictions_per_seq}: pass the "
                "lengths it was written with"
            )
        if ids and max(ids) >= vocab_size:
            raise InputError(
                f"--input_file: {path} holds token id {max(ids)} in its first record, but "
                f"{config_name} has vocab_size={vocab_size}: written with another vocab?"
            )


def _first_example(path):
    """The first tf.train.Example of a TFRecord file, or None if it has none or cannot be read."""
    try:
        compression = detect_compression(path)
        for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
            return tf.train.Example.FromString(record.numpy())
    except (tf.errors.OpError, DecodeError):
        return None
    return None


def _read_records(path, compression):
    return tf.data.TFRecordDataset(path, compression_type=compression)


def make_pretraining_dataset(
    input_patterns,
    batch_size,
    max_seq_length,
    max_predictions_per_seq,
    is_training,
    input_context=None,
    seed=None,
    num_cpu_threads=4,
    compression_type="auto",
    repeat=None,
    drop_remainder=True,
):
    """Builds the pretraining input pipeline (the original `input_fn_builder`, in TF2).

    Training: the file list is sharded per input pipeline, repeated and shuffled; up to
    `num_cpu_threads` files are read interleaved and records pass a 100-example shuffle buffer.
    Evaluation: files are read in order, once unless `repeat` says otherwise.

    Args:
      input_patterns: comma-separated string or list of file globs.
      batch_size: examples per batch of THIS pipeline: under `tf.distribute`, the per-replica
        batch size (`input_context.get_per_replica_batch_size(global_batch_size)`).
      max_seq_length: S, the length the files were written with.
      max_predictions_per_seq: P, the length the files were written with.
      is_training: shuffle and repeat (True) or read in order (False).
      input_context: a `tf.distribute.InputContext` (from `distribute_datasets_from_function`):
        pipeline `i` of `n` reads files `i, i+n, ...`, or every n-th record when there are fewer
        files than pipelines.
      seed: makes the shuffles and the interleave order reproducible; None = nondeterministic
        (faster) when training.
      num_cpu_threads: files read in parallel and parallel parse calls.
      compression_type: "auto" (each file is read as gzip if it is one, else plain), "" (plain
        TFRecords), "GZIP" or "ZLIB".
      repeat: repeat forever; defaults to `is_training`.
      drop_remainder: drop a last partial batch (static batch shapes, needed on TPU).

    Returns:
      A `tf.data.Dataset` of dicts: `input_ids`, `input_mask`, `segment_ids` [B, S] int32;
      `masked_lm_positions`, `masked_lm_ids` [B, P] int32; `masked_lm_weights` [B, P] float32;
      `next_sentence_labels` [B, 1] int32 (1 = B is a random sentence), kept [B, 1] as the
      original parses it.

    Raises:
      MissingFileError: if a pattern matches no file.
    """
    input_files = expand_globs(input_patterns, "--input_file")
    repeat = is_training if repeat is None else repeat
    feature_spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_files = num_pipelines > 1 and len(input_files) >= num_pipelines

    compressions = [
        detect_compression(path) if compression_type == "auto" else compression_type
        for path in input_files
    ]
    files = tf.data.Dataset.from_tensor_slices((input_files, compressions))
    if shard_files:
        files = files.shard(num_pipelines, pipeline_id)
    num_files = (
        -(-(len(input_files) - pipeline_id) // num_pipelines) if shard_files else len(input_files)
    )

    if is_training:
        if repeat:
            files = files.repeat()
        files = files.shuffle(max(num_files, 1), seed=seed)
        records = files.interleave(
            _read_records,
            cycle_length=max(1, min(num_cpu_threads, num_files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=seed is not None,
        )
    else:
        records = files.interleave(_read_records, cycle_length=1)
        if repeat:
            records = records.repeat()
    if num_pipelines > 1 and not shard_files:
        records = records.shard(num_pipelines, pipeline_id)
    if is_training:
        records = records.shuffle(100, seed=seed)

    dataset = records.map(
        lambda record: decode_record(record, feature_spec),
        num_parallel_calls=num_cpu_threads,
        deterministic=not is_training or seed is not None,
    )
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)
