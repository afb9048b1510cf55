"""export_saved_model.py --mixed_precision: a bfloat16 (or float16) inference export of a checkpoint serves
the same signatures, inputs and float32 outputs as its float32 export, with probabilities within the
rounding of the narrower type, in a process that imports only tensorflow and tensorflow_text.

The checkpoint is an original run_classifier.py one: the TF1 fixture encoder (2 layers, hidden 48) plus
a 3-label head (output_weights [3, 48], output_bias [3]); its float32 export is the reference.
"""

import json
import os
import subprocess
import sys
import textwrap
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.tasks import run_script
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint

from conftest import REPO_DIR, SUBPROCESS_ENV
from conftest import W_WORDS as WORDS

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
CAST_PER_CALL = "mixed_bfloat16, float32 kernels cast per call"


@pytest.fixture(scope="module")
def exports(google_ckpt_dir, w_vocab_file, tmp_path_factory):
    """{policy: version folder}: the same classifier checkpoint exported under each policy."""
    folder = tmp_path_factory.mktemp("classifier")
    reader = tf.train.load_checkpoint(str(google_ckpt_dir / "bert_model.ckpt"))
    tensors = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    rng = np.random.default_rng(0)
    # A head of a trained classifier's scale: logits of a few units, so probabilities spread out.
    tensors["output_weights"] = rng.normal(0.0, 0.3, [3, 48]).astype(np.float32)
    tensors["output_bias"] = np.float32([0.1, 0.0, -0.1])
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=str(folder / "bert_model.ckpt"), tensor_names=names,
        shape_and_slices=[""] * len(names), tensors=[tf.constant(tensors[n]) for n in names],
    )  # fmt: skip
    (folder / "bert_config.json").write_text((google_ckpt_dir / "bert_config.json").read_text())
    vocab = w_vocab_file
    paths = {}
    for policy in POLICIES:
        config = ExportSettings(
            init_checkpoint=str(folder / "bert_model.ckpt"), vocab_file=str(vocab),
            export_dir=str(folder / f"export_{policy}"), max_seq_length=24, mixed_precision=policy,
        )  # fmt: skip
        paths[policy] = export_checkpoint(config)
        # The policy the model was built under does not stay set for the rest of the process.
        assert keras.config.dtype_policy().name == "float32"
    # The bfloat16 export as it was before its kernels were stored in bfloat16: cast on every call.
    config.export_dir, config.mixed_precision = str(folder / "export_cast"), "mixed_bfloat16"
    with mock.patch("bert_tf.tasks.exporting.store_in_compute_dtype", lambda model: 0):
        paths[CAST_PER_CALL] = export_checkpoint(config)
    return paths


_LOAD_AND_RUN = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    paths, texts_a, texts_b = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])

    def spec(s):
        return [s.dtype.name, None if s.shape.rank is None else s.shape.as_list()]

    result = {}
    for policy, path in paths.items():
        signatures = tf.saved_model.load(path).signatures
        served = signatures["serving_default"](text_a=tf.constant(texts_a), text_b=tf.constant(texts_b))
        result[policy] = {
            "inputs": {n: {k: spec(s) for k, s in f.structured_input_signature[1].items()}
                       for n, f in signatures.items()},
            "outputs": {n: {k: spec(s) for k, s in f.structured_outputs.items()}
                        for n, f in signatures.items()},
            "served": {k: [v.dtype.name, v.numpy().tolist()] for k, v in served.items()},
        }
    print(json.dumps(result, default=lambda b: b.decode()))
    """
)


@pytest.fixture(scope="module")
def served(exports):
    """Each export's signatures and its serving_default outputs on 64 random text pairs, from a
    process that imports only tensorflow and tensorflow_text."""
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(WORDS, rng.integers(1, 14))) for _ in range(64)]
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_RUN, json.dumps(exports), json.dumps(texts),
         json.dumps(texts[::-1])],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_mixed_exports_keep_the_float32_exports_signatures(served):
    reference = served["float32"]
    assert set(reference["outputs"]) >= {"serving_default", "preprocess", "serve_ids"}
    assert reference["outputs"]["serving_default"] == {
        "probabilities": ["float32", [None, 3]], "label": ["string", [None]],
    }  # fmt: skip
    for policy in ("mixed_bfloat16", "mixed_float16"):
        assert served[policy]["inputs"] == reference["inputs"], policy
        assert served[policy]["outputs"] == reference["outputs"], policy
        assert served[policy]["served"]["probabilities"][0] == "float32", policy


def _probabilities(served, policy):
    return np.array(served[policy]["served"]["probabilities"][1], np.float64)


def test_bfloat16_probabilities_are_float32_ones_within_bfloat16_rounding(served):
    reference, bf16 = _probabilities(served, "float32"), _probabilities(served, "mixed_bfloat16")
    assert reference.shape == (64, 3)
    error = np.abs(bf16 - reference)
    # bfloat16 keeps 8 significant bits (eps 2^-8 = 0.4%) and every matmul, GELU and softmax of the 2
    # layers rounds to it. The fixture's weights (up to |2.2|) amplify that: the encoder's outputs are
    # off by 1.7% (rms) after layer 0 and 3.5% after layer 1, so logits of a few units move by up to
    # ~0.3. Measured on these 64 pairs: mean 0.010, 95th percentile 0.034, max 0.144 (float16: 0.0014,
    # 0.0059, 0.0145); the bounds are about twice that.
    assert error.mean() < 0.02 and np.quantile(error, 0.95) < 0.06 and error.max() < 0.25, error
    # bfloat16 ran: not the float32 numbers...
    assert not np.array_equal(bf16, reference)
    # ...and what differs is rounding: float16 (11 significant bits, 8x finer) errs several times less.
    float16_error = np.abs(_probabilities(served, "mixed_float16") - reference)
    assert float16_error.mean() < error.mean() / 3 and float16_error.max() < error.max() / 2
    # Where float32's top two probabilities are well apart, both exports name the same label.
    top_two = np.sort(reference, axis=1)[:, -2:]
    clear = top_two[:, 1] - top_two[:, 0] > 0.3
    assert clear.sum() >= 32
    labels = {p: np.array(served[p]["served"]["label"][1]) for p in ("float32", "mixed_bfloat16")}
    np.testing.assert_array_equal(labels["mixed_bfloat16"][clear], labels["float32"][clear])
    assert set(labels["float32"]) <= {"0", "1", "2"}


def _variable_dtypes(path):
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    shapes = reader.get_variable_to_shape_map()
    return {name: (dtype.name, tuple(shapes[name])) for name, dtype in
            reader.get_variable_to_dtype_map().items() if "VARIABLE_VALUE" in name}  # fmt: skip


def test_bfloat16_export_stores_kernels_and_embeddings_in_bfloat16_with_identical_outputs(
    exports, served
):
    # The fixture: 2 layers of q, k, v, attention output, intermediate and output kernels, the
    # pooler's, and the word (101 x 48), token-type and position tables, now stored in bfloat16.
    stored = _variable_dtypes(exports["mixed_bfloat16"])
    bf16 = sorted(shape for dtype, shape in stored.values() if dtype == "bfloat16")
    tables = [(2, 48), (40, 48), (101, 48)]
    assert bf16 == sorted([(48, 48)] * 9 + [(48, 96)] * 2 + [(96, 48)] * 2 + tables), bf16
    # Biases, LayerNorm and the classifier's head stay float32, and no float32 copy is left behind.
    float32 = [shape for dtype, shape in stored.values() if dtype == "float32"]
    assert (3, 48) in float32 and (48,) in float32 and not set(bf16) & set(float32), float32
    assert len(stored) == len(_variable_dtypes(exports[CAST_PER_CALL]))
    assert all(d != "bfloat16" for d, _ in _variable_dtypes(exports[CAST_PER_CALL]).values())
    # The same rounding, done once: bit-identical outputs.
    for key in ("probabilities", "label"):
        assert served["mixed_bfloat16"]["served"][key] == served[CAST_PER_CALL]["served"][key], key


def test_a_bad_mixed_precision_is_a_one_line_error_naming_the_flag(
    google_ckpt_dir, w_vocab_file, tmp_path
):
    vocab = w_vocab_file
    config = ExportSettings(
        init_checkpoint=str(google_ckpt_dir / "bert_model.ckpt"), vocab_file=str(vocab),
        export_dir=str(tmp_path / "export"), mixed_precision="bfloat16",
    )  # fmt: skip
    with pytest.raises(InputError, match="--mixed_precision .*'bfloat16'"):
        export_checkpoint(config)
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_DIR, "export_saved_model.py"),
         f"--init_checkpoint={google_ckpt_dir / 'bert_model.ckpt'}", f"--vocab_file={vocab}",
         f"--export_dir={tmp_path / 'export'}", "--mixed_precision=bf16"],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "--mixed_precision" in line]
    assert len(errors) == 1 and "bf16" in errors[0] and "mixed_bfloat16" in errors[0], result.stderr
    assert not (tmp_path / "export").exists()


def test_a_bfloat16_run_s_export_is_export_saved_model_s_export_of_its_checkpoint(tmp_path):
    """run_classifier.py --mixed_precision=mixed_bfloat16 --export_dir stores the kernels in bfloat16
    as export_saved_model.py does: the same variables, dtypes and outputs, bit for bit."""
    from test_run_classifier import tsv_config, write_sentiment_tsv

    from bert_tf.tasks.classification.task import SPEC

    sentences = write_sentiment_tsv(
        tmp_path / "data", sizes=(("train", 64), ("dev", 8), ("test", 16))
    )
    config = tsv_config(
        tmp_path / "data", tmp_path / "out", do_train=True, num_train_epochs=1.0,
        mixed_precision="mixed_bfloat16", export_dir=str(tmp_path / "run_export"),
    )  # fmt: skip
    run_export = run_script(SPEC, config)["export"]
    script_export = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(tmp_path / "out"),
            vocab_file=config.vocab_file,
            export_dir=str(tmp_path / "script_export"),
            mixed_precision="mixed_bfloat16",
        )  # fmt: skip
    )
    assert keras.config.dtype_policy().name == "float32"
    stored = _variable_dtypes(run_export)
    assert sorted(stored.values()) == sorted(_variable_dtypes(script_export).values())
    # The tiny config's 2 layers: 6 kernels each, the pooler's and 3 embedding tables in bfloat16.
    assert sum(dtype == "bfloat16" for dtype, _ in stored.values()) == 2 * 6 + 1 + 3, stored
    text = tf.constant(sentences)
    served = [
        tf.saved_model.load(path).signatures["serving_default"](text_a=text)
        for path in (run_export, script_export)
    ]
    np.testing.assert_array_equal(served[0]["probabilities"], served[1]["probabilities"])
    np.testing.assert_array_equal(served[0]["label"], served[1]["label"])
