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
