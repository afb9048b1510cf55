"""SQuAD data: reading, windowing, TFRecords, predictions; every expectation worked out by hand.

Most tests use a tiny vocab where each word w0..w9 is one wordpiece, so windows and positions can be
counted on paper; the others use Google's uncased vocab (sample_data/vocab.txt).
"""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.feature_cache import make_feature_dataset, write_records
from bert_tf.errors import InputError
from bert_tf.tasks.squad import data as squad
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.tokenization import FullTokenizer

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "q"] + [f"w{i}" for i in range(10)]
CLS, SEP, Q = 2, 3, 4  # ids in TINY_VOCAB; w<i> has id 5 + i
TEN_WORDS = " ".join(f"w{i}" for i in range(10))  # "w<i>" starts at character 3 * i


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(TINY_VOCAB) + "\n")
    return FullTokenizer(str(path), do_lower_case=True)


@pytest.fixture(scope="module")
def tokenizer(sample_vocab_path):
    return FullTokenizer(str(sample_vocab_path), do_lower_case=True)


def squad_json(context, qas, title="T"):
    return {
        "version": "1.1",
        "data": [{"title": title, "paragraphs": [{"context": context, "qas": qas}]}],
    }


def qa(qas_id, answer_text=None, answer_start=None, question="q", **extra):
    answers = [] if answer_text is None else [{"text": answer_text, "answer_start": answer_start}]
    return {"id": qas_id, "question": question, "answers": answers, **extra}


def one_example(context, answer_text, answer_start, is_training=True):
    examples, _ = squad.read_squad_json(
        squad_json(context, [qa("id1", answer_text, answer_start)]), is_training, False
    )
    return examples


def features_of(
    examples, tokenizer, max_seq_length=8, doc_stride=2, max_query_length=4, is_training=True
):
    return list(
        squad.convert_examples_to_features(
            examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training
        )
    )


# ----------------------------------------------------------------------------------------------
# Reading


def test_split_paragraph_splits_on_the_originals_five_whitespace_characters():
    text = " a  b\tc\r\nd\u202fe\u00a0f"
    doc_tokens, char_to_word_offset = squad.split_paragraph(text)
    # U+00A0 (no-break space) is not one of them: "e\u00a0f" stays one word.
    assert doc_tokens == ["a", "b", "c", "d", "e\u00a0f"]
    #                            " "  a  " " " " b  \t c  \r \n d  202f e  a0 f
    assert char_to_word_offset == [-1, 0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4]
    assert squad.word_char_spans(text) == [(1, 2), (4, 5), (6, 7), (9, 10), (11, 14)]


def test_training_answer_is_mapped_to_word_positions():
    context = "Café\u202fMüller  opened\tin 北京.\n"
    examples = one_example(context, "Müller  opened", 5)
    example = examples[0]
    assert example.doc_tokens == ["Café", "Müller", "opened", "in", "北京."]
    assert (example.start_position, example.end_position) == (1, 2)
    assert example.orig_answer_text == "Müller  opened"
    assert example.context_text == context
    assert example.answer_texts == ["Müller  opened"]


def test_answer_starting_in_leading_whitespace_maps_to_the_first_word():
    example = one_example("  w1 w2", " w1", 1)[0]
    assert (example.start_position, example.end_position) == (0, 0)


def test_answer_not_found_in_its_words_is_skipped_and_counted():
    # "cafe" is not in "café": the original skips such answers (Unicode oddities).
    data = squad_json("The café opened", [qa("bad", "cafe", 4), qa("good", "opened", 9)])
    examples, stats = squad.read_squad_json(data, is_training=True, version_2_with_negative=False)
    assert [example.qas_id for example in examples] == ["good"]
    assert stats == {"examples": 1, "skipped": 1, "impossible": 0}


def test_prediction_reading_keeps_every_gold_answer_and_needs_no_positions():
    answers = [{"text": "w1", "answer_start": 3}, {"text": "w1 w2", "answer_start": 999}]
    data = squad_json(
        TEN_WORDS, [{"id": "a", "question": "q", "answers": answers}, {"id": "b", "question": "q"}]
    )
    examples, stats = squad.read_squad_json(data, is_training=False, version_2_with_negative=False)
    assert [example.answer_texts for example in examples] == [["w1", "w1 w2"], []]
    assert [example.start_position for example in examples] == [None, None]
    assert stats == {"examples": 2, "skipped": 0, "impossible": 0}


def test_version_2_impossible_question_gets_word_positions_minus_one():
    data = squad_json(
        TEN_WORDS,
        [
            qa("no", is_impossible=True, plausible_answers=[{"text": "w1", "answer_start": 3}]),
            qa("yes", "w1", 3, is_impossible=False),
        ],
    )
    examples, stats = squad.read_squad_json(data, is_training=True, version_2_with_negative=True)
    impossible, possible = examples
    assert (impossible.is_impossible, impossible.orig_answer_text) == (True, "")
    assert (impossible.start_position, impossible.end_position) == (-1, -1)
    assert (possible.is_impossible, possible.start_position) == (False, 1)
    assert stats == {"examples": 2, "skipped": 0, "impossible": 1}


def _with(mutate):
    data = squad_json(TEN_WORDS, [qa("qid7", "w1", 3)], title="Tenfold")
    mutate(data)
    return data


def _article(data):
    return data["data"][0]


def _paragraph(data):
    return _article(data)["paragraphs"][0]


def _qa(data):
    return _paragraph(data)["qas"][0]


@pytest.mark.parametrize(
    "mutate, expected_parts",
    [
        (lambda d: d.pop("data"), ['missing key "data"']),
        (lambda d: _article(d).pop("paragraphs"), ["'Tenfold'", '"paragraphs"']),
        (lambda d: _paragraph(d).pop("context"), ["'Tenfold'", "paragraph 0", '"context"']),
        (lambda d: _paragraph(d).pop("qas"), ["'Tenfold'", "paragraph 0", '"qas"']),
        (
            lambda d: _paragraph(d).update(context=" \n\t"),
            ["'Tenfold'", "paragraph 0", "empty context"],
        ),
        (lambda d: _qa(d).pop("id"), ["'Tenfold'", "paragraph 0, question 0", '"id"']),
        (lambda d: _qa(d).pop("question"), ["'qid7'", '"question"']),
        (lambda d: _qa(d).pop("answers"), ["'qid7'", '"answers"']),
        (lambda d: _qa(d)["answers"][0].pop("answer_start"), ["'qid7'", '"answer_start"']),
        (
            lambda d: _qa(d)["answers"].append({"text": "w2", "answer_start": 6}),
            ["'qid7'", "exactly 1 answer, got 2"],
        ),
        (lambda d: _qa(d).update(answers=[]), ["'qid7'", "exactly 1 answer, got 0"]),
        (
            lambda d: _qa(d)["answers"][0].update(answer_start=28),
            ["'qid7'", "answer_start 28", "outside"],
        ),
        (
            lambda d: _qa(d)["answers"][0].update(answer_start=-1),
            ["'qid7'", "answer_start -1", "outside"],
        ),
        (lambda d: _qa(d)["answers"][0].update(text=" "), ["'qid7'", "empty answer text"]),
    ],
)
def test_malformed_input_raises_input_error_naming_file_and_place(tmp_path, mutate, expected_parts):
    path = tmp_path / "train-v1.1.json"
    path.write_text(json.dumps(_with(mutate)))
    with pytest.raises(InputError) as raised:
        squad.read_squad_examples(str(path), is_training=True, version_2_with_negative=False)
    message = str(raised.value)
    assert str(path) in message
    for part in expected_parts:
        assert part in message


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('{"data": [\n  {"title": "x",,}\n]}')
    with pytest.raises(InputError, match=r"dev\.json:2: not valid JSON"):
        squad.read_squad_examples(str(path), is_training=False, version_2_with_negative=False)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        squad.read_squad_examples(str(tmp_path / "nope.json"), False, False)


# ----------------------------------------------------------------------------------------------
# Features


def test_long_context_is_windowed_with_stride_and_max_context(tiny_tokenizer):
    # 10 wordpieces, 4 per window (8 - [CLS] q [SEP] [SEP]), stride 2: windows w0-w3, w2-w5, w4-w7, w6-w9.
    # Max context of w3: window 0 has min(3 left, 0 right) = 0, window 1 min(1, 2) = 1 -> window 1.
    examples = one_example(TEN_WORDS, "w4 w5", 12)
    features = features_of(examples, tiny_tokenizer)
    assert [f.unique_id for f in features] == [1000000000, 1000000001, 1000000002, 1000000003]
    assert [f.doc_span_index for f in features] == [0, 1, 2, 3]
    assert [f.example_index for f in features] == [0, 0, 0, 0]
    assert [f.tokens[3:7] for f in features] == [
        ["w0", "w1", "w2", "w3"],
        ["w2", "w3", "w4", "w5"],
        ["w4", "w5", "w6", "w7"],
        ["w6", "w7", "w8", "w9"],
    ]
    assert [f.token_to_orig_map for f in features] == [
        {3: 0, 4: 1, 5: 2, 6: 3},
        {3: 2, 4: 3, 5: 4, 6: 5},
        {3: 4, 4: 5, 5: 6, 6: 7},
        {3: 6, 4: 7, 5: 8, 6: 9},
    ]
    assert [f.token_is_max_context for f in features] == [
        {3: True, 4: True, 5: True, 6: False},
        {3: False, 4: True, 5: True, 6: False},
        {3: False, 4: True, 5: True, 6: False},
        {3: False, 4: True, 5: True, 6: True},
    ]
    # The answer w4 w5 is whole in windows 1 (positions 5, 6) and 2 (3, 4); elsewhere: [CLS].
    assert [(f.start_position, f.end_position) for f in features] == [
        (0, 0),
        (5, 6),
        (3, 4),
        (0, 0),
    ]
    assert features[1].input_ids == [CLS, Q, SEP, 7, 8, 9, 10, SEP]
    assert features[1].segment_ids == [0, 0, 0, 1, 1, 1, 1, 1]
    assert features[1].input_mask == [1] * 8


@pytest.mark.parametrize(
    "answer_text, answer_start, expected_positions",
    [
        ("w0", 0, [(3, 3), (0, 0), (0, 0), (0, 0)]),  # first word: window 0 only
        ("w9", 27, [(0, 0), (0, 0), (0, 0), (6, 6)]),  # last word: the last window only
        ("w3 w4", 9, [(0, 0), (4, 5), (0, 0), (0, 0)]),  # across window 0's right edge
        ("w2 w3 w4 w5", 6, [(0, 0), (3, 6), (0, 0), (0, 0)]),  # exactly window 1
    ],
)
def test_answers_at_window_edges(tiny_tokenizer, answer_text, answer_start, expected_positions):
    features = features_of(one_example(TEN_WORDS, answer_text, answer_start), tiny_tokenizer)
    assert [(f.start_position, f.end_position) for f in features] == expected_positions


def test_max_context_tie_goes_to_the_first_window(tiny_tokenizer):
    # 6 wordpieces, windows w0-w3, w1-w4, w2-w5 (stride 1). w2 scores min(2, 1) = 1 in window 0 and
    # min(1, 2) = 1 in window 1: the first wins.
    examples = one_example("w0 w1 w2 w3 w4 w5", "w0", 0)
    features = features_of(examples, tiny_tokenizer, doc_stride=1)
    assert [f.token_is_max_context for f in features] == [
        {3: True, 4: True, 5: True, 6: False},
        {3: False, 4: False, 5: True, 6: False},
        {3: False, 4: False, 5: True, 6: True},
    ]


def test_short_input_is_padded_and_query_truncated(tiny_tokenizer):
    examples, _ = squad.read_squad_json(
        squad_json("w1 w2", [qa("x", "w2", 3, question="q q q q q")]), True, False
    )
    (feature,) = features_of(examples, tiny_tokenizer, max_seq_length=10, max_query_length=2)
    assert feature.tokens == ["[CLS]", "q", "q", "[SEP]", "w1", "w2", "[SEP]"]
    assert feature.input_ids == [CLS, Q, Q, SEP, 6, 7, SEP, 0, 0, 0]
    assert feature.input_mask == [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    assert feature.segment_ids == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0]
    assert (feature.start_position, feature.end_position) == (5, 5)


def test_prediction_features_have_no_positions(tiny_tokenizer):
    features = features_of(
        one_example(TEN_WORDS, "w1", 3, is_training=False), tiny_tokenizer, is_training=False
    )
    assert len(features) == 4
    assert {(f.start_position, f.end_position) for f in features} == {(None, None)}


def test_impossible_question_features_point_at_cls(tiny_tokenizer):
    examples, _ = squad.read_squad_json(
        squad_json(TEN_WORDS, [qa("no", is_impossible=True)]), True, True
    )
    features = features_of(examples, tiny_tokenizer)
    assert [(f.start_position, f.end_position, f.is_impossible) for f in features] == [
        (0, 0, True)
    ] * 4


def test_answer_is_tightened_to_its_wordpieces(tokenizer):
    # The word "(1895-1943)." holds the answer; its wordpieces ( 1895 - 1943 ) . contain it exactly.
    context = "The leader was John Smith (1895-1943)."
    (feature,) = features_of(one_example(context, "1895", 27), tokenizer, max_seq_length=32)
    assert feature.tokens[feature.start_position : feature.end_position + 1] == ["1895"]
    assert feature.tokens[feature.start_position - 1] == "("


def test_answer_inside_a_wordpiece_keeps_the_whole_word(tokenizer):
    # "Japan" is inside the single wordpiece "japanese": no tighter span exists.
    context = "The Japanese electronics industry"
    (feature,) = features_of(one_example(context, "Japan", 4), tokenizer, max_seq_length=32)
    assert feature.tokens[feature.start_position : feature.end_position + 1] == ["japanese"]


@pytest.mark.parametrize(
    "context, answer_text, answer_start, expected_pieces",
    [
        (
            "Café\u202fMüller  opened\tin 北京.\n",
            "北京",
            24,
            ["北", "京"],
        ),  # CJK split per character
        ("Café\u202fMüller  opened\tin 北京.\n", "Müller", 5, ["muller"]),  # accent stripped
        (
            "a\u00a0b c",
            "b",
            2,
            ["b"],
        ),  # U+00A0 is inside the word "a\u00a0b", but splits wordpieces
    ],
)
def test_unicode_answers(tokenizer, context, answer_text, answer_start, expected_pieces):
    (feature,) = features_of(
        one_example(context, answer_text, answer_start), tokenizer, max_seq_length=32
    )
    assert feature.tokens[feature.start_position : feature.end_position + 1] == expected_pieces


def test_wordpieces_of_the_words_are_the_wordpieces_of_the_whole_context(tokenizer):
    # Features tokenize word by word; an in-graph preprocessor tokenizes the whole context. They agree
    # because every paragraph-whitespace character is also whitespace to the BasicTokenizer.
    context = (
        "Café\u202fMüller  opened\tin 北京.\nfoo\u200bbar a\u00a0b \u3000(1895-1943). x\u0301y\r\n"
    )
    doc_tokens, _ = squad.split_paragraph(context)
    per_word = [piece for word in doc_tokens for piece in tokenizer.tokenize(word)]
    assert per_word == tokenizer.tokenize(context)


def test_bad_window_settings_raise_value_error(tiny_tokenizer):
    examples = one_example(TEN_WORDS, "w1", 3)
    with pytest.raises(ValueError, match="max_query_length"):
        features_of(examples, tiny_tokenizer, max_seq_length=7, max_query_length=4)
    with pytest.raises(ValueError, match="doc_stride"):
        features_of(examples, tiny_tokenizer, doc_stride=0)


@pytest.mark.parametrize("is_training", [True, False])
def test_tfrecord_round_trip(tmp_path, tiny_tokenizer, is_training):
    examples, _ = squad.read_squad_json(
        squad_json(TEN_WORDS, [qa("a", "w4 w5", 12), qa("b", is_impossible=True)]),
        is_training,
        True,
    )
    features = features_of(
        examples, tiny_tokenizer, max_seq_length=10, doc_stride=3, is_training=is_training
    )
    path = str(tmp_path / "features.tf_record")
    write_records(path, (squad.serialize_squad_feature(f, is_training) for f in features))
    spec = squad.squad_feature_spec(10, is_training)
    (batch,) = make_feature_dataset(path, spec, batch_size=len(features), is_training=False)
    expected = {
        "unique_ids": [f.unique_id for f in features],
        "input_ids": [f.input_ids for f in features],
        "input_mask": [f.input_mask for f in features],
        "segment_ids": [f.segment_ids for f in features],
    }
    if is_training:
        # Windows w0-w5, w3-w8, w6-w9 (6 per window, stride 3); the answer w4 w5 is whole in the first two.
        expected["start_positions"] = [7, 4, 0, 0, 0, 0]
        expected["end_positions"] = [8, 5, 0, 0, 0, 0]
        expected["is_impossible"] = [0, 0, 0, 1, 1, 1]
    assert sorted(batch) == sorted(expected)
    for name, values in expected.items():
        np.testing.assert_array_equal(batch[name].numpy(), values, err_msg=name)


# ----------------------------------------------------------------------------------------------
# Predictions


def _logits(size=8, **values):
    """A logits list of `size` zeros with the given {"i<index>": value} set."""
    logits = [0.0] * size
    for key, value in values.items():
        logits[int(key[1:])] = value
    return logits


def _predict(
    tmp_path,
    examples,
    features,
    results,
    version_2=False,
    threshold=0.0,
    n_best_size=3,
    max_answer_length=2,
):
    paths = {
        name: str(tmp_path / name)
        for name in ("predictions.json", "nbest_predictions.json", "null_odds.json")
    }
    outputs = squad_predictions.write_predictions(
        examples,
        features,
        results,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        do_lower_case=True,
        output_prediction_file=paths["predictions.json"],
        output_nbest_file=paths["nbest_predictions.json"],
        output_null_log_odds_file=paths["null_odds.json"],
        version_2_with_negative=version_2,
        null_score_diff_threshold=threshold,
    )
    return outputs, paths


def _three_word_case(tiny_tokenizer, version_2=False):
    examples, _ = squad.read_squad_json(squad_json("w0 w1 w2", [qa("q1")]), False, version_2)
    features = features_of(
        examples, tiny_tokenizer, is_training=False
    )  # [CLS] q [SEP] w0 w1 w2 [SEP] [PAD]
    return examples, features


def test_nbest_is_ranked_by_start_plus_end_with_softmax_probabilities(tmp_path, tiny_tokenizer):
    examples, (feature,) = _three_word_case(tiny_tokenizer)
    # Best starts: 3 (w0), 4 (w1), 5 (w2); best ends: 4, 5, then 0 (first of the zeros, outside the document).
    # Valid pairs (max length 2): w0-w1 = 3 + 2, w1 = 1 + 2, w1-w2 = 1 + 1, w2 = 0.5 + 1; w0-w2 is too long.
    result = squad_predictions.RawResult(
        feature.unique_id, _logits(i3=3.0, i4=1.0, i5=0.5), _logits(i4=2.0, i5=1.0)
    )
    (predictions, nbest, null_odds), paths = _predict(tmp_path, examples, [feature], [result])
    assert predictions == {"q1": "w0 w1"}
    assert null_odds == {}
    exps = [1.0, math.exp(-2.0), math.exp(-3.0)]
    assert nbest["q1"] == [
        {
            "text": "w0 w1",
            "probability": pytest.approx(exps[0] / sum(exps), rel=1e-15),
            "start_logit": 3.0,
            "end_logit": 2.0,
        },
        {
            "text": "w1",
            "probability": pytest.approx(exps[1] / sum(exps), rel=1e-15),
            "start_logit": 1.0,
            "end_logit": 2.0,
        },
        {
            "text": "w1 w2",
            "probability": pytest.approx(exps[2] / sum(exps), rel=1e-15),
            "start_logit": 1.0,
            "end_logit": 1.0,
        },
    ]
    assert json.loads(open(paths["nbest_predictions.json"]).read()) == nbest
    assert not (tmp_path / "null_odds.json").exists()


def test_output_files_have_the_originals_format(tmp_path, tiny_tokenizer):
    examples, (feature,) = _three_word_case(tiny_tokenizer)
    start_logits = np.array(_logits(i3=3.0), np.float32)  # numpy float32, as a model returns them
    end_logits = np.array(_logits(i4=2.0), np.float32)
    _, paths = _predict(
        tmp_path,
        examples,
        [feature],
        [squad_predictions.RawResult(np.int64(feature.unique_id), start_logits, end_logits)],
        n_best_size=1,
    )
    assert open(paths["predictions.json"]).read() == '{\n    "q1": "w0 w1"\n}\n'
    assert open(paths["nbest_predictions.json"]).read() == (
        "{\n"
        '    "q1": [\n'
        "        {\n"
        '            "text": "w0 w1",\n'
        '            "probability": 1.0,\n'
        '            "start_logit": 3.0,\n'
        '            "end_logit": 2.0\n'
        "        }\n"
        "    ]\n"
        "}\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "nbest_predictions.json",
        "predictions.json",
    ]


@pytest.mark.parametrize(
    "null_logit, threshold, expected_prediction, expected_nbest_texts",
    [
        # null 3 + 3 = 6 beats the best span w0-w1 (5) by 1 > 0: "".
        (3.0, 0.0, "", ["", "w0 w1", "w1"]),
        # the same margin of 1 is within a threshold of 1.5: the span.
        (3.0, 1.5, "w0 w1", ["", "w0 w1", "w1"]),
        # a low null score: "" is not in the top 3, so it is added at the end.
        (-5.0, 0.0, "w0 w1", ["w0 w1", "w1", "w1 w2", ""]),
    ],
)
def test_version_2_chooses_null_by_threshold(
    tmp_path, tiny_tokenizer, null_logit, threshold, expected_prediction, expected_nbest_texts
):
    examples, (feature,) = _three_word_case(tiny_tokenizer, version_2=True)
    result = squad_predictions.RawResult(
        feature.unique_id,
        _logits(i0=null_logit, i3=3.0, i4=1.0, i5=0.5),
        _logits(i0=null_logit, i4=2.0, i5=1.0),
    )
    (predictions, nbest, null_odds), paths = _predict(
        tmp_path, examples, [feature], [result], version_2=True, threshold=threshold
    )
    assert predictions == {"q1": expected_prediction}
    assert null_odds == {"q1": 2 * null_logit - 5.0}
    assert [entry["text"] for entry in nbest["q1"]] == expected_nbest_texts
    null_entry = nbest["q1"][expected_nbest_texts.index("")]
    assert (null_entry["start_logit"], null_entry["end_logit"]) == (null_logit, null_logit)
    assert open(paths["null_odds.json"]).read() == '{\n    "q1": %r\n}\n' % (2 * null_logit - 5.0)


def test_windows_min_null_score_and_max_context_filter(tmp_path, tiny_tokenizer):
    examples, _ = squad.read_squad_json(squad_json(TEN_WORDS, [qa("q1")]), False, True)
    features = features_of(examples, tiny_tokenizer, is_training=False)  # the four windows above
    ids = [f.unique_id for f in features]
    results = [
        # Window 0: w3 (position 6) has the highest logits, but window 1 is its max context: ignored.
        squad_predictions.RawResult(
            ids[0], _logits(i0=2.0, i6=10.0), _logits(i0=2.0, i6=10.0)
        ),  # null 4
        squad_predictions.RawResult(
            ids[1], _logits(i0=0.5, i4=4.0), _logits(i0=0.5, i4=4.0)
        ),  # null 1 (the min); w3 = 8
        squad_predictions.RawResult(ids[2], _logits(i0=1.5), _logits(i0=1.5)),  # null 3
        squad_predictions.RawResult(ids[3], _logits(i0=1.0), _logits(i0=1.0)),  # null 2
    ]
    (predictions, nbest, null_odds), _ = _predict(
        tmp_path, examples, features, results, version_2=True, n_best_size=2
    )
    assert predictions == {"q1": "w3"}
    assert null_odds == {"q1": 1.0 - 8.0}
    texts_and_logits = [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest["q1"]]
    assert texts_and_logits == [("w3", 4.0, 4.0), ("", 0.5, 0.5)]


def test_no_valid_span_gives_the_originals_empty_placeholder(tmp_path, tiny_tokenizer):
    examples, (feature,) = _three_word_case(tiny_tokenizer)
    result = squad_predictions.RawResult(
        feature.unique_id, _logits(i0=9.0, i1=8.0), _logits(i0=9.0, i1=8.0)
    )
    (predictions, nbest, _), _ = _predict(tmp_path, examples, [feature], [result], n_best_size=2)
    assert predictions == {"q1": "empty"}
    assert nbest["q1"] == [
        {"text": "empty", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}
    ]


def test_spans_with_the_same_final_text_are_listed_once(tmp_path, tokenizer):
    # "foo\u200bbar" -> foo ##bar. The zero-width space, dropped by the tokenizer, defeats the
    # projection onto the original text, so every span gives the whole word.
    examples, _ = squad.read_squad_json(squad_json("foo\u200bbar", [qa("q1")]), False, False)
    (feature,) = features_of(examples, tokenizer, max_seq_length=16, is_training=False)
    assert feature.tokens == ["[CLS]", "q", "[SEP]", "foo", "##bar", "[SEP]"]
    # Candidates: foo ##bar (2 + 2), foo (2 + 1), ##bar (1 + 2): the last two repeat the first's text.
    result = squad_predictions.RawResult(
        feature.unique_id, _logits(16, i3=2.0, i4=1.0), _logits(16, i3=1.0, i4=2.0)
    )
    (predictions, nbest, _), _ = _predict(tmp_path, examples, [feature], [result])
    assert predictions == {"q1": "foo\u200bbar"}
    assert nbest["q1"] == [
        {"text": "foo\u200bbar", "probability": 1.0, "start_logit": 2.0, "end_logit": 2.0}
    ]


def test_missing_result_raises_value_error(tmp_path, tiny_tokenizer):
    examples, features = _three_word_case(tiny_tokenizer)
    with pytest.raises(ValueError, match="no result for feature 1000000000 of question 'q1'"):
        _predict(tmp_path, examples, features, [])


@pytest.mark.parametrize(
    "pred_text, orig_text, do_lower_case, expected",
    [
        ("steve smith", "Steve Smith's", True, "Steve Smith"),
        ("1895", "(1895-1943).", True, "1895"),
        ("1943", "(1895-1943).", True, "1943"),
        ("cafe", "Café,", True, "Café"),
        ("muller", "Müller.", True, "Müller"),
        ("北 京", "北京。", True, "北京"),
        ("Smith", "Smith's", False, "Smith"),
        ("smith", "Smith's", False, "Smith's"),  # cased: not found, the whole text
        (
            "abcd",
            "ab\u200bcd",
            True,
            "ab\u200bcd",
        ),  # the dropped U+200B changes the length: whole text
    ],
)
def test_get_final_text(pred_text, orig_text, do_lower_case, expected):
    assert squad_predictions.get_final_text(pred_text, orig_text, do_lower_case) == expected


# ----------------------------------------------------------------------------------------------
# TFDS


def _tfds_records(version_2):
    records = [
        {
            "id": "t1",
            "title": "Tenfold",
            "context": TEN_WORDS,
            "question": "q",
            "answers": {"text": ["w4 w5"], "answer_start": [12]},
        },
        {
            "id": "t2",
            "title": "Tenfold",
            "context": TEN_WORDS,
            "question": "q q",
            "answers": {"text": ["w9"], "answer_start": [27]},
        },
    ]
    if version_2:
        records.append(
            {
                "id": "t3",
                "title": "Tenfold",
                "context": TEN_WORDS,
                "question": "q",
                "answers": {"text": [], "answer_start": []},
            }
        )
        for record in records:
            record["is_impossible"] = record["id"] == "t3"
            record["plausible_answers"] = {"text": [], "answer_start": []}
    return records


def _mock_as_dataset(records):
    def as_dataset(self, split, **kwargs):
        del split, kwargs
        return tf.data.Dataset.from_generator(
            lambda: iter(records), output_signature=self.info.features.get_tensor_spec()
        )

    return as_dataset


@pytest.mark.parametrize("tfds_name, version_2", [("squad/v1.1", False), ("squad/v2.0", True)])
def test_read_tfds_squad_from_mock_data(tmp_path, tfds_name, version_2):
    tfds = pytest.importorskip("tensorflow_datasets")
    records = _tfds_records(version_2)
    with tfds.testing.mock_data(as_dataset_fn=_mock_as_dataset(records)):
        examples, stats = squad.read_tfds_squad(
            tfds_name, "train", is_training=True, data_dir=str(tmp_path)
        )
    assert [e.qas_id for e in examples] == [r["id"] for r in records]
    assert [(e.start_position, e.end_position) for e in examples] == [(4, 5), (9, 9), (-1, -1)][
        : len(records)
    ]
    assert [e.is_impossible for e in examples] == [False, False, True][: len(records)]
    assert examples[0].doc_tokens == [f"w{i}" for i in range(10)]
    assert examples[0].doc_tokens is examples[1].doc_tokens  # one context, split once
    assert (examples[0].title, examples[1].question_text) == ("Tenfold", "q q")
    assert stats == {"examples": len(records), "skipped": 0, "impossible": int(version_2)}


def test_read_tfds_squad_random_mock_data_for_prediction(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=3):
        examples, stats = squad.read_tfds_squad(
            "squad/v2.0", "validation", is_training=False, data_dir=str(tmp_path)
        )
    assert len(examples) == 3 and stats["examples"] == 3
    assert all(isinstance(e.qas_id, str) and e.doc_tokens for e in examples)


def test_read_tfds_squad_unprepared_says_how_to_prepare(tmp_path):
    pytest.importorskip("tensorflow_datasets")
    with pytest.raises(InputError, match=r"not prepared .*`tfds build squad/v1\.1 --data_dir="):
        squad.read_tfds_squad("squad/v1.1", "train", is_training=True, data_dir=str(tmp_path))
