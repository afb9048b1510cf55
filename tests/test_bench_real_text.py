"""bench/bench_real_text.py's pure parts at a tiny size: the deduplicated stratified split and the
tables' choice of setting, means, standard errors and targets.

The script defines absl flags at import, as every bench does; it is imported in a child process so
that its flags never meet another bench's in the test session."""

import json
import subprocess
import sys
import textwrap

from conftest import REPO_DIR


def _run(code):
    """The JSON printed last by `code`, run from the repository with the bench's flags parsed."""
    prelude = textwrap.dedent(
        """
        import json, sys
        from bench import bench_real_text as bench
        bench.FLAGS(["bench_real_text.py"])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120, cwd=REPO_DIR,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, json.loads(result.stdout.strip().splitlines()[-1])


def test_split_drops_conflicting_texts_keeps_label_shares_and_a_fixed_test_set():
    _, found = _run(
        """
        rows = [("a", f"a{i}") for i in range(600)] + [("b", f"b{i}") for i in range(300)]
        rows += [("c", f"c{i}") for i in range(100)]
        rows += [("a", "a1"), ("b", "a2"), ("c", "c5")]  # a repeat, a conflict, a repeat
        kept, conflicting = bench.deduplicated(rows)
        small = bench.stratified_split(kept, (100, 50, 200), 7)
        large = bench.stratified_split(kept, (400, 50, 200), 7)
        again = bench.stratified_split(kept, (100, 50, 200), 7)
        print(json.dumps({"kept": kept, "conflicting": conflicting, "small": small,
                          "large": large, "again": again}))
        """
    )
    kept_texts = [text for _, text in found["kept"]]
    assert found["conflicting"] == 1 and "a2" not in kept_texts
    assert len(kept_texts) == len(set(kept_texts)) == 999
    train, dev, test = found["small"]
    assert [len(train), len(dev), len(test)] == [100, 50, 200]
    # Each split keeps the set's shares: 599 a, 300 b, 100 c of 999 texts (rounded per label).
    assert sorted(label for label, _ in test).count("a") == round(200 * 599 / 999)
    assert sorted(label for label, _ in test).count("c") == round(200 * 100 / 999)
    texts = [tuple(row) for split in found["small"] for row in split]
    assert len(texts) == len(set(texts))  # no text in two splits
    assert found["again"] == found["small"]
    assert found["large"][2] == test and found["large"][1] == dev  # train size moves no test text


def test_tables_pick_the_best_dev_setting_and_say_which_targets_are_met():
    stdout, found = _run(
        """
        settings = {"sizes": ["1", "1", "1"]}
        rows = []
        for lr in (2e-5, 3e-5, 5e-5):
            for epochs in (2.0, 3.0, 4.0):
                dev = 0.9 if (lr, epochs) == (3e-5, 4.0) else 0.8
                rows.append({"system": "ours", "learning_rate": lr, "epochs": epochs, "seed": 1,
                             "dev_accuracy": dev, "test_accuracy": 0.5, "test_macro_f1": 0.5,
                             "train_seconds": 1.0, "predict_seconds": 1.0})
        for seed, accuracy in ((2, 0.86), (3, 0.88)):
            rows.append({**rows[5], "seed": seed, "test_accuracy": accuracy})
        rows[5] = {**rows[5], "test_accuracy": 0.84}
        for seed, accuracy in ((1, 0.87), (2, 0.89), (3, 0.91)):
            rows.append({**rows[5], "system": "transformers", "seed": seed,
                         "test_accuracy": accuracy})
        for system, accuracy in (("tfidf_lr", 0.82), ("tfidf_svm", 0.835)):
            rows.append({"system": system, "setting": "s", "dev_accuracy": 0.8,
                         "test_accuracy": accuracy, "test_macro_f1": accuracy,
                         "train_seconds": 1.0, "predict_seconds": 1.0})
        summary = bench.set_table("rotten_tomatoes", rows, "### header")
        print(json.dumps({"chosen": bench.chosen_setting(rows[:9]),
                          "rt": bench.targets("rotten_tomatoes", summary),
                          "imdb": bench.targets("imdb", summary)}))
        """
    )
    assert found["chosen"] == [3e-5, 4.0]
    # ours: 84, 86, 88 -> 86.00 ± 1.15; transformers 87, 89, 91 -> 89.00 ± 1.15.
    assert "| ours | lr 3e-05, 4 epochs | 3 (1,2,3) | 86.00 ± 1.15 |" in stdout
    assert "| transformers | lr 3e-05, 4 epochs | 3 (1,2,3) | 89.00 ± 1.15 |" in stdout
    # 86.00 < 83.5 + 3 and < 89 - 1.15: both missed; on IMDB (+0) the bag-of-words target is met.
    assert found["rt"] == "≥ tfidf_svm + 3: NOT MET; ≥ transformers - 1 SE: NOT MET"
    assert found["imdb"].startswith("≥ tfidf_svm + 0: met")
