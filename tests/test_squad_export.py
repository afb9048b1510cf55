"""The in-graph SQuAD path (bert_tf/tasks/squad/serving.py) against the Python features and predictions.

bert_tf/tasks/squad/data.py was checked feature for feature against the original run_squad.py; here the graph's
windows must be its windows, and the graph's answers for given logits must be write_predictions' answers.
No model is trained here: tests/test_run_squad.py exports trained ones.
"""

import functools
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import restore_init_checkpoint, save_google_checkpoint
from bert_tf.modeling import BertConfig
from bert_tf.models.networks import squad_network, squad_serving
from bert_tf.preprocessing import GraphPreprocessor
from bert_tf.tasks import exporting
from bert_tf.tasks.squad import data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.tokenization import BasicTokenizer, FullTokenizer

from conftest import SAMPLE_DIR

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "q"] + [f"w{i}" for i in range(10)]
TEN_WORDS = " ".join(f"w{i}" for i in range(10))
# Words the random paragraphs mix into the sample text: accents, CJK, a no-break space inside a
# word, dashes and brackets that split into several wordpieces.
ODD_WORDS = ["café", "Müller's", "(1895-1943).", "naïve", "co-operate", "a\u00a0b", "北京", "x--y"]
SEPARATORS = [" ", " ", " ", "  ", "\n", "\t", "\u202f", " \r\n"]


@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(TINY_VOCAB) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def sample_words():
    return (SAMPLE_DIR / "sample_text.txt").read_text(encoding="utf-8").split()


def _examples(contexts, questions, version_2):
    qas = [
        {"id": f"q{i}", "question": question, "answers": []} for i, question in enumerate(questions)
    ]
    paragraphs = [{"context": c, "qas": [qa]} for c, qa in zip(contexts, qas, strict=True)]
    examples, _ = data.read_squad_json(
        {"data": [{"title": "t", "paragraphs": paragraphs}]}, False, version_2
    )
    return examples


@functools.cache
def _preprocessor(vocab, do_lower_case):
    # make_windows packs to settings.max_seq_length: one preprocessor serves every setting.
    return GraphPreprocessor(vocab, do_lower_case)


def _windows(vocab, settings, questions, contexts, do_lower_case=True):
    preprocessor = _preprocessor(vocab, do_lower_case)
    return squad_serving.make_windows(
        preprocessor, settings, tf.constant(questions), tf.constant(contexts)
    )


# ----------------------------------------------------------------------------------------------
# Windows


def test_windows_are_the_features_windows_worked_by_hand(tiny_vocab):
    # As tests/test_squad_data.py: 10 wordpieces, 4 per window (8 - [CLS] q [SEP] [SEP]), stride 2.
    settings = squad_serving.QaSettings(max_seq_length=8, doc_stride=2, max_query_length=4)
    windows = _windows(tiny_vocab, settings, ["q", "q", ""], [TEN_WORDS, "w3 w4", ""])
    assert windows.example_index.numpy().tolist() == [0, 0, 0, 0, 1]  # the empty context: none
    assert windows.doc_start.numpy().tolist() == [0, 2, 4, 6, 0]
    assert windows.doc_length.numpy().tolist() == [4, 4, 4, 4, 2]
    assert windows.features["input_ids"].numpy().tolist()[1] == [2, 4, 3, 7, 8, 9, 10, 3]
    assert windows.features["input_ids"].numpy().tolist()[4] == [2, 4, 3, 8, 9, 3, 0, 0]
    assert windows.features["segment_ids"].numpy().tolist()[4] == [0, 0, 0, 1, 1, 1, 0, 0]
    assert windows.features["input_mask"].numpy().tolist()[4] == [1, 1, 1, 1, 1, 1, 0, 0]
    # Max context: wordpiece p belongs to the window where min(left, right) + 0.01 * length is
    # highest (the first on a tie): w3 to window 1, w4 and w5 to window 1 (min 2) over window 2.
    pieces = windows.doc_start[:, None] + tf.range(4, dtype=tf.int64)[None, :]
    is_max = squad_serving._is_max_context(pieces, windows, settings).numpy()[:4]
    assert is_max.tolist() == [
        [True, True, True, False],
        [False, True, True, False],
        [False, True, True, False],
        [False, True, True, True],
    ]


@pytest.mark.parametrize(
    "max_seq_length, doc_stride, max_query_length",
    [(24, 4, 8), (32, 16, 4), (20, 1, 12), (64, 128, 16), (16, 3, 1)],
)
def test_windows_match_convert_examples_to_features(
    sample_vocab_path, sample_words, max_seq_length, doc_stride, max_query_length
):
    rng = random.Random(max_seq_length * 1000 + doc_stride)
    contexts = [_paragraph(rng, sample_words, length) for length in (1, 3, 9, 20, 40, 70)]
    contexts.append(" ".join(["w"] * (max_seq_length - 5)))  # exactly one full window, or two
    questions = [_paragraph(rng, sample_words, rng.randint(0, 20)) for _ in contexts]
    settings = squad_serving.QaSettings(max_seq_length, doc_stride, max_query_length)
    windows = _windows(str(sample_vocab_path), settings, questions, contexts)
    features = list(
        data.convert_examples_to_features(
            _examples(contexts, questions, False),
            FullTokenizer(str(sample_vocab_path), do_lower_case=True),
            max_seq_length,
            doc_stride,
            max_query_length,
            is_training=False,
        )
    )
    input_ids = windows.features["input_ids"].numpy()
    lengths = windows.features["input_mask"].numpy().sum(axis=1)
    assert len(input_ids) == len(features)
    assert windows.example_index.numpy().tolist() == [f.example_index for f in features]
    for row, feature in enumerate(features):
        length = len(feature.tokens)
        assert lengths[row] == length
        assert input_ids[row, :length].tolist() == feature.input_ids[:length]
        assert (
            windows.features["segment_ids"].numpy()[row, :length].tolist()
            == (feature.segment_ids[:length])
        )


# ----------------------------------------------------------------------------------------------
# Span selection against write_predictions


def _paragraph(rng, words, num_words):
    chosen = [rng.choice(words + ODD_WORDS) for _ in range(num_words)]
    return "".join(word + rng.choice(SEPARATORS) for word in chosen).strip(" ")


def _cased_vocab(path, words):
    """A cased vocab holding every piece of `words`, so that cased text has no [UNK]."""
    tokens = BasicTokenizer(do_lower_case=False).tokenize(" ".join(words + ODD_WORDS))
    chars = sorted(set("".join(tokens)))
    whole = sorted({token for token in tokens if len(token) > 1})
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *chars, *[f"##{c}" for c in chars], *whole]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_graph_answers_equal_write_predictions_for_random_logits(
    tmp_path, sample_vocab_path, sample_words, do_lower_case
):
    # Random contexts (Emma's words, odd words, SQuAD's five whitespace characters), settings and
    # logits; logits rounded to 0.1 so that exact ties happen and the tie rules are compared too.
    vocab = (
        str(sample_vocab_path)
        if do_lower_case
        else _cased_vocab(tmp_path / "cased.txt", sample_words[:3000])
    )
    tokenizer = FullTokenizer(vocab, do_lower_case=do_lower_case)
    rng = random.Random(7 if do_lower_case else 8)
    numpy_rng = np.random.RandomState(0)
    compared = 0
    for _ in range(8):
        settings = squad_serving.QaSettings(
            max_seq_length=rng.choice([24, 32, 48]),
            doc_stride=rng.choice([1, 3, 8, 64]),
            max_query_length=rng.choice([4, 12]),
            n_best_size=rng.choice([1, 2, 5, 20]),
            max_answer_length=rng.choice([1, 3, 30]),
            version_2_with_negative=rng.random() < 0.5,
            null_score_diff_threshold=rng.choice([-1.0, 0.0, 2.0]),
        )
        contexts = [_paragraph(rng, sample_words, rng.randint(1, 60)) for _ in range(6)]
        questions = [_paragraph(rng, sample_words, rng.randint(0, 14)) for _ in range(6)]
        windows = _windows(vocab, settings, questions, contexts, do_lower_case)
        shape = windows.features["input_ids"].shape
        start_logits = np.round(numpy_rng.randn(*shape) * 3, 1).astype(np.float32)
        end_logits = np.round(numpy_rng.randn(*shape) * 3, 1).astype(np.float32)
        got = squad_serving.select_answers(
            tf.constant(contexts), windows, start_logits, end_logits, settings
        )
        examples = _examples(contexts, questions, settings.version_2_with_negative)
        features = list(
            data.convert_examples_to_features(
                examples,
                tokenizer,
                settings.max_seq_length,
                settings.doc_stride,
                settings.max_query_length,
                False,
            )
        )
        results = [
            squad_predictions.RawResult(
                f.unique_id, start_logits[i, : len(f.tokens)], end_logits[i, : len(f.tokens)]
            )
            for i, f in enumerate(features)
        ]
        predictions, nbest, null_odds = squad_predictions.write_predictions(
            examples,
            features,
            results,
            settings.n_best_size,
            settings.max_answer_length,
            do_lower_case,
            None,
            None,
            None,
            settings.version_2_with_negative,
            settings.null_score_diff_threshold,
        )
        for i, example in enumerate(examples):
            expected = predictions[example.qas_id]
            answer = got["answer"].numpy()[i].decode("utf-8")
            assert answer == ("" if expected == "empty" else expected), (settings, example)
            best = next(entry for entry in nbest[example.qas_id] if entry["text"])
            score = best["start_logit"] + best["end_logit"]
            assert got["score"].numpy()[i] == np.float32(score)
            if settings.version_2_with_negative:
                assert got["null_score_diff"].numpy()[i] == np.float32(null_odds[example.qas_id])
            compared += 1
    assert compared == 48


def test_no_window_and_no_valid_span_answer_empty(tiny_vocab):
    settings = squad_serving.QaSettings(
        max_seq_length=8,
        doc_stride=2,
        max_query_length=4,
        n_best_size=2,
        version_2_with_negative=True,
    )
    windows = _windows(tiny_vocab, settings, ["q", "q"], ["", "w1 w2"])
    # The second question's one window, [CLS] q [SEP] w1 w2 [SEP]: its 2 best starts are [CLS]
    # and w2, its 2 best ends [CLS] and w1, before w2: no valid span.
    start_logits = tf.constant([[9.0, 0.0, 0.0, 0.0, 5.0, 0.0]])
    end_logits = tf.constant([[9.0, 0.0, 0.0, 5.0, 0.0, 0.0]])
    got = squad_serving.select_answers(
        tf.constant(["", "w1 w2"]), windows, start_logits, end_logits, settings
    )
    assert got["answer"].numpy().tolist() == [b"", b""]
    assert got["score"].numpy().tolist() == [0.0, 0.0]  # the original's "empty" placeholder
    # Null scores: 1e6 without windows (write_predictions' start value), else 9 + 9.
    assert got["null_score_diff"].numpy().tolist() == [1e6, 18.0]


# ----------------------------------------------------------------------------------------------
# Google-format checkpoints


def test_google_format_squad_checkpoint_is_recognised_and_loads_with_its_head(tmp_path):
    config = BertConfig.from_json_file(str(SAMPLE_DIR / "bert_config_tiny.json"))
    fine_tuned = squad_network.BertSquad(config)
    prefix = save_google_checkpoint(fine_tuned, str(tmp_path / "bert_model.ckpt"))
    shapes = dict(tf.train.list_variables(prefix))
    assert shapes["cls/squad/output_weights"] == [2, 64] and shapes["cls/squad/output_bias"] == [2]
    # export_saved_model.py infers the model type from the head's names (SQuAD 1.1 defaults).
    info = exporting.infer_from_google(prefix)
    assert info.model_type == "squad"
    assert info.settings.version_2_with_negative is False and info.max_seq_length == 384
    # --init_checkpoint: the one restore path gives the encoder and the head.
    model = squad_network.BertSquad(config)
    report = restore_init_checkpoint(model, prefix)
    assert report.restored == ["encoder", "squad head"] and report.new == []
    for name in ("output_weights", "output_bias"):
        np.testing.assert_array_equal(
            getattr(model.head, name).numpy(), getattr(fine_tuned.head, name).numpy()
        )
