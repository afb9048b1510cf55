"""The google-research/bert README's own commands, run unchanged but for paths and a tiny model.

Each command below is the original README's, flag for flag (BERT_BASE_DIR is a tiny Google-format
release: 4 layers, hidden 32, the uncased vocab; GLUE_DIR and SQUAD_DIR hold small files in the
published layouts). Only the TPU flags of the SQuAD 2.0 commands are left out: no TPU is reachable
here. Each test checks the files the original writes.
"""

import collections
import json
import os
import random
import string
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

# The words of the MRPC and SQuAD files below and of the extract_features example.
MRPC_WORDS = "the lady walked to the house and said that she was very happy in the garden".split()
SYNONYMS = {"walked": "went", "said": "told", "happy": "glad", "house": "home"}
NAMES = ["emma", "harriet", "jane", "frank", "george", "robert"]
PLACES = ["hartfield", "highbury", "london", "bath", "randalls", "donwell"]
EXTRA_TEXT = " ".join(
    MRPC_WORDS + list(SYNONYMS.values()) + NAMES + PLACES
    + "lived at for many years . walked church every day who where did live walk what eat ?".split()
    + ["Who was Jim Henson ? Jim Henson was a puppeteer"]
)  # fmt: skip
PRETRAINING_KEYS = {
    "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "masked_lm_perplexity",
    "next_sentence_accuracy", "next_sentence_loss",
}  # fmt: skip


def run(script, *flags, cwd=None):
    """Runs a top-level script with the flags as written; returns its stderr (it must succeed)."""
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_DIR, script), *flags],
        capture_output=True, text=True, timeout=600, env=SUBPROCESS_ENV, cwd=cwd,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def read_results(path):
    return {key: float(value) for key, value in (line.split(" = ") for line in open(path))}


@pytest.fixture(scope="module")
def bert_base_dir(tmp_path_factory):
    """A tiny release in Google's layout: bert_config.json, vocab.txt, bert_model.ckpt.* (random)."""
    from bert_tf.checkpoints import save_google_checkpoint
    from bert_tf.modeling import BertConfig, BertPretrainingModel
    from bert_tf.tokenization import FullTokenizer, load_vocab

    folder = tmp_path_factory.mktemp("uncased_L-4_H-32_A-2")
    # The uncased vocab cut to the special tokens and the pieces these texts make: greedy WordPiece
    # splits them as with the whole vocab, and the masked-LM softmax is 40 times smaller.
    full = FullTokenizer(str(SAMPLE_DIR / "vocab.txt"), do_lower_case=True)
    texts = (SAMPLE_DIR / "sample_text.txt").read_text().splitlines() + [EXTRA_TEXT]
    used = {piece for text in texts for piece in full.tokenize(text)}
    special = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    vocab = [t for t in load_vocab(str(SAMPLE_DIR / "vocab.txt")) if t in used | special]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = BertConfig.from_dict(
        dict(
            vocab_size=len(vocab), hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=512, type_vocab_size=2,
        )
    )  # fmt: skip
    tf.keras.utils.set_random_seed(0)
    model = BertPretrainingModel(config)
    save_google_checkpoint(model, str(folder / "bert_model.ckpt"))
    (folder / "bert_config.json").write_text(config.to_json_string())
    return folder


# ---------------------------------------------------------------------------------- pretraining


@pytest.fixture(scope="module")
def tf_examples(bert_base_dir, tmp_path_factory):
    output = tmp_path_factory.mktemp("tmp") / "tf_examples.tfrecord"
    run(
        "create_pretraining_data.py",
        f"--input_file={SAMPLE_DIR / 'sample_text.txt'}",
        f"--output_file={output}",
        f"--vocab_file={bert_base_dir / 'vocab.txt'}",
        "--do_lower_case=True",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        "--dupe_factor=5",
    )
    return output


def test_create_pretraining_data_writes_the_originals_examples(tf_examples):
    spec = {
        "input_ids": tf.io.FixedLenFeature([128], tf.int64),
        "input_mask": tf.io.FixedLenFeature([128], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([128], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([20], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([20], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([20], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    records = list(tf.data.TFRecordDataset(str(tf_examples)))
    assert len(records) > 500  # six chapters, five passes (953 today)
    example = tf.io.parse_single_example(records[0], spec)
    assert set(tf.train.Example.FromString(records[0].numpy()).features.feature) == set(spec)
    assert int(example["input_ids"][0]) == 2  # [CLS], after [PAD] and [UNK] in the cut vocab
    assert 0 < float(tf.reduce_sum(example["masked_lm_weights"])) <= 20


@pytest.mark.parametrize(
    "from_checkpoint",
    [pytest.param(True, marks=pytest.mark.slow), False],
    ids=["init_checkpoint", "scratch"],
)
def test_run_pretraining_trains_evaluates_and_checkpoints(
    bert_base_dir, tf_examples, tmp_path, from_checkpoint
):
    output_dir = tmp_path / "pretraining_output"
    flags = [
        f"--input_file={tf_examples}",
        f"--output_dir={output_dir}",
        "--do_train=True",
        "--do_eval=True",
        f"--bert_config_file={bert_base_dir / 'bert_config.json'}",
        f"--init_checkpoint={bert_base_dir / 'bert_model.ckpt'}",
        "--train_batch_size=32",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--num_train_steps=20",
        "--num_warmup_steps=10",
        "--learning_rate=2e-5",
    ]
    if not from_checkpoint:
        flags.remove(f"--init_checkpoint={bert_base_dir / 'bert_model.ckpt'}")
    stderr = run("run_pretraining.py", *flags)
    results = read_results(output_dir / "eval_results.txt")
    assert set(results) == PRETRAINING_KEYS and results["global_step"] == 20
    # The same command with --do_train=False evaluates the model the run started from (the
    # checkpoint, or the same seed's initialization) on the same records: training lowered its loss.
    untrained_dir = tmp_path / "untrained"
    run(
        "run_pretraining.py",
        *[flag for flag in flags if not flag.startswith(("--output_dir", "--do_train"))],
        f"--output_dir={untrained_dir}", "--do_train=False",
    )  # fmt: skip
    untrained = read_results(untrained_dir / "eval_results.txt")
    print("LOSSES", untrained, results)
    assert untrained["global_step"] == 0
    assert results["masked_lm_loss"] < untrained["masked_lm_loss"] - 0.01
    assert results["loss"] < untrained["loss"] - 0.01
    assert (output_dir / "model.ckpt-20.index").exists()
    assert ("Initialized from" in stderr) == from_checkpoint


# ---------------------------------------------------------------------------------- MRPC

MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    """GLUE_DIR/MRPC: paraphrases (same words, one swapped for a synonym) against unrelated pairs."""
    folder = tmp_path_factory.mktemp("glue_data") / "MRPC"
    folder.mkdir()
    words, synonyms = MRPC_WORDS, SYNONYMS
    rng = random.Random(1)
    for split, size in (("train", 64), ("dev", 16), ("test", 10)):
        rows = [MRPC_HEADER if split != "test" else MRPC_HEADER.replace("Quality", "index")]
        for i in range(size):
            first = rng.sample(words, 8)
            label = rng.choice("01")
            second = [synonyms.get(w, w) for w in first] if label == "1" else rng.sample(words, 8)
            first_column = str(i) if split == "test" else label
            rows.append(f"{first_column}\t{i}\t{i + 1000}\t{' '.join(first)}\t{' '.join(second)}")
        (folder / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return folder.parent


def test_run_classifier_on_mrpc_then_prediction_from_the_trained_classifier(
    bert_base_dir, glue_dir, tmp_path
):
    common = [
        "--task_name=MRPC",
        f"--data_dir={glue_dir / 'MRPC'}",
        f"--vocab_file={bert_base_dir / 'vocab.txt'}",
        f"--bert_config_file={bert_base_dir / 'bert_config.json'}",
        "--max_seq_length=128",
    ]
    mrpc_output = tmp_path / "mrpc_output"
    run(
        "run_classifier.py", "--task_name=MRPC", "--do_train=true", "--do_eval=true",
        f"--data_dir={glue_dir / 'MRPC'}", f"--vocab_file={bert_base_dir / 'vocab.txt'}",
        f"--bert_config_file={bert_base_dir / 'bert_config.json'}",
        f"--init_checkpoint={bert_base_dir / 'bert_model.ckpt'}", "--max_seq_length=128",
        "--train_batch_size=32", "--learning_rate=2e-5", "--num_train_epochs=3.0",
        f"--output_dir={mrpc_output}/",
    )  # fmt: skip
    results = read_results(mrpc_output / "eval_results.txt")
    assert {"eval_accuracy", "eval_loss", "global_step", "loss"} <= set(results)
    assert results["global_step"] == 6  # int(64 / 32 * 3.0)
    trained_classifier = mrpc_output / "model.ckpt-6"
    assert trained_classifier.with_suffix(".ckpt-6.index").exists()

    # "Prediction from classifier", into a new output dir.
    predicted = tmp_path / "predicted"
    run(
        "run_classifier.py", *common, "--do_predict=true",
        f"--init_checkpoint={trained_classifier}", f"--output_dir={predicted}/",
    )  # fmt: skip
    # The same test set predicted in the training dir (which resumes from its checkpoint).
    run("run_classifier.py", *common, "--do_predict=true", f"--output_dir={mrpc_output}/")

    def probabilities(folder):
        lines = (folder / "test_results.tsv").read_text().splitlines()
        return np.array([[float(p) for p in line.split("\t")] for line in lines])

    assert probabilities(predicted).shape == (10, 2)
    np.testing.assert_allclose(probabilities(predicted), probabilities(mrpc_output), atol=1e-5)


# ---------------------------------------------------------------------------------- SQuAD


def squad_json(version_2, seed):
    """Twelve questions about three paragraphs in SQuAD's layout (2.0: four unanswerable)."""
    rng = random.Random(seed)
    names, places = NAMES, PLACES
    articles = []
    for a in range(3):
        name, place = rng.choice(names), rng.choice(places)
        context = f"{name} lived at {place} for many years . she walked to the church every day ."
        qas = [
            {"id": f"{a}-who", "question": f"who lived at {place} ?",
             "answers": [{"text": name, "answer_start": 0}], "is_impossible": False},
            {"id": f"{a}-where", "question": f"where did {name} live ?",
             "answers": [{"text": place, "answer_start": context.index(place)}],
             "is_impossible": False},
            {"id": f"{a}-walk", "question": "where did she walk ?",
             "answers": [{"text": "the church", "answer_start": context.index("the church")}],
             "is_impossible": False},
            {"id": f"{a}-none", "question": "what did she eat ?", "answers": [],
             "is_impossible": True},
        ]  # fmt: skip
        if not version_2:
            qas = [qa for qa in qas if not qa["is_impossible"]]
            for qa in qas:
                del qa["is_impossible"]
        articles.append({"title": f"t{a}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "2.0" if version_2 else "1.1", "data": articles}


@pytest.fixture(scope="module")
def squad_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("squad")
    for name, version_2, seed in (
        ("train-v1.1.json", False, 0), ("dev-v1.1.json", False, 1),
        ("train-v2.0.json", True, 0), ("dev-v2.0.json", True, 1),
    ):  # fmt: skip
        (folder / name).write_text(json.dumps(squad_json(version_2, seed)))
    return folder


def test_run_squad_v1_writes_predictions_the_official_evaluation_scores(
    bert_base_dir, squad_dir, tmp_path
):
    output_dir = tmp_path / "squad_base"
    run(
        "run_squad.py", f"--vocab_file={bert_base_dir / 'vocab.txt'}",
        f"--bert_config_file={bert_base_dir / 'bert_config.json'}",
        f"--init_checkpoint={bert_base_dir / 'bert_model.ckpt'}", "--do_train=True",
        f"--train_file={squad_dir / 'train-v1.1.json'}", "--do_predict=True",
        f"--predict_file={squad_dir / 'dev-v1.1.json'}", "--train_batch_size=12",
        "--learning_rate=3e-5", "--num_train_epochs=2.0", "--max_seq_length=384",
        "--doc_stride=128", f"--output_dir={output_dir}/",
    )  # fmt: skip
    predictions = json.loads((output_dir / "predictions.json").read_text())
    nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    ids = [f"{a}-{q}" for a in range(3) for q in ("who", "where", "walk")]
    assert sorted(predictions) == sorted(ids) == sorted(nbest)
    assert all(predictions[i] == nbest[i][0]["text"] for i in ids)
    assert not (output_dir / "null_odds.json").exists()
    # python $SQUAD_DIR/evaluate-v1.1.py $SQUAD_DIR/dev-v1.1.json ./squad/predictions.json
    scores = subprocess.run(
        [sys.executable, os.path.join(REPO_DIR, "evaluate_squad.py"),
         str(squad_dir / "dev-v1.1.json"), str(output_dir / "predictions.json")],
        capture_output=True, text=True, check=True, env=SUBPROCESS_ENV,
    ).stdout  # fmt: skip
    scores = json.loads(scores)
    assert scores["total"] == 9
    # The scores worked out here by the official script's rules, of the written predictions (this
    # tiny model's, mostly wrong) and of a copy with four of them replaced by answers written
    # otherwise than the gold ones (case, article, punctuation) or half right.
    gold = {
        qa["id"]: [answer["text"] for answer in qa["answers"]]
        for article in json.loads((squad_dir / "dev-v1.1.json").read_text())["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    }
    edited = {
        **predictions,
        "0-who": gold["0-who"][0].upper() + ".",
        "0-walk": "church",
        "1-walk": "a church!",
        "2-where": f"{gold['2-where'][0]} for many",
    }
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    for name, answers in (("predictions.json", predictions), ("edited.json", edited)):
        path = output_dir / name if name == "predictions.json" else tmp_path / name
        scores = json.loads(
            subprocess.run(
                [sys.executable, os.path.join(REPO_DIR, "evaluate_squad.py"),
                 str(squad_dir / "dev-v1.1.json"), str(path)],
                capture_output=True, text=True, check=True, env=SUBPROCESS_ENV,
            ).stdout
        )  # fmt: skip
        exact = {i: max(_words(answers[i]) == _words(g) for g in gold[i]) for i in ids}
        f1 = {i: max(_token_f1(_words(answers[i]), _words(g)) for g in gold[i]) for i in ids}
        assert scores["exact_match"] == pytest.approx(100 * sum(exact.values()) / 9, abs=1e-9), name
        assert scores["f1"] == pytest.approx(100 * sum(f1.values()) / 9, abs=1e-9), name
    changed = ("0-who", "0-walk", "1-walk", "2-where")  # 3 exact, 1 at F1 0.5, by the rules
    assert sum(exact[i] for i in changed) == 3 and sum(f1[i] for i in changed) == pytest.approx(3.5)


def _words(text):
    """SQuAD's normalized answer words: lower case, no ASCII punctuation, no a / an / the."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return [word for word in text.split() if word not in ("a", "an", "the")]


def _token_f1(predicted, gold):
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def test_run_squad_v2_then_its_rerun_with_a_null_score_threshold(
    bert_base_dir, squad_dir, tmp_path
):
    output_dir = tmp_path / "squad_large"
    flags = [
        f"--vocab_file={bert_base_dir / 'vocab.txt'}",
        f"--bert_config_file={bert_base_dir / 'bert_config.json'}",
        f"--init_checkpoint={bert_base_dir / 'bert_model.ckpt'}",
        "--do_train=True",
        f"--train_file={squad_dir / 'train-v2.0.json'}",
        "--do_predict=True",
        f"--predict_file={squad_dir / 'dev-v2.0.json'}",
        "--train_batch_size=24",
        "--learning_rate=3e-5",
        "--num_train_epochs=2.0",
        "--max_seq_length=384",
        "--doc_stride=128",
        f"--output_dir={output_dir}/",
        "--version_2_with_negative=True",
    ]
    run("run_squad.py", *flags)
    null_odds = json.loads((output_dir / "null_odds.json").read_text())
    assert len(null_odds) == 12
    # python $SQUAD_DIR/evaluate-v2.0.py $SQUAD_DIR/dev-v2.0.json ./squad/predictions.json
    #   --na-prob-file ./squad/null_odds.json
    scores = json.loads(
        subprocess.run(
            [sys.executable, os.path.join(REPO_DIR, "evaluate_squad.py"),
             str(squad_dir / "dev-v2.0.json"), str(output_dir / "predictions.json"),
             "--na-prob-file", str(output_dir / "null_odds.json")],
            capture_output=True, text=True, check=True, env=SUBPROCESS_ENV,
        ).stdout
    )  # fmt: skip
    assert {"best_f1_thresh", "HasAns_total", "NoAns_total"} <= set(scores)
    # The rerun: --do_train=False and a threshold; a question answers "" iff null_odds > it.
    threshold = float(np.median(list(null_odds.values())))
    flags[3] = "--do_train=False"
    run("run_squad.py", *flags, f"--null_score_diff_threshold={threshold}")
    predictions = json.loads((output_dir / "predictions.json").read_text())
    for qas_id, odds in null_odds.items():
        assert (predictions[qas_id] == "") == (odds > threshold), qas_id
    assert 0 < sum(answer == "" for answer in predictions.values()) < 12


# ---------------------------------------------------------------------------------- features


def test_extract_features_writes_the_originals_json_lines(bert_base_dir, tmp_path):
    input_file = tmp_path / "input.txt"
    input_file.write_text("Who was Jim Henson ? ||| Jim Henson was a puppeteer\n")
    output_file = tmp_path / "output.jsonl"
    run(
        "extract_features.py", f"--input_file={input_file}", f"--output_file={output_file}",
        f"--vocab_file={bert_base_dir / 'vocab.txt'}",
        f"--bert_config_file={bert_base_dir / 'bert_config.json'}",
        f"--init_checkpoint={bert_base_dir / 'bert_model.ckpt'}", "--layers=-1,-2,-3,-4",
        "--max_seq_length=128", "--batch_size=8",
    )  # fmt: skip
    (line,) = output_file.read_text().splitlines()
    record = json.loads(line)
    assert record["linex_index"] == 0
    tokens = [feature["token"] for feature in record["features"]]
    assert tokens == [
        "[CLS]", "who", "was", "jim", "henson", "?", "[SEP]",
        "jim", "henson", "was", "a", "puppet", "##eer", "[SEP]",
    ]  # fmt: skip
    for feature in record["features"]:
        assert [layer["index"] for layer in feature["layers"]] == [-1, -2, -3, -4]
        assert all(len(layer["values"]) == 32 for layer in feature["layers"])
