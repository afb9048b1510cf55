"""BertMaskedLM.fit: texts masked on the fly by the original's rules, the masked-LM loss and accuracy.

References: the original's masking rules written out here (create_pretraining_data.py: round(length *
masked_lm_prob) predictions, at least 1, at most max_predictions_per_seq, never [CLS]/[SEP]/padding,
80% [MASK] / 10% random / 10% kept, whole words together), dynamic.word_ids (the rule the pretraining
data writer records word numbers by), and the masked-LM cross-entropy and accuracy in float64 numpy.
"""

import json

import keras
import numpy as np
import pytest

from bert_tf import BertMaskedLM, BertPreprocessor
from bert_tf.data.pretraining import dynamic
from bert_tf.models.masked_lm_data import word_ids

from conftest import SAMPLE_DIR

TEXTS = [
    "the lady was tired after the walk",
    "she said that she was sad",
    "emma walked home with jane",
    "jane was sad and tired",
]
# Longer texts with many "##" pieces, for the rules' statistics.
WORDS = "unbelievable tokenization walked happily the a jane emma rested rain philosophers".split()


def _model(max_seq_length=16, **masking):
    keras.utils.set_random_seed(3)
    config = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())
    preprocessor = BertPreprocessor(str(SAMPLE_DIR / "vocab.txt"), max_seq_length=max_seq_length)
    model = BertMaskedLM(preprocessor, config, **masking)
    model.compile(learning_rate=1e-3)  # the recipe, at a random-init tiny model's rate
    return model


def _batches(model, texts, batch_size, passes=1):
    columns = (np.array(texts, dtype=object),)
    dataset = model.batches.dataset(columns, batch_size, passes=passes, shuffle=False)
    return [tuple(part.numpy() if not isinstance(part, dict) else {k: v.numpy() for k, v in part.items()} for part in batch) for batch in dataset]  # fmt: skip


@pytest.fixture(scope="module")
def statistics_model():
    return _model(max_seq_length=48, max_predictions_per_seq=5)


@pytest.fixture(scope="module")
def long_texts():
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 30))) for _ in range(96)]


def test_masks_follow_the_original_s_rules(statistics_model, long_texts):
    model = statistics_model
    originals = model.preprocessor.features(np.array(long_texts, dtype=object))
    originals = originals["input_ids"].numpy()
    vocabulary = model.preprocessor.vocabulary
    mask_id, cls_id, sep_id = (vocabulary.index(t) for t in ("[MASK]", "[CLS]", "[SEP]"))
    kinds = {"mask": 0, "kept": 0, "random": 0}
    for x, targets, weights in _batches(model, long_texts, batch_size=96, passes=2):
        for row in range(len(targets)):
            length = int(x["input_mask"][row].sum())
            count = int(weights[row].sum())
            # Python's round, half to even, as the original's.
            assert count == min(5, max(1, round(length * 0.15)))
            positions = x["masked_lm_positions"][row][:count]
            assert np.all(np.diff(positions) > 0)
            original = originals[row][: x["input_ids"].shape[1]]
            assert not np.isin(original[positions], [cls_id, sep_id, 0]).any()
            np.testing.assert_array_equal(targets[row][:count], original[positions])
            others = np.setdiff1d(np.arange(len(original)), positions)
            np.testing.assert_array_equal(x["input_ids"][row][others], original[others])
            for position in positions:
                shown = x["input_ids"][row][position]
                kind = (
                    "mask"
                    if shown == mask_id
                    else "kept"
                    if shown == original[position]
                    else "random"
                )
                kinds[kind] += 1
    total = sum(kinds.values())
    # ~540 predictions: 80% / 10% / 10% within about 3.5 binomial standard errors.
    assert total > 500
    assert abs(kinds["mask"] / total - 0.8) < 0.06
    assert abs(kinds["kept"] / total - 0.1) < 0.05 and abs(kinds["random"] / total - 0.1) < 0.05


def test_masks_are_fresh_each_pass_and_the_same_for_the_same_seed(statistics_model, long_texts):
    first, second = _batches(statistics_model, long_texts, batch_size=96, passes=2)
    assert not np.array_equal(first[0]["masked_lm_positions"], second[0]["masked_lm_positions"])
    again = _batches(statistics_model, long_texts, batch_size=96)[0]
    np.testing.assert_array_equal(first[0]["input_ids"], again[0]["input_ids"])
    np.testing.assert_array_equal(first[1], again[1])
    other_seed = _model(max_seq_length=48, max_predictions_per_seq=5, masking_seed=7)
    other = _batches(other_seed, long_texts, batch_size=96)[0]
    assert not np.array_equal(first[0]["masked_lm_positions"], other[0]["masked_lm_positions"])


def test_whole_word_masking_masks_every_piece_of_a_chosen_word(long_texts):
    model = _model(max_seq_length=48, max_predictions_per_seq=5, do_whole_word_mask=True)
    vocabulary = model.preprocessor.vocabulary
    originals = model.preprocessor.features(np.array(long_texts, dtype=object))["input_ids"].numpy()
    pieces_seen = 0
    for x, _, weights in _batches(model, long_texts, batch_size=96):
        for row in range(len(weights)):
            count = int(weights[row].sum())
            chosen = set(x["masked_lm_positions"][row][:count].tolist())
            assert count <= min(5, max(1, round(int(x["input_mask"][row].sum()) * 0.15)))
            for position in range(1, len(originals[row])):
                is_piece = vocabulary[originals[row][position]].startswith("##")
                if is_piece and (position in chosen) != (position - 1 in chosen):
                    pytest.fail(f"row {row}: position {position} split from its word")
                pieces_seen += is_piece and position in chosen
    assert pieces_seen > 10


def test_in_graph_word_numbers_follow_the_pretraining_data_s_rule():
    rng = np.random.default_rng(1)
    special, subword = {101, 102}, set(range(200, 260))
    is_subword = np.zeros(300, bool)
    is_subword[200:260] = True
    for _ in range(20):
        ids = rng.choice([101, 102, *range(150, 260)], size=12).astype(np.int32)
        real = int(rng.integers(1, 13))
        expected = dynamic.word_ids(ids[:real].tolist(), special, subword) + [0] * (12 - real)
        mask = (np.arange(12) < real).astype(np.int32)
        numbers = word_ids(ids, mask, np.array([101, 102], np.int32), is_subword)
        np.testing.assert_array_equal(numbers.numpy(), expected)


def test_loss_and_accuracy_are_the_masked_lm_s_over_the_predicted_tokens():
    model = _model(max_predictions_per_seq=4)
    x, targets, weights = _batches(model, TEXTS, batch_size=4)[0]
    assert weights.sum() < weights.size  # padded predictions, weighted out
    log_probs = model(x, training=False).numpy().astype(np.float64)  # [B, P, V]
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # [B, P]
    expected_loss = -(weights * picked).sum() / weights.sum()
    expected_accuracy = (weights * (log_probs.argmax(-1) == targets)).sum() / weights.sum()
    results = model.test_on_batch(x, targets, weights, return_dict=True)
    np.testing.assert_allclose(results["loss"], expected_loss, rtol=1e-5)
    assert results["masked_lm_accuracy"] == pytest.approx(expected_accuracy)


@pytest.fixture(scope="module")
def fitted():
    model = _model(max_predictions_per_seq=4)
    before = model.evaluate(TEXTS, batch_size=4, return_dict=True, verbose=0)
    model.fit(x=TEXTS, batch_size=4, epochs=4, verbose=0)
    return model, before


def test_fit_lowers_the_masked_lm_loss(fitted):
    model, before = fitted
    after = model.evaluate(TEXTS, batch_size=4, return_dict=True, verbose=0)
    assert model.optimizer.iterations.numpy() == 4
    assert after["loss"] < before["loss"] - 0.3
    pooler = model.task_model.bert.pooler.weights[0].numpy()
    untouched = _model(max_predictions_per_seq=4).task_model.bert.pooler.weights[0].numpy()
    np.testing.assert_array_equal(pooler, untouched)  # the masked LM alone is trained


def test_a_fitted_masked_lm_saves_and_loads(fitted, tmp_path):
    model = fitted[0]
    model.save(tmp_path / "masked_lm.keras")
    loaded = keras.saving.load_model(tmp_path / "masked_lm.keras")
    assert loaded.masking == model.masking
    x = _batches(model, TEXTS, batch_size=4)[0][0]
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), atol=1e-5)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.fit(x=TEXTS, y=[0, 1, 2, 3]), r"y: leave it None"),
        (lambda m: m.fit(x="one text"), r"x: give a list of strings"),
        (lambda m: m.fit(x=(TEXTS, TEXTS[:2])), r"x: texts_a has 4 texts but texts_b 2"),
        (lambda m: m.fit(x=[]), r"x: no texts"),
    ],
)
def test_bad_fit_input_is_one_line_before_any_step(fitted, call, message):
    model = fitted[0]
    steps = model.optimizer.iterations.numpy()
    with pytest.raises(ValueError, match=message):
        call(model)
    assert model.optimizer.iterations.numpy() == steps


@pytest.mark.parametrize(
    "masking, message",
    [
        ({"masked_lm_prob": 0.0}, r"masked_lm_prob must be a number in \(0, 1\], got 0.0"),
        ({"max_predictions_per_seq": 0}, r"max_predictions_per_seq must be a positive integer"),
    ],
)
def test_bad_masking_settings_are_refused(masking, message):
    with pytest.raises(ValueError, match=message):
        _model(**masking)
