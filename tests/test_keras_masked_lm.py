"""BertMaskedLM.fill_mask against the original TF1 model's masked-LM log-probabilities.

tests/fixtures/google_ckpt_tiny/reference.npz holds the original's inputs and its masked_lm_log_probs;
fill_mask's ids are checked against FullTokenizer's.
"""

import shutil

import keras
import numpy as np
import pytest

from bert_tf import BertMaskedLM
from bert_tf.tokenization import FullTokenizer

from conftest import SPECIAL_TOKENS, assert_float32_close

MASK_ID = SPECIAL_TOKENS.index("[MASK]")


@pytest.fixture(scope="module")
def preset(google_ckpt_dir, w_vocab_file, tmp_path_factory):
    folder = tmp_path_factory.mktemp("release") / "tiny"
    shutil.copytree(google_ckpt_dir, folder)
    shutil.copy(w_vocab_file, folder / "vocab.txt")
    return folder


TEXTS = (["w1 w2 [MASK] w3", "[MASK]"], ["w7 [MASK] w8 [MASK]", "w9"])


def test_restored_masked_lm_gives_the_original_s_log_probs(preset, reference):
    masked_lm = BertMaskedLM.from_preset(preset)
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    log_probs = masked_lm({name: reference[name].astype(np.int32) for name in names})
    # Log-probs near -12: float32 rounding of the original's own, scaled to the values.
    assert_float32_close(log_probs.numpy(), reference["masked_lm_log_probs"])


def test_fill_mask_puts_the_mask_id_at_each_mark_and_ranks_its_pieces(preset, w_vocab_file):
    masked_lm = BertMaskedLM.from_preset(preset)
    features, counts = masked_lm.masked_features(TEXTS)
    tokenizer = FullTokenizer(w_vocab_file, do_lower_case=True)

    def ids(text):  # FullTokenizer's ids of the text between the marks, the [MASK] id at each
        parts = [
            tokenizer.convert_tokens_to_ids(tokenizer.tokenize(p)) for p in text.split("[MASK]")
        ]
        return [i for part in parts[:-1] for i in (*part, MASK_ID)] + parts[-1]

    cls, sep = SPECIAL_TOKENS.index("[CLS]"), SPECIAL_TOKENS.index("[SEP]")
    for row, (text_a, text_b) in enumerate(zip(*TEXTS, strict=True)):
        expected = [cls, *ids(text_a), sep, *ids(text_b), sep]
        assert features["input_ids"][row, : len(expected)].numpy().tolist() == expected
    assert counts.tolist() == [3, 1]
    filled = masked_lm.fill_mask(TEXTS, k=4)
    log_probs = masked_lm(features).numpy()
    for row, marks in enumerate(filled):
        assert len(marks) == counts[row]
        for mark, best in enumerate(marks):
            assert len(best) == 4 and [v for _, v in best] == sorted([v for _, v in best])[::-1]
            assert best[0][1] == pytest.approx(log_probs[row, mark].max(), abs=1e-6)


def test_masked_lm_saves_and_loads_and_refuses_an_export(preset, tmp_path):
    masked_lm = BertMaskedLM.from_preset(preset)
    masked_lm.save(str(tmp_path / "mlm.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "mlm.keras"))
    assert loaded.fill_mask(TEXTS, k=2) == masked_lm.fill_mask(TEXTS, k=2)
    with pytest.raises(ValueError, match=r"^export\('x'\): export_saved_model.py writes no"):
        masked_lm.export("x")
