"""Faults a hostile user finds: damaged checkpoints (an --init_checkpoint, a resume).

A damaged checkpoint is one cut short (`.index` or `.data-*` truncated) or altered (one bit flipped).
It must be one line naming the file, and a resume must skip it for the newest intact checkpoint,
ending with the weights a resume from that one gives (bit for bit).
"""

import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from test_checkpoint_state import _trainer, _weights

from bert_tf.checkpoint_reading import verify_checkpoint
from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.errors import DamagedCheckpoint
from bert_tf.modeling import BertConfig, BertModel

from conftest import REPO_DIR

GOOGLE_TINY = os.path.join(REPO_DIR, "tests", "fixtures", "google_ckpt_tiny")


def _damage(prefix, kind):
    """Truncates (to half) or flips one bit of the checkpoint's index or data file; returns its path."""
    part = "index" if kind.endswith("index") else "data"
    (path,) = tf.io.gfile.glob(prefix + (".index" if part == "index" else ".data-*"))
    content = bytearray(open(path, "rb").read())
    if kind.startswith("truncated"):
        content = content[: len(content) // 2]
    else:
        content[len(content) // 3] ^= 0x10
    with open(path, "wb") as f:
        f.write(bytes(content))
    return path


KINDS = ["truncated index", "truncated data", "flipped data", "flipped index"]
REASONS = {
    "truncated index": "not an sstable",
    "truncated data": "Read less bytes than requested",
    "flipped data": "Checksum does not match",
    "flipped index": "checksum mismatch",
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_init_checkpoint_is_one_line_naming_the_file_before_any_work(tmp_path, kind):
    folder = tmp_path / "ckpt"
    shutil.copytree(GOOGLE_TINY, folder)
    damaged = _damage(str(folder / "bert_model.ckpt"), kind)
    config = BertConfig.from_json_file(os.path.join(GOOGLE_TINY, "bert_config.json"))
    model = BertModel(config)
    with pytest.raises(DamagedCheckpoint) as error:
        restore_init_checkpoint(model, str(folder), dry_run=True)
    message = str(error.value)
    assert message.startswith(
        f"{damaged}: the checkpoint {folder / 'bert_model.ckpt'} is damaged ("
    )
    assert REASONS[kind].lower() in message.lower() and "\n" not in message


@pytest.mark.parametrize("kind", ["truncated data", "flipped data", "truncated index"])
def test_a_resume_skips_a_damaged_newest_checkpoint_for_the_newest_intact_one(
    tmp_path, kind, caplog
):
    # Both runs stop at step 4 alike; one goes on to a checkpoint at 8, which is then damaged.
    damaged_run, clean_run = tmp_path / "damaged", tmp_path / "clean"
    _trainer(damaged_run).train(until=8)
    _trainer(clean_run).train(until=4)
    path = _damage(str(damaged_run / "model.ckpt-8"), kind)
    with caplog.at_level(logging.WARNING, logger="absl"), caplog.at_level(logging.WARNING):
        resumed = _trainer(damaged_run)
    warnings = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith(f"{path}: the checkpoint ")
    assert warnings[0].endswith("skipped: resuming from the newest intact checkpoint")
    assert resumed.global_step == 4
    resumed.train()
    reference = _trainer(clean_run)
    reference.train()
    for got, expected in zip(_weights(resumed), _weights(reference), strict=True):
        np.testing.assert_array_equal(got, expected)  # bit-exactly a resume from step 4
    verify_checkpoint(str(damaged_run / "model.ckpt-8"))  # step 8 was saved anew
    assert tf.train.latest_checkpoint(str(damaged_run)).endswith("model.ckpt-12")


def test_a_resume_where_every_checkpoint_is_damaged_is_one_line(tmp_path):
    _trainer(tmp_path).train(until=4)
    _damage(str(tmp_path / "model.ckpt-4"), "truncated data")
    with pytest.raises(
        DamagedCheckpoint, match=r"every checkpoint in .* is damaged, the newest .*model\.ckpt-4"
    ):
        _trainer(tmp_path)


def test_a_run_removes_the_leftovers_of_killed_saves_and_nothing_else(tmp_path):
    ours = [
        "checkpoint.tmp" + "0123456789abcdef" * 2,  # TensorFlow's temporary checkpoint list
        "model.ckpt-4_temp/part-00000-of-00001.data-00000-of-00001",  # a save's temporary folder
        ".train.tf_record.tmp-0123456789ab",  # bert_tf.file_io.temporary_name's
        "input_state/worker0of1-4_temp/part-00000-of-00001.index",  # this worker's input state's
    ]
    users = [
        "checkpoint.tmp-notes",
        "model.ckpt-best_temp",
        "train.tf_record.tmp-0123456789ab",  # not hidden
        "input_state/worker1of2-4_temp/x",  # another worker's
        "notes/.a.tmp-0123456789ab",  # not in the run's folder itself
    ]
    for name in ours + users:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    _trainer(tmp_path)
    left = sorted(
        os.path.relpath(os.path.join(root, name), tmp_path)
        for root, _, names in os.walk(tmp_path)
        for name in names
        if "events" not in name
    )
    assert left == sorted(users)


def _pretraining_file(path, input_ids):
    from bert_tf.data.pretraining import encoding, instances

    encoder = encoding.ExampleEncoder(8, 2, max_id=50000)
    records = [
        encoder.encode(instances.TrainingInstance(ids, [0] * len(ids), [1], [ids[1]], False))
        for ids in input_ids
    ]
    path.write_bytes(b"".join(encoding.frame_records(records)))
    return str(path)


def test_an_id_past_the_vocab_in_a_later_record_is_one_line_naming_file_and_record(tmp_path):
    from bert_tf.data.pretraining.reader import _check_ids, check_records
    from bert_tf.errors import InputError

    good = [101, 7592, 102, 2088, 102]
    first = _pretraining_file(tmp_path / "a.tfrecord", [good] * 3)
    second = _pretraining_file(tmp_path / "b.tfrecord", [good, good, [101, 31000, 102]])
    check_records([first], 8, 2, 30522, "bert_config.json")
    expected = (
        f"--input_file: {second} holds token id 31000 in record 2, but bert_config.json has "
        "vocab_size=30522: written with another vocab?"
    )
    with pytest.raises(InputError) as error:
        check_records([first, second], 8, 2, 30522, "bert_config.json")
    assert str(error.value) == expected
    with pytest.raises(InputError) as error:  # record 2 is the first of the second batch of 2
        _check_ids(second, 8, 30522, "bert_config.json", batch_size=2)
    assert str(error.value) == expected
