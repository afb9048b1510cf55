"""docs/python_api.md's examples run as written, on the tiny fixture checkpoint in place of the releases.

Every ```python block of the page runs in order in one namespace, in a fresh folder; the folder names
of the releases are replaced by a copy of tests/fixtures/google_ckpt_tiny with its vocabulary.
"""

import os
import re
import shutil

import numpy as np

from conftest import REPO_DIR

PAGE = REPO_DIR / "docs" / "python_api.md"
RELEASES = ("uncased_L-12_H-768_A-12", "all-MiniLM-L6-v2-converted")


def _blocks():
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_python_api_page_runs(tmp_path, google_ckpt_dir, w_vocab_file, monkeypatch):
    preset = tmp_path / "preset"
    shutil.copytree(google_ckpt_dir, preset)
    shutil.copy(w_vocab_file, preset / "vocab.txt")
    os.remove(preset / "reference.npz")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    blocks = _blocks()
    assert len(blocks) == 11
    for block in blocks:
        for release in RELEASES:
            block = block.replace(f'"{release}"', repr(str(preset)))
        exec(compile(block, str(PAGE), "exec"), namespace)  # noqa: S102
    assert namespace["logits"].shape == (2, 2)
    probabilities = namespace["outputs"]["probabilities"].numpy()
    expected = np.exp(namespace["logits"][:1])
    np.testing.assert_allclose(probabilities, expected / expected.sum(), rtol=0, atol=1e-5)
    assert namespace["choice_logits"].shape == (2, 2)
    assert [len(labels) for labels in namespace["word_labels"]] == [3]
    assert set(namespace["word_labels"][0]) <= {"O", "B-PER", "I-PER"}
    assert len(namespace["answers"]["answer"]) == 1 and namespace["answers"]["score"].shape == (1,)
    assert namespace["answers"]["answer"][0] in "Emma smiled at Harriet."
    assert namespace["vectors"].shape == (2, 48)  # the fixture's hidden size
    np.testing.assert_allclose(np.linalg.norm(namespace["vectors"], axis=1), 1.0, atol=1e-5)
    ranking = namespace["ranking"]
    assert set(ranking) == {"loss", "recall@1", "recall@10", "mrr@10"}
    assert ranking["recall@10"] == 1.0 and 0 < ranking["mrr@10"] <= 1  # 4 candidates
    assert np.isfinite(namespace["history"].history["loss"]).all()
    assert 0 <= namespace["history"].history["masked_lm_accuracy"][0] <= 1
    assert namespace["features"]["input_ids"].shape == (1, 8)
    assert namespace["encoded"]["pooled_output"].shape == (1, 48)
    student = namespace["student"]
    assert student.task_model.config.num_hidden_layers == 2 and set(namespace["scores"]) == {
        "loss",
        "accuracy",
    }
    assert (tmp_path / "models" / "student" / "1" / "saved_model.pb").is_file()
