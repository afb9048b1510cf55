"""int8 weights on the task models (BertTask.quantize): against numpy's own dequantization of the stored
int8 kernels and scales, the float32 model's predictions, a `.keras` round trip and a TF-only process."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_lora import TEXTS, _write_base

from bert_tf import BertTextClassifier, BertTextEmbedder, BertTokenClassifier

from conftest import SUBPROCESS_ENV

# Two blocks of six projections, and the pooler.
ENCODER_KERNELS = 2 * 6 + 1
MORE_TEXTS = [
    f"the {a} was {b}"
    for a in ("lady", "man", "day", "film")
    for b in ("good", "sad", "long", "a b c", "x")
]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return _write_base(str(tmp_path_factory.mktemp("int8") / "base"), seed=1)


def _dense_layers(model):
    return [
        layer for layer in model.backbone._flatten_layers() if isinstance(layer, keras.layers.Dense)
    ]


def test_int8_kernels_dequantize_to_the_float_kernels_within_half_a_step(base):
    model = BertTextClassifier.from_preset(base, num_classes=3, max_seq_length=16)
    floats = {layer.path: layer.kernel.numpy() for layer in _dense_layers(model)}
    model.quantize("int8")
    layers = _dense_layers(model)
    assert len(layers) == ENCODER_KERNELS == len(floats)
    for layer in layers:
        stored, scale = layer._kernel.numpy(), layer.kernel_scale.numpy()  # [I, U] int8, [U]
        assert stored.dtype == np.int8 and scale.shape == (stored.shape[1],)
        kernel = floats[layer.path]
        # Symmetric per output column: the column's largest magnitude maps to 127 (Keras adds
        # 1e-7 to it, a 3e-6 relative change at these magnitudes).
        np.testing.assert_allclose(scale, 127 / np.abs(kernel).max(axis=0), rtol=1e-5)
        step = 1 / scale  # [U]
        error = np.abs(stored.astype(np.float64) / scale - kernel)
        assert np.all(error <= 0.5 * step * (1 + 1e-5)), layer.path


def test_int8_predictions_agree_with_float32(base):
    model = BertTextClassifier.from_preset(base, num_classes=3, max_seq_length=16)
    keras.utils.set_random_seed(2)
    model.fit(TEXTS, [0, 1, 2, 1, 0] * 4, batch_size=4, epochs=2, verbose=0)
    expected = model.predict(MORE_TEXTS, verbose=0)
    model.quantize("int8")  # after fit
    logits = model.predict(MORE_TEXTS, verbose=0)
    assert np.mean(logits.argmax(-1) == expected.argmax(-1)) >= 0.98
    assert 0 < np.abs(logits - expected).max() < 0.05


@pytest.mark.parametrize("kind", ["classifier", "tagger", "embedder"])
def test_keras_save_and_load_of_an_int8_model_predict_the_same(base, tmp_path, kind):
    model = {
        "classifier": lambda: BertTextClassifier.from_preset(base, num_classes=3),
        "tagger": lambda: BertTokenClassifier.from_preset(base, ["O", "X"]),
        "embedder": lambda: BertTextEmbedder.from_preset(base),
    }[kind]()
    model.quantize("int8")
    expected = model.predict(TEXTS, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert loaded.quantization == "int8"
    assert all(layer._kernel.dtype == "int8" for layer in _dense_layers(loaded))
    np.testing.assert_allclose(
        np.asarray(loaded.predict(TEXTS, verbose=0)), np.asarray(expected), rtol=0, atol=1e-6
    )


_SERVE = """
import sys, json
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text_a=tf.constant(json.loads(sys.argv[2])))
print(json.dumps(out["probabilities"].numpy().tolist()))
"""


def test_quantized_before_fit_exports_int8_weights_served_like_predict(base, tmp_path):
    model = BertTextClassifier.from_preset(base, num_classes=3, max_seq_length=16)
    model.quantize("int8")  # before fit: biases, LayerNorms, embeddings and the head train
    kernel = _dense_layers(model)[0]._kernel.numpy().copy()
    model.fit(TEXTS, [0, 1, 2, 1, 0] * 4, batch_size=4, epochs=1, verbose=0)
    assert np.array_equal(_dense_layers(model)[0]._kernel.numpy(), kernel)
    probabilities = tf.nn.softmax(model.predict(TEXTS, verbose=0)).numpy()
    model.export(tmp_path / "export")
    dtypes = tf.train.load_checkpoint(str(tmp_path / "export/variables/variables"))
    dtypes = dtypes.get_variable_to_dtype_map()
    int8 = [name for name, dtype in dtypes.items() if dtype == tf.int8]
    assert len(int8) == ENCODER_KERNELS
    env = {key: value for key, value in SUBPROCESS_ENV.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(tmp_path / "export"), json.dumps(TEXTS)],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path, check=True,
    )  # fmt: skip
    served = json.loads(result.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(served, probabilities, rtol=0, atol=1e-5)


def test_bad_quantize_calls_are_one_line(base):
    model = BertTextClassifier.from_preset(base, num_classes=3)
    with pytest.raises(ValueError, match=r"mode 'int4' is not supported; use one of \('int8',\)"):
        model.quantize("int4")
    model.quantize("int8")
    with pytest.raises(ValueError, match=r"already quantized \(int8\)"):
        model.quantize("int8")
