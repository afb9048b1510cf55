"""Feature TFRecords of the fine-tuning tasks: reuse by settings, atomic writes, bucketing, padding, bad files."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import feature_cache, records
from bert_tf.errors import InputError, WriteError

from conftest import file_size_limit

SEQ = 16
SPEC = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "label_ids": tf.io.FixedLenFeature([], tf.int64),
    "is_real_example": tf.io.FixedLenFeature([], tf.int64),
}


def _example(index, length):
    """Example `index`: `length` real tokens with ids 100*index + position, then zeros."""
    ids = [100 * index + p + 1 for p in range(length)] + [0] * (SEQ - length)
    return {
        "input_ids": ids,
        "input_mask": [1] * length + [0] * (SEQ - length),
        "segment_ids": [0] * SEQ,
        "label_ids": index,
        "is_real_example": 1,
    }


def _serialized(example):
    return records.serialize_example(
        {name: records.int64_feature(np.reshape(value, [-1])) for name, value in example.items()}
    )


LENGTHS = [3, 16, 1, 9, 5, 12, 2, 7, 4, 16, 6, 8, 10, 3, 11]


@pytest.fixture
def feature_file(tmp_path):
    path = str(tmp_path / "eval.tf_record")
    feature_cache.write_records(path, [_serialized(_example(i, n)) for i, n in enumerate(LENGTHS)])
    return path


def test_cached_records_reuses_the_file_while_the_settings_match(tmp_path):
    path = str(tmp_path / "train.tf_record")
    calls = []

    def make(n):
        def make_examples():
            calls.append(n)
            return [_serialized(_example(i, 2)) for i in range(n)], {"num_real_examples": n}

        return make_examples

    first = feature_cache.cached_records(path, {"max_seq_length": 16, "inputs": ["a"]}, make(3))
    again = feature_cache.cached_records(path, {"max_seq_length": 16, "inputs": ("a",)}, make(5))
    assert calls == [3]
    assert first == again == {"num_real_examples": 3, "num_records": 3}
    changed = feature_cache.cached_records(path, {"max_seq_length": 32, "inputs": ["a"]}, make(5))
    assert calls == [3, 5] and changed["num_records"] == 5
    assert sum(1 for _ in tf.data.TFRecordDataset(path)) == 5
    saved = json.loads((tmp_path / "train.tf_record.settings.json").read_text())
    assert saved["settings"] == {"max_seq_length": 32, "inputs": ["a"]}


def test_a_failed_write_leaves_no_file_and_no_settings(tmp_path):
    path = str(tmp_path / "train.tf_record")

    def broken():
        def examples():
            yield _serialized(_example(0, 2))
            raise InputError("train.tsv:2: bad line")

        return examples(), {}

    with pytest.raises(InputError, match="train.tsv:2"):
        feature_cache.cached_records(path, {"a": 1}, broken)
    assert os.listdir(tmp_path) == []


def test_features_on_a_full_disk_name_the_file_and_leave_nothing(tmp_path):
    path = str(tmp_path / "train.tf_record")

    def examples():
        return (_serialized(_example(i, 9)) for i in range(200)), {"num_real_examples": 200}

    with file_size_limit(4096), pytest.raises(WriteError) as error:
        feature_cache.cached_records(path, {"a": 1}, examples)
    assert str(error.value) == f"cannot write {path}: File too large"
    assert os.listdir(tmp_path) == []


def test_file_identity_changes_when_the_input_changes(tmp_path):
    data = tmp_path / "train.tsv"
    data.write_text("a\t1\n")
    before = feature_cache.file_identity(str(data))
    data.write_text("a\t1\nb\t0\n")
    assert feature_cache.file_identity(str(data)) != before


def _read_all(dataset):
    return [{name: value.numpy() for name, value in batch.items()} for batch in dataset]


def test_prediction_input_keeps_every_example_once_and_in_order(feature_file):
    batches = _read_all(
        feature_cache.make_feature_dataset(feature_file, SPEC, 4, is_training=False)
    )
    labels = np.concatenate([b["label_ids"] for b in batches])
    np.testing.assert_array_equal(labels, np.arange(len(LENGTHS)))


def test_padding_fills_the_last_batch_with_fake_examples(feature_file):
    fake = {**_example(0, 0), "is_real_example": 0}
    dataset = feature_cache.make_feature_dataset(
        feature_file, SPEC, 4, False, num_records=len(LENGTHS), padding_features=fake
    )
    batches = _read_all(dataset)
    assert [len(b["label_ids"]) for b in batches] == [4, 4, 4, 4]
    real = np.concatenate([b["is_real_example"] for b in batches])
    np.testing.assert_array_equal(real, [1] * 15 + [0])


@pytest.mark.parametrize("batch_size", [2, 4])
def test_bucketed_prediction_batches_similar_lengths_cut_to_the_longest(feature_file, batch_size):
    fake = {**_example(0, 0), "is_real_example": 0}
    dataset = feature_cache.make_feature_dataset(
        feature_file, SPEC, batch_size, False, length_bucketing=True, bucket_window=2,
        num_records=len(LENGTHS), padding_features=fake,
    )  # fmt: skip
    batches = _read_all(dataset)
    seen = {}
    for batch in batches:
        longest = batch["input_mask"].sum(-1).max()
        # Cut to the longest input of the batch, rounded up to a multiple of 8 (at most 16).
        assert batch["input_ids"].shape[1] == min(-(-longest // 8) * 8, SEQ)
        for row, index in enumerate(batch["example_index"]):
            seen[int(index)] = {name: batch[name][row] for name in batch}
    # Every example (and the one padding example) comes back once, its tokens intact.
    assert sorted(seen) == list(range(16))
    for index, length in enumerate(LENGTHS):
        example = seen[index]
        assert example["label_ids"] == index and example["is_real_example"] == 1
        np.testing.assert_array_equal(
            example["input_ids"][:length], _example(index, length)["input_ids"][:length]
        )
        assert example["input_mask"].sum() == length
    assert seen[15]["is_real_example"] == 0
    # Within a window of 2 batches, lengths are sorted: the short inputs share batches.
    window = sorted(LENGTHS[: 2 * batch_size])
    first_batch_lengths = sorted(batches[0]["input_mask"].sum(-1))
    assert first_batch_lengths == window[:batch_size]


def test_bucketed_training_batches_are_cut_and_seeded(feature_file):
    def first_batches(seed):
        dataset = feature_cache.make_feature_dataset(
            feature_file, SPEC, 3, True, seed=seed, length_bucketing=True, bucket_window=2
        )
        return _read_all(dataset.take(6))

    one, again = first_batches(7), first_batches(7)
    for a, b in zip(one, again, strict=True):
        np.testing.assert_array_equal(a["input_ids"], b["input_ids"])
    assert any(b["input_ids"].shape[1] < SEQ for b in one)
    for batch in one:
        assert batch["input_ids"].shape[0] == 3
        assert batch["input_mask"].sum(-1).max() <= batch["input_ids"].shape[1]


SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")


@pytest.mark.parametrize("choices", [None, 3])
def test_cut_training_batches_are_the_padded_ones_less_their_padding(tmp_path, choices):
    spec, examples = SPEC, [_example(i, n) for i, n in enumerate(LENGTHS)]
    if choices:  # SWAG's [B, C, S] features: example i's choice c has LENGTHS[i] // (c + 1) tokens
        shape = [choices, SEQ]
        spec = {**SPEC, **{n: tf.io.FixedLenFeature(shape, tf.int64) for n in SEQUENCE_FEATURES}}
        for i, example in enumerate(examples):
            rows = [_example(i, LENGTHS[i] // (c + 1)) for c in range(choices)]
            example.update({n: [row[n] for row in rows] for n in SEQUENCE_FEATURES})
    path = str(tmp_path / "train.tf_record")
    feature_cache.write_records(path, [_serialized(example) for example in examples])

    def first_batches(cut):
        dataset = feature_cache.make_feature_dataset(
            path, spec, 3, True, seed=7, cut_to_longest=cut
        )
        # 100 batches: the shuffle's order also depends on TensorFlow's global seed, which other
        # tests in the same process may have set; a batch of 3 inputs of at most 8 tokens (9 of the
        # 15) then turns up with probability 1 - 0.8 ** 100, where 10 batches missed it 1 time in 10.
        return _read_all(dataset.take(100))

    widths = set()
    for padded, cut in zip(first_batches(False), first_batches(True), strict=True):
        assert padded["input_ids"].shape[-1] == SEQ
        width = cut["input_ids"].shape[-1]
        assert width == min(-(-padded["input_mask"].sum(-1).max() // 8) * 8, SEQ)
        widths.add(width)
        for name, value in padded.items():  # the same examples, in the same order
            expected = value[..., :width] if name in SEQUENCE_FEATURES else value
            np.testing.assert_array_equal(cut[name], expected, err_msg=name)
    assert widths == {8, 16}


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_a_bad_tfrecord_is_an_input_error_naming_the_file(feature_file, tmp_path, damage):
    data = open(feature_file, "rb").read()
    if damage == "truncated":
        data = data[: len(data) - 20]
    else:
        middle = len(data) // 2
        data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
    with open(feature_file, "wb") as f:
        f.write(data)
    good = str(tmp_path / "good.tf_record")
    feature_cache.write_records(good, [_serialized(_example(0, 2))])
    dataset = feature_cache.make_feature_dataset(feature_file, SPEC, 4, is_training=False)
    with pytest.raises(InputError, match=r"eval\.tf_record: corrupt or truncated TFRecord"):
        with records.reading_records([good, feature_file]):
            for _ in dataset:
                pass
