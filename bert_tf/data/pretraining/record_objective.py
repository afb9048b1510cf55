"""Which --objective of create_pretraining_data.py wrote a pretraining TFRecord file, from its first records.

The three objectives write the original's seven features; their content tells them apart:
- "mlm_nsp": [CLS] A [SEP] B [SEP]: every record has segment ids 1 (B and its [SEP]);
- "mlm": one segment (segment ids all 0) and masked positions (some masked_lm_weights 1);
- "ltr": one segment and no masked positions (masked_lm_weights all 0).
Unmasked records (--dynamic_masking, dynamic.py) are "mlm_nsp" or "mlm" by their segment ids alone.
"""

import tensorflow as tf
from google.protobuf.message import DecodeError

from bert_tf.data.records import detect_compression

# Records read from the start of a file: one decides, a few guard against an odd first one.
_RECORDS_READ = 8


def _values(example, name):
    feature = example.features.feature[name]
    return list(feature.int64_list.value) or list(feature.float_list.value)


def record_objective(example):
    """ "mlm_nsp", "mlm" or "ltr": the objective one tf.train.Example was written for."""
    if any(v == 1 for v in _values(example, "segment_ids")):
        return "mlm_nsp"
    if any(v == 1 for v in _values(example, "next_sentence_labels")):
        return "mlm_nsp"
    if "word_ids" in example.features.feature:  # unmasked: masked as it is read
        return "mlm"
    return "mlm" if any(v > 0 for v in _values(example, "masked_lm_weights")) else "ltr"


def file_objective(path):
    """The objective the first records of `path` were written for (mlm_nsp if any of them has two
    segments), or None for an empty or unreadable file (other checks report those)."""
    objectives = set()
    try:
        dataset = tf.data.TFRecordDataset(path, compression_type=detect_compression(path))
        for record in dataset.take(_RECORDS_READ):
            objectives.add(record_objective(tf.train.Example.FromString(record.numpy())))
    except (tf.errors.OpError, DecodeError):
        return None
    for objective in ("mlm_nsp", "mlm", "ltr"):
        if objective in objectives:
            return objective
    return None
