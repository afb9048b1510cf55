"""run_ner.py end to end: learning, eval_results.txt, test_predictions.txt, the raw-text export, resume,
bad input.

The task is made here from Jane Austen's sentences (tests/fixtures): the names of some of her characters
are PER and some of her places LOC, tagged IOB2 in CoNLL-2003's four-column layout. An all-"O" tagger
scores entity F1 0.
"""

import json
import logging
import os
import random
import re
import shutil
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import load_google_checkpoint, save_google_checkpoint
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.models.networks import tagger_network, tagging_serving
from bert_tf.models.networks.task_info import write_labels
from bert_tf.preprocessing import GraphPreprocessor
from bert_tf.tasks import TASKS, exporting, run_script
from bert_tf.tasks.tagging import conll, entity_metrics
from bert_tf.tasks.tagging import task as tagging
from bert_tf.tokenization import FullTokenizer

from conftest import (
    REPO_DIR,
    SAMPLE_DIR,
    assert_like_the_tf2_load,
    finish,
    rebuilt_for_export,
    saved_model_cli_outputs,
    start_python,
    start_saved_model_cli_run,
)

TINY_CONFIG = str(SAMPLE_DIR / "bert_config_tiny.json")
VOCAB = str(SAMPLE_DIR / "vocab.txt")
PEOPLE = frozenset(
    "Emma Fanny Weston Elton Crawford Knightley Elinor Harriet Catherine Marianne Woodhouse Edmund "
    "Jane Dashwood Churchill Bertram Fairfax Norris Frank Isabella".split()
)
PLACES = frozenset(
    "Hartfield Mansfield London Bath Highbury Randalls Sotherton Donwell Norland England Portsmouth "
    "Enscombe Oxford Weymouth Richmond Cleveland".split()
)
MAX_SEQ_LENGTH = 32
# A word without wordpieces (a control character): [UNK] in the features and in the export alike.
NO_PIECES = "\x07"


def _iob2(words):
    """IOB2 labels: consecutive names of one type make one entity ("Frank Churchill")."""
    labels, previous = [], None
    for word in words:
        kind = "PER" if word in PEOPLE else "LOC" if word in PLACES else None
        labels.append("O" if kind is None else f"{'I' if kind == previous else 'B'}-{kind}")
        previous = kind
    return labels


def _austen_sentences(path):
    """Sentences of 6 to 25 words holding a place or a name, alternately: [(words, labels)]."""
    with_places, with_people = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        words = re.findall(r"\w+|[^\w\s]", line)
        if 6 <= len(words) <= 25:
            labels = _iob2(words)
            if any(label.endswith("LOC") for label in labels):
                with_places.append((words, labels))
            elif any(label != "O" for label in labels):
                with_people.append((words, labels))
    # The shorter list sets the length: as many sentences with places as with people only.
    return [sentence for pair in zip(with_places, with_people, strict=False) for sentence in pair]


def _conll_text(sentences):
    """CoNLL-2003's layout: word POS chunk NER, a -DOCSTART- line and a blank line per document."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for words, labels in sentences:
        lines += [f"{word} NNP I-NP {label}" for word, label in zip(words, labels, strict=True)]
        lines.append("")
    return "\n".join(lines) + "\n"


def write_austen_ner(data_dir, austen_sentences_path):
    """train/dev/test.txt; test.txt also holds a long sentence (several windows) and a piece-less word.

    Returns:
      The test sentences' words, in file order.
    """
    sentences = _austen_sentences(austen_sentences_path)
    train, dev, test = sentences[:240], sentences[240:300], sentences[300:330]

    def joined(sentences):  # one sentence longer than a window
        words = [word for words, _ in sentences for word in words] + [NO_PIECES, "."]
        return words, _iob2(words)

    train += [joined(train[i : i + 3]) for i in range(0, 24, 3)]
    test.append(joined(test[:4]))
    os.makedirs(data_dir, exist_ok=True)
    for name, split in (("train", train), ("dev", dev), ("test", test)):
        (data_dir / f"{name}.txt").write_text(_conll_text(split), encoding="utf-8")
    return [words for words, _ in test]


def ner_config(data_dir, output_dir, **overrides):
    values = dict(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, output_dir=str(output_dir),
        data_dir=str(data_dir), max_seq_length=MAX_SEQ_LENGTH, train_batch_size=32,
        eval_batch_size=32, predict_batch_size=32, learning_rate=1e-3, num_train_epochs=4.0,
        iterations_per_loop=1000, log_steps=1000, save_checkpoints_steps=1000, seed=7,
    )  # fmt: skip
    values.update(overrides)
    return tagging.TaggerSettings(**values)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, austen_sentences_path):
    """One train + eval + predict + export run, shared by the tests that read its outputs."""
    root = tmp_path_factory.mktemp("ner")
    test_words = write_austen_ner(root / "data", austen_sentences_path)
    config = ner_config(
        root / "data", root / "out", do_train=True, do_eval=True, do_predict=True,
        export_dir=str(root / "export"),
    )  # fmt: skip
    outcome = run_script(tagging.SPEC, config)
    return {"root": root, "outcome": outcome, "test_words": test_words}


def _read_results(path):
    return {key: float(value) for key, value in (line.split(" = ") for line in open(path))}


def _predicted_sentences(path):
    """The last column of a predictions file, one list per sentence."""
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if current:
                sentences.append(current)
            current = []
        else:
            current.append(line.split())
    return sentences + ([current] if current else [])


# ---------------------------------------------------------------------------------------- learning


def test_fine_tuning_learns_austen_people_and_places_to_a_clear_margin(trained):
    out = trained["root"] / "out"
    results = _read_results(out / "eval_results.txt")
    assert set(results) == {
        "eval_precision", "eval_recall", "eval_f1", "eval_accuracy", "eval_f1_LOC", "eval_f1_PER",
        "eval_loss", "loss", "global_step",
    }  # fmt: skip
    # All-"O" scores entity F1 0 (and token accuracy ~0.92); seeds fixed, runs give ~0.95.
    assert results["eval_f1"] >= 0.8
    assert results["eval_f1_PER"] >= 0.7 and results["eval_f1_LOC"] >= 0.7
    f1 = 2 * results["eval_precision"] * results["eval_recall"]
    assert results["eval_f1"] == pytest.approx(
        f1 / (results["eval_precision"] + results["eval_recall"])
    )
    windows = json.loads((out / "train.tf_record.settings.json").read_text())["info"]
    assert windows["num_real_examples"] > 248  # the long sentences became several windows
    assert results["global_step"] == int(windows["num_real_examples"] / 32 * 4.0)
    assert (out / "labels.txt").read_text() == "O\nB-LOC\nB-PER\nI-PER\n"
    task = json.loads((out / "task.json").read_text())
    assert (task["model_type"], task["labels"], task["max_seq_length"]) == (
        "tagger", ["O", "B-LOC", "B-PER", "I-PER"], MAX_SEQ_LENGTH,
    )  # fmt: skip


def test_test_predictions_keep_every_line_and_append_the_predicted_label(trained):
    source = (trained["root"] / "data" / "test.txt").read_text(encoding="utf-8").split("\n")
    written = (trained["root"] / "out" / "test_predictions.txt").read_text(encoding="utf-8")
    written = written.split("\n")
    assert len(written) == len(source)
    labels = {"O", "B-LOC", "B-PER", "I-PER"}
    for before, after in zip(source, written, strict=True):
        if not before.strip() or before.startswith("-DOCSTART-"):
            assert after == before
        else:
            assert after.startswith(before + " ") and after.split()[-1] in labels
    # Read back as conlleval does (gold is the 4th column, the prediction the 5th): the test set is
    # tagged about as well as dev, the over-long sentence included.
    sentences = _predicted_sentences(trained["root"] / "out" / "test_predictions.txt")
    scores = entity_metrics.conll_entity_metrics(
        [[c[3] for c in s] for s in sentences], [[c[4] for c in s] for s in sentences]
    )
    assert scores["f1"] >= 0.8


def test_a_labelled_test_file_is_scored_in_test_results_txt_as_seqeval_scores_it(trained):
    import seqeval.metrics

    out = trained["root"] / "out"
    results = _read_results(out / "test_results.txt")
    assert set(results) == set(_read_results(out / "eval_results.txt"))
    # The reference: seqeval (conlleval's rules) on test_predictions.txt's gold and predicted columns.
    sentences = _predicted_sentences(out / "test_predictions.txt")
    gold, predicted = [[c[3] for c in s] for s in sentences], [[c[4] for c in s] for s in sentences]
    assert results["eval_f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted), abs=1e-9)
    assert results["eval_precision"] == pytest.approx(
        seqeval.metrics.precision_score(gold, predicted), abs=1e-9
    )


def test_a_test_file_without_labels_writes_no_test_results_and_says_so(trained, tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    words = [
        line.split()[0] if line.strip() else ""
        for line in (trained["root"] / "data" / "test.txt").read_text(encoding="utf-8").split("\n")
    ]
    (data / "test.txt").write_text("\n".join(words), encoding="utf-8")
    checkpoint = str(trained["root"] / "out")
    with caplog.at_level(logging.INFO, logger="absl"):
        run_script(
            tagging.SPEC,
            ner_config(data, tmp_path / "out", do_predict=True, init_checkpoint=checkpoint),
        )
    assert (tmp_path / "out" / "test_predictions.txt").exists()
    assert not (tmp_path / "out" / "test_results.txt").exists()
    said = [r.getMessage() for r in caplog.records if "holds no labels" in r.getMessage()]
    assert len(said) == 1 and "test.txt" in said[0], said


# ---------------------------------------------------------------------------------------- export

_LOAD_EXPORT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    texts = tf.constant(json.loads(sys.argv[2]))
    out = model.signatures["serving_default"](text=texts)
    features = model.signatures["preprocess"](text=texts)
    by_ids = model.signatures["serve_ids"](**features)
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "labels": [[x.decode() for x in row] for row in out["labels"].numpy()],
        "words": [[x.decode() for x in row] for row in out["words"].numpy()],
        "word_count": out["word_count"].numpy().tolist(),
        "probabilities": out["probabilities"].numpy().tolist(),
        "by_ids": by_ids["probabilities"].numpy().tolist(),
        "by_ids_labels": [[x.decode() for x in row] for row in by_ids["labels"].numpy()],
        "windows": features["input_ids"].shape.as_list(),
        "word_ids": features["word_ids"].numpy().tolist(),
    }))
    """
)


def test_predicting_from_the_fine_tuned_checkpoint_in_a_new_output_dir_gives_the_run_s_labels(
    trained, tmp_path
):
    out = trained["root"] / "out"
    checkpoint = tf.train.latest_checkpoint(str(out))
    predicted = run_script(
        tagging.SPEC,
        ner_config(trained["root"] / "data", tmp_path, do_predict=True, init_checkpoint=checkpoint),
    )["predict"]
    assert (tmp_path / "test_predictions.txt").read_text() == (
        out / "test_predictions.txt"
    ).read_text()
    assert predicted == trained["outcome"]["predict"]


@pytest.fixture(scope="module")
def started(trained, tmp_path_factory):
    """The two checks that run in a new process, started together: their imports of TensorFlow
    (most of their time) overlap on a second core while the tests in between run."""
    texts = [" ".join(words) for words in trained["test_words"]] + [""]
    # A copy of the trained run, evaluated again by the real script.
    script_out = tmp_path_factory.mktemp("script") / "out"
    shutil.copytree(trained["root"] / "out", script_out)
    (script_out / "eval_results.txt").unlink()
    processes = {
        "export": start_python(
            ["-c", _LOAD_EXPORT, trained["outcome"]["export"], json.dumps(texts)]
        ),
        "script": start_python(
            [
                os.path.join(REPO_DIR, "run_ner.py"),
                f"--data_dir={trained['root'] / 'data'}",
                f"--bert_config_file={TINY_CONFIG}",
                f"--vocab_file={VOCAB}",
                f"--output_dir={script_out}",
                f"--max_seq_length={MAX_SEQ_LENGTH}",
                "--train_batch_size=32",
                "--num_train_epochs=4",
                "--do_train",
                "--do_eval",
                "--eval_batch_size=8",
                "--alsologtostderr",
            ]  # fmt: skip
        ),
    }
    yield {"processes": processes, "script_out": script_out}
    for process in processes.values():
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_the_export_labels_every_word_like_test_predictions_in_a_tensorflow_only_process(
    trained, started
):
    export_path = trained["outcome"]["export"]
    assert export_path == str(trained["root"] / "export" / "1")
    assets = trained["root"] / "export" / "1" / "assets"
    assert (assets / "labels.txt").read_text() == "O\nB-LOC\nB-PER\nI-PER\n"
    stdout, _ = finish(started["processes"]["export"])
    served = json.loads(stdout.strip().splitlines()[-1])
    assert served["signatures"] == ["preprocess", "serve_ids", "serving_default"]
    expected = [
        [columns[-1] for columns in sentence]
        for sentence in _predicted_sentences(trained["root"] / "out" / "test_predictions.txt")
    ]
    counts = [len(words) for words in trained["test_words"]] + [0]
    assert served["word_count"] == counts
    longest = max(counts)
    for row, words in enumerate(trained["test_words"]):
        assert served["words"][row] == words + [""] * (longest - len(words))
        assert served["labels"][row] == expected[row] + [""] * (longest - len(words))
    assert served["labels"][-1] == [""] * longest  # an empty text: no word, no label
    # The long sentence took several windows, and each of its words was predicted in exactly one.
    assert served["windows"][1] >= 3
    long_word_ids = np.array(served["word_ids"][len(counts) - 2])
    assert sorted(long_word_ids[long_word_ids >= 0].tolist()) == list(range(counts[-2]))
    # serve_ids on preprocess's windows is serving_default without the words.
    assert served["by_ids_labels"] == served["labels"]
    np.testing.assert_array_equal(served["by_ids"], served["probabilities"])


def test_saved_model_cli_runs_the_export_as_tf_serving_loads_it(trained, tmp_path):
    export_path = trained["outcome"]["export"]
    texts = [" ".join(words) for words in trained["test_words"]] + [""]
    process = start_saved_model_cli_run(export_path, {"text": texts}, tmp_path)
    loaded = tf.saved_model.load(export_path)
    expected = loaded.signatures["serving_default"](text=tf.constant(texts))
    assert_like_the_tf2_load(saved_model_cli_outputs(process, tmp_path), expected)


@pytest.mark.parametrize("max_seq_length, doc_stride", [(6, None), (8, 2), (5, 1)])
def test_in_graph_windows_are_the_windows_of_run_ners_features(max_seq_length, doc_stride):
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    preprocessor = tagging_serving.TaggingPreprocessor(
        GraphPreprocessor(VOCAB, True, max_seq_length), doc_stride
    )
    pool = "Emma Woodhouse , handsome clever Hartfield Knightley unbelievably . héllo 東京".split()
    pool += [NO_PIECES, "supercalifragilisticexpialidocious"]  # no pieces; more than a window
    rng = random.Random(max_seq_length)
    sentences = [[rng.choice(pool) for _ in range(rng.randint(1, 30))] for _ in range(8)]
    # Words are separated by any whitespace str.split() knows, Unicode's included.
    separators = [" ", "\t", "\u00a0", "\u3000", "\u2028", "\x1f", "  \n"]
    texts = [rng.choice(separators).join(words) for words in sentences] + [" \u2003 "]
    words, features = preprocessor(tf.constant(texts))
    assert words.to_list()[-1] == [] and words.to_list()[:-1] == [
        [word.encode() for word in sentence] for sentence in sentences
    ]
    features = {name: value.numpy() for name, value in features.items()}
    for row, sentence in enumerate(sentences):
        expected = conll.convert_sentence_to_features(
            conll.Sentence(sentence, None, list(range(len(sentence)))), row, {},
            max_seq_length, tokenizer, doc_stride,
        )  # fmt: skip
        length = features["input_ids"].shape[2]
        for window, feature in enumerate(expected):
            for name in ("input_ids", "input_mask", "segment_ids", "word_ids"):
                assert features[name][row, window].tolist() == feature[name][:length], (row, name)
        # Windows past the sentence's last are all padding.
        assert not features["input_mask"][row, len(expected) :].any()
        assert (features["word_ids"][row, len(expected) :] == -1).all()


def test_export_saved_model_rebuilds_the_run_s_tagger_from_task_json(
    trained, tmp_path, monkeypatch
):
    model, info = rebuilt_for_export(
        monkeypatch, tagging.SPEC, str(trained["root"] / "out"), str(tmp_path), VOCAB
    )
    assert (info.labels, info.settings.doc_stride) == (["O", "B-LOC", "B-PER", "I-PER"], None)
    # The rebuilt model holds the run's weights: eager tagging_outputs on the in-graph windows gives
    # the labels of test_predictions.txt.
    preprocessor = tagging_serving.TaggingPreprocessor(
        GraphPreprocessor(VOCAB, True, MAX_SEQ_LENGTH)
    )
    words = trained["test_words"][-3:]
    _, features = preprocessor(tf.constant([" ".join(sentence) for sentence in words]))
    outputs = tagging_serving.tagging_outputs(model, info.labels, features)
    predicted = _predicted_sentences(trained["root"] / "out" / "test_predictions.txt")[-3:]
    for row, sentence in enumerate(predicted):
        labels = [label.decode() for label in outputs["labels"][row].numpy()]
        assert labels[: len(sentence)] == [columns[-1] for columns in sentence]


# ---------------------------------------------------------------------------------------- the script


def test_run_ner_py_resumes_from_the_checkpoint_and_evaluates_the_same(trained, started):
    out = started["script_out"]
    _, stderr = finish(started["processes"]["script"])
    checkpoint = tf.train.latest_checkpoint(str(trained["root"] / "out"))
    # The run found its last checkpoint, had no step left to train, and evaluated those weights.
    assert f"Resumed from {out / os.path.basename(checkpoint)}" in stderr
    assert os.path.basename(tf.train.latest_checkpoint(str(out))) == os.path.basename(checkpoint)
    again = _read_results(out / "eval_results.txt")
    first = _read_results(trained["root"] / "out" / "eval_results.txt")
    assert {k: v for k, v in again.items() if "loss" not in k} == {
        k: v for k, v in first.items() if "loss" not in k
    }
    # Batches of 8 instead of 32 pad and sum differently: float32 rounding of a mean log-loss.
    assert again["eval_loss"] == pytest.approx(first["eval_loss"], rel=1e-5)


# ---------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "case, message",
    [
        ("column_count", r"train\.txt:5: 3 columns, but the first word line \(3\) has 4"),
        ("unseen_dev_label", r"dev\.txt:4: label 'B-MISC' does not occur in the training data"),
        ("test_column_count", r"test\.txt:4: 2 columns, but the first word line \(3\) has 4"),
        ("no_dev_file", r"no dev file \(expected one of dev\.txt, valid\.txt, eng\.testa\)"),
        ("unlabelled_dev", r"dev\.txt: the dev file has no label column"),
        ("unseen_test_label", r"test\.txt:4: label 'B-MISC' does not occur in the training data"),
    ],
)
def test_bad_input_names_the_file_and_line(tmp_path, case, message):
    data = tmp_path / "data"
    data.mkdir()
    good = "-DOCSTART- -X- -X- O\n\nEmma NNP I-NP B-PER\nwalked VBD I-VP O\n.  . O O\n"
    (data / "train.txt").write_text(good)
    (data / "dev.txt").write_text(good)
    (data / "test.txt").write_text(good)
    if case == "column_count":
        (data / "train.txt").write_text(good.replace(".  . O O", ". O O"))
    elif case == "unseen_dev_label":
        (data / "dev.txt").write_text(good.replace("walked VBD I-VP O", "walked VBD I-VP B-MISC"))
    elif case == "test_column_count":
        (data / "test.txt").write_text(good.replace("walked VBD I-VP O", "walked O"))
    elif case == "unseen_test_label":
        (data / "test.txt").write_text(good.replace("walked VBD I-VP O", "walked VBD I-VP B-MISC"))
    elif case == "no_dev_file":
        (data / "dev.txt").unlink()
    else:
        (data / "dev.txt").write_text("Emma\nwalked\n")
    predicting = {"do_train": True, "do_predict": True}  # the test file is checked before training
    steps = {"test_column_count": {"do_predict": True}, "unseen_test_label": predicting}
    steps = steps.get(case, {"do_eval": True})
    config = ner_config(data, tmp_path / "out", **steps)
    with pytest.raises(InputError, match=message):
        run_script(tagging.SPEC, config)


def test_label_column_and_two_column_files_choose_the_labels(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("Emma NNP B-NP B-PER\nwalked VBD B-VP O\n\nHe PRP B-NP O\n")
    run = tagging.TaggerRun(ner_config(data, tmp_path / "chunks", do_train=True, label_column=2))
    assert run.labels == ["B-NP", "B-VP"] and run.task_info().labels == ["B-NP", "B-VP"]
    (data / "train.txt").write_text("Emma Woodhouse\tB-PER\nwalked\tO\n")
    assert tagging.TaggerRun(ner_config(data, tmp_path / "tabs", do_train=True)).labels == [
        "O", "B-PER",
    ]  # fmt: skip


def test_a_prediction_only_run_takes_the_labels_of_the_earlier_run(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("Emma B-PER\nwalked O\n")
    labels = tagging.TaggerRun(ner_config(data, tmp_path / "out", do_train=True)).labels
    write_labels(tmp_path / "out", labels)  # what that run writes when it starts
    (data / "train.txt").unlink()
    assert tagging.TaggerRun(ner_config(data, tmp_path / "out", do_predict=True)).labels == [
        "O", "B-PER",
    ]  # fmt: skip
    with pytest.raises(InputError, match=r"no training file .*other/labels\.txt"):
        tagging.TaggerRun(ner_config(data, tmp_path / "other", do_predict=True))


def test_labels_without_chunk_prefixes_get_token_accuracy_only():
    results = tagging.evaluation_results(
        [["NNP", "VBD"], ["DT"]], [["NNP", "NN"], ["DT"]], ["DT", "NN", "NNP", "VBD"]
    )
    assert results == {"eval_accuracy": pytest.approx(2 / 3)}


# ---------------------------------------------------------------------------------------- checkpoints


def test_the_google_format_head_is_cls_tagging_and_export_finds_it(tmp_path):
    config = BertConfig.from_json_file(TINY_CONFIG)
    model = tagger_network.BertTagger(config, num_labels=5)
    prefix = save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    shapes = dict(tf.train.list_variables(prefix))
    assert shapes["cls/tagging/output_weights"] == [5, config.hidden_size]
    assert shapes["cls/tagging/output_bias"] == [5]
    assert TASKS["tagger"].google_head == "cls/tagging/output_weights"
    info = exporting.infer_from_google(prefix)
    assert (info.model_type, info.labels) == ("tagger", ["0", "1", "2", "3", "4"])
    loaded = TASKS["tagger"].build_model(config, info)
    load_google_checkpoint(loaded, prefix)
    inputs = {"input_ids": tf.constant([[101, 5616, 3536, 102]])}
    np.testing.assert_array_equal(
        loaded(inputs, training=False)["logits"], model(inputs, training=False)["logits"]
    )
