"""bert_tf.tasks.classification.data: GLUE / XNLI files in their published layouts, users' TSV / CSV, TFDS, features."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.feature_cache import write_records
from bert_tf.data.packing import truncate_seq_pair
from bert_tf.data.records import serialize_values
from bert_tf.errors import InputError
from bert_tf.tasks import task_settings
from bert_tf.tasks.classification import data as classification
from bert_tf.tasks.classification.data.features import (
    classifier_feature_spec,
    convert_example_to_feature,
)
from bert_tf.tasks.classification.data.processor import InputExample
from bert_tf.tokenization import FullTokenizer

from conftest import SAMPLE_DIR

MNLI_TRAIN_HEADER = (
    "index promptID pairID genre sentence1_binary_parse sentence2_binary_parse sentence1_parse "
    "sentence2_parse sentence1 sentence2 label1 gold_label"
).split()
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER[:-1] + "label2 label3 label4 label5 gold_label".split()
STSB_HEADER = (
    "index genre filename year old_index source1 source2 sentence1 sentence2 score".split()
)


def get_processor(task_name=None, **source):
    """The processor of a DataSource (run_classifier.py's data flags) of these fields."""
    return classification.get_processor(task_settings.DataSource(task_name=task_name, **source))


def write_tsv(path, rows):
    """Writes rows (lists of fields, or ready lines) as UTF-8 lines ending in "\\n"."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [row if isinstance(row, str) else "\t".join(row) for row in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def mnli_row(index, sentence1, sentence2, labels=()):
    parses = ["(parse)"] * 4
    return [str(index), "31193", f"{index}n", "government", *parses, sentence1, sentence2, *labels]


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(str(SAMPLE_DIR / "vocab.txt"), do_lower_case=True)


# ---- GLUE files --------------------------------------------------------------------------------


def test_cola_train_has_no_header_and_test_has_one(tmp_path):
    write_tsv(
        tmp_path / "train.tsv",
        [
            ["gj04", "1", "", "Our friends won't buy this analysis."],
            ["gj04", "0", "*", "Fell Bob."],
        ],
    )
    write_tsv(
        tmp_path / "test.tsv", [["index", "sentence"], ["0", "Bill left."], ["1", "Sue ran."]]
    )
    processor = get_processor("CoLA")
    train = processor.get_train_examples(str(tmp_path))
    test = processor.get_test_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-0", "Our friends won't buy this analysis.", None, "1"),
        ("train-1", "Fell Bob.", None, "0"),
    ]
    assert [(e.guid, e.text_a, e.label) for e in test] == [
        ("test-1", "Bill left.", None),
        ("test-2", "Sue ran.", None),
    ]
    assert train[1].source == f"{tmp_path / 'train.tsv'}:2"
    assert processor.get_labels() == ["0", "1"] and not processor.is_pair


def test_sst2_reads_sentence_and_label_and_a_test_file_of_index_and_sentence(tmp_path):
    write_tsv(tmp_path / "dev.tsv", [["sentence", "label"], ["it 's a charming journey . ", "1"]])
    write_tsv(tmp_path / "test.tsv", [["index", "sentence"], ["0", "uneasy mishmash ."]])
    processor = get_processor("sst-2")
    (dev,) = processor.get_dev_examples(str(tmp_path))
    (test,) = processor.get_test_examples(str(tmp_path))
    assert (dev.guid, dev.text_a, dev.label) == ("dev-1", "it 's a charming journey . ", "1")
    assert (test.guid, test.text_a, test.label) == ("test-1", "uneasy mishmash .", None)
    assert get_processor("sst2").task_name == "sst-2"


def test_mrpc_reads_strings_3_and_4_keeps_quotes_and_names_examples_by_line(tmp_path):
    header = ["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    write_tsv(
        tmp_path / "train.tsv",
        [
            header,
            ["1", "702876", "702977", 'He said "we will', 'win" he said'],
            ["0", "2108705", "2108831", '"Yucaipa" owned', 'it "'],
        ],
    )
    write_tsv(
        tmp_path / "test.tsv",
        [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"], ["0", "1", "2", "a b", "c d"]],
    )
    processor = get_processor("mrpc")
    train = processor.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-1", 'He said "we will', 'win" he said', "1"),
        ("train-2", '"Yucaipa" owned', 'it "', "0"),
    ]
    (test,) = processor.get_test_examples(str(tmp_path))
    assert (test.guid, test.text_a, test.text_b, test.label) == ("test-1", "a b", "c d", None)
    assert processor.is_pair


def test_qqp_names_examples_by_id_and_its_test_file_has_three_columns(tmp_path):
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    write_tsv(tmp_path / "train.tsv", [header, ["133273", "213221", "213222", "How?", "Why?", "0"]])
    write_tsv(tmp_path / "test.tsv", [["id", "question1", "question2"], ["7", "Who?", "What?"]])
    processor = get_processor("qqp")
    (train,) = processor.get_train_examples(str(tmp_path))
    (test,) = processor.get_test_examples(str(tmp_path))
    assert (train.guid, train.text_a, train.text_b, train.label) == (
        "train-133273",
        "How?",
        "Why?",
        "0",
    )
    assert (test.guid, test.text_a, test.text_b, test.label) == ("test-7", "Who?", "What?", None)


def test_a_line_with_too_few_columns_names_file_and_line_unless_skipped(tmp_path):
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    path = write_tsv(
        tmp_path / "train.tsv",
        [header, ["1", "2", "3", "How?", "Why?", "1"], ["2", "4", "5", "How come?"]],
    )
    with pytest.raises(
        InputError, match=rf"{path}:3: the line has 4 columns and no text_b \(column 4\)"
    ) as error:
        get_processor("qqp").get_train_examples(str(tmp_path))
    assert "--skip_malformed_lines" in str(error.value)
    examples = get_processor("qqp", skip_malformed_lines=True).get_train_examples(str(tmp_path))
    assert [e.guid for e in examples] == ["train-1"]


def test_stsb_is_a_regression_on_the_last_column_and_its_test_file_has_no_score(tmp_path):
    row = ["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none"]
    write_tsv(tmp_path / "train.tsv", [STSB_HEADER, [*row, "A plane.", "An air plane.", "5.000"]])
    write_tsv(tmp_path / "test.tsv", [STSB_HEADER[:-1], [*row, "A girl.", "A boy."]])
    processor = get_processor("sts-b")
    (train,) = processor.get_train_examples(str(tmp_path))
    (test,) = processor.get_test_examples(str(tmp_path))
    assert processor.is_regression and processor.get_labels() == []
    assert (train.guid, train.text_a, train.text_b, train.label) == (
        "train-0",
        "A plane.",
        "An air plane.",
        "5.000",
    )
    assert (test.text_a, test.text_b, test.label) == ("A girl.", "A boy.", None)
    write_tsv(tmp_path / "dev.tsv", [STSB_HEADER, [*row, "A", "B", "high"]])
    with pytest.raises(InputError, match=rf"{tmp_path / 'dev.tsv'}:2: the score 'high'"):
        processor.get_dev_examples(str(tmp_path))


@pytest.fixture
def mnli_dir(tmp_path):
    write_tsv(
        tmp_path / "train.tsv",
        [MNLI_TRAIN_HEADER, mnli_row(0, "Premise.", "Hypothesis.", ["neutral", "neutral"])],
    )
    for kind in ("matched", "mismatched"):
        labels = ["entailment"] * 4 + ["contradiction", "contradiction"]  # gold_label is the last
        write_tsv(
            tmp_path / f"dev_{kind}.tsv",
            [MNLI_DEV_HEADER, mnli_row(9815, f"Dev {kind}.", "H.", labels)],
        )
        write_tsv(
            tmp_path / f"test_{kind}.tsv",
            [MNLI_TRAIN_HEADER[:10], mnli_row(3, f"Test {kind}.", "H.")],
        )
    return tmp_path


def test_mnli_reads_matched_files_and_mnli_mm_mismatched_ones(mnli_dir):
    matched, mismatched = get_processor("mnli"), get_processor("MNLI-MM")
    (train,) = matched.get_train_examples(str(mnli_dir))
    assert (train.guid, train.text_a, train.text_b, train.label) == (
        "train-0",
        "Premise.",
        "Hypothesis.",
        "neutral",
    )
    (dev,) = matched.get_dev_examples(str(mnli_dir))
    assert (dev.guid, dev.text_a, dev.label) == (
        "dev_matched-9815",
        "Dev matched.",
        "contradiction",
    )
    (dev,) = mismatched.get_dev_examples(str(mnli_dir))
    assert (dev.guid, dev.text_a) == ("dev_mismatched-9815", "Dev mismatched.")
    (test,) = mismatched.get_test_examples(str(mnli_dir))
    assert (test.guid, test.text_a, test.label) == ("test_mismatched-3", "Test mismatched.", None)
    assert matched.get_labels() == ["contradiction", "entailment", "neutral"]
    assert mismatched.dev_source("glue/MNLI") == [os.path.join("glue/MNLI", "dev_mismatched.tsv")]


def test_an_mnli_row_without_gold_label_after_sentence2_is_malformed(mnli_dir):
    path = write_tsv(mnli_dir / "dev_matched.tsv", [MNLI_DEV_HEADER, mnli_row(1, "P.", "H.")])
    with pytest.raises(
        InputError, match=rf"{path}:2: the line has 10 columns and no label \(the last"
    ):
        get_processor("mnli").get_dev_examples(str(mnli_dir))


@pytest.mark.parametrize(
    "task, labels",
    [
        ("qnli", ["entailment", "not_entailment"]),
        ("rte", ["entailment", "not_entailment"]),
        ("wnli", ["0", "1"]),
    ],
)
def test_qnli_rte_wnli_read_index_text_text_label(tmp_path, task, labels):
    write_tsv(
        tmp_path / "train.tsv",
        [["index", "sentence1", "sentence2", "label"], ["5", "A cat.", "An animal.", labels[1]]],
    )
    write_tsv(tmp_path / "test.tsv", [["index", "sentence1", "sentence2"], ["0", "X.", "Y."]])
    processor = get_processor(task)
    (train,) = processor.get_train_examples(str(tmp_path))
    (test,) = processor.get_test_examples(str(tmp_path))
    assert (train.guid, train.text_a, train.text_b, train.label) == (
        "train-5",
        "A cat.",
        "An animal.",
        labels[1],
    )
    assert (test.guid, test.text_a, test.text_b, test.label) == ("test-0", "X.", "Y.", None)
    assert processor.get_labels() == labels


def test_a_label_outside_the_tasks_labels_names_file_and_line(tmp_path):
    header = ["index", "question", "sentence", "label"]
    path = write_tsv(
        tmp_path / "dev.tsv", [header, ["0", "Q?", "S.", "entailment"], ["1", "Q?", "S.", "yes"]]
    )
    with pytest.raises(InputError, match=rf"{path}:3: label 'yes' is not one of task qnli"):
        get_processor("qnli").get_dev_examples(str(tmp_path))


def test_ax_has_only_a_test_set(tmp_path):
    write_tsv(
        tmp_path / "diagnostic.tsv",
        [["index", "sentence1", "sentence2"], ["0", "The cat sat.", "The cat did not sit."]],
    )
    processor = get_processor("ax")
    (test,) = processor.get_test_examples(str(tmp_path))
    assert (test.guid, test.text_a, test.text_b, test.label) == (
        "test-0",
        "The cat sat.",
        "The cat did not sit.",
        None,
    )
    with pytest.raises(InputError, match="task ax has no train set"):
        processor.get_train_examples(str(tmp_path))


def test_xnli_train_renames_contradictory_and_dev_keeps_the_chosen_language(tmp_path):
    write_tsv(
        tmp_path / "multinli" / "multinli.train.de.tsv",
        [["premise", "hypo", "label"], ["Ein Hund.", "Ein Tier.", "contradictory"]],
    )
    rest = ["x"] * 4  # sentence1_binary_parse .. promptID: not read
    write_tsv(
        tmp_path / "xnli.dev.tsv",
        [
            ["language", "gold_label", *rest, "sentence1", "sentence2"],
            ["zh", "neutral", *rest, "一只猫。", "动物。"],
            ["de", "entailment", *rest, "Eine Katze.", "Ein Tier."],
        ],
    )
    processor = get_processor("xnli", xnli_language="de")
    (train,) = processor.get_train_examples(str(tmp_path))
    assert (train.guid, train.text_a, train.text_b, train.label) == (
        "train-1",
        "Ein Hund.",
        "Ein Tier.",
        "contradiction",
    )
    (dev,) = processor.get_dev_examples(str(tmp_path))
    assert (dev.guid, dev.text_a, dev.label) == ("dev-2", "Eine Katze.", "entailment")
    (dev,) = get_processor("xnli").get_dev_examples(str(tmp_path))  # zh by default
    assert (dev.guid, dev.text_a, dev.label) == ("dev-1", "一只猫。", "neutral")


def test_an_empty_file_names_the_file(tmp_path):
    (tmp_path / "train.tsv").write_bytes(b"")
    with pytest.raises(InputError, match=rf"{tmp_path / 'train.tsv'} is empty"):
        get_processor("cola").get_train_examples(str(tmp_path))


def test_a_header_only_file_has_no_examples(tmp_path):
    write_tsv(tmp_path / "dev.tsv", [["sentence", "label"]])
    with pytest.raises(InputError, match=rf"{tmp_path / 'dev.tsv'} holds no examples"):
        get_processor("sst-2").get_dev_examples(str(tmp_path))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"sentence\tlabel\ngood\t1\nbad \xff byte\t0\n")
    with pytest.raises(InputError, match=rf"{path}:3: not valid UTF-8"):
        get_processor("sst-2").get_train_examples(str(tmp_path))


def test_a_missing_file_names_it(tmp_path):
    with pytest.raises(InputError, match=rf"{tmp_path / 'dev.tsv'} does not exist"):
        get_processor("mrpc").get_dev_examples(str(tmp_path))
    with pytest.raises(FileNotFoundError):  # also catchable as such
        get_processor("mrpc").get_dev_examples(str(tmp_path))


def test_crlf_line_ends_and_blank_lines_are_not_data(tmp_path):
    (tmp_path / "train.tsv").write_bytes(b"sentence\tlabel\r\na b\t1\r\n\r\nc d\t0\r\n")
    examples = get_processor("sst-2").get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("train-1", "a b", "1"),
        ("train-3", "c d", "0"),
    ]


def test_get_processor_refuses_unknown_tasks_and_flags_a_glue_task_does_not_use():
    with pytest.raises(InputError, match="--task_name='sst-5' is not one of"):
        get_processor("sst-5")
    with pytest.raises(InputError, match="--text_a_column, --labels: not used"):
        get_processor("mrpc", text_a_column=3, labels="0,1")
    with pytest.raises(InputError, match="needs --tfds_name"):
        get_processor("tfds")
    assert set(classification.TASK_NAMES) >= {
        "cola",
        "mnli-mm",
        "xnli",
        "tsv",
        "csv",
        "tfds",
        "stsb",
    }


# ---- users' TSV / CSV -----------------------------------------------------------------------------


def test_tsv_columns_by_index_without_header(tmp_path):
    write_tsv(
        tmp_path / "train.tsv", [["pos", "x", 'so "good', "really"], ["neg", "y", "bad", "no"]]
    )
    processor = get_processor("tsv", text_a_column=2, text_b_column="3", label_column=0)
    examples = processor.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == [
        ("train-0", 'so "good', "really", "pos"),
        ("train-1", "bad", "no", "neg"),
    ]
    assert processor.get_labels() == ["neg", "pos"] and processor.is_pair


def test_csv_reads_quoted_fields_and_columns_by_header_name(tmp_path):
    (tmp_path / "train.csv").write_text(
        'stars,review\n5,"Good, ""very"" good"\n1,"two\nlines"\n5,plain\n',
        encoding="utf-8-sig",  # a byte-order mark before the header
    )
    processor = get_processor(
        "csv", text_a_column="review", label_column="stars", has_header=True, data_dir=str(tmp_path)
    )
    assert processor.get_labels() == ["1", "5"]
    examples = processor.get_train_examples(str(tmp_path))
    assert [(e.text_a, e.label, e.source.rsplit(":", 1)[1]) for e in examples] == [
        ('Good, "very" good', "5", "2"),
        ("two\nlines", "1", "3"),
        ("plain", "5", "5"),
    ]


def test_each_files_header_is_looked_up_and_the_test_file_needs_no_label(tmp_path):
    write_tsv(tmp_path / "train.tsv", [["label", "text"], ["b", "first"], ["a", "second"]])
    write_tsv(tmp_path / "test.tsv", [["id", "text"], ["0", "third"]])
    processor = get_processor("tsv", text_a_column="text", label_column="label", has_header=True)
    assert [e.text_a for e in processor.get_train_examples(str(tmp_path))] == ["first", "second"]
    (test,) = processor.get_test_examples(str(tmp_path))
    assert (test.guid, test.text_a, test.label) == ("test-1", "third", None)


def test_discovered_labels_are_sorted_integers_numerically(tmp_path):
    write_tsv(tmp_path / "train.tsv", [["a", "10"], ["b", "2"], ["c", "1"], ["d", "2"]])
    processor = get_processor("tsv", text_a_column=0, label_column=1, data_dir=str(tmp_path))
    assert processor.get_labels() == ["1", "2", "10"]


def test_given_labels_keep_their_order_and_refuse_other_training_labels(tmp_path):
    path = write_tsv(tmp_path / "train.tsv", [["x", "pos"], ["y", "neutral"]])
    processor = get_processor("tsv", text_a_column=0, label_column=1, labels="pos, neg")
    assert processor.get_labels() == ["pos", "neg"]
    with pytest.raises(InputError, match=rf"{path}:2: label 'neutral' is not one of --labels"):
        processor.get_train_examples(str(tmp_path))


def test_a_dev_label_missing_from_training_names_file_and_line(tmp_path):
    write_tsv(tmp_path / "train.tsv", [["x", "pos"], ["y", "neg"]])
    path = write_tsv(tmp_path / "dev.tsv", [["z", "neg"], ["w", "neutral"]])
    processor = get_processor("tsv", text_a_column=0, label_column=1)
    with pytest.raises(InputError, match=rf"{path}:2: label 'neutral' is not one of the training"):
        processor.get_dev_examples(str(tmp_path))


def test_a_missing_column_names_file_line_and_column(tmp_path):
    path = write_tsv(tmp_path / "train.tsv", [["x", "y", "pos"], ["z", "neg"]])
    processor = get_processor("tsv", text_a_column=0, text_b_column=1, label_column=2)
    with pytest.raises(
        InputError, match=rf"{path}:2: the line has 2 columns and no --label_column=2"
    ):
        processor.get_train_examples(str(tmp_path))


def test_a_column_name_needs_a_header_that_has_it(tmp_path):
    path = write_tsv(tmp_path / "train.tsv", [["text", "label"], ["x", "pos"]])
    with pytest.raises(InputError, match=rf"{path}:1: the header has no column 'sentence'"):
        get_processor(
            "tsv", text_a_column="sentence", label_column="label", has_header=True
        ).get_train_examples(str(tmp_path))
    with pytest.raises(InputError, match="names a column, but the files have no header"):
        get_processor("tsv", text_a_column="text", label_column=1).get_train_examples(str(tmp_path))


def test_labels_without_a_training_file_or_labels_flag_is_an_error(tmp_path):
    processor = get_processor("csv", text_a_column=0, label_column=1, data_dir=str(tmp_path))
    with pytest.raises(InputError, match=rf"labels in {tmp_path / 'train.csv'}, which does not"):
        processor.get_labels()
    with pytest.raises(FileNotFoundError):  # a caller may then read the labels of an earlier run
        processor.get_labels()


# ---- features ---------------------------------------------------------------------------------------


def test_truncate_seq_pair_pops_the_longer_and_b_on_ties():
    tokens_a, tokens_b = ["a1", "a2", "a3", "a4", "a5"], ["b1", "b2", "b3"]
    truncate_seq_pair(tokens_a, tokens_b, 5)  # (5,3) -> (4,3) -> (3,3) -> tie: b -> (3,2)
    assert (tokens_a, tokens_b) == (["a1", "a2", "a3"], ["b1", "b2"])
    tokens_a, tokens_b = ["a1", "a2"], ["b1", "b2", "b3", "b4", "b5", "b6"]
    truncate_seq_pair(tokens_a, tokens_b, 6)
    assert (tokens_a, tokens_b) == (["a1", "a2"], ["b1", "b2", "b3", "b4"])


def test_pair_feature_is_cls_a_sep_b_sep_with_segments_0_then_1(tokenizer):
    example = InputExample("g", "the cat sat on the mat", "a dog ran", label="1")
    feature = convert_example_to_feature(example, {"0": 0, "1": 1}, 8, tokenizer)
    # budget 8 - 3 = 5: (6,3) -> (5,3) -> (4,3) -> (3,3) -> tie pops b -> (3,2)
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "[SEP]"]
    assert feature == {
        "input_ids": tokenizer.convert_tokens_to_ids(tokens),
        "input_mask": [1] * 8,
        "segment_ids": [0, 0, 0, 0, 0, 1, 1, 1],
        "label_ids": 1,
        "is_real_example": 1,
    }
    assert feature["input_ids"][0] == 101 and feature["input_ids"][4] == 102


def test_single_feature_is_cut_to_s_minus_2_and_short_ones_padded_with_zeros(tokenizer):
    long = InputExample("g", "one two three four five six", label="b")
    feature = convert_example_to_feature(long, ["a", "b"], 6, tokenizer)
    assert feature["input_ids"] == tokenizer.convert_tokens_to_ids(
        ["[CLS]", "one", "two", "three", "four", "[SEP]"]
    )
    assert feature["label_ids"] == 1
    short = InputExample("g", "Hello!", text_b="", label=None)  # empty text_b: a single text
    feature = convert_example_to_feature(short, ["a", "b"], 7, tokenizer)
    assert feature["input_ids"] == [101, 7592, 999, 102, 0, 0, 0]
    assert feature["input_mask"] == [1, 1, 1, 1, 0, 0, 0]
    assert feature["segment_ids"] == [0] * 7
    assert feature["label_ids"] == 0  # no label (test set)


def test_pair_feature_pads_after_the_second_segment(tokenizer):
    example = InputExample("g", "hello", "world", label="5.5")
    feature = convert_example_to_feature(example, [], 8, tokenizer, is_regression=True)
    assert feature["input_ids"] == [101, 7592, 102, 2088, 102, 0, 0, 0]
    assert feature["segment_ids"] == [0, 0, 0, 1, 1, 0, 0, 0]
    assert feature["label_ids"] == 5.5


def test_a_label_outside_the_label_map_names_the_examples_source(tokenizer):
    example = InputExample("dev-3", "text", label="maybe", source="dev.tsv:4")
    with pytest.raises(InputError, match="dev.tsv:4: label 'maybe'"):
        convert_example_to_feature(example, ["yes", "no"], 8, tokenizer)


@pytest.mark.parametrize("is_regression, label", [(False, "neg"), (True, "3.8")])
def test_features_round_trip_through_a_tfrecord(tmp_path, tokenizer, is_regression, label):
    example = InputExample("g", "the cat", "a dog", label=label)
    features = [convert_example_to_feature(example, ["pos", "neg"], 8, tokenizer, is_regression)]
    spec = classifier_feature_spec(8, is_regression)
    path = str(tmp_path / "features.tf_record")
    # As ClassifierRun writes them.
    write_records(path, (serialize_values(f, spec) for f in features))
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]
    for feature, record in zip(features, parsed, strict=True):
        for name in ("input_ids", "input_mask", "segment_ids", "is_real_example"):
            assert record[name].dtype == tf.int64
            assert record[name].numpy().tolist() == feature[name]
        assert record["label_ids"].dtype == (tf.float32 if is_regression else tf.int64)
        np.testing.assert_allclose(record["label_ids"].numpy(), feature["label_ids"], rtol=1e-6)


# ---- TensorFlow Datasets ----------------------------------------------------------------------------


def test_tfds_glue_mrpc_gives_pairs_with_glue_labels(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=4):
        processor = get_processor("mrpc", tfds_name="glue/mrpc", tfds_data_dir=str(tmp_path))
        train = processor.get_train_examples(None)
        test = processor.get_test_examples(None)
    assert processor.task_name == "mrpc" and processor.is_pair and not processor.is_regression
    assert processor.get_labels() == ["0", "1"]
    assert len(train) == 4 and {e.label for e in train} <= {"0", "1"}
    assert all(isinstance(e.text_a, str) and isinstance(e.text_b, str) for e in train)
    assert train[0].source == "glue/mrpc:train[0]" and train[0].guid.startswith("train-")
    assert [e.label for e in test] == [None] * 4


def test_tfds_glue_stsb_is_a_regression(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=3):
        processor = get_processor("tfds", tfds_name="glue/stsb", tfds_data_dir=str(tmp_path))
        dev = processor.get_dev_examples(None)
    assert processor.task_name == "sts-b" and processor.is_regression
    assert processor.get_labels() == []
    assert all(isinstance(float(e.label), float) for e in dev)


def _mnli_as_dataset(self, split, **kwargs):
    """A stand-in for the prepared glue/mnli: the premise says which split was read."""
    return tf.data.Dataset.from_tensor_slices(
        {
            "premise": [f"premise of {split}"] * 3,
            "hypothesis": ["h"] * 3,
            "label": np.array([0, 1, 2], np.int64),  # tfds: entailment, neutral, contradiction
            "idx": np.array([7, 8, 9], np.int32),
        }
    )


def test_tfds_mnli_mm_reads_the_mismatched_splits_with_glue_label_names(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(as_dataset_fn=_mnli_as_dataset):
        processor = get_processor("mnli-mm", tfds_name="glue/mnli", tfds_data_dir=str(tmp_path))
        dev = processor.get_dev_examples(None)
        test = processor.get_test_examples(None)
        train = get_processor("mnli", tfds_name="glue/mnli").get_train_examples(None)
        matched = get_processor("mnli", tfds_name="glue/mnli").get_dev_examples(None)
    assert processor.task_name == "mnli-mm"
    assert processor.get_labels() == ["contradiction", "entailment", "neutral"]
    assert [(e.guid, e.text_a, e.label) for e in dev] == [
        ("validation_mismatched-7", "premise of validation_mismatched", "entailment"),
        ("validation_mismatched-8", "premise of validation_mismatched", "neutral"),
        ("validation_mismatched-9", "premise of validation_mismatched", "contradiction"),
    ]
    assert {e.text_a for e in test} == {"premise of test_mismatched"}
    assert {e.label for e in test} == {None}
    assert {e.text_a for e in train} == {"premise of train"}
    assert {e.text_a for e in matched} == {"premise of validation_matched"}


def test_tfds_other_datasets_take_feature_names_and_keep_their_class_names(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=2):
        processor = get_processor("tfds", tfds_name="imdb_reviews", text_a_column="text")
        train = processor.get_train_examples(None)
        with pytest.raises(InputError, match="has no feature 'title'; it has"):
            get_processor("tfds", tfds_name="imdb_reviews", text_a_column="title")
    assert processor.get_labels() == ["neg", "pos"] and not processor.is_pair
    assert [e.guid for e in train] == ["train-0", "train-1"]
    assert {e.label for e in train} <= {"neg", "pos"} and train[0].text_b is None
    with pytest.raises(InputError, match="needs --text_a_column"):
        get_processor("tfds", tfds_name="imdb_reviews")


def test_tfds_task_name_must_match_the_glue_config():
    with pytest.raises(InputError, match="--task_name=cola does not match --tfds_name=glue/mrpc"):
        get_processor("cola", tfds_name="glue/mrpc")
    with pytest.raises(InputError, match="GLUE configs are"):
        get_processor("tfds", tfds_name="glue/sst5")
    assert get_processor(None, tfds_name="glue/cola").task_name == "cola"


def test_an_unprepared_tfds_dataset_says_how_to_prepare_it(tmp_path):
    pytest.importorskip("tensorflow_datasets")
    processor = get_processor("rte", tfds_name="glue/rte", tfds_data_dir=str(tmp_path))
    with pytest.raises(InputError) as error:
        processor.get_train_examples(None)
    message = str(error.value)
    assert "\n" not in message
    assert f"tfds build glue/rte --data_dir={tmp_path}" in message
    assert f"--tfds_data_dir={tmp_path}" in message
    assert processor.train_source(None) == []
