"""bert_tf.export: numbered version folders, atomic publication, assets (the writer every export uses)."""

import errno
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import export
from bert_tf.errors import InputError, WriteError

from conftest import file_size_limit


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
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", save_half_then_fail)
    with pytest.raises(WriteError) as error:
        export.write_saved_model(str(tmp_path), module, signatures)
    assert str(error.value) == f"cannot write {tmp_path / '1'}: No space left on device"
    assert os.listdir(tmp_path) == []


def test_an_export_the_disk_refuses_names_the_version_folder_and_leaves_nothing(tmp_path):
    module, signatures = _module()
    export.write_saved_model(str(tmp_path), module, signatures)
    with file_size_limit(64), pytest.raises(WriteError) as error:
        export.write_saved_model(str(tmp_path), module, signatures)  # TF's own writers fail
    assert str(error.value) == f"cannot write {tmp_path / '2'}: File too large"
    assert os.listdir(tmp_path) == ["1"]
    assert tf.saved_model.load(str(tmp_path / "1")).signatures["serving_default"]


class _Block(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(3, name="dense")
        self.norm = keras.layers.LayerNormalization(name="LayerNorm")

    def call(self, x):
        return self.norm(self.dense(x))


class _Stack(keras.Model):
    """Two blocks whose variables have the same names (kernel, bias, gamma, beta), as BERT's layers do."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.blocks = [_Block(name=f"layer_{i}") for i in range(2)]

    def call(self, x):
        for block in self.blocks:
            x = block(x)
        return x


_SESSION_LOADER = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    # TF Serving's C++ loader (and saved_model_cli run): a TF1 session restores the variables from the
    # MetaGraph's saver, then runs the signature's tensors by name.
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], sys.argv[1])
        signature = meta_graph.signature_def["serving_default"]
        feed = {signature.inputs["x"].name: [[1.0, 2.0, 3.0, 4.0]]}
        y = session.run(signature.outputs["y"].name, feed)
    print(json.dumps(y.tolist()))
    """
)


def test_keras_models_export_for_the_tf_serving_loader(tmp_path):
    keras.utils.set_random_seed(0)
    model = _Stack(name="stack")
    model(tf.zeros([1, 4]))
    module = tf.Module()
    module.model = model

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(x):
        return {"y": model(x)}

    path = export.write_saved_model(str(tmp_path), module, {"serving_default": serve})
    result = subprocess.run(
        [sys.executable, "-c", _SESSION_LOADER, path],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    served = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
    # The same graph computes both: equal up to float32 rounding of values of ~1.
    np.testing.assert_allclose(
        served, model(tf.constant([[1.0, 2.0, 3.0, 4.0]])).numpy(), atol=1e-6
    )
