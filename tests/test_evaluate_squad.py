"""bert_tf.squad_evaluation and evaluate_squad.py: the official SQuAD scores, worked by hand.

Expected values are fractions written out from the official scripts' rules (see each comment); they
are compared with rel=1e-12 because a hand-written fraction such as 450 / 7 and the scripts' running
sum of per-question floats may differ in the last bit.
"""

import json
import logging
import subprocess
import sys

import pytest

import evaluate_squad
from bert_tf import squad_evaluation as squad
from bert_tf.errors import InputError

from conftest import REPO_DIR

REL = 1e-12


def _dataset(*questions, version="v2.0", title="Super_Bowl_50"):
    """A one-article SQuAD file; each question is (id, [gold texts]) and, for v2.0, has is_impossible."""
    qas = []
    for qid, answers in questions:
        qa = {
            "id": qid,
            "question": "?",
            "answers": [{"text": t, "answer_start": 0} for t in answers],
        }
        if version != "1.1":
            qa["is_impossible"] = not answers
        qas.append(qa)
    return {
        "version": version,
        "data": [{"title": title, "paragraphs": [{"context": "...", "qas": qas}]}],
    }


# Two answerable questions and two unanswerable ones.
FOUR_QUESTIONS = _dataset(
    ("q1", ["Denver Broncos", "The Denver Broncos!"]),
    ("q2", ["Santa Clara, California", "Levi's Stadium"]),
    ("q3", []),
    ("q4", []),
)
FOUR_PREDICTIONS = {
    "q1": "denver broncos",  # exact after normalisation: 1, 1
    "q2": "Levi's Stadium in Santa Clara",  # exact 0; F1 max(1/2, 4/7) = 4/7 (see below)
    "q3": "",  # unanswerable, answered "": 1, 1
    "q4": "Broncos",  # unanswerable, answered: 0, 0
}


# --------------------------------------------------------------------------- normalisation and scores


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("The Cat!", "cat"),
        ("  An  apple,\ta day ", "apple day"),
        ("U.S.", "us"),
        ("an-apple", "anapple"),  # punctuation goes first, so "an" is no longer a word
        ("Théâtre", "théâtre"),  # accents stay; "the" inside a word stays
        ("Über", "über"),
        ("“Hello” — world", "“hello” — world"),  # only ASCII punctuation is removed
        ("a’s", "’s"),  # ’ is not removed, but it ends the word "a", which then goes
        ("new\u00a0york", "new york"),  # str.split() splits at unicode whitespace
        ("the a an", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert squad.normalize_answer(text) == normalized


def test_f1_counts_common_tokens_with_multiplicity():
    # Gold [cat, sat], predicted [cat, sat, on, mat]: P 2/4, R 2/2 -> 2/3.
    assert squad.f1_score("the cat sat", "cat sat on a mat") == pytest.approx(2 / 3, rel=REL)
    # Gold [x, y, y], predicted [y, y, y, z]: 2 common -> P 2/4, R 2/3 -> 4/7.
    assert squad.f1_score("x y y", "y y y z") == pytest.approx(4 / 7, rel=REL)
    assert squad.f1_score("cat", "dog") == 0.0


def test_empty_answers_match_only_each_other():
    assert (squad.exact_score("", ""), squad.f1_score("", "")) == (1, 1.0)
    assert (squad.exact_score("The", "!"), squad.f1_score("The", "!")) == (1, 1.0)
    assert (squad.exact_score("", "cat"), squad.f1_score("", "cat")) == (0, 0.0)
    assert (squad.exact_score("cat", ""), squad.f1_score("cat", "")) == (0, 0.0)


# --------------------------------------------------------------------------- the v2.0 dict


def test_v2_scores_and_breakdown_worked_by_hand():
    results = squad.evaluate_v2(FOUR_QUESTIONS, FOUR_PREDICTIONS)
    # q2's F1: against "Santa Clara, California" 2 of [levis stadium in santa clara] -> P 2/5, R 2/3,
    # F1 1/2; against "Levi's Stadium" P 2/5, R 1 -> 4/7. Per question F1: 1, 4/7, 1, 0.
    assert list(results) == [
        "exact",
        "f1",
        "total",
        "HasAns_exact",
        "HasAns_f1",
        "HasAns_total",
        "NoAns_exact",
        "NoAns_f1",
        "NoAns_total",
    ]
    assert results["exact"] == 50.0
    assert results["f1"] == pytest.approx(100 * (1 + 4 / 7 + 1) / 4, rel=REL)
    assert results["total"] == 4
    assert results["HasAns_exact"] == 50.0
    assert results["HasAns_f1"] == pytest.approx(100 * (1 + 4 / 7) / 2, rel=REL)
    assert (results["HasAns_total"], results["NoAns_total"]) == (2, 2)
    assert results["NoAns_exact"] == results["NoAns_f1"] == 50.0


def test_gold_answers_that_normalise_to_empty_are_dropped():
    # Golds ["The", "cat"]: "The" normalises to "" and is dropped, so "" does not match.
    results = squad.evaluate_v2(_dataset(("q", ["The", "cat"])), {"q": ""})
    assert (results["exact"], results["f1"]) == (0.0, 0.0)
    # With every gold empty the question has gold [""] (yet still counts as HasAns).
    results = squad.evaluate_v2(_dataset(("q", ["The", "!"])), {"q": "an"})
    assert (results["exact"], results["HasAns_total"]) == (100.0, 1)


def test_na_probs_above_the_threshold_answer_no_answer_and_give_best_thresholds():
    na_probs = {"q1": 0.1, "q2": 0.2, "q4": 0.3, "q3": 0.8}
    results = squad.evaluate_v2(FOUR_QUESTIONS, FOUR_PREDICTIONS, na_probs, na_prob_thresh=0.25)
    # q4 (0.3) and q3 (0.8) turn into "": both unanswerable, so both score 1.
    assert results["exact"] == 75.0
    assert results["f1"] == pytest.approx(100 * (1 + 4 / 7 + 1 + 1) / 4, rel=REL)
    assert results["NoAns_exact"] == 100.0
    assert results["HasAns_f1"] == pytest.approx(100 * (1 + 4 / 7) / 2, rel=REL)
    # Best threshold, from "everything unanswered" (2 right) up the probabilities:
    #   exact: q1 +1 -> 3 (best, 0.1); q2 +0; q4 answered "Broncos" -1 -> 2; q3 answered "" +0.
    #   f1:    q1 +1 -> 3 (0.1); q2 +4/7 -> 3 4/7 (best, 0.2); q4 -1; q3 +0.
    assert list(results)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    assert (results["best_exact"], results["best_exact_thresh"]) == (75.0, 0.1)
    assert results["best_f1"] == pytest.approx(100 * (3 + 4 / 7) / 4, rel=REL)
    assert results["best_f1_thresh"] == 0.2


def test_default_threshold_keeps_every_prediction():
    na_probs = {"q1": 0.9, "q2": 0.9, "q3": 0.9, "q4": 1.0}  # none exceeds 1.0
    with_probs = squad.evaluate_v2(FOUR_QUESTIONS, FOUR_PREDICTIONS, na_probs)
    without = squad.evaluate_v2(FOUR_QUESTIONS, FOUR_PREDICTIONS)
    assert {k: with_probs[k] for k in without} == without
    assert "best_exact" not in without


def test_best_threshold_ties_follow_the_na_prob_files_order():
    # The official scan takes tied probabilities one at a time in the file's order and keeps a
    # threshold whenever the running score beats the best, even between two tied questions.
    data = _dataset(("has", ["cat"]), ("none", []))
    predictions = {"has": "cat", "none": "dog"}
    first_has = squad.evaluate_v2(data, predictions, {"has": 0.5, "none": 0.5})
    # Start 1 (none right); "has" +1 -> 2 (best at 0.5); "none" -1 -> 1.
    assert (first_has["best_exact"], first_has["best_exact_thresh"]) == (100.0, 0.5)
    first_none = squad.evaluate_v2(data, predictions, {"none": 0.5, "has": 0.5})
    # Start 1; "none" -1 -> 0; "has" +1 -> 1, not better: the threshold stays 0.0.
    assert (first_none["best_exact"], first_none["best_exact_thresh"]) == (50.0, 0.0)


def test_best_threshold_tests_the_raw_prediction_text():
    # "the" normalises to "" (so it scores 1 on the unanswerable question), but it is a non-empty
    # string, so the official scan counts answering it as a loss: start 1, then 1 - 1 = 0.
    results = squad.evaluate_v2(_dataset(("none", [])), {"none": "the"}, {"none": 0.5})
    assert results["exact"] == 100.0
    assert (results["best_exact"], results["best_exact_thresh"]) == (100.0, 0.0)


def test_missing_predictions_score_zero_and_are_reported(caplog):
    predictions = {"q1": "Denver Broncos", "q4": "", "not-in-data": "ignored"}
    with caplog.at_level(logging.WARNING):
        results = squad.evaluate_v2(FOUR_QUESTIONS, predictions, {"q1": 0.0, "q4": 0.9}, 0.5)
    # q1 right, q4 right (0.9 > 0.5 -> ""), q2 and q3 missing -> 0 whatever their kind.
    assert (results["exact"], results["total"]) == (50.0, 4)
    assert (results["HasAns_exact"], results["NoAns_exact"]) == (50.0, 50.0)
    # Best: start 1 (q4; q3 has no prediction); q1 +1 -> 2 (0.0 is not above 0.0); q4 "" +0.
    assert (results["best_exact"], results["best_exact_thresh"]) == (50.0, 0.0)
    assert "2 of 4 questions have no prediction and score 0: q2, q3" in caplog.text


# --------------------------------------------------------------------------- v1.1 data


def test_v1_data_reports_the_v1_script_numbers_first():
    data = _dataset(("a", ["The", "cat"]), ("b", ["x y"]), ("c", ["z"]), version="1.1")
    predictions = {"a": "", "b": "x"}
    results = squad.evaluate(data, predictions)
    # v1.1 keeps gold "The": "" matches it exactly (EM 1), but F1 of no tokens is 0. "b": F1 2/3.
    assert results["exact_match"] == pytest.approx(100 / 3, rel=REL)
    assert results["f1"] == pytest.approx(100 * (2 / 3) / 3, rel=REL)
    # v2.0 drops "The": "a" scores 0 there; its F1 stays in HasAns_f1.
    assert list(results) == [
        "exact_match",
        "f1",
        "exact",
        "total",
        "HasAns_exact",
        "HasAns_f1",
        "HasAns_total",
    ]
    assert results["exact"] == 0.0
    assert results["HasAns_f1"] == pytest.approx(100 * (2 / 3) / 3, rel=REL)
    assert squad.evaluate_v1(data, predictions) == {
        "exact_match": results["exact_match"],
        "f1": results["f1"],
    }


def test_v1_f1_of_two_empty_answers_is_zero():
    data = _dataset(("a", ["the"]), version="1.1")
    assert squad.evaluate_v1(data, {"a": "a"}) == {"exact_match": 100.0, "f1": 0.0}
    assert squad.evaluate_v2(data, {"a": "a"})["f1"] == 100.0


def test_v2_data_gives_only_the_v2_dict():
    assert squad.evaluate(FOUR_QUESTIONS, FOUR_PREDICTIONS) == squad.evaluate_v2(
        FOUR_QUESTIONS, FOUR_PREDICTIONS
    )


# --------------------------------------------------------------------------- bad input


def test_malformed_data_names_the_article_and_question():
    data = _dataset(("q1", ["x"]), ("q2", ["y"]))
    del data["data"][0]["paragraphs"][0]["qas"][1]["answers"]
    with pytest.raises(InputError, match=r"dev.json: article 0 \('Super_Bowl_50'\) question 'q2'"):
        squad.evaluate(data, {}, sources=("dev.json", "p", "n"))
    with pytest.raises(InputError, match="dev.json: needs 'data'"):
        squad.evaluate({"version": "v2.0"}, {}, sources=("dev.json", "p", "n"))
    with pytest.raises(InputError, match="question 'q1': the id is used twice"):
        squad.evaluate(_dataset(("q1", ["x"]), ("q1", ["y"])), {})
    with pytest.raises(InputError, match="no questions"):
        squad.evaluate({"data": []}, {})


def test_bad_predictions_and_na_probs_name_the_file_and_question():
    sources = ("dev.json", "pred.json", "na.json")
    with pytest.raises(InputError, match="pred.json: question 'q1': the answer must be a string"):
        squad.evaluate(FOUR_QUESTIONS, {"q1": ["x"]}, sources=sources)
    with pytest.raises(InputError, match="pred.json: must be a JSON object"):
        squad.evaluate(FOUR_QUESTIONS, ["x"], sources=sources)
    with pytest.raises(InputError, match="na.json: no value for question 'q2'"):
        squad.evaluate(FOUR_QUESTIONS, FOUR_PREDICTIONS, {"q1": 0.1}, sources=sources)
    with pytest.raises(InputError, match="na.json: question 'q1': 'high' is not a number"):
        squad.evaluate(FOUR_QUESTIONS, FOUR_PREDICTIONS, {"q1": "high"}, sources=sources)


def test_load_json_names_the_file_and_line(tmp_path):
    path = tmp_path / "pred.json"
    path.write_text('{"q1": "x",\n "q2": }', encoding="utf-8")
    with pytest.raises(InputError, match=r"pred.json:2: not valid JSON \(column 8"):
        squad.load_json(str(path))
    with pytest.raises(InputError, match="missing.json does not exist"):
        squad.load_json(str(tmp_path / "missing.json"))


# --------------------------------------------------------------------------- the script


def _write(directory, name, value):
    path = directory / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


def test_script_prints_the_official_json(tmp_path):
    data = _write(tmp_path, "dev.json", FOUR_QUESTIONS)
    predictions = _write(tmp_path, "pred.json", FOUR_PREDICTIONS)
    na_probs = _write(tmp_path, "na.json", {"q1": 0.1, "q2": 0.2, "q4": 0.3, "q3": 0.8})
    completed = subprocess.run(
        [sys.executable, "evaluate_squad.py", data, predictions, "--na-prob-file", na_probs]
        + ["--na-prob-thresh", "0.25"],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    printed = json.loads(completed.stdout)
    expected = squad.evaluate_v2(
        FOUR_QUESTIONS, FOUR_PREDICTIONS, {"q1": 0.1, "q2": 0.2, "q4": 0.3, "q3": 0.8}, 0.25
    )
    assert list(printed) == list(expected)
    assert printed["exact"] == 75.0 and printed["best_f1_thresh"] == 0.2
    assert printed == expected


def test_script_writes_the_out_file_whole(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", FOUR_QUESTIONS)
    predictions = _write(tmp_path, "pred.json", FOUR_PREDICTIONS)
    out_file = tmp_path / "eval.json"
    assert evaluate_squad.main([data, predictions, "-o", str(out_file)]) == 0
    assert json.loads(out_file.read_text())["exact"] == 50.0
    assert capsys.readouterr().out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.json", "eval.json", "pred.json"]


def test_script_errors_are_one_line_naming_the_file(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", FOUR_QUESTIONS)
    broken = tmp_path / "pred.json"
    broken.write_text("{not json", encoding="utf-8")
    assert evaluate_squad.main([data, str(broken)]) == 1
    error = capsys.readouterr().err
    assert (
        error.startswith(f"error: {broken}:1: not valid JSON (column 2") and error.count("\n") == 1
    )
    assert evaluate_squad.main([data, data, "--out-image-dir", str(tmp_path)]) == 1
    assert "--out-image-dir (precision-recall plots) is not supported" in capsys.readouterr().err
    out_file = tmp_path / "no-such-dir" / "eval.json"
    predictions = _write(tmp_path, "ok.json", FOUR_PREDICTIONS)
    assert evaluate_squad.main([data, predictions, "--out-file", str(out_file)]) == 1
    assert f"error: {out_file}: cannot write it" in capsys.readouterr().err


def test_script_without_arguments_prints_help_and_fails(capsys):
    assert evaluate_squad.main([]) == 1
    assert "usage: evaluate_squad.py" in capsys.readouterr().out
