"""Writing pretraining TFRecords without TensorFlow: hand-encoded `tf.train.Example`s, framing.

TensorFlow costs ~3 s and ~300 MB to import; the processes that make instances need neither.
A pretraining example has a fixed layout, so its protobuf encoding is a few byte joins, and the
TFRecord framing's CRC-32C runs in numpy over a whole batch of records at once.

TFRecord framing of one record (little-endian):
  uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
"""

import contextlib
import gzip
import struct

import numpy as np

from bert_tf.data.pretraining import dynamic
from bert_tf.file_io import PendingFile, reporting_write_errors

# Feature order in every example: the original's (any order parses the same).
FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)

_CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected
_MASK_DELTA = 0xA282EAD8
_FLOAT_ONE = struct.pack("<f", 1.0)


def _varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag, payload):
    """A length-delimited protobuf field: tag byte, varint length, payload."""
    return tag + _varint(len(payload)) + payload


class ExampleEncoder:
    """Serializes instances as `tf.train.Example` bytes with the original's seven features."""

    def __init__(self, max_seq_length, max_predictions_per_seq, max_id):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        # The varint of every id, position and length, looked up instead of computed.
        self._varints = [_varint(i) for i in range(max(max_id, 4 * max_seq_length, 1 << 14) + 1)]
        self._headers = {}  # (feature name, packed length) -> bytes before the packed values

    def _header(self, name, num_bytes):
        """The map entry of feature `name` up to its packed values, which take num_bytes."""
        header = self._headers.get((name, num_bytes))
        if header is None:
            # Feature.float_list = 2 (masked_lm_weights), Feature.int64_list = 3; the list's
            # packed `value` = 1; the map entry's key = 1, value = 2; Features.feature = 1.
            kind = b"\x12" if name == "masked_lm_weights" else b"\x1a"
            value_list = b"\x0a" + _varint(num_bytes)
            feature = kind + _varint(len(value_list) + num_bytes) + value_list
            entry = _field(b"\x0a", name.encode()) + b"\x12" + _varint(len(feature) + num_bytes)
            entry += feature
            header = b"\x0a" + _varint(len(entry) + num_bytes) + entry
            self._headers[(name, num_bytes)] = header
        return header

    def encode(self, instance):
        """Returns the serialized Example of a `TrainingInstance` (zero padded)."""
        seq_pad = self.max_seq_length - len(instance.input_ids)
        num_predictions = len(instance.masked_lm_positions)
        pred_pad = self.max_predictions_per_seq - num_predictions
        if seq_pad < 0 or pred_pad < 0:
            raise ValueError(
                f"Instance of length {len(instance.input_ids)} with {num_predictions} predictions "
                f"exceeds max_seq_length {self.max_seq_length} / "
                f"max_predictions_per_seq {self.max_predictions_per_seq}"
            )
        varint = self._varints.__getitem__
        zeros = b"\x00" * seq_pad
        values = (
            b"".join(map(varint, instance.input_ids)) + zeros,
            b"\x01" * len(instance.input_ids) + zeros,
            bytes(instance.segment_ids) + zeros,
            b"".join(map(varint, instance.masked_lm_positions)) + b"\x00" * pred_pad,
            b"".join(map(varint, instance.masked_lm_ids)) + b"\x00" * pred_pad,
            _FLOAT_ONE * num_predictions + b"\x00\x00\x00\x00" * pred_pad,
            b"\x01" if instance.is_random_next else b"\x00",
        )
        return self._example(FEATURE_NAMES, values)

    def encode_unmasked(self, instance, word_ids, mask_token_id, vocab_size):
        """The serialized Example of an unmasked instance for dynamic masking (dynamic.py's features).

        Args:
          instance: a TrainingInstance without masked positions.
          word_ids: [L] its word numbers (dynamic.word_ids).
          mask_token_id: the id of [MASK].
          vocab_size: random replacements are drawn from [0, vocab_size).
        """
        seq_pad = self.max_seq_length - len(instance.input_ids)
        if seq_pad < 0:
            raise ValueError(
                f"Instance of length {len(instance.input_ids)} exceeds max_seq_length "
                f"{self.max_seq_length}"
            )
        varint = self._varints.__getitem__
        zeros = b"\x00" * seq_pad
        values = (
            b"".join(map(varint, instance.input_ids)) + zeros,
            b"\x01" * len(instance.input_ids) + zeros,
            bytes(instance.segment_ids) + zeros,
            b"".join(map(varint, word_ids)) + zeros,
            b"\x01" if instance.is_random_next else b"\x00",
            varint(mask_token_id),
            varint(vocab_size),
        )
        return self._example(dynamic.FEATURE_NAMES, values)

    def _example(self, names, values):
        """The serialized Example of the packed feature `values`, one per name of `names`."""
        parts = []
        for name, packed in zip(names, values, strict=True):
            parts.append(self._header(name, len(packed)))
            parts.append(packed)
        features = b"".join(parts)
        return b"\x0a" + self._varints[len(features)] + features  # Example.features = 1


def _crc32c_tables():
    """The byte table, and the two 65,536-entry tables that step the register by 4 bytes."""
    table = np.zeros(256, np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_CRC32C_POLY if crc & 1 else 0)
        table[byte] = crc

    def four_zero_bytes(state):
        for _ in range(4):
            state = table[state & 0xFF] ^ (state >> 8)
        return state

    # The register is linear in its bits: after 4 data bytes it is
    # low[(crc ^ word) & 0xFFFF] ^ high[(crc ^ word) >> 16] (slicing by 4 with 16-bit tables).
    low = four_zero_bytes(np.arange(1 << 16, dtype=np.uint32))
    high = four_zero_bytes(np.arange(1 << 16, dtype=np.uint32) << np.uint32(16))
    return table, low, high


_TABLE, _TABLE4_LOW, _TABLE4_HIGH = _crc32c_tables()
# The top byte of _TABLE[b] differs for every b, which makes one zero-byte step invertible.
assert len(set((_TABLE >> 24).tolist())) == 256
_BYTE_OF_TOP = np.zeros(256, np.uint32)
_BYTE_OF_TOP[_TABLE >> 24] = np.arange(256, dtype=np.uint32)
_START_STATES = [0xFFFFFFFF]  # _START_STATES[k]: k zero bytes lead from it to the usual start
_CRC_BATCH = 2048  # records per vectorized CRC pass (bounds the byte matrix to ~2 MB)


def _start_state(num_zero_bytes):
    """The CRC register that k leading zero bytes turn into 0xFFFFFFFF (the usual start)."""
    while len(_START_STATES) <= num_zero_bytes:
        state = _START_STATES[-1]
        byte = int(_BYTE_OF_TOP[state >> 24])
        _START_STATES.append((((state ^ int(_TABLE[byte])) << 8) | byte) & 0xFFFFFFFF)
    return _START_STATES[num_zero_bytes]


def crc32c_many(chunks):
    """CRC-32C of each bytes object in `chunks`, computed together.

    The chunks are right-aligned in one [n, width] byte matrix, zero-padded on the left; each
    row starts from the register value that its padding carries to the standard start value, so
    the padding changes nothing. The loop runs over 4-byte columns, vectorized over rows.

    Returns:
      [n] uint32 array.
    """
    return np.concatenate(
        [np.zeros(0, np.uint32)]
        + [_crc32c_batch(chunks[k : k + _CRC_BATCH]) for k in range(0, len(chunks), _CRC_BATCH)]
    )


def _crc32c_batch(chunks):
    lengths = [len(c) for c in chunks]
    width = max(4, -(-max(lengths) // 4) * 4)
    matrix = np.zeros((len(chunks), width), np.uint8)
    for row, chunk in enumerate(chunks):
        if chunk:
            matrix[row, width - len(chunk) :] = np.frombuffer(chunk, np.uint8)
    words = np.ascontiguousarray(matrix.view("<u4").T)  # [width / 4, n] little-endian words
    crc = np.array([_start_state(width - n) for n in lengths], np.uint32)
    mixed = np.empty_like(crc)
    index = np.empty_like(crc)
    for column in words:
        np.bitwise_xor(crc, column, out=mixed)
        np.bitwise_and(mixed, 0xFFFF, out=index)
        np.right_shift(mixed, 16, out=mixed)
        np.bitwise_xor(_TABLE4_LOW[index], _TABLE4_HIGH[mixed], out=crc)
    return crc ^ np.uint32(0xFFFFFFFF)


def _masked(crc):
    """TFRecord's CRC masking: rotate right by 15 and add a constant (uint32 arithmetic)."""
    crc = crc.astype(np.uint64)
    return ((((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF).astype("<u4")


def frame_records(datas):
    """Returns each serialized example framed as a TFRecord (bytes ready to append to a file)."""
    headers = [struct.pack("<Q", len(d)) for d in datas]
    header_crcs = _masked(crc32c_many(headers)).tobytes()
    data_crcs = _masked(crc32c_many(datas)).tobytes()
    return [
        header + header_crcs[4 * k : 4 * k + 4] + data + data_crcs[4 * k : 4 * k + 4]
        for k, (header, data) in enumerate(zip(headers, datas, strict=True))
    ]


class AtomicRecordFile:
    """A TFRecord file written under a temporary name (bert_tf.file_io.PendingFile), published when done.

    With `compression="gzip"` the whole file is one gzip stream (TF's "GZIP" compression_type).
    """

    def __init__(self, path, compression=""):
        if compression not in ("", "gzip"):
            raise ValueError(f"output compression must be '' or 'gzip', got {compression!r}")
        self.path = path
        self.pending = PendingFile(path)
        self.num_records = 0
        self._raw = open(self.pending.temp_path, "wb")  # noqa: SIM115 (closed in finish/abort)
        self._file = self._raw
        if compression == "gzip":
            # Empty name and mtime 0: the same records give byte-identical files.
            self._file = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0)

    def write(self, framed_record):
        try:
            self._file.write(framed_record)
        except OSError:  # (no context manager per record: this runs millions of times)
            with reporting_write_errors(self.path, self.pending.temp_path):
                raise
        self.num_records += 1

    def finish(self):
        """Completes the temporary file (flushes and closes it); `publish` then gives it its name."""
        with reporting_write_errors(self.path, self.pending.temp_path):
            if self._file is not self._raw:
                self._file.close()
            self._raw.close()

    def publish(self):
        """Moves the finished temporary file to its final name."""
        with reporting_write_errors(self.path, self.pending.temp_path):
            self.pending.publish()

    def close(self):
        """Finishes the file and moves it to its final name."""
        self.finish()
        self.publish()

    def abort(self):
        """Closes and deletes the temporary file; the final name is never touched."""
        for file in {self._file, self._raw}:
            with contextlib.suppress(OSError):
                file.close()
        self.pending.discard()
