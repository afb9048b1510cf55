"""Frozen exports (bert_tf/export.py: the serving graphs hold the weights as constants) answer as the
same model exported with its weights as variables, for every export kind and every signature."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_serving_runtimes import BFLOAT16_KINDS, KINDS, MODEL_TYPES

from bert_tf.modeling import BertConfig
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.precision import build_with_policy, store_in_compute_dtype
from bert_tf.tasks import TASKS

from conftest import SAMPLE_DIR

VOCAB = str(SAMPLE_DIR / "vocab.txt")


def _export_both(kind, folder):
    """(frozen export, variables export) of one random tiny model of `kind`."""
    settings, options, _ = KINDS[kind]
    config = BertConfig.from_json_file(str(SAMPLE_DIR / "bert_config_tiny.json"))
    model_type = MODEL_TYPES.get(kind, kind)
    info = TaskInfo(model_type=model_type, bert_config=config, max_seq_length=24, **settings)
    keras.utils.set_random_seed(3)
    spec = TASKS[model_type]
    policy = "mixed_bfloat16" if kind in BFLOAT16_KINDS else "float32"
    model = build_with_policy(lambda: spec.build_model(config, info), policy)
    model(model.dummy_inputs())
    if kind in BFLOAT16_KINDS:
        store_in_compute_dtype(model)
    frozen = spec.export_model(
        model, info, VOCAB, str(folder), version=1, freeze_weights=True, **options
    )
    variables = spec.export_model(model, info, VOCAB, str(folder), version=2, **options)
    return frozen, variables


def _outputs(path, inputs):
    """{signature: {output: np.ndarray}}: the raw-string signatures on `inputs`, then each id
    signature on its preprocess's outputs."""
    signatures = tf.saved_model.load(path).signatures
    results = {}
    for raw in (True, False):
        for name, signature in sorted(signatures.items()):
            specs = signature.structured_input_signature[1]
            if all(spec.dtype == tf.string for spec in specs.values()) != raw:
                continue
            if raw:
                feed = {key: tf.constant(inputs[key]) for key in specs}
            else:
                pair = set(specs) <= set(results.get("preprocess_pair", {}))
                source = "preprocess_pair" if pair else "preprocess"
                feed = {key: tf.constant(results[source][key]) for key in specs}
            results[name] = {key: value.numpy() for key, value in signature(**feed).items()}
    return results


def _function_ops(path):
    """The op types of the functions (the signatures' graphs) of the SavedModel at `path`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(f"{path}/saved_model.pb", "rb") as file:
        saved_model.ParseFromString(file.read())
    library = saved_model.meta_graphs[0].graph_def.library
    return {node.op for function in library.function for node in function.node_def}


# Two kinds run in the quick suite; the others (~10 s each on 2 cores) with the slow tests.
QUICK_KINDS = ("encoder", "tagger")
ALL_KINDS = [
    kind if kind in QUICK_KINDS else pytest.param(kind, marks=pytest.mark.slow)
    for kind in sorted(KINDS)
]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_frozen_export_answers_as_the_variables_export(kind, tmp_path):
    frozen, variables = _export_both(kind, tmp_path)
    # The frozen serving graphs read no variable (every weight is a constant of the graph), and the
    # checkpoint beside them holds none.
    assert not _function_ops(frozen) & {"ReadVariableOp", "ResourceGather"}
    assert [name for name, _ in tf.train.list_variables(f"{frozen}/variables/variables")] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH"
    ]
    assert "ReadVariableOp" in _function_ops(variables)
    assert (tmp_path / "1" / "assets" / "vocab.txt").read_text() == open(VOCAB).read()
    expected, actual = _outputs(variables, KINDS[kind][2]), _outputs(frozen, KINDS[kind][2])
    assert sorted(actual) == sorted(expected)
    for signature, outputs in expected.items():
        assert sorted(actual[signature]) == sorted(outputs), signature
        for name, value in outputs.items():
            where = f"{kind} {signature} {name}"
            got = actual[signature][name]
            assert (got.dtype, got.shape) == (value.dtype, value.shape), where
            if value.dtype.kind == "f" and kind in BFLOAT16_KINDS:
                # oneDNN's kernel for a constant weight sums in another order; its float32 sum
                # is then rounded to bfloat16: measured at most one bfloat16 step (2^-8 relative).
                scale = max(float(np.abs(value).max(initial=0.0)), 1.0)
                np.testing.assert_allclose(got, value, rtol=0, atol=2**-7 * scale, err_msg=where)
            elif value.dtype.kind == "f":
                # The same sums in another order: measured at most 4.8e-7 (outputs up to 3.0).
                # SQuAD's null_score_diff holds a 1e6 sentinel: relative there.
                np.testing.assert_allclose(got, value, rtol=1e-6, atol=1e-6, err_msg=where)
            else:
                np.testing.assert_array_equal(got, value, err_msg=where)
