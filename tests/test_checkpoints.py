"""Google-format checkpoints (load, save, errors) and --init_checkpoint, against the original's.

tests/fixtures/google_ckpt_tiny/bert_model.ckpt was written by the original TF1 code; its
variable names, shapes and values are the reference for what we read and write.
"""

import dataclasses
import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import (
    load_google_checkpoint,
    restore_init_checkpoint,
    save_google_checkpoint,
)
from bert_tf.modeling import BertConfig, BertModel, BertPretrainingModel

from conftest import assert_float32_close

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
OUTPUTS = ("sequence_output", "pooled_output", "masked_lm_log_probs", "next_sentence_log_probs")


@pytest.fixture(scope="module")
def inputs(reference):
    return {name: tf.constant(reference[name]) for name in MODEL_INPUTS}


def _checkpoint_values(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _write_checkpoint(prefix, values):
    """Writes {name: array} as a TF checkpoint with exactly these names (as the TF1 Saver would)."""
    names = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(values[name]) for name in names],
    )
    return prefix


def _assert_same_outputs(actual, expected, names=OUTPUTS):
    for name in names:
        np.testing.assert_array_equal(actual[name].numpy(), expected[name].numpy(), err_msg=name)


def _random_pretraining_model(config):
    model = BertPretrainingModel(config)
    model(model.dummy_inputs())
    rng = np.random.default_rng(0)
    # Random values everywhere (biases and LayerNorm too), so no weight can go unnoticed.
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape).astype(np.float32))
    return model


# --- save_google_checkpoint -----------------------------------------------------------------------


def test_saved_names_and_shapes_are_the_originals(tmp_path, config, ckpt_prefix):
    prefix = save_google_checkpoint(BertPretrainingModel(config), str(tmp_path / "bert_model.ckpt"))
    assert prefix == str(tmp_path / "bert_model.ckpt")
    assert sorted(tf.train.list_variables(prefix)) == sorted(tf.train.list_variables(ckpt_prefix))


def test_bert_model_saves_only_the_encoder(tmp_path, config, ckpt_prefix):
    prefix = save_google_checkpoint(BertModel(config), str(tmp_path / "bert_model.ckpt"))
    expected = [v for v in tf.train.list_variables(ckpt_prefix) if v[0].startswith("bert/")]
    assert sorted(tf.train.list_variables(prefix)) == sorted(expected)


def test_load_then_save_reproduces_the_original_values(tmp_path, ckpt_prefix, config):
    model = BertPretrainingModel(config)
    assert load_google_checkpoint(model, ckpt_prefix) == []
    prefix = save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    saved, original = _checkpoint_values(prefix), _checkpoint_values(ckpt_prefix)
    assert sorted(saved) == sorted(original)
    for name, value in original.items():
        assert saved[name].dtype == np.float32, name
        np.testing.assert_array_equal(saved[name], value, err_msg=name)


def test_saved_checkpoint_loads_into_a_fresh_model(tmp_path, config, inputs):
    source = _random_pretraining_model(config)
    prefix = save_google_checkpoint(source, str(tmp_path / "bert_model.ckpt"))
    target = BertPretrainingModel(config)
    assert load_google_checkpoint(target, prefix) == []
    _assert_same_outputs(target(inputs, training=False), source(inputs, training=False))


def test_round_trip_with_other_vocab_segments_and_depth(tmp_path):
    config = BertConfig(
        vocab_size=77,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
        type_vocab_size=3,
    )
    rng = np.random.default_rng(1)
    inputs = {
        "input_ids": tf.constant(rng.integers(0, 77, (2, 11)), tf.int32),
        "input_mask": tf.constant([[1] * 11, [1] * 8 + [0] * 3]),
        "segment_ids": tf.constant([[0] * 4 + [1] * 4 + [2] * 3] * 2),
        "masked_lm_positions": tf.constant([[1, 5, 9], [0, 2, 7]]),
    }
    source = _random_pretraining_model(config)
    prefix = save_google_checkpoint(source, str(tmp_path / "bert_model.ckpt"))
    shapes = dict(tf.train.list_variables(prefix))
    assert shapes["bert/embeddings/token_type_embeddings"] == [3, 32]
    assert shapes["cls/predictions/output_bias"] == [77]
    assert "bert/encoder/layer_2/output/LayerNorm/gamma" in shapes
    target = BertPretrainingModel(config)
    load_google_checkpoint(target, prefix)
    expected = source(inputs, training=False)
    _assert_same_outputs(target(inputs, training=False), expected)
    for actual, wanted in zip(
        target(inputs)["encoder_outputs"], expected["encoder_outputs"], strict=True
    ):
        np.testing.assert_array_equal(actual.numpy(), wanted.numpy())


def test_save_leaves_only_the_checkpoint_files(tmp_path, config):
    (tmp_path / "bert_model.ckpt.index").write_bytes(b"old index")
    (tmp_path / "bert_model.ckpt.data-00000-of-00001").write_bytes(b"old data")
    prefix = save_google_checkpoint(BertModel(config), str(tmp_path / "bert_model.ckpt"))
    assert sorted(os.listdir(tmp_path)) == [
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]
    assert len(tf.train.list_variables(prefix)) == 39


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, config, monkeypatch):
    (tmp_path / "bert_model.ckpt.index").write_bytes(b"old index")
    (tmp_path / "bert_model.ckpt.data-00000-of-00001").write_bytes(b"old data")

    def failing_save(**kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "disk full")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", failing_save)
    with pytest.raises(tf.errors.ResourceExhaustedError):
        save_google_checkpoint(BertModel(config), str(tmp_path / "bert_model.ckpt"))
    assert sorted(os.listdir(tmp_path)) == [
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]
    assert (tmp_path / "bert_model.ckpt.index").read_bytes() == b"old index"
    assert (tmp_path / "bert_model.ckpt.data-00000-of-00001").read_bytes() == b"old data"


def test_save_creates_the_folder(tmp_path, config):
    prefix = str(tmp_path / "new" / "folder" / "bert_model.ckpt")
    save_google_checkpoint(BertModel(config), prefix)
    assert len(tf.train.list_variables(prefix)) == 39


def test_save_to_a_tf_io_gfile_url(config):
    # ram:// is TF's in-memory filesystem: a stand-in for gs:// that needs no network.
    prefix = "ram://test_save_to_a_tf_io_gfile_url/bert_model.ckpt"
    save_google_checkpoint(BertModel(config), prefix)
    assert sorted(tf.io.gfile.listdir(os.path.dirname(prefix))) == [
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]
    (value,) = tf.raw_ops.RestoreV2(
        prefix=prefix,
        tensor_names=["bert/pooler/dense/bias"],
        shape_and_slices=[""],
        dtypes=[tf.float32],
    )
    assert value.shape == (config.hidden_size,)


# --- load_google_checkpoint errors and unused variables -------------------------------------------


@pytest.mark.parametrize(
    "field, value, variable",
    [
        ("hidden_size", 32, "bert/embeddings/word_embeddings"),
        ("vocab_size", 99, "bert/embeddings/word_embeddings"),
        ("max_position_embeddings", 64, "bert/embeddings/position_embeddings"),
        ("intermediate_size", 64, "bert/encoder/layer_0/intermediate/dense/kernel"),
    ],
)
def test_shape_mismatch_is_an_error_naming_the_variable(
    config, ckpt_prefix, field, value, variable
):
    other = BertConfig.from_dict({**config.to_dict(), field: value})
    with pytest.raises(ValueError, match=variable):
        load_google_checkpoint(BertPretrainingModel(other), ckpt_prefix)


def test_failed_load_changes_no_weight(config, ckpt_prefix):
    other = BertConfig.from_dict({**config.to_dict(), "intermediate_size": 64})
    model = BertModel(other)
    model(model.dummy_inputs())
    before = [weight.numpy() for weight in model.weights]
    with pytest.raises(ValueError):
        load_google_checkpoint(model, ckpt_prefix)
    for weight, value in zip(model.weights, before, strict=True):
        np.testing.assert_array_equal(weight.numpy(), value, err_msg=weight.path)


def test_missing_layer_is_an_error_naming_it(tmp_path, config):
    one_layer = BertConfig.from_dict({**config.to_dict(), "num_hidden_layers": 1})
    prefix = save_google_checkpoint(BertModel(one_layer), str(tmp_path / "bert_model.ckpt"))
    with pytest.raises(ValueError, match="bert/encoder/layer_1/"):
        load_google_checkpoint(BertModel(config), prefix)


def test_missing_variable_is_an_error_naming_it(tmp_path, ckpt_prefix, config):
    values = _checkpoint_values(ckpt_prefix)
    del values["bert/encoder/layer_1/attention/output/LayerNorm/beta"]
    prefix = _write_checkpoint(str(tmp_path / "bert_model.ckpt"), values)
    for model in (BertModel(config), BertPretrainingModel(config)):
        with pytest.raises(
            ValueError, match="bert/encoder/layer_1/attention/output/LayerNorm/beta"
        ):
            load_google_checkpoint(model, prefix, allow_missing_heads=True)


def test_missing_heads_are_an_error_unless_allowed(
    tmp_path, ckpt_prefix, config, reference, inputs
):
    values = _checkpoint_values(ckpt_prefix)
    encoder_only = {name: value for name, value in values.items() if name.startswith("bert/")}
    prefix = _write_checkpoint(str(tmp_path / "bert_model.ckpt"), encoder_only)
    with pytest.raises(ValueError, match="cls/"):
        load_google_checkpoint(BertPretrainingModel(config), prefix)
    model = BertPretrainingModel(config)
    assert load_google_checkpoint(model, prefix, allow_missing_heads=True) == []
    outputs = model(inputs, training=False)
    assert_float32_close(outputs["pooled_output"], reference["pooled_output"])


def test_nonexistent_prefix_is_a_file_not_found_error_naming_it(tmp_path, config):
    prefix = str(tmp_path / "nowhere" / "bert_model.ckpt")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_google_checkpoint(BertModel(config), prefix)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        restore_init_checkpoint(BertModel(config), prefix)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        restore_init_checkpoint(BertModel(config), str(tmp_path / "nowhere"))


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_bert_model_reports_the_heads_unused(config, ckpt_prefix, caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        unused = load_google_checkpoint(BertModel(config), ckpt_prefix)
    assert _warnings(caplog) == []  # heads left out of a BertModel are expected
    assert unused == [
        "cls/predictions/output_bias",
        "cls/predictions/transform/LayerNorm/beta",
        "cls/predictions/transform/LayerNorm/gamma",
        "cls/predictions/transform/dense/bias",
        "cls/predictions/transform/dense/kernel",
        "cls/seq_relationship/output_bias",
        "cls/seq_relationship/output_weights",
    ]


def test_a_deeper_checkpoint_than_the_config_warns_naming_the_unused_layers(
    tmp_path, config, caplog
):
    deeper = dataclasses.replace(config, num_hidden_layers=config.num_hidden_layers + 1)
    prefix = save_google_checkpoint(BertModel(deeper), str(tmp_path / "bert_model.ckpt"))
    with caplog.at_level(logging.INFO, logger="absl"):
        unused = load_google_checkpoint(BertModel(config), prefix)
    assert len(unused) == 16 and all(name.startswith("bert/encoder/layer_2/") for name in unused)
    (warning,) = _warnings(caplog)
    assert "16 encoder variables" in warning and "bert/encoder/layer_2/" in warning


def test_junk_is_reported_unused_but_optimizer_state_is_not(tmp_path, ckpt_prefix, config):
    values = _checkpoint_values(ckpt_prefix)
    kernel = "bert/encoder/layer_0/attention/self/query/kernel"
    values.update(
        {
            "global_step": np.array(1000, np.int64),
            kernel + "/adam_m": np.zeros_like(values[kernel]),
            kernel + "/adam_v": np.zeros_like(values[kernel]),
            "junk/extra_weight": np.ones([3], np.float32),
            "bert/encoder/layer_7/output/dense/bias": np.ones([48], np.float32),
        }
    )
    prefix = _write_checkpoint(str(tmp_path / "bert_model.ckpt"), values)
    assert load_google_checkpoint(BertPretrainingModel(config), prefix) == [
        "bert/encoder/layer_7/output/dense/bias",
        "junk/extra_weight",
    ]


# --- restore_init_checkpoint ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["prefix", "folder"])
@pytest.mark.parametrize("model_class", [BertModel, BertPretrainingModel])
def test_restore_init_checkpoint_from_google(
    google_ckpt_dir, reference, inputs, where, model_class
):
    config = BertConfig.from_json_file(str(google_ckpt_dir / "bert_config.json"))
    path = str(google_ckpt_dir / "bert_model.ckpt") if where == "prefix" else str(google_ckpt_dir)
    model = model_class(config)
    assert restore_init_checkpoint(model, path).prefix == str(google_ckpt_dir / "bert_model.ckpt")
    outputs = model(inputs, training=False)
    assert_float32_close(outputs["sequence_output"], reference["sequence_output"])
    if model_class is BertPretrainingModel:
        assert_float32_close(outputs["masked_lm_log_probs"], reference["masked_lm_log_probs"])


@pytest.mark.parametrize("model_class", [BertModel, BertPretrainingModel])
def test_restore_init_checkpoint_from_training_checkpoint(tmp_path, config, inputs, model_class):
    source = _random_pretraining_model(config)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=source), str(tmp_path / "training"), max_to_keep=1
    )
    saved_prefix = manager.save()
    model = model_class(config)
    assert restore_init_checkpoint(model, str(tmp_path / "training")).prefix == saved_prefix
    expected = source(inputs, training=False)
    names = OUTPUTS if model_class is BertPretrainingModel else ("sequence_output", "pooled_output")
    _assert_same_outputs(model(inputs, training=False), expected, names)


# --- tf.distribute --------------------------------------------------------------------------------

_MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    from bert_tf.checkpoints import load_google_checkpoint, save_google_checkpoint
    from bert_tf.modeling import BertConfig, BertPretrainingModel

    fixture_dir, output_prefix = sys.argv[1], sys.argv[2]
    ckpt_prefix = fixture_dir + "/bert_model.ckpt"
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = BertPretrainingModel(BertConfig.from_json_file(fixture_dir + "/bert_config.json"))
        unused = load_google_checkpoint(model, ckpt_prefix)
    save_google_checkpoint(model, output_prefix)

    reference = np.load(fixture_dir + "/reference.npz")
    inputs = {name: tf.constant(reference[name])
              for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")}
    pooled = strategy.run(lambda: model(inputs, training=False)["pooled_output"])
    errors = [float(np.abs(p.numpy() - reference["pooled_output"]).max())
              for p in strategy.experimental_local_results(pooled)]
    print(json.dumps({
        "replicas": strategy.num_replicas_in_sync,
        "mirrored": type(model.weights[0]).__name__ + "/" + type(model.weights[0].value).__name__,
        "unused": unused,
        "pooled_errors": errors,
    }))
    """
)


def test_load_and_save_under_mirrored_strategy(tmp_path, google_ckpt_dir):
    # Two logical CPUs must be configured before TF initializes its devices: a fresh process can.
    output_prefix = str(tmp_path / "bert_model.ckpt")
    result = subprocess.run(
        [sys.executable, "-c", _MIRRORED_SCRIPT, str(google_ckpt_dir), output_prefix],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_DIR,
        env={**os.environ, "PYTHONPATH": REPO_DIR, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2
    assert "Mirrored" in report["mirrored"], report["mirrored"]
    assert report["unused"] == []
    # Pooled outputs lie in [-1, 1]: 1e-4 is ~800 float32 rounding steps of them (the parity tests
    # see 23), while a replica with unloaded weights is off by 0.1 or more.
    assert len(report["pooled_errors"]) == 2 and max(report["pooled_errors"]) < 1e-4
    saved = _checkpoint_values(output_prefix)
    original = _checkpoint_values(str(google_ckpt_dir / "bert_model.ckpt"))
    assert sorted(saved) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(saved[name], value, err_msg=name)
