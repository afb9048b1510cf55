"""BertMultipleChoice, BertTokenClassifier and BertQuestionAnswerer on raw strings: fit, predict, save, export, from_preset
of a script's run.

References: run_swag.py's own test_results.tsv, run_ner.py's test_predictions.txt, export_saved_model.py's export of the same weights,
and the cross-entropy of the logits in float64 numpy.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_run_ner import _conll_text, _predicted_sentences, ner_config
from test_run_squad import QUESTIONS as SQUAD_QUESTIONS
from test_run_squad import make_config, squad_file
from test_run_swag import swag_config, write_swag

from bert_tf import (
    BertMultipleChoice,
    BertPreprocessor,
    BertQuestionAnswerer,
    BertTokenClassifier,
)
from bert_tf.checkpoints import save_google_checkpoint
from bert_tf.models.networks.task_info import read_task_info, write_task_info
from bert_tf.tasks import run_script
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint
from bert_tf.tasks.multiple_choice import task as multiple_choice
from bert_tf.tasks.squad import task as squad
from bert_tf.tasks.tagging import task as tagging

from conftest import SAMPLE_DIR, assert_float32_close

VOCAB = str(SAMPLE_DIR / "vocab.txt")
CONTEXTS = ["The lady was very tired after the walk.", "She said that she was sad!", "Ünïcode"]
CHOICES = [
    ["She sat down to rest.", "She ran home."],
    ["She cried.", "She laughed, very happy."],
    ["ascii", ""],
]


def _tiny_config():
    return json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())


def _cross_entropy(logits, labels):
    logits = np.asarray(logits, np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels].mean()


@pytest.fixture(scope="module")
def chooser():
    """A tiny random-init model fitted a few steps on Python lists: the restful ending is right."""
    keras.utils.set_random_seed(11)
    model = BertMultipleChoice(BertPreprocessor(VOCAB, max_seq_length=24), _tiny_config())
    model.compile(learning_rate=1e-3)  # the recipe, at a random-init tiny model's rate
    contexts = [f"{name} was tired after the walk." for name in ("Emma", "Jane", "Anne", "Fanny")]
    choices = [["she sat down to rest.", "she ran home."], ["she ran home.", "she slept."]] * 2
    labels = np.array([0, 1, 0, 1])
    before = model.evaluate((contexts, choices), labels, verbose=0, return_dict=True)["loss"]
    history = model.fit((contexts, choices), labels, batch_size=2, epochs=4, verbose=0)
    return model, (contexts, choices), labels, before, history


def test_fit_on_python_lists_learns_and_evaluate_gives_the_logits_cross_entropy(chooser):
    model, x, labels, before, history = chooser
    schedule = model.optimizer.get_config()["learning_rate"]["config"]
    # 4 questions / 2 per batch * 4 epochs = 8 steps, the first 10% of them (0) warming up.
    assert schedule == {"init_lr": 1e-3, "num_train_steps": 8, "num_warmup_steps": 0}
    logits = model.predict(x, batch_size=3, verbose=0)
    assert logits.shape == (4, 2)
    results = model.evaluate(x, labels, verbose=0, return_dict=True)
    assert results["loss"] < before
    np.testing.assert_allclose(results["loss"], _cross_entropy(logits, labels), rtol=1e-5)
    assert results["accuracy"] == np.mean(logits.argmax(axis=1) == labels)


def test_save_and_load_model_give_the_same_logits_under_safe_mode(chooser, tmp_path):
    model = chooser[0]
    path = str(tmp_path / "chooser.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)  # safe_mode=True by default
    assert isinstance(loaded, BertMultipleChoice)
    np.testing.assert_allclose(
        loaded.predict((CONTEXTS, CHOICES), verbose=0),
        model.predict((CONTEXTS, CHOICES), verbose=0),
        rtol=0,
        atol=1e-5,
    )


def _served_pair(model, tmp_path, request, **export_settings):
    """serving_default's outputs of `request` from model.export and from export_saved_model.py's
    export of the same weights (export_checkpoint), after checking they have the same signatures."""
    path = model.export(str(tmp_path / "models" / "model" / "1"))
    save_google_checkpoint(model.task_model, str(tmp_path / "ckpt" / "bert_model.ckpt"))
    write_task_info(str(tmp_path / "ckpt"), model.task_info())
    reference = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(tmp_path / "ckpt" / "bert_model.ckpt"),
            export_dir=str(tmp_path / "reference"),
            vocab_file=VOCAB,
            **export_settings,
        )
    )
    ours, theirs = tf.saved_model.load(path), tf.saved_model.load(reference)
    assert sorted(ours.signatures) == sorted(theirs.signatures)
    return ours.signatures["serving_default"](**request), theirs.signatures["serving_default"](
        **request
    )


def test_export_is_export_saved_model_s(chooser, tmp_path):
    model = chooser[0]
    request = {"context": tf.constant(CONTEXTS), "choices": tf.constant(CHOICES)}
    served, expected = _served_pair(model, tmp_path, request, max_seq_length=24)
    np.testing.assert_allclose(served["probabilities"], expected["probabilities"], atol=1e-6)
    logits = model.predict((CONTEXTS, CHOICES), verbose=0)
    np.testing.assert_allclose(served["probabilities"], tf.nn.softmax(logits), rtol=0, atol=1e-5)
    np.testing.assert_array_equal(served["choice"], logits.argmax(axis=1))


def test_bad_input_is_one_line_naming_the_argument(chooser):
    model = chooser[0]
    with pytest.raises(ValueError, match=r"^x\[1\]\[1\] has 1 choices, but x\[1\]\[0\] has 2"):
        model.predict((CONTEXTS[:2], [["a", "b"], ["c"]]))
    with pytest.raises(ValueError, match=r"^y\[1\] = 2 is out of range for num_classes=2"):
        model.fit((CONTEXTS[:2], CHOICES[:2]), [0, 2])
    with pytest.raises(ValueError, match=r"^x: give \(contexts, choices\)"):
        model.predict(CONTEXTS)
    with pytest.raises(ValueError, match=r"^x\[1\]: 2 lists of choices for 3 contexts"):
        model.predict((CONTEXTS, CHOICES[:2]))


@pytest.mark.slow  # a script run: about 20 s
def test_from_preset_of_a_run_swag_run_predicts_its_test_results(tmp_path):
    sizes = (("train", 16), ("val", 4), ("test", 6))
    test_rows, _ = write_swag(tmp_path / "data", sizes=sizes)
    config = swag_config(
        tmp_path / "data", tmp_path / "out", do_train=True, do_predict=True, num_train_epochs=1.0
    )
    run_script(multiple_choice.SPEC, config)
    model = BertMultipleChoice.from_preset(tmp_path / "out", vocabulary=VOCAB)
    assert model.task_info().to_json() == read_task_info(str(tmp_path / "out")).to_json()
    # SWAG's context is sent1, a choice sent2 + " " + ending (bert_tf/tasks/multiple_choice/swag.py).
    contexts = [row[4] for row in test_rows]
    choices = [[f"{row[5]} {ending}" for ending in row[7:11]] for row in test_rows]
    expected = np.loadtxt(tmp_path / "out" / "test_results.tsv")
    probabilities = tf.nn.softmax(model.predict((contexts, choices), batch_size=4, verbose=0))
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"^preset folder .* does not exist"):
        BertMultipleChoice.from_preset(tmp_path / "missing")


# ---------------------------------------------------------------------------------- BertTokenClassifier

LABELS = ["O", "B-PER", "I-PER"]
SENTENCES = ["Emma visited Harriet .", "Jane Fairfax came home", ["Harriet", "Smith", "smiled"]]
TAGS = [[1, 0, 1, 0], [1, 2, 0, 0], [1, 2, 0]]


def _assert_exported_like_export_saved_model(model, tmp_path, texts, **export_settings):
    request = {"text": tf.constant(texts)}
    served, expected = _served_pair(model, tmp_path, request, **export_settings)
    np.testing.assert_allclose(served["probabilities"], expected["probabilities"], atol=1e-6)
    np.testing.assert_array_equal(served["labels"], expected["labels"])
    return served


@pytest.fixture(scope="module")
def tagger():
    """A tiny random-init tagger fitted a few steps on Python lists (texts and word lists)."""
    keras.utils.set_random_seed(13)
    model = BertTokenClassifier(BertPreprocessor(VOCAB, max_seq_length=16), _tiny_config(), LABELS)
    model.compile(learning_rate=1e-3)
    before = model.evaluate(SENTENCES, TAGS, verbose=0, return_dict=True)["loss"]
    history = model.fit(SENTENCES * 4, TAGS * 4, batch_size=4, epochs=3, verbose=0)
    return model, before, history


def test_tagger_fits_word_labels_and_evaluate_gives_the_words_cross_entropy(tagger):
    model, before, history = tagger
    probabilities = model.predict(SENTENCES, batch_size=2)
    assert probabilities.shape == (3, 4, 3)
    np.testing.assert_array_equal(probabilities[2, 3], 0.0)  # past the third text's 3 words
    results = model.evaluate(SENTENCES, TAGS, verbose=0, return_dict=True)
    assert results["loss"] < before
    probabilities = np.asarray(probabilities, np.float64)
    words = [(row, word, tag) for row, tags in enumerate(TAGS) for word, tag in enumerate(tags)]
    loss = -np.mean([np.log(probabilities[row, word, tag]) for row, word, tag in words])
    np.testing.assert_allclose(results["loss"], loss, rtol=1e-4)
    right = [probabilities[row, word].argmax() == tag for row, word, tag in words]
    np.testing.assert_allclose(results["accuracy"], np.mean(right), rtol=1e-6)
    labels = model.predict_labels(SENTENCES)
    assert [len(row) for row in labels] == [4, 4, 3]


def test_tagger_save_load_and_export_give_the_same_word_probabilities(tagger, tmp_path):
    model = tagger[0]
    model.save(str(tmp_path / "tagger.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "tagger.keras"))
    assert isinstance(loaded, BertTokenClassifier) and loaded.labels == LABELS
    texts = [text if isinstance(text, str) else " ".join(text) for text in SENTENCES]
    # A text longer than a window (14 pieces) is read in run_ner.py's windows.
    texts.append(" ".join(["Emma Woodhouse , handsome , clever , and rich ,"] * 3))
    probabilities = model.predict(texts)
    np.testing.assert_allclose(loaded.predict(texts), probabilities, rtol=0, atol=1e-5)
    served = _assert_exported_like_export_saved_model(model, tmp_path, texts, max_seq_length=16)
    np.testing.assert_allclose(served["probabilities"], probabilities, rtol=0, atol=1e-5)
    expected = [
        row + [""] * (len(served["labels"][0]) - len(row)) for row in model.predict_labels(texts)
    ]
    assert served["labels"].numpy().astype(str).tolist() == expected


def test_tagger_bad_input_is_one_line_naming_the_argument(tagger):
    model = tagger[0]
    with pytest.raises(ValueError, match=r"^y\[0\]: 2 labels for 4 words$"):
        model.fit(SENTENCES[:1], [[0, 1]])
    with pytest.raises(ValueError, match=r"^y\[1\]\[0\] = 3 is out of range for 3 labels"):
        model.fit(SENTENCES[:2], [TAGS[0], [3, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"^x\[0\]\[1\] = 'two words' is not one word$"):
        model.predict([["one", "two words"]])
    with pytest.raises(ValueError, match=r"^labels must be a list of at least 2 strings"):
        BertTokenClassifier(model.preprocessor, _tiny_config(), ["O"])


@pytest.mark.slow  # a script run: about 20 s
def test_tagger_from_preset_of_a_run_ner_run_predicts_its_test_predictions(tmp_path):
    people = [["Emma", "smiled", "."], ["Mr", "Knightley", "walked", "home"], ["It", "rained"]]
    tags = [["B-PER", "O", "O"], ["B-PER", "I-PER", "O", "O"], ["O", "O"]]
    test = [["Harriet", "and", "Emma", "laughed"], ["Jane", "Fairfax", "sang"] * 12]
    os.makedirs(tmp_path / "data")
    (tmp_path / "data" / "train.txt").write_text(
        _conll_text(list(zip(people, tags, strict=True))) * 3
    )
    test_tags = [["O"] * len(words) for words in test]
    (tmp_path / "data" / "test.txt").write_text(
        _conll_text(list(zip(test, test_tags, strict=True)))
    )
    config = ner_config(
        tmp_path / "data", tmp_path / "out", do_train=True, do_predict=True, train_batch_size=3
    )
    run_script(tagging.SPEC, config)
    model = BertTokenClassifier.from_preset(tmp_path / "out", vocabulary=VOCAB)
    assert model.task_info().to_json() == read_task_info(str(tmp_path / "out")).to_json()
    predicted = _predicted_sentences(tmp_path / "out" / tagging.PREDICTIONS_FILE)
    assert model.predict_labels(test) == [[line[-1] for line in lines] for lines in predicted]
    with pytest.raises(ValueError, match=r"^labels=\['O', 'X'\], but the run in .* has labels="):
        BertTokenClassifier.from_preset(tmp_path / "out", ["O", "X"], vocabulary=VOCAB)


# ---------------------------------------------------------------------------------- BertQuestionAnswerer

# The second context spans several windows (doc_stride 6, 13 pieces a window); its answer is late.
QUESTIONS = ["Who smiled?", "Who sang?", "Who smiled?"]
QA_CONTEXTS = [
    "Emma smiled at Harriet.",
    "After the long walk to the house, under the old trees by the river near the church, Jane sang.",
    "In the garden, after tea, Ünïcode smiled.",
]
ANSWERS = ["Emma", "Jane", "Ünïcode"]


@pytest.fixture(scope="module")
def answerer():
    """A tiny random-init model fitted on Python lists to answer with the named person."""
    keras.utils.set_random_seed(17)
    preprocessor = BertPreprocessor(VOCAB, max_seq_length=24)
    model = BertQuestionAnswerer(preprocessor, _tiny_config(), doc_stride=6, max_query_length=8)
    model.compile(learning_rate=1e-3)
    spans = [
        [context.index(a), context.index(a) + len(a)]
        for context, a in zip(QA_CONTEXTS, ANSWERS, strict=True)
    ]
    model.fit((QUESTIONS * 4, QA_CONTEXTS * 4), spans * 4, batch_size=4, epochs=4, verbose=0)
    return model, spans


def test_answerer_fits_character_spans_and_answers_with_them(answerer):
    model, spans = answerer
    predicted = model.predict((QUESTIONS, QA_CONTEXTS), batch_size=2)
    assert predicted["answer"] == ANSWERS
    assert predicted["score"].shape == (3,)
    with pytest.raises(ValueError, match=r"^y\[1\] = \[3, 99\] is no answer in a context of 94 "):
        model.fit((QUESTIONS[:2], QA_CONTEXTS[:2]), [[0, 4], [3, 99]])
    with pytest.raises(ValueError, match=r"^x: 2 questions and 3 contexts$"):
        model.predict((QUESTIONS[:2], QA_CONTEXTS))
    with pytest.raises(ValueError, match=r"^max_seq_length=24 must exceed max_query_length=30"):
        BertQuestionAnswerer(model.preprocessor, _tiny_config(), max_query_length=30)


def test_answerer_save_load_and_export_give_the_same_answers(answerer, tmp_path):
    model = answerer[0]
    model.save(str(tmp_path / "qa.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "qa.keras"))
    assert isinstance(loaded, BertQuestionAnswerer) and loaded.settings == model.settings
    predicted = model.predict((QUESTIONS, QA_CONTEXTS))
    again = loaded.predict((QUESTIONS, QA_CONTEXTS))
    assert again["answer"] == predicted["answer"]
    np.testing.assert_allclose(again["score"], predicted["score"], rtol=0, atol=1e-5)
    request = {"question": tf.constant(QUESTIONS), "context": tf.constant(QA_CONTEXTS)}
    served, expected = _served_pair(model, tmp_path, request)
    assert served["answer"].numpy().tolist() == expected["answer"].numpy().tolist()
    assert [a.decode() for a in served["answer"].numpy()] == predicted["answer"]
    np.testing.assert_allclose(served["score"], expected["score"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(served["score"], predicted["score"], rtol=0, atol=1e-5)


@pytest.mark.slow  # a script run: about 20 s
def test_answerer_from_preset_of_a_run_squad_run_answers_as_its_predictions(tmp_path):
    data_file = squad_file(tmp_path / "data.json", version_2=False)
    config_file = tmp_path / "bert_config.json"
    config_file.write_text(json.dumps(_tiny_config()))
    config = make_config(
        str(config_file), tmp_path / "out", train_file=data_file, predict_file=data_file,
        do_train=True, do_predict=True, num_train_epochs=16.0,
    )  # fmt: skip
    run_script(squad.SPEC, config)
    model = BertQuestionAnswerer.from_preset(tmp_path / "out", vocabulary=VOCAB)
    assert model.task_info().to_json() == read_task_info(str(tmp_path / "out")).to_json()
    ids = list(SQUAD_QUESTIONS)
    questions = [SQUAD_QUESTIONS[i][0] for i in ids]
    contexts = [SQUAD_QUESTIONS[i][1] for i in ids]
    predicted = model.predict((questions, contexts), batch_size=2)
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert dict(zip(ids, predicted["answer"], strict=True)) == predictions
    nbest = json.loads((tmp_path / "out" / "nbest_predictions.json").read_text())
    best = [next(entry for entry in nbest[i] if entry["text"]) for i in ids]
    scores = [entry["start_logit"] + entry["end_logit"] for entry in best]
    assert_float32_close(predicted["score"], scores)
    with pytest.raises(ValueError, match=r"^doc_stride=5, but the run in .* has doc_stride=16$"):
        BertQuestionAnswerer.from_preset(tmp_path / "out", vocabulary=VOCAB, doc_stride=5)
