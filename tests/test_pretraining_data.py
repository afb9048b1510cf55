"""Instance creation and masking (bert_tf.data.pretraining.instances), TFRecord encoding, the reader."""

import collections
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining import encoding as tfrecord_io
from bert_tf.data.pretraining import instances as pretraining_data
from bert_tf.data.pretraining import reader as pretraining

CLS, SEP, MASK = 2, 3, 4
NUM_DOCUMENTS, SENTENCES_PER_DOCUMENT, TOKENS_PER_SENTENCE = 20, 15, 10
FIRST_WORD = 5


def _toy_vocab():
    """Specials, then one token per corpus position; every third token is a "##" piece."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    num_words = NUM_DOCUMENTS * SENTENCES_PER_DOCUMENT * TOKENS_PER_SENTENCE
    tokens += [f"##x{i}" if i % 3 == 2 else f"x{i}" for i in range(num_words)]
    return {token: i for i, token in enumerate(tokens)}


def _toy_documents():
    """Every id occurs once, increasing through the corpus: an id tells its document and place."""
    ids = iter(range(FIRST_WORD, 10**9))
    return [
        [[next(ids) for _ in range(TOKENS_PER_SENTENCE)] for _ in range(SENTENCES_PER_DOCUMENT)]
        for _ in range(NUM_DOCUMENTS)
    ]


def _document_of(token_id):
    return (token_id - FIRST_WORD) // (SENTENCES_PER_DOCUMENT * TOKENS_PER_SENTENCE)


def _options(**flags):
    flags.setdefault("max_seq_length", 64)
    flags.setdefault("max_predictions_per_seq", 20)
    return pretraining_data.InstanceOptions.from_vocab(_toy_vocab(), **flags)


def _instances(seed=0, dupe_factor=10, **flags):
    rng = random.Random(seed)
    return pretraining_data.create_instances(_toy_documents(), _options(**flags), dupe_factor, rng)


def _unmasked(instance):
    ids = list(instance.input_ids)
    for position, token_id in zip(
        instance.masked_lm_positions, instance.masked_lm_ids, strict=True
    ):
        ids[position] = token_id
    return ids


def _segments(instance):
    """(A, B) of the unmasked instance, without [CLS] / [SEP]."""
    ids = _unmasked(instance)
    first_sep = ids.index(SEP)
    return ids[1:first_sep], ids[first_sep + 1 : -1]


def test_options_reject_impossible_max_seq_length():
    with pytest.raises(ValueError, match="max_seq_length"):
        _options(max_seq_length=4)


def test_options_require_special_tokens_in_vocab():
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        pretraining_data.InstanceOptions.from_vocab({"[CLS]": 0, "[SEP]": 1, "a": 2})


def test_packing_is_cls_a_sep_b_sep_with_segment_ids():
    for instance in _instances(dupe_factor=2):
        ids = _unmasked(instance)
        assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2 and ids.count(CLS) == 1
        first_sep = ids.index(SEP)
        assert instance.segment_ids == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        assert 5 <= len(ids) <= 64
        assert first_sep >= 2 and len(ids) - first_sep >= 3  # A and B are never empty


def test_number_of_predictions_follows_the_original_formula():
    instances = _instances(max_predictions_per_seq=100)
    for instance in instances:
        expected = min(100, max(1, round(len(instance.input_ids) * 0.15)))
        assert len(instance.masked_lm_positions) == expected
    predicted = sum(len(i.masked_lm_positions) for i in instances)
    real_tokens = sum(len(i.input_ids) - 3 for i in instances)
    assert 0.14 < predicted / real_tokens < 0.17


def test_predictions_are_capped_by_max_predictions_per_seq():
    instances = _instances(max_seq_length=128, max_predictions_per_seq=5)
    assert max(len(i.masked_lm_positions) for i in instances) == 5


def test_masked_positions_are_sorted_distinct_never_special_and_labels_are_originals():
    for instance in _instances(dupe_factor=3):
        positions = instance.masked_lm_positions
        assert positions == sorted(set(positions))
        assert all(_unmasked(instance)[p] not in (CLS, SEP) for p in positions)
        assert all(label >= FIRST_WORD for label in instance.masked_lm_ids)
        unmasked_positions = set(range(len(instance.input_ids))) - set(positions)
        # Outside the predictions nothing changed: the ids still increase within A and B.
        assert all(instance.input_ids[p] != MASK for p in unmasked_positions)


def test_replacements_are_80_percent_mask_10_random_10_kept():
    counts = collections.Counter()
    for instance in _instances(dupe_factor=20):
        for position, label in zip(
            instance.masked_lm_positions, instance.masked_lm_ids, strict=True
        ):
            token_id = instance.input_ids[position]
            counts["mask" if token_id == MASK else "kept" if token_id == label else "random"] += 1
    total = sum(counts.values())
    assert total > 10000
    assert abs(counts["mask"] / total - 0.8) < 0.015
    assert abs(counts["kept"] / total - 0.1) < 0.012
    assert abs(counts["random"] / total - 0.1) < 0.012


def test_random_replacements_are_tokens_of_a_vocab_with_repeated_lines():
    original = _toy_vocab()
    # Every word's line repeated at the end of the file: the words' first ids belong to no token.
    vocab = dict(original)
    vocab.update({token: len(original) + i for i, token in enumerate(list(original)[5:])})
    options = pretraining_data.InstanceOptions.from_vocab(
        vocab, max_seq_length=64, max_predictions_per_seq=20
    )
    assert options.vocab_size == 2 * len(original) - 5
    new_id = {old_id: vocab[token] for token, old_id in original.items()}
    documents = [[[new_id[i] for i in s] for s in doc] for doc in _toy_documents()]
    instances = pretraining_data.create_instances(documents, options, 10, random.Random(0))
    replaced = [
        i.input_ids[p]
        for i in instances
        for p, label in zip(i.masked_lm_positions, i.masked_lm_ids, strict=True)
        if i.input_ids[p] not in (label, options.mask_id)
    ]
    assert len(replaced) > 100
    assert set(replaced) <= set(vocab.values())


def test_next_sentence_labels_are_about_half_random():
    instances = _instances(dupe_factor=20)
    random_fraction = np.mean([i.is_random_next for i in instances])
    assert 0.45 < random_fraction < 0.58  # above 0.5: one-sentence chunks are always random


def test_actual_next_b_continues_a_and_random_next_b_is_another_document():
    for instance in _instances(dupe_factor=3):
        tokens_a, tokens_b = _segments(instance)
        # Truncation only trims the ends, so each side is a run of consecutive corpus ids.
        assert tokens_a == list(range(tokens_a[0], tokens_a[-1] + 1))
        assert tokens_b == list(range(tokens_b[0], tokens_b[-1] + 1))
        if instance.is_random_next:
            assert _document_of(tokens_b[0]) != _document_of(tokens_a[0])
        else:
            assert _document_of(tokens_b[0]) == _document_of(tokens_a[0])
            assert tokens_b[0] > tokens_a[-1]


def test_unused_sentences_go_back_after_a_random_next():
    """With dupe_factor 1, A segments of one document cover it, none repeated."""
    instances = _instances(dupe_factor=1, short_seq_prob=0.0, max_seq_length=128)
    a_ids = [t for instance in instances for t in _segments(instance)[0]]
    assert len(a_ids) == len(set(a_ids))
    assert len(a_ids) > 0.5 * NUM_DOCUMENTS * SENTENCES_PER_DOCUMENT * TOKENS_PER_SENTENCE


def test_short_seq_prob_makes_shorter_instances():
    full = _instances(short_seq_prob=0.0, max_seq_length=128)
    short = _instances(short_seq_prob=1.0, max_seq_length=128)
    assert np.mean([len(i.input_ids) for i in short]) < 0.8 * np.mean(
        [len(i.input_ids) for i in full]
    )


def test_truncation_trims_the_longer_side_from_both_ends():
    fronts, backs = 0, 0
    for seed in range(50):
        tokens_a, tokens_b = pretraining_data.truncate_seq_pair(
            list(range(20)), [100, 101, 102], 10, random.Random(seed)
        )
        assert tokens_b == [100, 101, 102]
        assert len(tokens_a) == 7 and tokens_a == list(range(tokens_a[0], tokens_a[0] + 7))
        fronts += tokens_a[0] > 0
        backs += tokens_a[-1] < 19
    assert fronts > 10 and backs > 10


def test_truncation_trims_b_on_ties_and_keeps_short_pairs():
    tokens_a, tokens_b = pretraining_data.truncate_seq_pair(
        [1, 2, 3], [4, 5, 6], 5, random.Random(0)
    )
    assert tokens_a == [1, 2, 3] and len(tokens_b) == 2
    assert pretraining_data.truncate_seq_pair([1], [2], 5, random.Random(0)) == ([1], [2])


def test_whole_word_masking_never_splits_a_word():
    vocab = _toy_vocab()
    subword_ids = {i for token, i in vocab.items() if token.startswith("##")}
    instances = _instances(do_whole_word_mask=True, dupe_factor=5)
    multi_piece_words = 0
    for instance in instances:
        ids = _unmasked(instance)
        masked = set(instance.masked_lm_positions)
        for position in masked:
            # The whole word: back to its first piece, forward over the "##" pieces after it.
            start = position
            while ids[start] in subword_ids and ids[start - 1] not in (CLS, SEP):
                start -= 1
            end = position + 1
            while end < len(ids) and ids[end] in subword_ids:
                end += 1
            assert set(range(start, end)) <= masked, (ids, sorted(masked))
            multi_piece_words += end - start > 1
    assert multi_piece_words > 1000


def test_same_seed_same_instances_other_seed_others():
    assert _instances(seed=7, dupe_factor=2) == _instances(seed=7, dupe_factor=2)
    assert _instances(seed=7, dupe_factor=2) != _instances(seed=8, dupe_factor=2)


def test_a_single_document_of_one_long_sentence_is_truncated_not_crashed():
    options = _options(max_seq_length=16)
    documents = [[list(range(FIRST_WORD, FIRST_WORD + 200))]]
    instances = pretraining_data.create_instances(documents, options, 3, random.Random(0))
    assert len(instances) == 3
    for instance in instances:
        assert len(instance.input_ids) == 16 and instance.is_random_next


# ---------------------------------------------------------------- TFRecord encoding and framing


def _crc32c_bitwise(data):
    """Reference CRC-32C, one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_matches_the_standard_check_value_and_a_bitwise_reference():
    rng = random.Random(0)
    chunks = [b"123456789", b"", b"\x00"] + [
        bytes(rng.randrange(256) for _ in range(n)) for n in (1, 3, 4, 5, 8, 63, 700, 2500)
    ]
    crcs = tfrecord_io.crc32c_many(chunks)
    assert crcs[0] == 0xE3069283
    assert crcs.tolist() == [_crc32c_bitwise(c) for c in chunks]


def _example_via_tf(instance, max_seq_length, max_predictions):
    """The Example the original builds with tf.train (an independent encoder)."""

    def ints(values, length):
        return tf.train.Feature(
            int64_list=tf.train.Int64List(value=values + [0] * (length - len(values)))
        )

    num_predictions = len(instance.masked_lm_positions)
    weights = [1.0] * num_predictions + [0.0] * (max_predictions - num_predictions)
    features = {
        "input_ids": ints(instance.input_ids, max_seq_length),
        "input_mask": ints([1] * len(instance.input_ids), max_seq_length),
        "segment_ids": ints(instance.segment_ids, max_seq_length),
        "masked_lm_positions": ints(instance.masked_lm_positions, max_predictions),
        "masked_lm_ids": ints(instance.masked_lm_ids, max_predictions),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights)),
        "next_sentence_labels": ints([int(instance.is_random_next)], 1),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def test_encoded_examples_equal_those_built_with_tf_train():
    encoder = tfrecord_io.ExampleEncoder(64, 20, max_id=40000)
    big_ids = pretraining_data.TrainingInstance(
        [CLS, 30000, 127, 128, 16384, SEP, 9, SEP], [0] * 6 + [1] * 2, [1, 4], [77, 20000], True
    )
    for instance in _instances(dupe_factor=1)[:50] + [big_ids]:
        ours = tf.train.Example.FromString(encoder.encode(instance))
        assert ours == _example_via_tf(instance, 64, 20)


def test_encoder_rejects_instances_longer_than_max_seq_length():
    encoder = tfrecord_io.ExampleEncoder(4, 2, max_id=10)
    with pytest.raises(ValueError, match="max_seq_length 4"):
        encoder.encode(pretraining_data.TrainingInstance([2, 5, 3, 6, 3], [0] * 5, [1], [5], False))


def _write_instances(path, instances, max_seq_length=64, compression=""):
    encoder = tfrecord_io.ExampleEncoder(max_seq_length, 20, max_id=len(_toy_vocab()))
    writer = tfrecord_io.AtomicRecordFile(str(path), compression)
    for record in tfrecord_io.frame_records([encoder.encode(i) for i in instances]):
        writer.write(record)
    writer.close()


def test_atomic_record_file_appears_only_when_closed(tmp_path):
    path = tmp_path / "a.tfrecord"
    writer = tfrecord_io.AtomicRecordFile(str(path))
    writer.write(b"partial")
    assert not path.exists()
    writer.abort()
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------- the reader


def test_reader_round_trip_gives_int32_features_of_the_instances(tmp_path):
    instances = _instances(dupe_factor=1)[:10]
    _write_instances(tmp_path / "a.tfrecord", instances)
    dataset = pretraining.make_pretraining_dataset(
        str(tmp_path / "*.tfrecord"), 4, 64, 20, is_training=False
    )
    batches = list(dataset)
    assert len(batches) == 2  # 10 examples, batches of 4, remainder dropped
    batch = batches[0]
    assert batch["input_ids"].shape == (4, 64) and batch["input_ids"].dtype == tf.int32
    assert batch["masked_lm_weights"].dtype == tf.float32
    assert batch["next_sentence_labels"].shape == (4, 1)
    for row, instance in enumerate(instances[:4]):
        length = len(instance.input_ids)
        assert batch["input_ids"][row, :length].numpy().tolist() == instance.input_ids
        assert batch["input_mask"][row].numpy().sum() == length
        assert batch["segment_ids"][row, :length].numpy().tolist() == instance.segment_ids
        num_predictions = len(instance.masked_lm_positions)
        assert (
            batch["masked_lm_ids"][row, :num_predictions].numpy().tolist() == instance.masked_lm_ids
        )
        assert batch["masked_lm_weights"][row].numpy().sum() == num_predictions
        assert batch["next_sentence_labels"][row, 0] == int(instance.is_random_next)


def test_reader_reads_gzip_files(tmp_path):
    _write_instances(tmp_path / "a.tfrecord.gz", _instances(dupe_factor=1)[:8], compression="gzip")
    dataset = pretraining.make_pretraining_dataset(
        str(tmp_path / "a.tfrecord.gz"), 8, 64, 20, False, compression_type="GZIP"
    )
    assert next(iter(dataset))["input_ids"].shape == (8, 64)


def test_reader_detects_gzip_files_by_content_by_default(tmp_path):
    instances = _instances(dupe_factor=1)[:8]
    # No telling suffix: the content decides. One gzip file, one plain one, read together.
    _write_instances(tmp_path / "part-0", instances[:4], compression="gzip")
    _write_instances(tmp_path / "part-1", instances[4:])
    assert pretraining.detect_compression(str(tmp_path / "part-0")) == "GZIP"
    assert pretraining.detect_compression(str(tmp_path / "part-1")) == ""
    dataset = pretraining.make_pretraining_dataset(str(tmp_path / "part-*"), 8, 64, 20, False)
    (batch,) = list(dataset)
    assert [
        row[: len(i.input_ids)].tolist()
        for row, i in zip(batch["input_ids"].numpy(), instances, strict=True)
    ] == [i.input_ids for i in instances]


def test_reader_reads_files_written_the_original_way(tmp_path):
    instances = _instances(dupe_factor=1)[:6]
    with tf.io.TFRecordWriter(str(tmp_path / "original.tfrecord")) as writer:
        for instance in instances:
            writer.write(_example_via_tf(instance, 64, 20).SerializeToString())
    batch = next(
        iter(
            pretraining.make_pretraining_dataset(
                str(tmp_path / "original.tfrecord"), 6, 64, 20, False
            )
        )
    )
    assert (
        batch["masked_lm_positions"][2].numpy().tolist()[:3] == instances[2].masked_lm_positions[:3]
    )


def test_reader_names_a_pattern_that_matches_nothing(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        pretraining.make_pretraining_dataset(str(tmp_path / "nothing-here*"), 2, 64, 20, True)


def _rows(dataset):
    return sorted(tuple(row) for batch in dataset for row in batch["input_ids"].numpy().tolist())


def _padded_rows(instances):
    return sorted(tuple(i.input_ids + [0] * (64 - len(i.input_ids))) for i in instances)


def test_reader_shards_files_per_input_pipeline(tmp_path):
    instances = _instances(dupe_factor=1)[:16]
    for k in range(4):
        _write_instances(tmp_path / f"part-{k}.tfrecord", instances[4 * k : 4 * k + 4])
    shards = [
        _rows(
            pretraining.make_pretraining_dataset(
                str(tmp_path / "part-*.tfrecord"),
                2,
                64,
                20,
                False,
                input_context=tf.distribute.InputContext(2, i, 1),
            )
        )
        for i in range(2)
    ]
    assert shards[0] == _padded_rows(instances[0:4] + instances[8:12])
    assert shards[1] == _padded_rows(instances[4:8] + instances[12:16])


def test_reader_shards_records_when_files_are_fewer_than_pipelines(tmp_path):
    instances = _instances(dupe_factor=1)[:8]
    _write_instances(tmp_path / "one.tfrecord", instances)
    shard = pretraining.make_pretraining_dataset(
        str(tmp_path / "one.tfrecord"),
        4,
        64,
        20,
        False,
        input_context=tf.distribute.InputContext(2, 1, 1),
    )
    assert _rows(shard) == _padded_rows(instances[1::2])


def test_training_reader_repeats_and_is_reproducible_with_a_seed(tmp_path):
    _write_instances(tmp_path / "a.tfrecord", _instances(dupe_factor=1)[:6])

    def take():
        dataset = pretraining.make_pretraining_dataset(
            str(tmp_path / "a.tfrecord"), 4, 64, 20, True, seed=3
        )
        return [batch["input_ids"].numpy().tolist() for batch in dataset.take(5)]

    assert take() == take()  # 20 examples out of 6: repeated


def test_reader_works_with_distribute_datasets_from_function(tmp_path):
    _write_instances(tmp_path / "a.tfrecord", _instances(dupe_factor=1)[:8])
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(4)
        return pretraining.make_pretraining_dataset(
            str(tmp_path / "a.tfrecord"),
            batch_size,
            64,
            20,
            True,
            input_context=input_context,
            seed=0,
        )

    batch = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
    assert batch["input_ids"].shape == (4, 64)
