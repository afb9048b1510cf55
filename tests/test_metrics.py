"""bert_tf.metrics: hand-worked values, and scikit-learn / scipy / seqeval as independent references.

Float comparisons against the references use rel=1e-12: the same ratios computed by another float64
implementation, so only last-bit rounding may differ. Counts are compared exactly.
"""

import math
import random
import warnings

import numpy as np
import pytest

from bert_tf import metrics
from bert_tf.tasks.tagging import entity_metrics

REL = 1e-12


# --------------------------------------------------------------------------- classification


def test_accuracy_is_the_fraction_of_equal_pairs():
    assert metrics.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5


def test_accuracy_refuses_unpaired_or_empty_inputs():
    with pytest.raises(ValueError, match="3 predictions for 2 labels"):
        metrics.accuracy([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="no predictions"):
        metrics.accuracy([], [])


def test_f1_score_of_the_positive_class_worked_by_hand():
    predictions = [1, 1, 0, 0, 1]
    labels = [1, 0, 1, 0, 1]
    # Class 1: tp 2, fp 1, fn 1 -> 2*2 / (2*2 + 1 + 1).
    assert metrics.f1_score(predictions, labels) == pytest.approx(2 / 3, rel=REL)
    # Class 0: tp 1 (index 3), fp 1 (index 2), fn 1 (index 1) -> 2 / 4.
    assert metrics.f1_score(predictions, labels, positive_label=0) == 0.5


def test_f1_score_is_zero_without_positive_labels_or_predictions():
    assert metrics.f1_score([0, 0, 0], [0, 0, 0]) == 0.0


def test_matthews_corrcoef_worked_by_hand():
    # tp 2, tn 1, fp 1, fn 1: (tp tn - fp fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = 1 / sqrt(36).
    assert metrics.matthews_corrcoef([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(1 / 6)
    assert metrics.matthews_corrcoef([0, 1, 1, 0], [0, 1, 1, 0]) == 1.0
    assert metrics.matthews_corrcoef([1, 0, 0, 1], [0, 1, 1, 0]) == -1.0


def test_matthews_corrcoef_is_zero_when_undefined():
    # One predicted class only: the denominator is 0; scikit-learn returns 0.0 then.
    assert metrics.matthews_corrcoef([1, 1, 1, 1], [0, 1, 0, 1]) == 0.0
    assert metrics.matthews_corrcoef([0, 1, 0, 1], [1, 1, 1, 1]) == 0.0


def test_pearson_worked_by_hand():
    # x - mean = [-1, 0, 1]; y - mean = [-7/3, -1/3, 8/3]: r = 5 / (sqrt(2) sqrt(114) / 3).
    assert metrics.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(15 / math.sqrt(228), rel=REL)


def test_pearson_of_a_constant_sample_is_nan():
    assert math.isnan(metrics.pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_pearson_needs_two_pairs():
    with pytest.raises(ValueError, match="at least 2 pairs"):
        metrics.pearson([1.0], [2.0])


def test_spearman_gives_ties_their_average_rank():
    # Ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]: centred dot 4.5, norms sqrt(4.5) and sqrt(5).
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3 / math.sqrt(10), rel=REL)


def test_glue_metrics_report_each_tasks_keys():
    predictions, labels = [1, 0, 1, 1], [1, 0, 0, 1]
    assert list(metrics.glue_metrics("cola", predictions, labels)) == [
        "accuracy",
        "matthews_corrcoef",
    ]
    for name in ("mrpc", "MRPC", "glue/mrpc", "qqp"):
        result = metrics.glue_metrics(name, predictions, labels)
        assert result == {"accuracy": 0.75, "f1": pytest.approx(0.8, rel=REL)}, name
    for name in ("sst-2", "glue/sst2", "mnli", "mnli-mm", "qnli", "rte", "wnli", "xnli", None):
        assert metrics.glue_metrics(name, predictions, labels) == {"accuracy": 0.75}, name


def test_glue_metrics_for_regression_are_the_correlations_and_their_mean():
    scores, labels = [1.0, 2.0, 2.0, 3.0], [1.0, 3.0, 2.0, 4.0]
    for name in ("sts-b", "STS-B", "glue/stsb"):
        result = metrics.glue_metrics(name, scores, labels)
        assert list(result) == ["pearson", "spearman", "corr"]
        assert result["spearman"] == pytest.approx(3 / math.sqrt(10), rel=REL)
        assert result["corr"] == pytest.approx((result["pearson"] + result["spearman"]) / 2)
    # A user's task: floating-point predictions mean regression unless told otherwise.
    assert list(metrics.glue_metrics("csv", scores, labels)) == ["pearson", "spearman", "corr"]
    assert list(metrics.glue_metrics("csv", [1, 2], [1, 2], is_regression=True))[0] == "pearson"
    assert metrics.glue_metrics("csv", [1.0, 0.0], [1.0, 1.0], is_regression=False) == {
        "accuracy": 0.5
    }


def test_classification_metrics_match_scikit_learn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for trial in range(50):
        num_classes = 2 if trial % 2 else 4
        labels = rng.integers(0, num_classes, size=int(rng.integers(1, 60)))
        predictions = np.where(
            rng.random(labels.size) < 0.6, labels, rng.integers(0, num_classes, labels.size)
        )
        assert metrics.accuracy(predictions, labels) == pytest.approx(
            sklearn_metrics.accuracy_score(labels, predictions), rel=REL
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn warns when one class is seen only
            expected_mcc = sklearn_metrics.matthews_corrcoef(labels, predictions)
        assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
            expected_mcc, rel=REL, abs=1e-15
        )
        if num_classes == 2:
            assert metrics.f1_score(predictions, labels) == pytest.approx(
                sklearn_metrics.f1_score(labels, predictions, zero_division=0.0), rel=REL
            )


def test_correlations_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    for _ in range(50):
        size = int(rng.integers(2, 40))
        x = rng.integers(0, 6, size).astype(np.float64)  # small integers: plenty of ties
        y = x + rng.normal(0.0, 2.0, size).round(1)
        if np.all(x == x[0]) or np.all(y == y[0]):
            continue
        assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], rel=REL, abs=1e-15)
        assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], rel=REL, abs=1e-15)


# --------------------------------------------------------------------------- CoNLL entities


def test_identical_labels_score_one():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    result = entity_metrics.conll_entity_metrics(gold, gold)
    assert (result["precision"], result["recall"], result["f1"], result["accuracy"]) == (1, 1, 1, 1)
    assert (result["support"], result["num_predicted"], result["num_correct"]) == (2, 2, 2)


def test_a_boundary_error_makes_the_entity_wrong():
    result = entity_metrics.conll_entity_metrics([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
    assert (result["support"], result["num_predicted"], result["num_correct"]) == (1, 1, 0)
    assert (result["precision"], result["recall"], result["f1"]) == (0.0, 0.0, 0.0)
    assert result["accuracy"] == pytest.approx(2 / 3)


def test_a_type_error_makes_the_entity_wrong_and_counts_under_both_types():
    result = entity_metrics.conll_entity_metrics([["B-PER", "I-PER"]], [["B-ORG", "I-ORG"]])
    assert result["f1"] == 0.0
    assert result["per_type"]["PER"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "support": 1,
        "num_predicted": 0,
        "num_correct": 0,
    }
    assert (result["per_type"]["ORG"]["support"], result["per_type"]["ORG"]["num_predicted"]) == (
        0,
        1,
    )


def test_overall_and_per_type_scores_worked_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    result = entity_metrics.conll_entity_metrics(gold, predicted)
    # Gold PER, LOC, ORG; predicted PER, ORG, ORG; right: PER and the second sentence's ORG.
    assert (result["support"], result["num_predicted"], result["num_correct"]) == (3, 3, 2)
    assert result["precision"] == result["recall"] == result["f1"] == pytest.approx(2 / 3)
    assert result["accuracy"] == 5 / 6
    assert list(result["per_type"]) == ["LOC", "ORG", "PER"]
    assert result["per_type"]["PER"]["f1"] == 1.0
    assert result["per_type"]["LOC"]["recall"] == 0.0
    org = result["per_type"]["ORG"]
    assert (org["precision"], org["recall"], org["f1"]) == (0.5, 1.0, pytest.approx(2 / 3))


def test_iob1_chunks_start_at_i_and_b_separates_adjacent_same_type_chunks():
    labels = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]
    assert entity_metrics.extract_entities(labels) == [
        ("PER", 0, 2),
        ("PER", 2, 3),
        ("LOC", 4, 5),
        ("ORG", 5, 6),
    ]
    assert entity_metrics.extract_entities(
        labels, scheme="iob1"
    ) == entity_metrics.extract_entities(labels)


def test_strict_iob2_ignores_an_i_that_continues_nothing():
    labels = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "B-ORG", "I-LOC"]
    assert entity_metrics.extract_entities(labels, scheme="iob2") == [("PER", 2, 3), ("ORG", 5, 6)]
    # conlleval's rules count the ill-formed runs as entities.
    assert entity_metrics.extract_entities(labels) == [
        ("PER", 0, 2),
        ("PER", 2, 3),
        ("LOC", 4, 5),
        ("ORG", 5, 6),
        ("LOC", 6, 7),
    ]


def test_iob1_and_iob2_readings_score_differently():
    gold = [["B-PER", "I-PER", "O"]]
    predicted = [["I-PER", "I-PER", "O"]]  # right in IOB1 terms, ill-formed in IOB2
    assert entity_metrics.conll_entity_metrics(gold, predicted, scheme="iob1")["f1"] == 1.0
    strict = entity_metrics.conll_entity_metrics(gold, predicted, scheme="iob2")
    assert (strict["num_predicted"], strict["f1"]) == (0, 0.0)


def test_iobes_entities():
    labels = ["B-PER", "E-PER", "S-LOC", "B-ORG", "I-ORG", "E-ORG", "B-PER", "E-PER"]
    expected = [("PER", 0, 2), ("LOC", 2, 3), ("ORG", 3, 6), ("PER", 6, 8)]
    assert entity_metrics.extract_entities(labels) == expected
    assert entity_metrics.extract_entities(labels, scheme="iobes") == expected


def test_strict_iobes_drops_chunks_that_are_never_closed():
    labels = ["B-PER", "I-PER", "O", "B-LOC", "S-LOC", "I-ORG", "E-ORG"]
    assert entity_metrics.extract_entities(labels, scheme="iobes") == [("LOC", 4, 5)]
    assert entity_metrics.extract_entities(labels) == [
        ("PER", 0, 2),
        ("LOC", 3, 4),
        ("LOC", 4, 5),
        ("ORG", 5, 7),
    ]


def test_a_change_of_type_inside_a_chunk_splits_it():
    assert entity_metrics.extract_entities(["B-PER", "I-LOC", "I-LOC"]) == [
        ("PER", 0, 1),
        ("LOC", 1, 3),
    ]
    assert entity_metrics.extract_entities(["B-PER", "I-LOC", "I-LOC"], scheme="iob2") == [
        ("PER", 0, 1)
    ]


def test_only_o_labels_score_zero_with_full_token_accuracy():
    result = entity_metrics.conll_entity_metrics([["O", "O"], ["O"]], [["O", "O"], ["O"]])
    assert (result["precision"], result["recall"], result["f1"]) == (0.0, 0.0, 0.0)
    assert (result["accuracy"], result["num_tokens"], result["per_type"]) == (1.0, 3, {})


def test_no_tokens_score_zero():
    for sequences in ([], [[]]):
        result = entity_metrics.conll_entity_metrics(sequences, sequences)
        assert (result["f1"], result["accuracy"], result["num_tokens"]) == (0.0, 0.0, 0)


def test_mismatched_inputs_and_foreign_labels_are_refused():
    with pytest.raises(ValueError, match="1 gold sentences but 2 predicted"):
        entity_metrics.conll_entity_metrics([["O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="sentence 1: 2 gold labels but 1 predicted"):
        entity_metrics.conll_entity_metrics([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match=r"sentence 0 position 1 \(predicted\): label 'S-PER'"):
        entity_metrics.conll_entity_metrics([["O", "O"]], [["O", "S-PER"]], scheme="iob1")
    with pytest.raises(ValueError, match="label 'X'"):
        entity_metrics.conll_entity_metrics([["X"]], [["O"]])
    with pytest.raises(ValueError, match="scheme must be one of"):
        entity_metrics.conll_entity_metrics([["O"]], [["O"]], scheme="bilou")


def _random_sentences(rng, prefixes, count):
    """Seeded random gold / predicted sentences, ill-formed sequences included."""

    def label():
        prefix = rng.choice(prefixes + "O")
        return "O" if prefix == "O" else f"{prefix}-{rng.choice(['PER', 'LOC', 'ORG'])}"

    lengths = [rng.randint(0, 12) for _ in range(count)]
    return [[label() for _ in range(n)] for n in lengths], [
        [label() for _ in range(n)] for n in lengths
    ]


@pytest.mark.parametrize(
    "scheme, prefixes, seqeval_options",
    [
        ("auto", "BIES", {}),  # seqeval's default mode ports conlleval's rules (with S-)
        ("iob1", "BI", {}),
        ("iob2", "BI", {"mode": "strict", "scheme": "IOB2"}),
        ("iobes", "BIES", {"mode": "strict", "scheme": "IOBES"}),
    ],
)
def test_entity_metrics_match_seqeval(scheme, prefixes, seqeval_options):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    seqeval_scheme = pytest.importorskip("seqeval.scheme")
    if "scheme" in seqeval_options:
        seqeval_options = {**seqeval_options, "scheme": getattr(seqeval_scheme, scheme.upper())}
    rng = random.Random(1234)
    for _ in range(100):
        gold, predicted = _random_sentences(rng, prefixes, 6)
        ours = entity_metrics.conll_entity_metrics(gold, predicted, scheme=scheme)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # seqeval warns about undefined (0.0) scores
            report = seqeval_metrics.classification_report(
                gold, predicted, output_dict=True, zero_division=0, **seqeval_options
            )
        for entity_type, scores in ours["per_type"].items():
            theirs = report[entity_type]
            assert scores["support"] == theirs["support"]
            assert scores["precision"] == pytest.approx(theirs["precision"], rel=REL)
            assert scores["recall"] == pytest.approx(theirs["recall"], rel=REL)
            assert scores["f1"] == pytest.approx(theirs["f1-score"], rel=REL)
        assert ours["precision"] == pytest.approx(report["micro avg"]["precision"], rel=REL)
        assert ours["recall"] == pytest.approx(report["micro avg"]["recall"], rel=REL)
        assert ours["f1"] == pytest.approx(report["micro avg"]["f1-score"], rel=REL)
        if ours["num_tokens"]:
            assert ours["accuracy"] == pytest.approx(
                seqeval_metrics.accuracy_score(gold, predicted), rel=REL
            )
