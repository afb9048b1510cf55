"""bench/bench_from_scratch.py's text layout at a tiny size: Austen's chapters become documents of
sentences, a missing novel is one line naming it, the held-out documents never reach the
pretraining file, and short texts grouped into documents carry no label.

The bench's modules define absl flags at import (through bench_real_text), so they run in a child
process, as tests/test_bench_real_text.py does."""

import json
import subprocess
import sys
import textwrap

from conftest import REPO_DIR

NOVEL = """PERSUASION

Chapter 1

Sir Walter Elliot, of Kellynch Hall, was a man who, for his own amusement,
never took up any book but the Baronetage.  There he found occupation!

Was it so? "Yes," she said.

CHAPTER II.

Mr Shepherd, a civil, cautious lawyer, said it.
"""


def _run(code, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import json\n" + textwrap.dedent(code), str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=REPO_DIR,
    )  # fmt: skip
    return result


def _write_novels(folder):
    folder.mkdir()
    for novel in ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice"):
        (folder / f"{novel}.txt").write_text(NOVEL, encoding="utf-8")
    return folder


def test_chapters_become_documents_of_sentences(tmp_path):
    folder = _write_novels(tmp_path / "novels")
    (folder / "sensesensibility.txt").write_text(NOVEL, encoding="utf-8")
    result = _run(
        """
        import sys
        from bench import from_scratch_corpus
        print(json.dumps(from_scratch_corpus.austen_documents(sys.argv[1])))
        """.replace("sys.argv[1]", repr(str(folder))),
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    documents = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(documents) == 12  # two chapters in each of six novels; the title page is dropped
    assert documents[0] == [
        "Sir Walter Elliot, of Kellynch Hall, was a man who, for his own amusement, never took up "
        "any book but the Baronetage.",
        "There he found occupation!",
        "Was it so?",
        '"Yes," she said.',
    ]
    assert documents[1] == ["Mr Shepherd, a civil, cautious lawyer, said it."]


def test_a_missing_novel_is_one_line_naming_it(tmp_path):
    folder = _write_novels(tmp_path / "novels")  # sensesensibility.txt is missing
    result = _run(
        f"""
        from bench import from_scratch_corpus
        from_scratch_corpus.austen_documents({str(folder)!r})
        """,
        tmp_path,
    )
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("FileNotFoundError: ")
    assert str(folder / "sensesensibility.txt") in last


def test_held_out_documents_never_reach_the_pretraining_file(tmp_path):
    result = _run(
        """
        from bench import from_scratch_corpus
        documents = [[f"Document {k} sentence {j}." for j in range(2)] for k in range(10)]
        train, heldout = from_scratch_corpus.split_off(documents, 4)
        print(json.dumps([[d[0] for d in train], [d[0] for d in heldout]]))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    train, heldout = json.loads(result.stdout.strip().splitlines()[-1])
    assert heldout == ["Document 3 sentence 0.", "Document 7 sentence 0."]
    assert len(train) == 8 and not set(train) & set(heldout)


def test_short_texts_are_documents_that_carry_no_label_and_no_held_out_text(tmp_path):
    # The tweets' and Rotten Tomatoes' files are sorted by label. Grouped in that order, a document's
    # texts would share a label and next-sentence prediction would learn it.
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "pretrain.txt").write_text("Base one.\nBase two.\n\nBase three.\n")
    result = _run(
        """
        import sys
        from bench import bench_real_text, from_scratch_corpus
        rows = [(label, f"{label} review {k}.") for label in ("0", "1") for k in range(400)]
        bench_real_text.read_set = lambda name: rows
        heldout = {"0 review 7.", "1 review 300."}
        added = from_scratch_corpus.rotten_tomatoes_text(sys.argv[1] + "/text", heldout)
        with open(sys.argv[1] + "/text/pretrain_rt.txt", encoding="utf-8") as reader:
            print(json.dumps([added, reader.read()]))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    added, text = json.loads(result.stdout.strip().splitlines()[-1])
    assert text.startswith("Base one.\nBase two.\n\nBase three.\n\n")
    documents = [d.split("\n") for d in text.strip().split("\n\n")[2:]]
    texts = [t for d in documents for t in d]
    assert sorted(texts) == sorted(
        f"{label} review {k}." for label in ("0", "1") for k in range(400)
        if f"{label} review {k}." not in ("0 review 7.", "1 review 300.")
    )  # fmt: skip
    assert added == [len(documents), 798, 3 * 798]
    assert all(len(d) == 16 for d in documents[:-1])
    # In file order 49 of 50 documents hold one label; shuffled, a document of 16 holds one label
    # with probability 2 / 2^16.
    one_label = [d for d in documents[:-1] if len({t.split()[0] for t in d}) == 1]
    assert not one_label


def test_the_fine_tuning_rate_is_chosen_on_dev_never_on_test(tmp_path):
    result = _run(
        """
        from bench import from_scratch_finetune

        def rows(*dev_test, first=1):
            return [{"seed": first + k, "dev_accuracy": d, "test_accuracy": t}
                    for k, (d, t) in enumerate(dev_test)]

        by_rate = {
            3e-4: {("rt", "random"): rows((0.60, 0.90), (0.60, 0.90), (0.60, 0.90)),
                   ("rt", "pretrained"): rows((0.70, 0.6), (0.70, 0.6), (0.70, 0.6)),
                   ("tweets", "random"): rows((0.4, 0.4), (0.5, 0.5))},
            1e-4: {("rt", "random"): rows((0.50, 0.5), (0.70, 0.5), (0.72, 0.5)),
                   ("rt", "pretrained"): rows((0.70, 0.7), (0.70, 0.7), (0.70, 0.7)),
                   ("tweets", "random"): rows((0.40, 0.4), (0.44, 0.5), (0.9, 0.9), (0.9, 0.9))},
            5e-5: {("rt", "random"): rows((0.99, 0.99), first=4),
                   ("tweets", "random"): rows((0.1, 0.1), (0.1, 0.1), (0.1, 0.1))},
        }
        chosen = from_scratch_finetune.choose_on_dev(by_rate)
        print(json.dumps({f"{k[0]} {k[1]}": [rate, [row["seed"] for row in rows]]
                          for k, (rate, rows) in chosen.items()}))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    chosen = json.loads(result.stdout.strip().splitlines()[-1])
    # Mean dev 0.64 beats 0.60 though 3e-4's test accuracy is higher; 5e-5 has run no seed the
    # others have, so it waits.
    assert chosen["rt random"] == [1e-4, [1, 2, 3]]
    assert chosen["rt pretrained"] == [3e-4, [1, 2, 3]]  # equal dev: the first rate in the order
    # Compared on the seeds all three rates ran (1 and 2), then every run at the chosen rate.
    assert chosen["tweets random"] == [3e-4, [1, 2]]


def test_a_fresh_pooler_is_random_inits_and_the_rest_is_the_checkpoints(tmp_path):
    # dynamic_full_freshpooler: the pretrained encoder with the pooler random init starts from.
    result = _run(
        """
        import os, sys
        import numpy as np
        import tensorflow as tf
        from bench import from_scratch_pretrain
        work = sys.argv[1]
        config = from_scratch_pretrain.write_bert_config(
            os.path.join(work, "bert_config.json"), 40, (1, 16, 2, 32, 32)
        )
        vocab = os.path.join(work, "vocab.txt")
        with open(vocab, "w") as writer:
            writer.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) + "\\n")
        def export(name, checkpoint, seed, fresh=False):
            folder = from_scratch_pretrain.export_model(
                config, vocab, checkpoint, os.path.join(work, name), seed, fresh_pooler=fresh
            )
            reader = tf.train.load_checkpoint(os.path.join(folder, "bert_model.ckpt"))
            return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
        trained = export("trained", None, 7)  # stands for a pretraining run's weights
        checkpoint = os.path.join(work, "trained", "bert_model.ckpt")
        random = export("random", None, 12345)
        fresh = export("fresh", checkpoint, 12345, fresh=True)
        kept = export("kept", checkpoint, 12345)
        pooler = sorted(n for n in fresh if "pooler" in n)
        rest = sorted(n for n in fresh if "pooler" not in n and n in trained)
        print(json.dumps({
            "pooler": pooler,
            "rest": len(rest),
            "pooler_is_random": all(np.array_equal(fresh[n], random[n]) for n in pooler),
            "kernel_differs_from_trained": not np.array_equal(
                fresh["bert/pooler/dense/kernel"], trained["bert/pooler/dense/kernel"]
            ),
            "rest_is_trained": all(np.array_equal(fresh[n], trained[n]) for n in rest),
            "kept_pooler_is_trained": all(np.array_equal(kept[n], trained[n]) for n in pooler),
        }))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["pooler"] == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
    assert found["rest"] > 10
    assert found["pooler_is_random"] and found["kernel_differs_from_trained"]  # biases start at 0
    assert found["rest_is_trained"] and found["kept_pooler_is_trained"]


def test_the_imdb_reviews_read_are_a_sample_of_both_labels(tmp_path):
    # The IMDB file is sorted by label: its first reviews are all negative.
    result = _run(
        """
        import sys
        from bench import bench_real_text, from_scratch_corpus
        sets = {
            "imdb": [(label, f"Review {label} {k}. It ends.") for label in ("0", "1") for k in range(500)],
            "tweets": [("neutral", f"Tweet {k}.") for k in range(40)],
        }
        bench_real_text.read_set = lambda name: sets[name]
        from_scratch_corpus.austen_documents = lambda: [["Chapter one."], ["Chapter two."]]
        counts = from_scratch_corpus.write_corpus(sys.argv[1] + "/text", set(), 50, 200)
        with open(sys.argv[1] + "/text/pretrain.txt", encoding="utf-8") as reader:
            train = reader.read()
        with open(sys.argv[1] + "/text/heldout.txt", encoding="utf-8") as reader:
            heldout = reader.read()
        print(json.dumps([counts["imdb"], train, heldout]))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    counts, train, heldout = json.loads(result.stdout.strip().splitlines()[-1])
    reviews = [
        line.split()[1] + " " + line.split()[2] for text in (train, heldout)
        for line in text.splitlines() if line.startswith("Review")
    ]  # fmt: skip
    assert counts[:2] == [196, 4] and len(reviews) == len(set(reviews)) == 200
    positive = sum(review.startswith("1") for review in reviews)
    # A random 200 of 500 + 500 hold 100 ± 7 (one SD) positive reviews; the file's first 200, none.
    assert 70 <= positive <= 130, positive


def test_an_unknown_model_name_is_one_line_before_any_work(tmp_path):
    work_dir = tmp_path / "study"
    result = subprocess.run(
        [sys.executable, "-m", "bench.bench_from_scratch", f"--work_dir={work_dir}",
         "--stages=data,pretrain,finetune", "--models=random,dynamic_full_foo"],
        capture_output=True, text=True, timeout=120, cwd=REPO_DIR,
    )  # fmt: skip
    assert result.returncode != 0
    assert "--models: dynamic_full_foo is not random" in result.stderr.strip().splitlines()[-1]
    assert not work_dir.exists()
