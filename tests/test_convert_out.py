"""convert_checkpoint.py --output_format=huggingface: every head against transformers, without torch.

transformers' and sentence-transformers' outputs for the folders written from tests/convert_out_models.py's
tiny models are recorded once in tests/fixtures/huggingface_heads/outputs.npz
(make_huggingface_heads_outputs.py). Here each folder is written again and checked to hold exactly the
model's weights (so it is the file transformers ran), and the model's own outputs are checked against
transformers'; the pretraining model also against the original TF1 code's (google_ckpt_tiny/reference.npz).
"""

import dataclasses
import json
import math
import os
import shutil

import convert_out_models as models
import numpy as np
import pytest
from safetensors.numpy import load_file

from bert_tf.checkpoints import (
    google_variable_names,
    restore_init_checkpoint,
    save_google_checkpoint,
)
from bert_tf.errors import InputError
from bert_tf.formats.convert import ConvertSettings, convert, google_values_from_hf, run
from bert_tf.modeling import BertModel, BertPretrainingModel
from bert_tf.models.networks.embedder_network import pool
from bert_tf.tasks import run_script
from bert_tf.tokenization import FullTokenizer

HF_FILES = [
    "config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "vocab.txt",
]
ST_FILES = ["1_Pooling", "modules.json", "sentence_bert_config.json"]
ARCHITECTURES = {
    "classifier": "BertForSequenceClassification",
    "regression": "BertForSequenceClassification",
    "multi_label": "BertForSequenceClassification",
    "tagger": "BertForTokenClassification",
    "squad": "BertForQuestionAnswering",
    "multiple_choice": "BertForMultipleChoice",
}
PROBLEM_TYPES = {
    "classifier": "single_label_classification",
    "regression": "regression",
    "multi_label": "multi_label_classification",
}


@pytest.fixture(scope="module")
def recorded():
    with np.load(models.OUTPUTS) as outputs:
        return {name: outputs[name] for name in outputs.files}


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return models.write_vocab(tmp_path_factory.mktemp("vocab"))


def export(checkpoint, vocab, output_dir, **flags):
    run(
        ConvertSettings(
            init_checkpoint=str(checkpoint),
            vocab_file=vocab,
            output_format="huggingface",
            output_dir=str(output_dir),
            **flags,
        )
    )
    return output_dir


def assert_holds_the_weights(folder, model, pooler=True):
    """model.safetensors holds exactly `model`'s weights, read back by convert.py's import (without
    the [CLS] pooler, which transformers' token classifier and question answering do not build)."""
    tensors = load_file(str(folder / "model.safetensors"))
    targets = {
        name: variable
        for name, variable in google_variable_names(model).items()
        if pooler or not name.startswith("bert/pooler/")
    }
    values, unused = google_values_from_hf(tensors, targets, "model.safetensors")
    assert unused == []
    for name, variable in targets.items():
        np.testing.assert_array_equal(values[name], variable.numpy(), err_msg=name)


@pytest.mark.parametrize("case", sorted(models.TASK_CASES))
def test_each_head_loads_in_transformers_with_the_model_s_outputs(case, recorded, vocab, tmp_path):
    model, checkpoint = models.write_task_checkpoint(case, tmp_path / "run")
    folder = export(checkpoint, vocab, tmp_path / "hf")
    assert sorted(os.listdir(folder)) == HF_FILES
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [ARCHITECTURES[case]]
    assert config["hidden_act"] == "gelu_new"  # the original's tanh GELU, by transformers' name
    assert config.get("problem_type") == PROBLEM_TYPES.get(case)
    labels = models.TASK_CASES[case].get("labels")
    if labels:
        assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
        assert config["label2id"] == {label: i for i, label in enumerate(labels)}
    else:
        assert "id2label" not in config
    if case == "regression":
        assert config["num_labels"] == 1
    assert_holds_the_weights(folder, model, pooler=case not in ("tagger", "squad"))
    # Two float32 implementations of the same weights: measured 1.4e-5 at most on logits up to 12 (1.1e-5
    # at padding positions); a swapped or untransposed weight, a wrong activation or a freshly
    # initialized head moves logits by 1e-2 or more.
    inputs = models.reference_inputs()
    ours, theirs = models.task_logits(model, case, inputs), recorded[f"{case}_logits"]
    if case in ("tagger", "squad"):  # a logit per position: padding positions are ill-conditioned
        real = inputs["input_mask"].astype(bool)  # [B, S]
        if case == "squad":
            real = np.stack([real, real])
        np.testing.assert_allclose(ours[~real], theirs[~real], rtol=0, atol=2e-4)
        ours, theirs = ours[real], theirs[real]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=5e-5)


def test_a_google_checkpoint_with_both_heads_is_bert_for_pretraining_with_the_original_s_outputs(
    recorded, vocab, tmp_path
):
    folder = export(models.GOOGLE_CKPT_DIR, vocab, tmp_path / "hf")
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"]
    model = BertPretrainingModel(models.bert_config())
    restore_init_checkpoint(model, str(models.GOOGLE_CKPT_DIR / "bert_model.ckpt"))
    assert_holds_the_weights(folder, model)
    tensors = load_file(str(folder / "model.safetensors"))
    assert "cls.predictions.decoder.weight" not in tensors  # tied, as transformers saves it
    with np.load(models.GOOGLE_CKPT_DIR / "reference.npz") as reference:
        real = reference["input_mask"].astype(bool)
        # transformers on the written folder against the original TF1 code: measured 1.4e-5 at most.
        np.testing.assert_allclose(
            recorded["pretraining_sequence_output"][real],
            reference["sequence_output"][real],
            rtol=0,
            atol=1e-4,
        )
        for name in ("masked_lm_log_probs", "next_sentence_log_probs"):
            np.testing.assert_allclose(
                recorded[f"pretraining_{name}"], reference[name], rtol=0, atol=1e-4, err_msg=name
            )


@pytest.fixture(scope="module")
def encoder():
    model = BertModel(models.bert_config())
    restore_init_checkpoint(model, str(models.GOOGLE_CKPT_DIR / "bert_model.ckpt"))
    return model


def test_an_encoder_release_is_a_bert_model_without_prefix(encoder, recorded, vocab, tmp_path):
    release = models.write_embedding_release(tmp_path / "release", encoder)
    os.remove(release / "embedding.json")
    folder = export(release, vocab, tmp_path / "hf")
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["BertModel"]
    assert all(
        not name.startswith("bert.") for name in load_file(str(folder / "model.safetensors"))
    )
    assert_holds_the_weights(folder, encoder)
    outputs = encoder(models.reference_inputs(), training=False)
    real = models.reference_inputs()["input_mask"].astype(bool)
    np.testing.assert_allclose(
        outputs["sequence_output"].numpy()[real],
        recorded["encoder_sequence_output"][real],
        rtol=0,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        outputs["pooled_output"].numpy(), recorded["encoder_pooled_output"], rtol=0, atol=1e-5
    )


def test_an_embedding_model_is_a_sentence_transformers_folder(encoder, recorded, vocab, tmp_path):
    release = models.write_embedding_release(tmp_path / "release", encoder)
    folder = export(release, vocab, tmp_path / "hf")
    assert sorted(os.listdir(folder)) == sorted(HF_FILES + ST_FILES)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert tokenizer_config["do_lower_case"] is True  # embedding.json's
    assert tokenizer_config["model_max_length"] == 16
    assert tokenizer_config["split_special_tokens"] is True  # "[SEP]" in a text is text, as ours
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] is True
    # transformers' fast tokenizer gave FullTokenizer's ids ("W7" lower-cased too).
    assert str(recorded["tokenizer_class"]) == "BertTokenizer"
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    input_ids = np.zeros([len(models.EMBEDDING_TEXTS), 16], np.int32)
    for i, text in enumerate(models.EMBEDDING_TEXTS):
        row = tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(text), "[SEP]"])
        input_ids[i, : len(row)] = row
    np.testing.assert_array_equal(input_ids, recorded["embedding_input_ids"])
    input_mask = (input_ids != 0).astype(np.int32)
    sequence_output = encoder({"input_ids": input_ids, "input_mask": input_mask})["sequence_output"]
    ours = pool(sequence_output, input_mask, "mean", normalize=True).numpy()
    # Unit vectors: two float32 implementations, measured below 1e-6 apart.
    np.testing.assert_allclose(ours, recorded["embeddings"], rtol=0, atol=1e-5)


def test_minilm_round_trips_hugging_face_to_ours_and_back_bit_for_bit(minilm_dir, tmp_path):
    convert(str(minilm_dir), str(tmp_path / "google"))
    folder = export(tmp_path / "google", str(tmp_path / "google" / "vocab.txt"), tmp_path / "hf")
    original = load_file(str(minilm_dir / "model.safetensors"))
    written = load_file(str(folder / "model.safetensors"))
    assert set(original) - set(written) == {"embeddings.position_ids"}  # a buffer, not a weight
    assert set(written) <= set(original)
    for name, value in written.items():
        assert value.dtype == original[name].dtype and value.shape == original[name].shape, name
        assert value.tobytes() == original[name].tobytes(), name
    # The sentence-transformers modules come back too: mean pooling, normalized, 256 pieces.
    modules = json.loads((folder / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == 256
    assert json.loads((folder / "tokenizer_config.json").read_text())["do_lower_case"] is True


def _release_with_task(tmp_path, task):
    folder = tmp_path / "run"
    shutil.copytree(models.GOOGLE_CKPT_DIR, folder)
    (folder / "task.json").write_text(json.dumps(task))
    return folder


@pytest.mark.parametrize(
    "task, reason",
    [
        ({"model_type": "feature_tagger", "labels": ["O", "B-PER"]}, "BiLSTM"),
        (
            {"model_type": "classifier", "labels": ["a", "b"], "classifier": {"doc_stride": 64}},
            "--doc_stride",
        ),
    ],
)
def test_a_head_transformers_cannot_express_is_refused_in_one_line_before_writing(
    task, reason, vocab, tmp_path
):
    folder = _release_with_task(tmp_path, task)
    with pytest.raises(InputError, match=reason) as error:
        export(folder, vocab, tmp_path / "hf")
    assert "\n" not in str(error.value) and "cannot be converted" in str(error.value)
    assert not (tmp_path / "hf").exists()
    assert sorted(os.listdir(tmp_path)) == ["run"]  # no temporary folder either


def test_the_direction_follows_the_input_flag_and_flags_are_checked(vocab, tmp_path):
    with pytest.raises(InputError, match="--hf_model_dir is required"):
        run(ConvertSettings(output_dir=str(tmp_path / "out")))
    with pytest.raises(InputError, match="pass --output_format=huggingface or keras_hub"):
        run(
            ConvertSettings(
                init_checkpoint=str(models.GOOGLE_CKPT_DIR),
                output_format="google",
                output_dir=str(tmp_path),
            )
        )
    # --init_checkpoint alone converts out (huggingface); the release folder has no vocab.txt.
    with pytest.raises(InputError, match="--vocab_file is required: no vocab.txt beside "):
        run(
            ConvertSettings(
                init_checkpoint=str(models.GOOGLE_CKPT_DIR), output_dir=str(tmp_path / "o")
            )
        )
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(InputError, match="--overwrite"):
        export(models.GOOGLE_CKPT_DIR, vocab, tmp_path / "full")


def test_a_run_dir_alone_gives_the_vocabulary_casing_and_config(vocab, tmp_path):
    _, run_dir = models.write_task_checkpoint("classifier", tmp_path / "run")
    shutil.copyfile(vocab, run_dir / "vocab.txt")
    info = {**json.loads((run_dir / "task.json").read_text()), "do_lower_case": False}
    (run_dir / "task.json").write_text(json.dumps(info))  # a cased run: not the default casing
    run(ConvertSettings(init_checkpoint=str(run_dir), output_dir=str(tmp_path / "hf")))
    folder = tmp_path / "hf"
    assert (folder / "vocab.txt").read_text() == (run_dir / "vocab.txt").read_text()
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["hidden_size"] == info["bert_config"]["hidden_size"]
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    assert tokenizer["do_lower_case"] is False


# --- A run of run_classifier.py, end to end -------------------------------------------------------


def hf_classifier_probabilities(folder, input_ids, segment_ids, input_mask):
    """Softmax of BertForSequenceClassification's logits, transcribed in float64 numpy from the folder's
    config.json and model.safetensors: x @ W.T + b, GELU by config.json's hidden_act, LayerNorm 1e-12."""
    config = json.loads((folder / "config.json").read_text())
    w = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    gelus = {
        "gelu_new": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
        "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    }
    gelu = gelus[config["hidden_act"]]

    def linear(x, name):
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def layer_norm(x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]

    batch, seq = input_ids.shape
    heads = config["num_attention_heads"]
    x = layer_norm(
        w["bert.embeddings.word_embeddings.weight"][input_ids]
        + w["bert.embeddings.position_embeddings.weight"][:seq]
        + w["bert.embeddings.token_type_embeddings.weight"][segment_ids],
        "bert.embeddings.LayerNorm",
    )
    mask_bias = (1.0 - input_mask[:, None, None, :]) * -1e30  # [B, 1, 1, S]
    for i in range(config["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}"
        q, k, v = (
            linear(x, f"{p}.attention.self.{n}")
            .reshape(batch, seq, heads, -1)
            .transpose(0, 2, 1, 3)
            for n in ("query", "key", "value")
        )  # [B, N, S, D]
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + mask_bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        context = (probs / probs.sum(-1, keepdims=True)) @ v
        context = context.transpose(0, 2, 1, 3).reshape(batch, seq, -1)
        x = layer_norm(
            linear(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm"
        )
        inner = gelu(linear(x, f"{p}.intermediate.dense"))
        x = layer_norm(linear(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    logits = linear(np.tanh(linear(x[:, 0], "bert.pooler.dense")), "classifier")
    logits = np.exp(logits - logits.max(-1, keepdims=True))
    return logits / logits.sum(-1, keepdims=True)


@pytest.mark.slow
def test_a_run_classifier_run_converts_to_a_folder_that_predicts_its_test_results(tmp_path):
    from bert_tf.tasks.classification.task import SPEC, ClassifierSettings

    from conftest import SAMPLE_DIR

    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    words = ["good", "bad", "film", "the", "was", "very", "Great", "awful", "plot", "actors"]
    for split, size in (("train", 48), ("test", 6)):
        rows = []
        for _ in range(size):
            text = " ".join(rng.choice(words, 6))
            rows.append(
                text if split == "test" else f"{text}\t{'pos' if 'good' in text else 'neg'}"
            )
        (data / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    run_script(SPEC,
        ClassifierSettings(
            bert_config_file=str(SAMPLE_DIR / "bert_config_tiny.json"),
            vocab_file=str(SAMPLE_DIR / "vocab.txt"), output_dir=str(tmp_path / "run"),
            task_name="tsv", data_dir=str(data), text_a_column="0", label_column="1",
            max_seq_length=16, train_batch_size=16, learning_rate=1e-3, num_train_epochs=1.0,
            do_train=True, do_predict=True, seed=1,
        )
    )  # fmt: skip
    folder = export(tmp_path / "run", str(SAMPLE_DIR / "vocab.txt"), tmp_path / "hf")
    config = json.loads((folder / "config.json").read_text())
    labels = (tmp_path / "run" / "labels.txt").read_text().split()
    assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert (tokenizer_config["do_lower_case"], tokenizer_config["model_max_length"]) == (True, 16)
    tokenizer = FullTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    texts = (data / "test.tsv").read_text().splitlines()
    input_ids = np.zeros([len(texts), 16], np.int64)
    for i, text in enumerate(texts):
        row = tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(text)[:14], "[SEP]"])
        input_ids[i, : len(row)] = row
    probabilities = hf_classifier_probabilities(
        folder, input_ids, np.zeros_like(input_ids), (input_ids != 0).astype(np.float64)
    )
    expected = np.loadtxt(tmp_path / "run" / "test_results.tsv", ndmin=2)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-4)  # float32 run, 6 digits


def test_the_tokenizer_casing_of_a_cased_google_release_comes_from_its_folder_name(vocab, tmp_path):
    release = tmp_path / "cased_L-12_H-768_A-12"
    shutil.copytree(models.GOOGLE_CKPT_DIR, release)
    folder = export(release, vocab, tmp_path / "hf")
    assert json.loads((folder / "tokenizer_config.json").read_text())["do_lower_case"] is False
    with pytest.raises(InputError, match="is the cased release"):
        export(release, vocab, tmp_path / "hf2", do_lower_case=True)
    assert not (tmp_path / "hf2").exists()


def test_a_checkpoint_with_the_masked_lm_head_alone_is_bert_for_masked_lm(vocab, tmp_path):
    # The ablation --objective=mlm: no next-sentence head, so BertForPreTraining cannot hold it.
    model = BertPretrainingModel(dataclasses.replace(models.bert_config(), objective="mlm"))
    restore_init_checkpoint(model, str(models.GOOGLE_CKPT_DIR / "bert_model.ckpt"))
    release = tmp_path / "release"
    release.mkdir()
    save_google_checkpoint(model, str(release / "bert_model.ckpt"))
    (release / "bert_config.json").write_text(models.bert_config().to_json_string())
    folder = export(release, vocab, tmp_path / "hf")
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    assert_holds_the_weights(folder, model, pooler=False)  # BertForMaskedLM has no pooler
    assert "bert.pooler.dense.weight" not in load_file(str(folder / "model.safetensors"))


def test_overwrite_replaces_a_sentence_transformers_folder_by_a_classifier_s(
    encoder, vocab, tmp_path
):
    release = models.write_embedding_release(tmp_path / "release", encoder)
    folder = export(release, vocab, tmp_path / "hf")
    (folder / "model.safetensors.index.json").write_text("{}")  # a sharded model's, stale
    _, checkpoint = models.write_task_checkpoint("classifier", tmp_path / "run")
    export(checkpoint, vocab, folder, overwrite=True)
    # No modules.json left behind to make the classifier's folder a sentence-transformers one, no
    # index naming shards that are not there: the folder is replaced whole.
    assert sorted(os.listdir(folder)) == sorted(HF_FILES)
    assert sorted(os.listdir(tmp_path)) == ["hf", "release", "run"]
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
