"""Every export kind, written under this project's TensorFlow, answers the same on TF Serving's runtimes.

TF Serving links a TensorFlow core and a TensorFlow Text into its binary: 2.20 + tf-text 2.20 in TF
Serving 2.20.0; tf-text 2.12.1 in TF Serving 2.19 and earlier (tensorflow/serving #2064, #2267 and PR
#4057), where 2.12 is the oldest core of the line. A graph using an op or an op attribute such a runtime
lacks fails to load or at its first call. Each runtime is a venv of its own (scripts/serving_envs.py,
built once and reused); one fresh process per runtime, importing only tensorflow, tensorflow_text,
numpy and json, loads all the exports and calls every signature, and its outputs must equal those of
a fresh process of this project's TensorFlow: floats to float32 rounding (the bfloat16 exports'
to bfloat16 rounding), strings and ints exactly.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.precision import build_with_policy, store_in_compute_dtype
from bert_tf.tasks import TASKS

from conftest import FLOAT32_EPS, REPO_DIR, SAMPLE_DIR

_spec = importlib.util.spec_from_file_location("serving_envs", REPO_DIR / "scripts/serving_envs.py")
serving_envs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serving_envs)

VOCAB = str(SAMPLE_DIR / "vocab.txt")
# A missing runtime fails the check in CI (it must have installed them) and skips it elsewhere.
MUST_RUN = os.environ.get("CI") == "true"

TEXTS = [
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy disposition.",
    "",
    "The real evils, indeed, of Emma's situation were the power of having rather too much her own "
    "way, and a disposition to think a little too well of herself.",  # several windows of 24
    "Café naïve — “quoted”\u00a0東京!\tMr.\u3000Knightley",
]
TEXTS_B = ["She was the youngest.", "Who?", "", "x"]
# Each export kind: its TaskInfo, export options and the inputs its raw-string signatures take.
KINDS = {
    "encoder": (dict(), {"encoder_layers": True}, {"text_a": TEXTS, "text_b": TEXTS_B}),
    "classifier": (
        dict(labels=["neg", "pos", "mixed"]),
        {},
        {"text_a": TEXTS, "text_b": TEXTS_B},  # text_b for preprocess_pair
    ),
    "classifier_pair": (
        dict(labels=["entailment", "neutral", "contradiction"], is_pair=True),
        {},
        {"text_a": TEXTS, "text_b": TEXTS_B},
    ),
    "classifier_windows": (
        dict(labels=["neg", "pos"], doc_stride=8, window_combination="weighted_mean"),
        {},
        {"text_a": TEXTS},
    ),
    # A random tiny head gives probabilities near 0.5: thresholds far from it keep the labels stable.
    "multi_label": (
        dict(labels=["animal", "colour", "food"], thresholds=[0.2, 0.3, 0.9]),
        {},
        {"text_a": TEXTS, "text_b": TEXTS_B},
    ),
    "multi_label_windows": (
        dict(labels=["a", "b"], thresholds=[0.1, 0.95], doc_stride=8, window_combination="max"),
        {},
        {"text_a": TEXTS},
    ),
    "squad": (
        dict(version_2_with_negative=True, doc_stride=8, max_query_length=8, n_best_size=5),
        {},
        {"question": ["Who was rich?", "", "Whose evils?", "東京?"], "context": TEXTS},
    ),
    "tagger": (dict(labels=["O", "B-PER", "I-PER", "B-LOC"], doc_stride=6), {}, {"text": TEXTS}),
    # run_ner.py --feature_layers: the frozen encoder's layers through a BiLSTM (Keras' LSTM loop).
    "feature_tagger": (
        dict(labels=["O", "B-PER"], doc_stride=6, feature_layers="weighted_sum_all", lstm_size=8),
        {},
        {"text": TEXTS},
    ),
    "embedding": (dict(pooling="mean", normalize=True), {}, {"text_a": TEXTS, "text_b": TEXTS_B}),
    "multiple_choice": (
        dict(),
        {},
        {
            "context": TEXTS[:3],
            "choices": [["She smiled.", "", "He left."]] + [TEXTS_B[:3]] * 2,
        },
    ),
}
KINDS.update(
    # export_saved_model.py --mixed_precision=mixed_bfloat16: kernels and embeddings stored in bfloat16.
    encoder_bfloat16=(dict(), {}, {"text_a": TEXTS, "text_b": TEXTS_B}),
    classifier_bfloat16=(dict(labels=["neg", "pos"]), {}, {"text_a": TEXTS, "text_b": TEXTS_B}),
)
MODEL_TYPES = {
    "classifier_pair": "classifier",
    "classifier_windows": "classifier",
    "multi_label_windows": "multi_label",
    "encoder_bfloat16": "encoder",
    "classifier_bfloat16": "classifier",
}
BFLOAT16_KINDS = ("encoder_bfloat16", "classifier_bfloat16")

# Run by each runtime's python, in isolated mode (-I: no PYTHONPATH, so no bert_tf): loads every
# export, calls its raw-string signatures, then each id signature on its preprocess's outputs.
# Errors are recorded per export and signature, so one report names every failure.
_CALL_EVERY_EXPORT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text
    assert "bert_tf" not in sys.modules

    def encode(value):
        value = value.numpy()
        if value.dtype == object:
            data = [item.hex() for item in value.reshape(-1)]
        else:
            data = value.reshape(-1).tolist()
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": data}

    def call(signature, inputs):
        kwargs = {name: tf.constant(value, spec.dtype) for name, value in inputs.items()
                  for spec in [signature.structured_input_signature[1][name]]}
        return signature(**kwargs)

    exports = json.load(open(sys.argv[1]))
    report = {"tensorflow": tf.__version__, "tensorflow_text": tensorflow_text.__version__}
    for kind, export in sorted(exports.items()):
        results = report[kind] = {}
        try:
            signatures = tf.saved_model.load(export["path"]).signatures
        except Exception as error:
            results["load"] = {"error": f"{type(error).__name__}: {str(error)[:1500]}"}
            continue
        outputs = {}
        for raw in (True, False):
            for name in sorted(signatures):
                specs = signatures[name].structured_input_signature[1]
                if all(spec.dtype == tf.string for spec in specs.values()) != raw:
                    continue
                try:
                    if raw:
                        inputs = {key: export["inputs"][key] for key in specs}
                    else:
                        sources = [s for s in ("preprocess_pair", "preprocess")
                                   if s in outputs and set(specs) <= set(outputs[s])]
                        if not sources:
                            raise RuntimeError("no preprocess outputs to call it on")
                        inputs = {key: outputs[sources[0]][key] for key in specs}
                    outputs[name] = call(signatures[name], inputs)
                    results[name] = {key: encode(v) for key, v in outputs[name].items()}
                except Exception as error:
                    results[name] = {"error": f"{type(error).__name__}: {str(error)[:1500]}"}
    json.dump(report, open(sys.argv[2], "w"))
    """
)


def _write_exports(folder):
    """Every kind, a random tiny model each (seeded), exported under this TensorFlow."""
    config = BertConfig.from_json_file(str(SAMPLE_DIR / "bert_config_tiny.json"))
    exports = {}
    for seed, (kind, (settings, options, inputs)) in enumerate(KINDS.items()):
        model_type = MODEL_TYPES.get(kind, kind)
        info = TaskInfo(model_type=model_type, bert_config=config, max_seq_length=24, **settings)
        keras.utils.set_random_seed(seed)
        spec = TASKS[model_type]
        policy = "mixed_bfloat16" if kind in BFLOAT16_KINDS else "float32"
        model = build_with_policy(lambda: spec.build_model(config, info), policy)  # noqa: B023
        model(model.dummy_inputs())
        if kind in BFLOAT16_KINDS:
            assert store_in_compute_dtype(model) > 0
        path = spec.export_model(model, info, VOCAB, str(folder / kind), **options)
        exports[kind] = {"path": path, "inputs": inputs}
    return exports


def _start(python, exports_file, report_file):
    return subprocess.Popen(
        [python, "-I", "-c", _CALL_EVERY_EXPORT, exports_file, report_file],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""},
        cwd=tempfile.gettempdir(),
    )  # fmt: skip


def _report(process, report_file, timeout=600):
    """The runner's report; a hang or a crash fails with the process's stderr (~20 s of CPU each;
    the timeout leaves room for a loaded machine)."""
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"the runtime's process did not finish in {timeout} s")
    assert process.returncode == 0, stderr[-3000:]
    with open(report_file) as file:
        return json.load(file)


def _decode(encoded):
    if encoded["dtype"] == "object":
        values = [bytes.fromhex(item) for item in encoded["values"]]
        return np.array(values, dtype=object).reshape(encoded["shape"])
    return np.array(encoded["values"], dtype=encoded["dtype"]).reshape(encoded["shape"])


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{runtime: report} for this TensorFlow ("tf2.21") and every runtime of serving_envs."""
    pythons = {}
    for name in serving_envs.RUNTIMES:
        try:
            pythons[name] = str(serving_envs.ensure(name))
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            message = f"serving runtime {name} could not be built: {error}"
            if MUST_RUN:
                pytest.fail(message)
            pytest.skip(message)
    folder = tmp_path_factory.mktemp("exports")
    exports_file = str(folder / "exports.json")
    with open(exports_file, "w") as file:
        json.dump(_write_exports(folder), file)
    pythons["tf2.21"] = sys.executable
    processes = {
        name: _start(python, exports_file, str(folder / f"{name}.json"))
        for name, python in pythons.items()
    }
    try:
        return {
            name: _report(process, str(folder / f"{name}.json"))
            for name, process in processes.items()
        }
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate()


def _errors(report):
    return {
        f"{kind} {signature}": result["error"]
        for kind in KINDS
        for signature, result in report[kind].items()
        if "error" in result
    }


def test_this_tensorflow_serves_every_signature_of_every_kind(reports):
    report = reports["tf2.21"]
    assert report["tensorflow"] == tf.__version__
    assert not _errors(report)
    for kind, (_, _, inputs) in KINDS.items():
        raw = {"serving_default", "preprocess"} | (
            {"preprocess_pair"} if "text_b" in inputs else set()
        )
        assert raw | {"serve_ids"} <= set(report[kind]), kind


@pytest.mark.parametrize(
    "runtime, versions", [("tf2.20", ("2.20.0", "2.20.0")), ("tf2.12", ("2.12.1", "2.12.1"))]
)
def test_every_kind_answers_the_same_on_tf_serving_s_runtime(reports, runtime, versions):
    report, expected = reports[runtime], reports["tf2.21"]
    assert (report["tensorflow"], report["tensorflow_text"]) == versions
    assert not _errors(report), json.dumps(_errors(report), indent=1)
    for kind in KINDS:
        assert sorted(report[kind]) == sorted(expected[kind]), kind
        for signature, outputs in expected[kind].items():
            served = report[kind][signature]
            assert sorted(served) == sorted(outputs), (kind, signature)
            for name, value in outputs.items():
                where = f"{kind} {signature} {name}"
                actual, value = _decode(served[name]), _decode(value)
                assert (actual.dtype, actual.shape) == (value.dtype, value.shape), where
                if value.dtype.kind == "f" and kind in BFLOAT16_KINDS:
                    # Measured: equal on 2.20; on 2.12 0.3% of the encoder's outputs one bfloat16
                    # step apart (at most 0.0078 at 1.5, 2^-8 relative): its kernels round some
                    # sums differently. Twice that step, not a float32 bound.
                    np.testing.assert_allclose(actual, value, rtol=2**-6, atol=2**-8, err_msg=where)
                elif value.dtype.kind == "f":
                    # Measured: equal on 2.20, within 2 float32 steps of the largest value on
                    # 2.12; per element, since SQuAD's null_score_diff holds a 1e6 sentinel.
                    np.testing.assert_allclose(
                        actual, value, rtol=16 * FLOAT32_EPS, atol=1e-5, err_msg=where
                    )
                else:
                    np.testing.assert_array_equal(actual, value, err_msg=where)
