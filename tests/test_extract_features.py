"""extract_features.py: the original's JSON lines, values of the encoder's layers, pairs, edge lines, npz."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import load_google_checkpoint
from bert_tf.errors import InputError
from bert_tf.modeling import BertModel
from bert_tf.tasks.extract_features_run import extract_features, parse_layers
from bert_tf.tokenization import FullTokenizer

from conftest import REPO_DIR, assert_float32_close

WORDS = "the a cat dog sat on mat . , ! hello world emma is very happy".split()


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    """A 101-entry vocab for the fixture checkpoint (vocab_size 101): specials, words, pieces."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokens += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
    tokens += [c for c in "abcdefghijklmnopqrstuvwxyz" if c not in tokens]  # "a" is a word
    tokens += [f"w{i}" for i in range(101 - len(tokens))]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def model(config, ckpt_prefix):
    model = BertModel(config)
    load_google_checkpoint(model, ckpt_prefix)
    return model


LINES = [
    "Hello world, the cat sat on the mat!",
    "the dog ||| emma is very happy",
    "",
    " ".join(["cat"] * 60),  # longer than max_seq_length
]


@pytest.fixture
def input_file(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return str(path)


def _reference(model, tokenizer, text_a, text_b, max_seq_length, layer):
    """The tokens and the layer's output for one line, computed alone (no batch padding)."""
    tokens_a = tokenizer.tokenize(text_a)
    if text_b is None:
        tokens_a = tokens_a[: max_seq_length - 2]
        tokens, segments = ["[CLS]", *tokens_a, "[SEP]"], [0] * (len(tokens_a) + 2)
    else:
        tokens_b = tokenizer.tokenize(text_b)  # short pairs here: no truncation
        tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
        segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    ids = tf.constant([tokenizer.convert_tokens_to_ids(tokens)])
    out = model({"input_ids": ids, "segment_ids": tf.constant([segments])}, training=False)
    return tokens, out["encoder_outputs"][layer][0].numpy()


def test_json_lines_have_the_original_format_and_the_encoder_values(
    model, vocab_file, input_file, tmp_path
):
    tokenizer = FullTokenizer(vocab_file)
    output = tmp_path / "out.jsonl"
    assert extract_features(model, tokenizer, input_file, str(output), [-1, -2], 20, 3) == 4
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    assert list(records[0]) == ["linex_index", "features"]
    assert list(records[0]["features"][0]) == ["token", "layers"]
    assert [layer["index"] for layer in records[0]["features"][0]["layers"]] == [-1, -2]

    for record, line in zip(records, LINES, strict=True):
        text_a, _, text_b = line.partition(" ||| ")
        for position, layer in enumerate([-1, -2]):
            tokens, expected = _reference(model, tokenizer, text_a, text_b or None, 20, layer)
            assert [f["token"] for f in record["features"]] == tokens
            values = np.array([f["layers"][position]["values"] for f in record["features"]])
            # Batched with padding (float32 rounding only), then rounded to 6 decimals as the original.
            assert_float32_close(values, expected)
            np.testing.assert_array_equal(values, np.round(values, 6))
    assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]  # the empty line
    assert len(records[3]["features"]) == 20  # cut to max_seq_length, [CLS] and [SEP] kept
    assert records[3]["features"][-1]["token"] == "[SEP]"
    segment_b_tokens = [f["token"] for f in records[1]["features"]]
    assert segment_b_tokens.count("[SEP]") == 2


def test_npz_holds_the_same_values_unrounded(model, vocab_file, input_file, tmp_path):
    tokenizer = FullTokenizer(vocab_file)
    extract_features(model, tokenizer, input_file, str(tmp_path / "o.jsonl"), [-1], 20, 2)
    extract_features(model, tokenizer, input_file, str(tmp_path / "o.npz"), [-1], 20, 2, "npz")
    records = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    with np.load(tmp_path / "o.npz") as archive:
        offsets = archive["token_offsets"]
        np.testing.assert_array_equal(archive["linex_index"], [0, 1, 2, 3])
        for n, record in enumerate(records):
            rows = slice(offsets[n], offsets[n + 1])
            assert archive["tokens"][rows].tolist() == [f["token"] for f in record["features"]]
            values = np.array([f["layers"][0]["values"] for f in record["features"]])
            np.testing.assert_allclose(archive["layer_-1"][rows], values, rtol=0, atol=5.1e-7)
    assert sorted(os.listdir(tmp_path)) == [
        "input.txt",
        "o.jsonl",
        "o.npz",
    ]  # no temporary file left


def test_bad_input_names_the_file_and_line_and_writes_nothing(model, vocab_file, tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"input\.txt:2: not valid UTF-8"):
        extract_features(
            model, FullTokenizer(vocab_file), str(path), str(tmp_path / "o.jsonl"), [-1]
        )
    assert sorted(os.listdir(tmp_path)) == ["input.txt"]


def test_layers_flag_is_checked_against_the_model():
    assert parse_layers("-1,-2", 2) == [-1, -2]
    assert parse_layers("0,1", 2) == [0, 1]
    with pytest.raises(InputError, match="layer -3 does not exist"):
        parse_layers("-1,-3", 2)
    with pytest.raises(InputError, match="comma-separated"):
        parse_layers("last", 2)


def test_script_writes_the_features(google_ckpt_dir, vocab_file, input_file, tmp_path):
    output = tmp_path / "features.jsonl"
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "extract_features.py"),
            f"--input_file={input_file}", f"--output_file={output}", f"--vocab_file={vocab_file}",
            f"--bert_config_file={google_ckpt_dir / 'bert_config.json'}",
            f"--init_checkpoint={google_ckpt_dir / 'bert_model.ckpt'}",
            "--layers=-1", "--max_seq_length=20", "--batch_size=2",
        ],
        capture_output=True, text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(output.read_text().splitlines()) == len(LINES)
