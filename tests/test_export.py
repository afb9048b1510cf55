"""bert_tf.export: numbered version folders, atomic publication, assets (the writer every export uses)."""

import os

import pytest
import tensorflow as tf

from bert_tf import export
from bert_tf.errors import InputError


def _module():
    module = tf.Module()
    module.scale = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(x):
        return {"y": x * module.scale}

    return module, {"serving_default": serve}


def test_versions_are_numbered_from_one_and_skip_other_folders(tmp_path):
    assert export.next_version(str(tmp_path / "missing")) == 1
    (tmp_path / "3").mkdir()
    (tmp_path / "10").mkdir()
    (tmp_path / ".tmp-11-abc").mkdir()
    (tmp_path / "notes").mkdir()
    assert export.next_version(str(tmp_path)) == 11


def test_write_saved_model_publishes_a_numbered_folder_that_serves(tmp_path):
    module, signatures = _module()
    first = export.write_saved_model(
        str(tmp_path), module, signatures, assets={"labels.txt": "a\nb\n"}
    )
    second = export.write_saved_model(str(tmp_path), module, signatures)
    assert (first, second) == (str(tmp_path / "1"), str(tmp_path / "2"))
    assert sorted(os.listdir(tmp_path)) == ["1", "2"]  # no temporary folder left behind
    assert (tmp_path / "1" / "assets" / "labels.txt").read_text() == "a\nb\n"
    loaded = tf.saved_model.load(first)
    out = loaded.signatures["serving_default"](x=tf.constant([1.5, -1.0]))
    assert out["y"].numpy().tolist() == [3.0, -2.0]


def test_an_existing_version_is_refused_and_left_alone(tmp_path):
    module, signatures = _module()
    export.write_saved_model(str(tmp_path), module, signatures, version=5)
    before = sorted(os.listdir(tmp_path / "5"))
    with pytest.raises(InputError, match="--version=5"):
        export.write_saved_model(str(tmp_path), module, signatures, version=5)
    assert sorted(os.listdir(tmp_path / "5")) == before
    with pytest.raises(InputError, match="positive integer"):
        export.write_saved_model(str(tmp_path), module, signatures, version=0)


def test_a_failed_export_leaves_nothing(tmp_path, monkeypatch):
    module, signatures = _module()

    def save_half_then_fail(module, path, signatures):
        os.makedirs(os.path.join(path, "variables"))
        open(os.path.join(path, "saved_model.pb"), "wb").close()
        raise OSError("No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", save_half_then_fail)
    with pytest.raises(OSError, match="No space"):
        export.write_saved_model(str(tmp_path), module, signatures)
    assert os.listdir(tmp_path) == []
