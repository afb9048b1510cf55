"""run_classifier.py --doc_stride: long texts classified whole from their windows, in Python and in the export.

The task puts its only signal at the END of texts much longer than --max_seq_length: a model that
reads the first window only (the original's truncation) is at chance, one that reads every window is
not.
"""

import functools
import json
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf
from test_run_classifier import NEGATIVE, POSITIVE, tsv_config

from bert_tf.data.packing import window_spans
from bert_tf.errors import InputError
from bert_tf.models.networks.task_info import TaskInfo, read_task_info
from bert_tf.models.networks.text_windows import combine_windows, text_windows, window_signatures
from bert_tf.preprocessing import GraphPreprocessor
from bert_tf.tasks import run_script
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.data.features import convert_example_to_window_features
from bert_tf.tasks.classification.data.processor import InputExample
from bert_tf.tokenization import FullTokenizer

from conftest import PROBABILITY_ATOL, SAMPLE_DIR, finish, last_json_line, start_python

run = functools.partial(run_script, classification.SPEC)  # run_classifier.py's work

FILLER = "the lady walked to the house and said that she was very much in it".split()
VOCAB = str(SAMPLE_DIR / "vocab.txt")
MAX_SEQ_LENGTH = 32  # windows of 30 pieces


def _text(rng, label, length):
    """`length` filler words, then 12 words of the label's set: past the first window of 30 pieces."""
    words = [rng.choice(FILLER) for _ in range(length)]
    signal = [rng.choice(POSITIVE if label == "pos" else NEGATIVE) for _ in range(12)]
    return " ".join([*words, *signal])


@pytest.fixture(scope="module")
def long_texts(tmp_path_factory):
    """train/dev/test.tsv of 32-60 filler words, then the words that give the label."""
    folder = tmp_path_factory.mktemp("long")
    rng = random.Random(5)
    texts = {}
    for split, size in (("train", 256), ("dev", 64), ("test", 9)):
        rows = [
            (_text(rng, label, rng.randint(32, 60)), label)
            for label in rng.choices(["pos", "neg"], k=size)
        ]
        # Two short ones: a window each.
        if split == "test":
            rows[:2] = [("happy", "pos"), ("she was sad", "neg")]
        texts[split] = rows
        lines = [text if split == "test" else f"{text}\t{label}" for text, label in rows]
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return folder, texts


def _accuracy(folder):
    lines = (folder / "eval_results.txt").read_text().splitlines()
    return float(dict(line.split(" = ") for line in lines)["eval_accuracy"])


@pytest.fixture(scope="module")
def windowed(long_texts, tmp_path_factory):
    data, _ = long_texts
    root = tmp_path_factory.mktemp("windowed")
    settings = dict(
        do_train=True, do_eval=True, max_seq_length=MAX_SEQ_LENGTH, num_train_epochs=3.0,
        learning_rate=1e-3, train_batch_size=32,
    )  # fmt: skip
    outcome = run(
        tsv_config(
            data, root / "out", do_predict=True, doc_stride=15, export_dir=str(root / "export"),
            **settings,
        )
    )  # fmt: skip
    run(tsv_config(data, root / "cut", **settings))
    return root, outcome


def test_every_window_is_read_so_the_end_of_a_long_text_counts(windowed):
    root, _ = windowed
    # 64 dev texts: chance is 0.5 (standard error 0.06); the signal is past the first window.
    assert _accuracy(root / "out") >= 0.85
    assert _accuracy(root / "cut") <= 0.7


def test_the_windows_are_run_squads_windows_of_each_text(windowed, long_texts):
    root, texts = windowed[0], long_texts[1]
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    records = [
        tf.train.Example.FromString(record.numpy()).features.feature
        for record in tf.data.TFRecordDataset(str(root / "out" / "predict.tf_record"))
    ]
    expected = []
    for index, (text, _) in enumerate(texts["test"]):
        pieces = tokenizer.tokenize(text)
        # Windows of 30 pieces starting 15 apart, the last one the first to reach the end (the
        # previous one ends short of it); a text of 30 pieces or fewer is one window.
        starts = [0] + [start for start in range(15, len(pieces), 15) if start + 15 < len(pieces)]
        for start in starts:
            ids = tokenizer.convert_tokens_to_ids(["[CLS]", *pieces[start : start + 30], "[SEP]"])
            expected.append((index, ids + [0] * (MAX_SEQ_LENGTH - len(ids))))
    got = [
        (record["text_index"].int64_list.value[0], list(record["input_ids"].int64_list.value))
        for record in records
    ]
    assert got == expected
    assert len(got) > 2 * len(texts["test"])  # long texts make several windows


# (pieces, window, stride): the windows as (start, length), worked by hand from run_squad.py's rule
# (start at 0; the next one `min(stride, length)` later; stop at the first window reaching the end).
HAND_WORKED_WINDOWS = [
    (10, 4, 2, [(0, 4), (2, 4), (4, 4), (6, 4)]),  # stride < window
    (9, 4, 3, [(0, 4), (3, 4), (6, 3)]),  # a short last window
    (7, 4, 3, [(0, 4), (3, 4)]),  # the second window ends exactly at the end
    (5, 4, 1, [(0, 4), (1, 4)]),
    (10, 4, 4, [(0, 4), (4, 4), (8, 2)]),  # stride == window
    (8, 4, 4, [(0, 4), (4, 4)]),  # an exact multiple of the window: no empty third
    (10, 4, 6, [(0, 4), (4, 4), (8, 2)]),  # stride > window: a window at a time, no piece skipped
    (10, 4, 100, [(0, 4), (4, 4), (8, 2)]),
    (4, 4, 2, [(0, 4)]),  # exactly one window
    (3, 4, 2, [(0, 3)]),  # shorter than a window
    (1, 4, 9, [(0, 1)]),
    (0, 4, 2, []),  # empty: no window (the features file makes it one empty window, below)
]


@pytest.mark.parametrize("num_pieces, window, stride, expected", HAND_WORKED_WINDOWS)
def test_window_spans_are_run_squads_windows(num_pieces, window, stride, expected):
    assert [tuple(span) for span in window_spans(num_pieces, window, stride)] == expected


LETTERS = "a b c d e f g h i j".split()  # one wordpiece each in the uncased vocab


@pytest.mark.parametrize("num_pieces, window, stride, expected", HAND_WORKED_WINDOWS)
def test_the_features_files_windows_hold_the_hand_worked_pieces(
    num_pieces, window, stride, expected
):
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    example = InputExample(guid="0", text_a=" ".join(LETTERS[:num_pieces]), label="pos")
    windows = convert_example_to_window_features(
        example, {"pos": 0}, window + 2, tokenizer, stride, 0
    )
    got = [
        tokenizer.convert_ids_to_tokens(
            [i for i, mask in zip(w["input_ids"], w["input_mask"], strict=True) if mask]
        )
        for w in windows
    ]
    assert got == [
        ["[CLS]", *LETTERS[start : start + length], "[SEP]"]
        for start, length in expected or [(0, 0)]
    ]


def test_test_results_have_one_row_per_text_and_the_export_gives_them_from_raw_text(
    windowed, long_texts
):
    root, outcome = windowed
    texts = [text for text, _ in long_texts[1]["test"]]
    rows = (root / "out" / "test_results.tsv").read_text().splitlines()
    predicted = np.array([[float(p) for p in row.split("\t")] for row in rows])
    assert predicted.shape == (9, 2)
    script = (
        "import json, sys\n"
        "import tensorflow as tf, tensorflow_text  # noqa: F401\n"
        "texts = json.loads(sys.argv[2])\n"
        "serve = tf.saved_model.load(sys.argv[1]).signatures['serving_default']\n"
        "print(json.dumps(serve(text_a=tf.constant(texts))['probabilities'].numpy().tolist()))\n"
    )
    served = np.array(
        last_json_line(
            finish(start_python(["-c", script, outcome["export"], json.dumps(texts)]))[0]
        )
    )
    # Printed to 6 decimals, batched otherwise; a first-window-only export is off by 0.1 or more.
    np.testing.assert_allclose(served, predicted, rtol=0, atol=PROBABILITY_ATOL)


def _probabilities(folder):
    rows = (folder / "test_results.tsv").read_text().splitlines()
    return np.array([[float(p) for p in row.split("\t")] for row in rows])


def test_predicting_from_a_windowed_checkpoint_elsewhere_reads_its_texts_whole(
    windowed, long_texts, tmp_path
):
    # No --doc_stride: the model predicts as it was trained and as its export does (task.json).
    root = windowed[0]
    data = long_texts[0]
    checkpoint = tf.train.latest_checkpoint(str(root / "out"))
    run(
        tsv_config(
            data, tmp_path / "predicted", do_predict=True, init_checkpoint=checkpoint,
            max_seq_length=MAX_SEQ_LENGTH,
        )
    )  # fmt: skip
    # Printed to 6 decimals; first windows alone are off by 0.1 or more on the long texts.
    np.testing.assert_allclose(
        _probabilities(tmp_path / "predicted"), _probabilities(root / "out"), atol=2e-6
    )


def test_a_run_going_on_with_a_windowed_model_combines_windows_by_its_rule(
    windowed, long_texts, tmp_path
):
    # The same model, its run's task.json saying max: predicted in that (copied) run folder with
    # no window flag, and from elsewhere with --doc_stride only, both combine by max.
    root, data = windowed[0], long_texts[0]
    max_run = tmp_path / "max_run"
    shutil.copytree(root / "out", max_run)
    task = json.loads((max_run / "task.json").read_text())
    (max_run / "task.json").write_text(json.dumps({**task, "window_combination": "max"}))
    settings = dict(do_predict=True, max_seq_length=MAX_SEQ_LENGTH)
    run(
        tsv_config(
            data, tmp_path / "flags", init_checkpoint=str(root / "out"), doc_stride=15,
            window_combination="max", **settings,
        )
    )  # fmt: skip
    run(tsv_config(data, max_run, **settings))
    run(
        tsv_config(
            data, tmp_path / "elsewhere", init_checkpoint=str(max_run), doc_stride=15, **settings
        )
    )  # fmt: skip
    by_max = _probabilities(tmp_path / "flags")
    assert np.abs(by_max - _probabilities(root / "out")).max() > 0.01  # max is not mean here
    np.testing.assert_allclose(_probabilities(max_run), by_max, atol=2e-6)
    np.testing.assert_allclose(_probabilities(tmp_path / "elsewhere"), by_max, atol=2e-6)


@pytest.mark.parametrize(
    "max_seq_length, doc_stride", [(8, 2), (8, 6), (8, 20), (5, 1), (11, 3), (32, 15)]
)
def test_the_exports_windows_are_those_of_the_features_file(max_seq_length, doc_stride):
    # Strides past a window (20 > 6) step a window at a time, as run_squad.py's; an empty text and
    # a one-piece text are one window each.
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    rng = random.Random(max_seq_length * 100 + doc_stride)
    pool = [*FILLER, *POSITIVE, "supercalifragilisticexpialidocious", "héllo", "東京"]
    texts = [" ".join(rng.choices(pool, k=rng.randint(1, 40))) for _ in range(10)] + ["", "the"]
    expected = []
    for index, text in enumerate(texts):
        example = InputExample(guid=str(index), text_a=text, label="pos")
        for window in convert_example_to_window_features(
            example, {"pos": 0}, max_seq_length, tokenizer, doc_stride, index
        ):
            ids = [
                i for i, mask in zip(window["input_ids"], window["input_mask"], strict=True) if mask
            ]
            expected.append((index, ids))
    preprocessor = GraphPreprocessor(VOCAB, True, max_seq_length)
    features, text_index = text_windows(preprocessor, tf.constant(texts), doc_stride)
    got = [
        (int(index), [int(i) for i, mask in zip(ids, masks, strict=True) if mask])
        for index, ids, masks in zip(
            text_index.numpy(), features["input_ids"].numpy(), features["input_mask"].numpy(),
            strict=True,
        )
    ]  # fmt: skip
    assert got == expected
    assert len(expected) > len(texts)  # some texts are longer than a window


def test_combining_windows_by_mean_and_max_of_log_probabilities():
    logits = np.log([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8], [0.6, 0.4]])
    text_index = np.array([0, 0, 0, 1])
    mean = combine_windows(logits, text_index, "mean")
    np.testing.assert_allclose(mean[0], np.log([0.9 * 0.5 * 0.2, 0.1 * 0.5 * 0.8]) / 3)
    np.testing.assert_allclose(mean[1], np.log([0.6, 0.4]))
    np.testing.assert_allclose(combine_windows(logits, text_index, "max")[0], np.log([0.9, 0.8]))
    scores = np.array([[1.0], [2.0], [4.0]])
    np.testing.assert_allclose(
        combine_windows(scores, np.array([0, 0, 1]), "max", True), [[1.5], [4.0]]
    )


def test_weighted_mean_weighs_each_window_by_the_wordpieces_it_holds():
    # A text of a 30-piece window leaning to label 0 and a 10-piece tail window sure of label 1:
    # weighted, the long window wins; unweighted, the short one does.
    logits = np.log([[0.8, 0.2], [0.05, 0.95], [0.3, 0.7]])
    text_index = np.array([0, 0, 1])
    num_tokens = np.array([32, 12, 2])  # [CLS] + pieces + [SEP]; the last an empty text's
    weighted = combine_windows(logits, text_index, "weighted_mean", num_tokens=num_tokens)
    np.testing.assert_allclose(
        weighted[0], (30 * np.log([0.8, 0.2]) + 10 * np.log([0.05, 0.95])) / 40
    )
    np.testing.assert_allclose(weighted[1], np.log([0.3, 0.7]))
    assert weighted[0].argmax() == 0
    assert combine_windows(logits, text_index, "mean")[0].argmax() == 1
    with pytest.raises(ValueError, match="median"):
        combine_windows(logits, text_index, "median")
    scores = np.array([[1.0], [5.0], [2.0]])
    np.testing.assert_allclose(
        combine_windows(scores, text_index, "weighted_mean", True, num_tokens), [[2.0], [2.0]]
    )


class _ScoreIds:
    """A stand-in for a classifier: logits that are smooth functions of a window's mean id."""

    def __init__(self, is_regression):
        self.is_regression = is_regression

    def __call__(self, features, training=False):
        mask = tf.cast(features["input_mask"], tf.float32)
        ids = tf.cast(features["input_ids"], tf.float32) * mask
        mean_id = tf.reduce_sum(ids, axis=-1) / tf.reduce_sum(mask, axis=-1) / 100.0
        logits = 3.0 * tf.stack([tf.sin(mean_id), tf.cos(0.7 * mean_id), tf.sin(1.3 * mean_id)], 1)
        return {"logits": logits[:, :1] if self.is_regression else logits}


@pytest.mark.parametrize("is_regression", [False, True])
@pytest.mark.parametrize("rule", ["weighted_mean", "mean", "max"])
def test_the_export_combines_windows_as_the_predictions_file_does(rule, is_regression):
    # The export's graph (serve_ids) against combine_windows, which test_results.tsv comes from,
    # on windows of uneven lengths.
    rng = random.Random(11)
    texts = [_text(rng, "pos", rng.randint(0, 70)) for _ in range(6)] + ["", "happy"]
    preprocessor = GraphPreprocessor(VOCAB, True, MAX_SEQ_LENGTH)
    info = TaskInfo(
        model_type="classifier", max_seq_length=MAX_SEQ_LENGTH, doc_stride=15,
        window_combination=rule, is_regression=is_regression,
    )  # fmt: skip
    model = _ScoreIds(is_regression)
    signatures = window_signatures(preprocessor, model, info, lambda logits: {"logits": logits})
    windows = signatures["preprocess"](text_a=tf.constant(texts))
    served = signatures["serve_ids"](**windows)["logits"].numpy()
    expected = combine_windows(
        model(windows)["logits"].numpy(),
        windows["text_index"].numpy(),
        rule,
        is_regression,
        windows["input_mask"].numpy().sum(axis=-1),
    )
    assert len(windows["text_index"]) > len(texts) + 4  # several texts of several windows
    # Values of magnitude 10 or less, float32 in the graph.
    np.testing.assert_allclose(served, expected, atol=1e-5)


def test_a_new_windowed_run_combines_by_weighted_mean_and_says_so(windowed):
    assert read_task_info(str(windowed[0] / "out")).settings.window_combination == "weighted_mean"


def test_a_task_json_naming_an_unknown_window_rule_is_refused():
    with pytest.raises(InputError, match="out/task.json: window_combination 'median'"):
        TaskInfo.from_json(
            {"model_type": "classifier", "window_combination": "median"}, "out/task.json"
        )


@pytest.mark.parametrize("recorded", [{}, {"window_combination": None}])
def test_a_task_json_from_before_weighted_mean_combines_by_mean(recorded):
    # Windowed runs before weighted_mean existed combined by the plain mean and may not say so.
    task = {"model_type": "classifier", "doc_stride": 15, **recorded}
    assert TaskInfo.from_json(task, "task.json").settings.window_combination == "mean"
