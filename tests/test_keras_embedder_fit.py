"""BertTextEmbedder.fit on (anchor, positive[, negative]) rows, and its evaluate.

References: sentence-transformers' MultipleNegativesRankingLoss written out in float64 numpy (cosine
similarities of each anchor to every positive and negative of the batch, times 20, cross-entropy of
the row's own positive, mean over anchors), and recall@1 / MRR@10 of the predicted vectors ranked in
numpy.
"""

import json

import keras
import numpy as np
import pytest

from bert_tf import BertPreprocessor, BertTextEmbedder
from bert_tf.models.text_embedder import InBatchNegativesLoss

from conftest import SAMPLE_DIR

ANCHORS = ["the lady was tired", "she said that", "emma walked home", "jane was sad"]
POSITIVES = ["the lady rested", "she spoke", "emma went home", "jane cried"]
NEGATIVES = ["a cat sat", "the road was long", "it rained all day", "a letter came"]


def _model(seed=3):
    keras.utils.set_random_seed(seed)
    config = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())
    model = BertTextEmbedder(
        BertPreprocessor(str(SAMPLE_DIR / "vocab.txt"), max_seq_length=16), config
    )
    model.compile(learning_rate=1e-3)  # the recipe, at a random-init tiny model's rate
    return model


def _ranking_loss(embeddings, scale=20.0):
    """MultipleNegativesRankingLoss of [B, T, H] in float64: -log softmax(scale * cos)[own]."""
    embeddings = np.asarray(embeddings, np.float64)
    unit = embeddings / np.linalg.norm(embeddings, axis=-1, keepdims=True)
    anchors = unit[:, 0]
    candidates = np.concatenate([unit[:, t] for t in range(1, unit.shape[1])], axis=0)
    scores = scale * anchors @ candidates.T  # [B, (T - 1) * B]
    log_softmax = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    return -np.mean(log_softmax[np.arange(len(anchors)), np.arange(len(anchors))])


@pytest.fixture(scope="module")
def fitted():
    model = _model()
    before = model.evaluate((ANCHORS, POSITIVES, NEGATIVES), return_dict=True, verbose=0)
    history = model.fit(x=(ANCHORS, POSITIVES, NEGATIVES), batch_size=4, epochs=6, verbose=0)
    return model, before, history.history["loss"]


def test_the_loss_is_multiple_negatives_ranking_loss():
    embeddings = np.random.default_rng(0).normal(size=[5, 3, 8]).astype(np.float32)
    loss = InBatchNegativesLoss()(np.zeros([5]), embeddings)
    # float32 cosines and softmax against float64: 1e-5 relative; a sum instead of the mean over
    # anchors, or scale 1, is off by far more.
    np.testing.assert_allclose(float(loss), _ranking_loss(embeddings), rtol=1e-5)


def test_fit_step_s_loss_is_the_ranking_loss_of_the_model_s_vectors():
    model = _model()
    features, dummy = next(
        iter(model.dataset((np.array(ANCHORS), np.array(POSITIVES)), np.zeros(4), 4))
    )
    assert features["input_ids"].shape[:2] == (4, 2)  # [B, T, S]
    vectors = model(features, training=False).numpy()
    np.testing.assert_allclose(vectors[:, 0], model.predict(ANCHORS, verbose=0), atol=1e-5)
    loss = model.test_on_batch(features, dummy, return_dict=True)["loss"]
    np.testing.assert_allclose(loss, _ranking_loss(vectors), rtol=1e-5)


def test_fit_lowers_the_loss_and_raises_the_ranking(fitted):
    model, before, losses = fitted
    assert losses[-1] < 0.5 * losses[0]
    after = model.evaluate((ANCHORS, POSITIVES, NEGATIVES), return_dict=True, verbose=0)
    assert after["loss"] < before["loss"]
    assert after["mrr@10"] > before["mrr@10"]


def test_evaluate_ranks_each_anchor_s_candidates(fitted):
    model = fitted[0]
    results = model.evaluate((ANCHORS, POSITIVES, NEGATIVES), return_dict=True, verbose=0)
    anchors = model.predict(ANCHORS, verbose=0).astype(np.float64)
    candidates = np.concatenate(
        [model.predict(POSITIVES, verbose=0), model.predict(NEGATIVES, verbose=0)]
    ).astype(np.float64)
    cosines = (anchors / np.linalg.norm(anchors, axis=1, keepdims=True)) @ (
        candidates / np.linalg.norm(candidates, axis=1, keepdims=True)
    ).T
    ranks = np.array([1 + np.sum(row > row[i]) for i, row in enumerate(cosines)])
    assert results["recall@1"] == pytest.approx(np.mean(ranks == 1))
    assert results["mrr@10"] == pytest.approx(np.mean(np.where(ranks <= 10, 1 / ranks, 0)))
    # Every candidate of the set, not the batch's: the ranking loss over all 8 candidates.
    scores = 20 * cosines
    expected = np.mean(np.log(np.exp(scores).sum(axis=1)) - scores[np.arange(4), np.arange(4)])
    assert results["loss"] == pytest.approx(expected, rel=1e-6)


def test_a_fitted_embedder_saves_and_loads(fitted, tmp_path):
    model = fitted[0]
    model.save(tmp_path / "embedder.keras")
    loaded = keras.saving.load_model(tmp_path / "embedder.keras")
    np.testing.assert_allclose(
        loaded.predict(ANCHORS, verbose=0), model.predict(ANCHORS, verbose=0), atol=1e-6
    )
    assert loaded.similarity_scale == 20.0
    assert isinstance(loaded.loss, InBatchNegativesLoss)


@pytest.mark.parametrize(
    "x, y, message",
    [
        (ANCHORS, None, r"x: give the rows as \(anchors, positives\)"),
        ((ANCHORS, POSITIVES[:3]), None, r"x: one text of each kind per row, got 4 anchors, 3"),
        ((ANCHORS, POSITIVES), [0, 1, 2, 3], r"y: leave it None"),
        ((ANCHORS, [1, 2, 3, 4]), None, r"x\[1\] \(positives\)\[0\] is a int"),
    ],
)
def test_bad_rows_are_one_line_before_any_step(x, y, message, fitted):
    model = fitted[0]
    steps = model.optimizer.iterations.numpy()
    with pytest.raises(ValueError, match=message):
        model.fit(x=x, y=y, batch_size=4)
    assert model.optimizer.iterations.numpy() == steps
