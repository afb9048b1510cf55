"""tf.data input for masked-LM + next-sentence pretraining TFRecords.

Reads the files `create_pretraining_data.py` writes, and those of the original google-research
script (the same seven features, int64 / float, fixed lengths). Letters in shapes: B = batch size
of this pipeline, S = max_seq_length, P = max_predictions_per_seq.

Example:
    dataset = make_pretraining_dataset("out/*.tfrecord", batch_size=32, max_seq_length=128,
                                       max_predictions_per_seq=20, is_training=True)
    features = next(iter(dataset))  # features["input_ids"]: [32, 128] int32
"""

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from bert_tf.data.pretraining import masking as dynamic_masking
from bert_tf.data.records import decode_record, detect_compression
from bert_tf.errors import InputError
from bert_tf.file_io import expand_globs
from bert_tf.progress_log import ProgressLog


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


def check_records(
    input_files, max_seq_length, max_predictions_per_seq, vocab_size, config_name, dynamic=False
):
    """Reads the first record of each file: its kind and lengths must be the flags'; then the ids of
    every record, which must be within vocab_size (`_check_ids`).

    Before any work: records of another --max_seq_length (phase 1's 128 read by phase 2's 512) fail
    to parse only once training has started, and ids past the embedding table are zeros on a GPU,
    an InvalidArgumentError at some later step on a CPU.

    Args:
      dynamic: --dynamic_masking: the files must hold unmasked records (dynamic.py), not masked ones.

    Raises:
      InputError: one line naming the file, what it holds and the flags (or config) given.
    """
    for path in input_files:
        example = _first_example(path)
        if example is None:
            continue  # empty, or unreadable: the reader names the bad record when it gets there
        feature = example.features.feature
        _check_kind(path, feature, dynamic)
        ids = feature["input_ids"].int64_list.value
        predictions = max_predictions_per_seq
        if not dynamic:
            predictions = len(feature["masked_lm_positions"].int64_list.value)
        if (len(ids), predictions) != (max_seq_length, max_predictions_per_seq):
            raise InputError(
                f"--input_file: {path} holds records of max_seq_length={len(ids)}, "
                f"max_predictions_per_seq={predictions}, but the flags give --max_seq_length="
                f"{max_seq_length} --max_predictions_per_seq={max_predictions_per_seq}: pass the "
                "lengths it was written with"
            )
        _check_ids(path, max_seq_length, vocab_size, config_name)
        # Dynamic masking draws random replacements below the record's vocab_size.
        written = feature["vocab_size"].int64_list.value[0] if dynamic else 0
        if written > vocab_size:
            raise InputError(
                f"--input_file: {path} was written with a vocab of {written} tokens, but "
                f"{config_name} has vocab_size={vocab_size}: written with another vocab?"
            )


def _check_ids(path, max_seq_length, vocab_size, config_name, batch_size=4096):
    """Every record's input_ids must be below vocab_size; one line names the first that is not.

    One pass over the file in the graph (input_ids parsed alone, batch_size records at a time), with
    a progress line every 30 s: a few seconds a GB.

    Raises:
      InputError: naming the file, the record (0-based) and its id.
    """
    spec = {"input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64)}
    records = tf.data.TFRecordDataset(path, compression_type=detect_compression(path))
    maxima = records.batch(batch_size).map(
        lambda batch: tf.reduce_max(tf.io.parse_example(batch, spec)["input_ids"], axis=1),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    progress = ProgressLog(f"ids checked in {path}:", every=None, unit="records", first=False)
    try:
        for batch in maxima.prefetch(2):
            batch = batch.numpy()
            past = np.flatnonzero(batch >= vocab_size)
            if past.size:
                raise InputError(
                    f"--input_file: {path} holds token id {batch[past[0]]} in record "
                    f"{progress.done + past[0]}, but {config_name} has vocab_size={vocab_size}: "
                    "written with another vocab?"
                )
            progress.add(len(batch))
    except tf.errors.OpError:
        return  # a record that does not parse: the reader names it when it gets there
    progress.finish()


def _check_kind(path, feature, dynamic):
    """Masked records for a static run, unmasked ones (dynamic.py) for --dynamic_masking."""
    if "input_ids" not in feature:
        raise InputError(f"--input_file: {path} is not pretraining data: no input_ids feature")
    unmasked = "word_ids" in feature
    if unmasked and not dynamic:
        raise InputError(
            f"--input_file: {path} holds unmasked records (create_pretraining_data.py "
            "--dynamic_masking=True): pass --dynamic_masking=True to mask them as they are read"
        )
    if dynamic and not unmasked:
        if "masked_lm_positions" not in feature:
            raise InputError(f"--input_file: {path} is not pretraining data: no word_ids feature")
        raise InputError(
            f"--input_file: {path} holds masked records (written without --dynamic_masking), but "
            "--dynamic_masking=True: drop the flag, or write the data with "
            "create_pretraining_data.py --dynamic_masking=True"
        )
    if not dynamic and "masked_lm_positions" not in feature:
        raise InputError(
            f"--input_file: {path} is not pretraining data: no masked_lm_positions feature"
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


def _read_keyed_records(path, compression, file_index, pass_index):
    """((file index, record index, pass), record) of one file: the keys of dynamic masking."""
    records = tf.data.TFRecordDataset(path, compression_type=compression).enumerate()
    return records.map(lambda index, record: ((file_index, index, pass_index), record))


def _file_list(input_files, compression_type, num_pipelines, pipeline_id, repeat):
    """(dataset of (path, compression, file index, pass), files per pass) of this pipeline.

    Pipeline i of n takes files i, i + n, ... when there are at least n files. Repeated, the k-th
    file of the list is read on pass k // (files per pass).
    """
    compressions = [
        detect_compression(path) if compression_type == "auto" else compression_type
        for path in input_files
    ]
    files = tf.data.Dataset.from_tensor_slices(
        (input_files, compressions, tf.range(len(input_files), dtype=tf.int64))
    )
    num_files = len(input_files)
    if num_pipelines > 1 and len(input_files) >= num_pipelines:
        files = files.shard(num_pipelines, pipeline_id)
        num_files = -(-(len(input_files) - pipeline_id) // num_pipelines)
    if repeat:
        files = files.repeat()
    files = files.enumerate().map(lambda k, file: (*file, k // max(num_files, 1)))
    return files, num_files


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
    masking=None,
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
      masking: a masking.MaskingOptions to read unmasked records (--dynamic_masking) and mask
        each afresh on every pass over its file, keyed on (seed, file, record, pass); None =
        masked records, read as they are.

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
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_files = num_pipelines > 1 and len(input_files) >= num_pipelines
    files, num_files = _file_list(
        input_files, compression_type, num_pipelines, pipeline_id, is_training and repeat
    )
    read = (
        _read_keyed_records
        if masking
        else lambda path, compression, *_: _read_records(path, compression)
    )

    if is_training:
        files = files.shuffle(max(num_files, 1), seed=seed)
        records = files.interleave(
            read,
            cycle_length=max(1, min(num_cpu_threads, num_files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=seed is not None,
        )
    else:
        records = files.interleave(read, cycle_length=1)
        if repeat:  # evaluation: the same masks on every repetition
            records = records.repeat()
    if num_pipelines > 1 and not shard_files:
        records = records.shard(num_pipelines, pipeline_id)
    if is_training:
        records = records.shuffle(100, seed=seed)

    dataset = records.map(
        _decoder(max_seq_length, max_predictions_per_seq, masking),
        num_parallel_calls=num_cpu_threads,
        deterministic=not is_training or seed is not None,
    )
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _decoder(max_seq_length, max_predictions_per_seq, masking):
    """(record) -> features for masked records; ((key), record) -> masked features for dynamic ones."""
    if masking is None:
        spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
        return lambda record: decode_record(record, spec)
    spec = dynamic_masking.feature_spec(max_seq_length)

    def decode_and_mask(key, record):
        seed = dynamic_masking.record_seed(masking.seed, *key)
        return dynamic_masking.dynamic_mask(decode_record(record, spec), seed, masking)

    return decode_and_mask
