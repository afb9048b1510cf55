"""`from_preset` of a keras-hub BERT preset folder (bert_tf.models.presets, kind "keras_hub").

Reference: tests/fixtures/keras_hub_bert_tiny, a preset keras-hub's own save_to_preset wrote, with
keras-hub's BertBackbone outputs and its tokenizer's ids recorded beside it (make_keras_hub_preset.py);
read here without keras-hub.
"""

import json
import os
import shutil

import numpy as np
import pytest

from bert_tf import BertMaskedLM, BertTextClassifier, BertTextEmbedder
from bert_tf.models import presets

from conftest import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "keras_hub_bert_tiny"
PRESET = FIXTURE / "preset"


@pytest.fixture(scope="module")
def classifier():
    return BertTextClassifier.from_preset(PRESET, num_classes=3)


def test_a_classifier_of_a_keras_hub_preset_has_keras_hub_s_backbone(
    classifier, keras_hub_recorded, keras_hub_inputs
):
    outputs = classifier.task_model.bert(keras_hub_inputs, training=False)
    real = keras_hub_recorded["input_mask"].astype(bool)
    # Two float32 implementations: measured below 1e-6; a weight in the wrong place moves them 1e-3.
    np.testing.assert_allclose(
        outputs["sequence_output"].numpy()[real],
        keras_hub_recorded["sequence_output"][real],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        outputs["pooled_output"].numpy(), keras_hub_recorded["pooled_output"], atol=1e-5
    )
    assert classifier.predict(["W3 w4,w26"], verbose=0).shape == (1, 3)


def test_the_preset_s_tokenizer_gives_keras_hub_s_ids(classifier, keras_hub_recorded):
    preprocessor = classifier.preprocessor
    assert preprocessor.do_lower_case is True
    assert preprocessor.max_seq_length == 12  # the backbone's positions, under the default 128
    ids = preprocessor.features(np.array(["W3 w4,w26"], dtype=object))["input_ids"].numpy()
    cls_id, sep_id = (preprocessor.vocabulary.index(token) for token in ("[CLS]", "[SEP]"))
    np.testing.assert_array_equal(ids[0], [cls_id, *keras_hub_recorded["text_ids"][0], sep_id])


def test_an_embedder_of_a_keras_hub_preset_pools_keras_hub_s_sequence_output(
    keras_hub_recorded, keras_hub_inputs
):
    embedder = BertTextEmbedder.from_preset(PRESET)
    vectors = embedder(keras_hub_inputs, training=False).numpy()
    mask = keras_hub_recorded["input_mask"][..., None].astype(np.float64)
    mean = (keras_hub_recorded["sequence_output"] * mask).sum(axis=1) / mask.sum(axis=1)
    np.testing.assert_allclose(
        vectors, mean / np.linalg.norm(mean, axis=1, keepdims=True), atol=1e-5
    )


def test_a_keras_hub_embedder_preset_s_pooling_is_read(
    keras_hub_recorded, keras_hub_inputs, tmp_path
):
    folder = tmp_path / "preset"
    shutil.copytree(PRESET, folder)
    # keras-hub's BertTextEmbedder.get_config: its pooling_mode and normalize.
    task = {"class_name": "BertTextEmbedder", "config": {"pooling_mode": "cls", "normalize": False}}
    (folder / "task.json").write_text(json.dumps(task))
    vectors = BertTextEmbedder.from_preset(folder)(keras_hub_inputs, training=False).numpy()
    np.testing.assert_allclose(vectors, keras_hub_recorded["sequence_output"][:, 0], atol=1e-5)


def test_a_keras_hub_task_preset_is_not_taken_for_a_run(tmp_path):
    folder = tmp_path / "preset"
    shutil.copytree(PRESET, folder)
    # keras-hub's task presets hold a task.json of their own, as a run's output_dir does.
    (folder / "task.json").write_text(
        json.dumps({"class_name": "BertTextClassifier", "config": {}})
    )
    assert presets.folder_kind(str(folder)) == "keras_hub"
    preset = presets.read_preset(folder)
    assert preset.checkpoint is None and preset.bert_config.num_hidden_layers == 2


def test_a_masked_lm_of_a_keras_hub_preset_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"keras-hub preset is read for its encoder only"):
        BertMaskedLM.from_preset(PRESET)


def test_a_keras_hub_preset_without_weights_names_the_file(tmp_path):
    folder = tmp_path / "preset"
    shutil.copytree(PRESET, folder)
    os.remove(folder / "model.weights.h5")
    with pytest.raises(ValueError, match=r"model\.weights\.h5 does not exist"):
        BertTextClassifier.from_preset(folder, num_classes=2)


def test_a_classifier_preset_keras_hub_saves_gives_keras_hub_s_pooled_output(tmp_path):
    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub writes this preset here")
    import keras

    keras.utils.set_random_seed(5)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
        max_sequence_length=24,
    )  # fmt: skip
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=str(PRESET / "assets" / "tokenizer" / "vocabulary.txt"),
        lowercase=True,
        strip_accents=True,
    )
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=10)
    keras_hub.models.BertTextClassifier(backbone, 2, preprocessor=preprocessor).save_to_preset(
        str(tmp_path / "preset")
    )
    ours = BertTextClassifier.from_preset(tmp_path / "preset", num_classes=4)
    assert ours.preprocessor.max_seq_length == 10  # preprocessor.json's sequence_length
    texts = np.array(["W3 w4,w26", "w1 w2 w3"], dtype=object)
    features = ours.preprocessor.features(texts)
    expected = backbone(
        {
            "token_ids": features["input_ids"],
            "segment_ids": features["segment_ids"],
            "padding_mask": features["input_mask"] > 0,
        },
        training=False,
    )["pooled_output"]
    pooled = ours.task_model.bert(features, training=False)["pooled_output"]
    np.testing.assert_allclose(pooled.numpy(), np.asarray(expected), atol=1e-5)
    hub_ids = preprocessor(texts.tolist())["token_ids"].numpy()
    np.testing.assert_array_equal(
        hub_ids[:, : features["input_ids"].shape[1]], features["input_ids"]
    )
