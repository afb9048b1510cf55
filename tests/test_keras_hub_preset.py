"""keras-hub BERT presets both ways (bert_tf/formats/keras_hub_preset.py).

In: tests/fixtures/keras_hub_bert_tiny/preset, written by keras-hub's own save_to_preset, with keras-hub's
BertBackbone outputs recorded beside it (make_keras_hub_preset.py): read without keras-hub. Out:
--output_format=keras_hub writes the preset with keras-hub, so those tests need it (skipped without).
"""

import json
import os
import shutil

import convert_out_models as models
import h5py
import numpy as np
import pytest

from bert_tf.checkpoints import google_variable_names, load_google_checkpoint
from bert_tf.errors import InputError
from bert_tf.formats.convert import ConvertSettings, convert, run
from bert_tf.formats.keras_hub_preset import read_preset
from bert_tf.modeling import BertConfig, BertModel
from bert_tf.tokenization import FullTokenizer

FIXTURE = models.FIXTURES_DIR / "keras_hub_bert_tiny"
PRESET = FIXTURE / "preset"


def assert_keras_hub_outputs(model, recorded, inputs):
    outputs = model(inputs, training=False)
    real = recorded["input_mask"].astype(bool)
    # Two float32 implementations: measured below 1e-6; a weight in the wrong place, an unreshaped
    # attention kernel or the erf GELU moves the outputs by 1e-3 or more.
    np.testing.assert_allclose(
        outputs["sequence_output"].numpy()[real], recorded["sequence_output"][real], atol=1e-5
    )
    np.testing.assert_allclose(
        outputs["pooled_output"].numpy(), recorded["pooled_output"], rtol=0, atol=1e-5
    )


def test_read_preset_gives_keras_hub_s_backbone_outputs_without_keras_hub(
    keras_hub_recorded, keras_hub_inputs
):
    bert_config, weights, vocab_path, do_lower_case = read_preset(str(PRESET))
    assert (bert_config.hidden_size, bert_config.num_hidden_layers) == (16, 2)
    assert bert_config.hidden_act == "gelu"  # keras-hub's tanh GELU
    assert do_lower_case is True
    assert vocab_path == os.path.join(str(PRESET), "assets", "tokenizer", "vocabulary.txt")
    model = BertModel(bert_config)
    targets = google_variable_names(model)
    assert sorted(weights) == sorted(targets)
    for name, variable in targets.items():
        variable.assign(weights[name])
    assert_keras_hub_outputs(model, keras_hub_recorded, keras_hub_inputs)
    # keras-hub's tokenizer of the preset gave FullTokenizer's ids.
    tokenizer = FullTokenizer(vocab_path, do_lower_case=do_lower_case)
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("W3 w4,w26"))
    np.testing.assert_array_equal(ids, keras_hub_recorded["text_ids"].reshape(-1))


def test_a_preset_converts_into_a_google_release(keras_hub_recorded, keras_hub_inputs, tmp_path):
    assert convert(str(PRESET), str(tmp_path / "release")) == []
    config = BertConfig.from_json_file(str(tmp_path / "release" / "bert_config.json"))
    model = BertModel(config)
    load_google_checkpoint(model, str(tmp_path / "release" / "bert_model.ckpt"))
    assert_keras_hub_outputs(model, keras_hub_recorded, keras_hub_inputs)


def test_a_preset_without_its_weights_is_one_line_naming_the_file(tmp_path):
    shutil.copytree(PRESET, tmp_path / "preset")
    os.remove(tmp_path / "preset" / "model.weights.h5")
    with pytest.raises(InputError, match=r"model\.weights\.h5 does not exist"):
        run(
            ConvertSettings(hf_model_dir=str(tmp_path / "preset"), output_dir=str(tmp_path / "out"))
        )
    assert not (tmp_path / "out").exists()


# --- Out: needs keras-hub -------------------------------------------------------------------------


def export(checkpoint, vocab, output_dir):
    run(
        ConvertSettings(
            init_checkpoint=str(checkpoint),
            vocab_file=vocab,
            output_format="keras_hub",
            output_dir=str(output_dir),
        )
    )
    return output_dir


@pytest.fixture(scope="module")
def keras_hub():
    return pytest.importorskip(
        "keras_hub", reason="--output_format=keras_hub writes with keras-hub"
    )


@pytest.mark.parametrize("case", ["classifier", "regression"])
def test_a_classifier_loads_as_bert_text_classifier_with_the_model_s_logits(
    case, keras_hub, tmp_path
):
    model, checkpoint = models.write_task_checkpoint(case, tmp_path / "run")
    vocab = models.write_vocab(tmp_path)
    folder = export(checkpoint, vocab, tmp_path / "preset")
    assert (folder / "task.json").is_file() and (folder / "assets" / "tokenizer").is_dir()
    classifier = keras_hub.models.BertTextClassifier.from_preset(str(folder))
    inputs = models.reference_inputs()
    keras_inputs = {
        "token_ids": inputs["input_ids"],
        "segment_ids": inputs["segment_ids"],
        "padding_mask": inputs["input_mask"].astype(bool),
    }
    logits = np.asarray(classifier(keras_inputs))  # the preprocessor runs in predict() only
    # measured 6e-6 on logits up to 4; a wrong head transpose or a fresh head is off by 1e-1.
    np.testing.assert_allclose(logits, models.task_logits(model, case, inputs), rtol=0, atol=2e-5)
    backbone = keras_hub.models.BertBackbone.from_preset(str(folder))
    pooled = backbone.predict(keras_inputs, verbose=0)["pooled_output"]
    ours = model.bert(inputs, training=False)["pooled_output"].numpy()
    np.testing.assert_allclose(pooled, ours, rtol=0, atol=1e-5)


def test_a_preset_round_trips_through_a_google_release_bit_for_bit(keras_hub, tmp_path):
    convert(str(PRESET), str(tmp_path / "release"))
    vocab = str(PRESET / "assets" / "tokenizer" / "vocabulary.txt")
    folder = export(tmp_path / "release", vocab, tmp_path / "preset")
    with (
        h5py.File(PRESET / "model.weights.h5") as original,
        h5py.File(folder / "model.weights.h5") as written,
    ):
        names = []
        original.visititems(
            lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None
        )
        assert len(names) == 5 + 16 * 2 + 2
        for name in names:
            assert written[name][()].tobytes() == original[name][()].tobytes(), name
    config = json.loads((folder / "tokenizer.json").read_text())["config"]
    assert config["lowercase"] is True and config["strip_accents"] is True


def test_a_head_keras_hub_has_no_class_for_is_refused_before_writing(tmp_path):
    _, checkpoint = models.write_task_checkpoint("squad", tmp_path / "run")
    vocab = models.write_vocab(tmp_path)
    with pytest.raises(InputError, match="keras-hub has no BERT class for a squad head"):
        export(checkpoint, vocab, tmp_path / "preset")
    assert not (tmp_path / "preset").exists()


def test_an_embedding_model_is_a_bert_text_embedder_with_sentence_transformers_embeddings(
    keras_hub, tmp_path
):
    encoder = BertModel(models.bert_config())
    load_google_checkpoint(
        encoder, str(models.GOOGLE_CKPT_DIR / "bert_model.ckpt"), allow_missing_heads=True
    )
    release = models.write_embedding_release(tmp_path / "release", encoder)
    folder = export(release, models.write_vocab(tmp_path), tmp_path / "preset")
    embedder = keras_hub.models.BertTextEmbedder.from_preset(str(folder))
    assert (embedder.pooling_mode, embedder.normalize) == ("mean", True)
    embeddings = embedder.predict(models.EMBEDDING_TEXTS, verbose=0)
    # sentence-transformers' embeddings of the same encoder (huggingface_heads/outputs.npz): unit
    # vectors, measured below 1e-6 apart; another pooling or no normalisation is off by 1e-1.
    with np.load(models.OUTPUTS) as recorded:
        np.testing.assert_allclose(embeddings, recorded["embeddings"], rtol=0, atol=1e-5)
