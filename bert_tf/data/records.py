"""TFRecords of tf.train.Examples: building them, the one decoder, and naming a file that is corrupt.

Every TFRecord this project reads or writes (pretraining instances, fine-tuning features) holds the
original's features: int64 or float lists of fixed length, one tf.train.Example per record.
"""

import contextlib

import numpy as np
import tensorflow as tf

from bert_tf.errors import InputError


def int64_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def serialize_example(features):
    """{name: tf.train.Feature} -> serialized tf.train.Example bytes."""
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def serialize_values(values, feature_spec):
    """{name: number or list} -> serialized tf.train.Example bytes, of the spec's dtypes."""
    return serialize_example(
        {
            name: float_feature(np.reshape(values[name], [-1]))
            if spec.dtype == tf.float32
            else int64_feature(np.reshape(values[name], [-1]))
            for name, spec in feature_spec.items()
        }
    )


def decode_record(record, feature_spec):
    """Parses one serialized example by `feature_spec`; int64 features become int32 (TPUs lack int64)."""
    example = tf.io.parse_single_example(record, feature_spec)
    return {
        name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
        for name, value in example.items()
    }


# A gzip stream starts with 1f 8b and the deflate method 08. A plain TFRecord starts with its first
# record's length as a little-endian uint64, which would have to be 0x..088b1f (over 500 KB) to match.
_GZIP_MAGIC = b"\x1f\x8b\x08"


def detect_compression(path):
    """Returns "GZIP" for a gzip stream (e.g. `--output_compression=gzip` output), else ""."""
    with tf.io.gfile.GFile(path, "rb") as f:
        return "GZIP" if f.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC else ""


def find_corrupt_record(paths):
    """Returns (path, record index, reason) of the first unreadable record in `paths`, or None."""
    for path in paths:
        index = 0
        try:
            for _ in tf.data.TFRecordDataset(path, compression_type=detect_compression(path)):
                index += 1
        except tf.errors.OpError as error:
            return path, index, error.message.splitlines()[0]
    return None


@contextlib.contextmanager
def reading_records(paths, remedy=None):
    """Turns TensorFlow's error for a corrupt or truncated TFRecord into an InputError naming the file.

    TensorFlow reports a bad record with its byte offset only, deep in a traceback. On that error the
    files are read again, one by one, to find which one is bad.

    Args:
      paths: the TFRecord files the block reads.
      remedy: what the message tells the user to do about it (e.g. that a cached file is made again
        once deleted); default: nothing.
    """
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
        found = find_corrupt_record(paths)
        if found is None:
            raise
        path, index, reason = found
        raise InputError(
            f"{path}: corrupt or truncated TFRecord at record {index} ({reason})"
            + (f"; {remedy}" if remedy else "")
        ) from error
