"""SQuAD predictions: the windows' start and end logits -> answer text, as the original run_squad.py.

The n best starts and ends of every window of an example are paired; the valid pairs (start <= end,
both in the paragraph part, the start max-context in its window, at most max_answer_length pieces)
are ranked by start + end logit, mapped back to the paragraph's words and projected onto the original
text (`get_final_text`); SQuAD 2.0 answers "" when the null score beats the best answer by more than
a threshold. Outputs: predictions.json, nbest_predictions.json and null_odds.json in the original's
formats. One difference, which changes no result the original produces: SQuAD 2.0 with no valid
non-null span gets the original's "empty" placeholder instead of a crash.
"""

import collections
import functools
import json
import math

from absl import logging

from bert_tf import tokenization
from bert_tf.file_io import write_text

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
_Candidate = collections.namedtuple(
    "_Candidate", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"]
)
_NbestEntry = collections.namedtuple("_NbestEntry", ["text", "start_logit", "end_logit"])


def write_predictions(
    all_examples,
    all_features,
    all_results,
    n_best_size,
    max_answer_length,
    do_lower_case,
    output_prediction_file,
    output_nbest_file,
    output_null_log_odds_file,
    version_2_with_negative,
    null_score_diff_threshold,
    verbose_logging=False,
):
    """Turns start/end logits into answer texts and writes them in the original's formats.

    Args:
      all_examples: the SquadExamples the features were made from, in the same order.
      all_features: their SquadFeatures.
      all_results: RawResults, one per feature (logits: sequences of floats, at least as long as
        each feature's tokens).
      n_best_size: starts and ends considered per window, and answers kept per question.
      max_answer_length: the longest answer, in wordpieces.
      do_lower_case: as the tokenizer's (for projecting answers onto the original text).
      output_prediction_file: predictions.json ({id: text}); None writes nothing.
      output_nbest_file: nbest_predictions.json ({id: [{text, probability, start_logit,
        end_logit}]}); None writes nothing.
      output_null_log_odds_file: null_odds.json ({id: null score - best answer score}), SQuAD 2.0
        only; None writes nothing.
      version_2_with_negative: allow the null answer "".
      null_score_diff_threshold: SQuAD 2.0 answers "" when null score - best score exceeds this.
      verbose_logging: log why an answer could not be projected onto the original text.

    Returns:
      (predictions, nbest, null_odds): the dicts written (null_odds is empty for SQuAD 1.1).

    Raises:
      ValueError: if a feature has no result.
    """
    features_by_example = collections.defaultdict(list)
    for feature in all_features:
        features_by_example[feature.example_index].append(feature)
    results_by_id = {int(result.unique_id): result for result in all_results}

    predictions, all_nbest, null_odds = {}, {}, {}
    for example_index, example in enumerate(all_examples):
        features = features_by_example[example_index]
        candidates, null, null_score = _candidates(
            features,
            _window_logits(example, features, results_by_id),
            n_best_size,
            max_answer_length,
            version_2_with_negative,
        )
        nbest = _nbest(
            example,
            features,
            candidates,
            null,
            n_best_size,
            do_lower_case,
            verbose_logging,
            version_2_with_negative,
        )
        all_nbest[example.qas_id] = _nbest_json(nbest)
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0].text
            continue
        predictions[example.qas_id], null_odds[example.qas_id] = _answer_or_null(
            nbest, null_score, null_score_diff_threshold
        )

    for path, contents in (
        (output_prediction_file, predictions),
        (output_nbest_file, all_nbest),
        (output_null_log_odds_file if version_2_with_negative else None, null_odds),
    ):
        if path:
            logging.info("Writing %s", path)
            _write_json(path, contents)
    return predictions, all_nbest, null_odds


def _window_logits(example, features, results_by_id):
    """[(start logits, end logits)] of each window of `example`, as lists of floats."""
    logits = []
    for feature in features:
        result = results_by_id.get(feature.unique_id)
        if result is None:
            raise ValueError(
                f"no result for feature {feature.unique_id} of question {example.qas_id!r}"
            )
        logits.append((_floats(result.start_logits), _floats(result.end_logits)))
    return logits


def _nbest_json(nbest):
    """nbest_predictions.json's entries of one question: each answer with its softmax probability."""
    probabilities = _compute_softmax([entry.start_logit + entry.end_logit for entry in nbest])
    return [
        {
            "text": entry.text,
            "probability": probability,
            "start_logit": entry.start_logit,
            "end_logit": entry.end_logit,
        }
        for entry, probability in zip(nbest, probabilities, strict=True)
    ]


def _answer_or_null(nbest, null_score, null_score_diff_threshold):
    """SQuAD 2.0: (the best non-null answer, or "" when the null score beats it by more than the
    threshold; null score - best non-null score)."""
    best_non_null = next(entry for entry in nbest if entry.text)
    score_diff = null_score - best_non_null.start_logit - best_non_null.end_logit
    answer = "" if score_diff > null_score_diff_threshold else best_non_null.text
    return answer, score_diff


def _floats(values):
    return values.tolist() if hasattr(values, "tolist") else [float(value) for value in values]


def _best_indexes(logits, n_best_size):
    """Indexes of the n_best_size largest logits, largest first (ties: lower index first)."""
    return sorted(range(len(logits)), key=lambda index: logits[index], reverse=True)[:n_best_size]


def _candidates(features, logits, n_best_size, max_answer_length, version_2_with_negative):
    """Valid (start, end) pairs of all windows, best first; the null candidate and its score.

    A pair is valid when both ends are in the window's document part, the start is max context,
    start <= end and the span has at most max_answer_length wordpieces. The null candidate is [CLS]
    of the window with the lowest null score (start + end logit at 0); with SQuAD 2.0 it is ranked
    among the others.
    """
    candidates = []
    null = _Candidate(0, 0, 0, 0.0, 0.0)  # kept by an example without windows
    null_score = 1000000.0
    for feature_index, (feature, (start_logits, end_logits)) in enumerate(
        zip(features, logits, strict=True)
    ):
        if version_2_with_negative and start_logits[0] + end_logits[0] < null_score:
            null_score = start_logits[0] + end_logits[0]
            null = _Candidate(feature_index, 0, 0, start_logits[0], end_logits[0])
        for start_index in _best_indexes(start_logits, n_best_size):
            if start_index not in feature.token_to_orig_map:
                continue
            if not feature.token_is_max_context.get(start_index, False):
                continue
            for end_index in _best_indexes(end_logits, n_best_size):
                if end_index not in feature.token_to_orig_map:
                    continue
                if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                    continue
                candidates.append(
                    _Candidate(
                        feature_index,
                        start_index,
                        end_index,
                        start_logits[start_index],
                        end_logits[end_index],
                    )
                )
    if version_2_with_negative:
        candidates.append(null)
    candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)  # stable
    return candidates, null, null_score


def _nbest(
    example,
    features,
    candidates,
    null,
    n_best_size,
    do_lower_case,
    verbose_logging,
    version_2_with_negative,
):
    """The n best distinct answer texts as _NbestEntry; with SQuAD 2.0, "" is always among them.

    Without any valid span the list ends with the original's placeholder "empty" (logits 0).
    """
    nbest = []
    seen_texts = set()
    for candidate in candidates:
        if len(nbest) >= n_best_size:
            break
        if candidate.start_index > 0:
            feature = features[candidate.feature_index]
            text = _answer_text(example, feature, candidate, do_lower_case, verbose_logging)
            if text in seen_texts:
                continue
        else:
            text = ""
        seen_texts.add(text)
        nbest.append(_NbestEntry(text, candidate.start_logit, candidate.end_logit))
    if version_2_with_negative and "" not in seen_texts:
        nbest.append(_NbestEntry("", null.start_logit, null.end_logit))
    if not any(entry.text for entry in nbest):  # no valid span at all: the original's placeholder
        nbest.append(_NbestEntry("empty", 0.0, 0.0))
    return nbest


def _answer_text(example, feature, candidate, do_lower_case, verbose_logging):
    """The original text of a candidate span: its words, cut to what the wordpieces spell."""
    pieces = feature.tokens[candidate.start_index : candidate.end_index + 1]
    first_word = feature.token_to_orig_map[candidate.start_index]
    last_word = feature.token_to_orig_map[candidate.end_index]
    orig_text = " ".join(example.doc_tokens[first_word : last_word + 1])
    piece_text = " ".join(pieces).replace(" ##", "").replace("##", "")
    piece_text = " ".join(piece_text.split())
    return get_final_text(piece_text, orig_text, do_lower_case, verbose_logging)


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Projects the normalised prediction `pred_text` onto `orig_text`, the words it came from.

    For pred_text "steve smith" in orig_text "Steve Smith's" this gives "Steve Smith": orig_text is
    basic-tokenized (lower-cased, accents stripped, punctuation split), and where that equals orig_text
    character for character once spaces are removed, the prediction's characters are mapped back.
    Otherwise (the normalisation changed the length, or pred_text is not found) it gives orig_text.
    """
    tok_text = " ".join(_basic_tokenizer(do_lower_case).tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            logging.info("Unable to find text %r in %r", pred_text, orig_text)
        return orig_text
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logging.info(
                "Length not equal after stripping spaces: %r vs %r", orig_ns_text, tok_ns_text
            )
        return orig_text
    tok_s_to_ns = {s_index: ns_index for ns_index, s_index in enumerate(tok_ns_to_s)}
    if start_position not in tok_s_to_ns or end_position not in tok_s_to_ns:
        if verbose_logging:
            logging.info("Could not map %r back onto %r", pred_text, orig_text)
        return orig_text
    orig_start = orig_ns_to_s[tok_s_to_ns[start_position]]
    orig_end = orig_ns_to_s[tok_s_to_ns[end_position]]
    return orig_text[orig_start : orig_end + 1]


@functools.cache
def _basic_tokenizer(do_lower_case):
    return tokenization.BasicTokenizer(do_lower_case=do_lower_case)


def _strip_spaces(text):
    """(text without " ", for each of its characters the index in `text`)."""
    kept = [(index, char) for index, char in enumerate(text) if char != " "]
    return "".join(char for _, char in kept), [index for index, _ in kept]


def _compute_softmax(scores):
    """Softmax of a list of floats, summed in order as the original does."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total = 0.0
    for value in exp_scores:
        total += value
    return [value / total for value in exp_scores]


def _write_json(path, contents):
    """Writes `contents` as the original does (indent 4, trailing newline), atomically."""
    write_text(path, json.dumps(contents, indent=4) + "\n")
