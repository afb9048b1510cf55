"""The official SQuAD evaluation (evaluate-v1.1.py and evaluate-v2.0.py) as a library.

The numbers are the official scripts' to the last bit: the same answer normalisation, the same sums in
the same order. Scores are in percent, as the scripts print them.

- v2.0 rules (`evaluate_v2`, what the v2.0 script prints): gold answers that normalise to "" are
  dropped, and a question left with none (an unanswerable one) has the single gold answer "", which
  only an empty prediction matches (exact 1, F1 1). A no-answer probability above the threshold turns
  the prediction into "". With no-answer probabilities, `best_*` report the best threshold.
- v1.1 rules (`evaluate_v1`): every gold answer counts, even one that normalises to "", and F1 against
  an empty answer is 0 (no tokens in common) even when both are empty.

One deliberate change from both scripts: a question with no prediction scores 0 and stays in every
total (as in v1.1; the v2.0 script crashes with a KeyError instead), and a warning names it.
"""

import collections
import re
import string

from absl import logging

from bert_tf import file_io
from bert_tf.errors import InputError

_PUNCTUATION = frozenset(string.punctuation)  # ASCII only: “ ” ’ « » — and accents stay
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_MISSING_LISTED = 20

_SOURCES = ("dataset", "predictions", "na probs")  # the inputs' names in error messages

# One question: its id, its gold answer texts (as in the file), and whether it has any.
Question = collections.namedtuple("Question", ["qid", "answers", "has_answer"])


def normalize_answer(text):
    """Lower-cases, removes ASCII punctuation, the words a / an / the, and extra whitespace.

    The official normaliser, step for step: only `string.punctuation` goes, so unicode punctuation and
    accents stay; `\\b` is unicode-aware, so "the" inside "théâtre" stays but "a" in "a’s" goes.
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_score(gold, prediction):
    """1 if the normalised answers are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score(gold, prediction):
    """Token F1 of the normalised answers, v2.0 rules: an empty side scores 1 only against another.

    Args:
      gold: a gold answer text.
      prediction: the predicted text.

    Returns:
      A float in [0, 1].
    """
    gold_tokens = normalize_answer(gold).split()
    predicted_tokens = normalize_answer(prediction).split()
    if not gold_tokens or not predicted_tokens:
        return float(gold_tokens == predicted_tokens)
    return _token_f1(gold_tokens, predicted_tokens)


def _token_f1(gold_tokens, predicted_tokens):
    common = collections.Counter(gold_tokens) & collections.Counter(predicted_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(predicted_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


# --------------------------------------------------------------------------- reading and checking


def load_json(path):
    """The parsed JSON file at `path` (bert_tf.file_io.read_json).

    Raises:
      InputError: the file is missing, unreadable or not JSON (the message names it and the line).
    """
    try:
        return file_io.read_json(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read it: {error.strerror or error}") from None


def _field(container, key, kind, where):
    value = container.get(key) if isinstance(container, dict) else None
    if not isinstance(value, kind):
        expected = {list: "a list", str: "a string", dict: "an object"}[kind]
        raise InputError(f"{where}: needs {key!r}, {expected}")
    return value


def read_questions(dataset_json, source="dataset"):
    """The questions of a SQuAD file, in file order.

    Args:
      dataset_json: the parsed file: {"version", "data": [{"title", "paragraphs": [{"context",
        "qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}.
      source: the file's name for error messages.

    Returns:
      (questions, is_v1): a list of `Question`, and whether the data is v1.1 (no question carries
      `is_impossible` and every question has a gold answer, which is what evaluate-v1.1.py can score).

    Raises:
      InputError: a missing or mistyped field, or a repeated question id; the message names the file,
        the article (index and title) and the question id.
    """
    questions, seen, is_v1 = [], set(), True
    for article_index, article in enumerate(_field(dataset_json, "data", list, source)):
        title = article.get("title") if isinstance(article, dict) else None
        where = f"{source}: article {article_index}" + (f" ({title!r})" if title else "")
        for paragraph_index, paragraph in enumerate(_field(article, "paragraphs", list, where)):
            in_paragraph = f"{where} paragraph {paragraph_index}"
            for qa_index, qa in enumerate(_field(paragraph, "qas", list, in_paragraph)):
                qid = _field(qa, "id", str, f"{in_paragraph} question {qa_index}")
                in_question = f"{where} question {qid!r}"
                if qid in seen:
                    raise InputError(f"{in_question}: the id is used twice")
                seen.add(qid)
                answers = [
                    _field(answer, "text", str, f"{in_question} answer {i}")
                    for i, answer in enumerate(_field(qa, "answers", list, in_question))
                ]
                is_v1 = is_v1 and "is_impossible" not in qa and bool(answers)
                questions.append(Question(qid, answers, bool(answers)))
    return questions, is_v1


def _check_predictions(predictions, source):
    if not isinstance(predictions, dict):
        raise InputError(f"{source}: must be a JSON object {{question id: answer text}}")
    for qid, text in predictions.items():
        if not isinstance(text, str):
            raise InputError(
                f"{source}: question {qid!r}: the answer must be a string, got {text!r}"
            )


def _check_na_probs(na_probs, predicted_qids, source):
    if not isinstance(na_probs, dict):
        raise InputError(f"{source}: must be a JSON object {{question id: no-answer probability}}")
    for qid, value in na_probs.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{source}: question {qid!r}: {value!r} is not a number")
    for qid in predicted_qids:
        if qid not in na_probs:
            raise InputError(f"{source}: no value for question {qid!r}, which has a prediction")


def _warn_missing(questions, predictions):
    missing = [q.qid for q in questions if q.qid not in predictions]
    if missing:
        listed = ", ".join(missing[:_MISSING_LISTED]) + (
            ", ..." if len(missing) > _MISSING_LISTED else ""
        )
        logging.warning(
            "%d of %d questions have no prediction and score 0: %s",
            len(missing),
            len(questions),
            listed,
        )


# --------------------------------------------------------------------------- scoring


def _raw_scores(questions, predictions):
    """{qid: (exact, f1)} under v2.0 rules, for the questions with a prediction, before thresholds."""
    scores = {}
    for question in questions:
        if question.qid not in predictions:
            continue
        prediction = predictions[question.qid]
        golds = [text for text in question.answers if normalize_answer(text)] or [""]
        scores[question.qid] = (
            max(exact_score(gold, prediction) for gold in golds),
            max(f1_score(gold, prediction) for gold in golds),
        )
    return scores


def _percentages(exact, f1, qids):
    """{"exact", "f1", "total"}: mean scores of `qids` in percent, summed in file order."""
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact[qid] for qid in qids) / total,
        "f1": 100.0 * sum(f1[qid] for qid in qids) / total,
        "total": total,
    }


def _best_threshold(raw, predictions, na_probs, has_answer, num_questions):
    """(best score in percent, its threshold) over every cut of the no-answer probabilities.

    Below every probability, all questions are answered "", so each unanswerable one scores 1. Raising
    the threshold past a question's probability swaps in its prediction: an answerable question gains
    its score, an unanswerable one loses 1 if the prediction is a non-empty string (the official test,
    on the raw text: "the" counts as an answer here though it normalises to ""). Questions are taken in
    the official order, by probability with ties in the probabilities' own order, and a threshold is
    kept only when it strictly beats the best so far, as the official script does.
    """
    score = sum(1 for qid in raw if not has_answer[qid])
    best_score, best_threshold = score, 0.0
    for qid in sorted(na_probs, key=na_probs.get):
        if qid not in raw:
            continue
        if has_answer[qid]:
            score += raw[qid]
        elif predictions[qid]:
            score -= 1
        if score > best_score:
            best_score, best_threshold = score, na_probs[qid]
    return 100.0 * best_score / num_questions, best_threshold


def _evaluate_questions(questions, predictions, na_probs, na_prob_thresh):
    """The v2.0 script's ordered dict; see `evaluate_v2`."""
    has_answer = {q.qid: q.has_answer for q in questions}
    raw = _raw_scores(questions, predictions)
    exact, f1 = {}, {}
    for question in questions:
        qid = question.qid
        if qid not in raw:  # no prediction: wrong, whatever the threshold
            exact[qid] = f1[qid] = 0
        elif (na_probs[qid] if na_probs is not None else 0.0) > na_prob_thresh:
            exact[qid] = f1[qid] = float(not question.has_answer)  # predicted "no answer"
        else:
            exact[qid], f1[qid] = raw[qid]
    all_qids = [q.qid for q in questions]
    results = _percentages(exact, f1, all_qids)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q.qid for q in questions if q.has_answer == wanted]
        if qids:
            for key, value in _percentages(exact, f1, qids).items():
                results[f"{prefix}_{key}"] = value
    if na_probs is not None:
        for name, index in (("exact", 0), ("f1", 1)):
            best, threshold = _best_threshold(
                {qid: scores[index] for qid, scores in raw.items()},
                predictions,
                na_probs,
                has_answer,
                len(questions),
            )
            results[f"best_{name}"] = best
            results[f"best_{name}_thresh"] = threshold
    return results


def _evaluate_questions_v1(questions, predictions):
    exact_total = f1_total = 0.0
    for question in questions:
        if question.qid not in predictions:
            continue
        prediction = predictions[question.qid]
        exact_total += max(exact_score(gold, prediction) for gold in question.answers)
        predicted_tokens = normalize_answer(prediction).split()
        f1_total += max(
            _token_f1(normalize_answer(gold).split(), predicted_tokens) for gold in question.answers
        )
    return {
        "exact_match": 100.0 * exact_total / len(questions),
        "f1": 100.0 * f1_total / len(questions),
    }


def _read_inputs(dataset_json, predictions, na_probs, sources):
    """Checks the three inputs; returns (questions, is_v1) as `read_questions` does."""
    questions, is_v1 = read_questions(dataset_json, sources[0])
    if not questions:
        raise InputError(f"{sources[0]}: the data set has no questions")
    _check_predictions(predictions, sources[1])
    if na_probs is not None:
        _check_na_probs(na_probs, [q.qid for q in questions if q.qid in predictions], sources[2])
    _warn_missing(questions, predictions)
    return questions, is_v1


def evaluate_v2(dataset_json, predictions, na_probs=None, na_prob_thresh=1.0, *, sources=_SOURCES):
    """What evaluate-v2.0.py prints.

    Args:
      dataset_json: the parsed SQuAD file (v1.1 or v2.0).
      predictions: {question id: answer text}; "" means "no answer". Ids not in the data are ignored.
      na_probs: {question id: no-answer probability or score} (run_squad.py's null_odds.json), or None.
      na_prob_thresh: a question whose na_prob exceeds this is answered "" (default 1.0).
      sources: the names of the three inputs for error messages (the files, for the script).

    Returns:
      A dict in the official order: "exact", "f1" (percent), "total"; "HasAns_exact", "HasAns_f1",
      "HasAns_total" if some question has gold answers; "NoAns_*" likewise if some has none; with
      na_probs, "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh".

    Raises:
      InputError: malformed data (naming the file, article and question), no questions, a non-string
        prediction, or a predicted question without an na_prob.
    """
    questions, _ = _read_inputs(dataset_json, predictions, na_probs, sources)
    return _evaluate_questions(questions, predictions, na_probs, na_prob_thresh)


def evaluate_v1(dataset_json, predictions, *, sources=_SOURCES):
    """What evaluate-v1.1.py prints: {"exact_match", "f1"} in percent.

    Raises:
      InputError: as `evaluate_v2`, and for a question without gold answers (which the v1.1 script
        cannot score).
    """
    questions, _ = _read_inputs(dataset_json, predictions, None, sources)
    for question in questions:
        if not question.answers:
            raise InputError(f"{sources[0]}: question {question.qid!r} has no gold answer")
    return _evaluate_questions_v1(questions, predictions)


def evaluate(dataset_json, predictions, na_probs=None, na_prob_thresh=1.0, *, sources=_SOURCES):
    """What evaluate_squad.py prints: the v2.0 dict, and on v1.1 data the v1.1 script's two numbers.

    On v1.1 data (no question has `is_impossible`, every one has a gold answer) the dict starts with
    the v1.1 script's "exact_match" and "f1", followed by the v2.0 keys except its "f1" (on such data
    it equals "HasAns_f1"). The v1.1 and v2.0 numbers differ only where a gold answer normalises to ""
    (e.g. "The"). Other data gives exactly `evaluate_v2`'s dict. Args and errors as `evaluate_v2`.
    """
    questions, is_v1 = _read_inputs(dataset_json, predictions, na_probs, sources)
    results = _evaluate_questions(questions, predictions, na_probs, na_prob_thresh)
    if not is_v1:
        return results
    v1_results = _evaluate_questions_v1(questions, predictions)
    return {**v1_results, **{k: v for k, v in results.items() if k != "f1"}}
