"""CoNLL tagging data: parsing, label alignment on first pieces, windows, merging, writing back, bad input."""

import numpy as np
import pytest

from bert_tf import file_io
from bert_tf.data.feature_cache import make_feature_dataset, write_records
from bert_tf.errors import InputError
from bert_tf.tasks.tagging import conll
from bert_tf.tokenization import FullTokenizer

# Ids in sample_data/vocab.txt (Google's uncased vocab), looked up by hand.
CLS, SEP, UNK = 101, 102, 100
EMMA, WOOD, HOUSE, VISITED, HART, FIELD, PERIOD = 5616, 3536, 4580, 4716, 7530, 3790, 1012
LETTERS = {letter: 1037 + i for i, letter in enumerate("abcdefghij")}  # "a" is 1037 ... "j" 1046

CONLL_2003 = (
    "-DOCSTART- -X- -X- O\n"
    "\n"
    "EU NNP B-NP B-ORG\n"
    "rejects VBZ B-VP O\n"
    "German JJ B-NP B-MISC\n"
    "\n"
    "Peter NNP B-NP B-PER\n"
    "Blackburn NNP I-NP I-PER\n"
    "-DOCSTART- -X- -X- O\n"
    "BRUSSELS NNP B-NP B-LOC\n"
    "\n"
)


@pytest.fixture(scope="module")
def tokenizer(sample_vocab_path):
    return FullTokenizer(str(sample_vocab_path), do_lower_case=True)


def _write(tmp_path, text, name="train.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


def _sentence(words, labels=None):
    return conll.Sentence(list(words), labels, list(range(1, len(words) + 1)))


# ---------------------------------------------------------------------------------------- reading


def test_read_conll_parses_four_columns_and_skips_docstart(tmp_path):
    sentences = conll.read_conll(_write(tmp_path, CONLL_2003))
    assert [s.words for s in sentences] == [
        ["EU", "rejects", "German"],
        ["Peter", "Blackburn"],
        ["BRUSSELS"],
    ]
    assert [s.labels for s in sentences] == [
        ["B-ORG", "O", "B-MISC"],
        ["B-PER", "I-PER"],
        ["B-LOC"],
    ]
    assert [s.line_numbers for s in sentences] == [[3, 4, 5], [7, 8], [10]]


def test_label_column_picks_another_column(tmp_path):
    path = _write(tmp_path, CONLL_2003)
    assert conll.read_conll(path, label_column=1)[0].labels == ["NNP", "VBZ", "JJ"]
    assert conll.read_conll(path, label_column=-2)[1].labels == ["B-NP", "I-NP"]


def test_read_conll_reads_a_tab_separated_file_whose_words_hold_spaces(tmp_path):
    path = _write(tmp_path, "New York\tB-LOC\r\nis\tO\r\n\r\nOK\tO\r\n")
    sentences = conll.read_conll(path)
    assert [s.words for s in sentences] == [["New York", "is"], ["OK"]]
    assert [s.labels for s in sentences] == [["B-LOC", "O"], ["O"]]


def test_a_file_of_words_only_reads_without_labels(tmp_path):
    sentences = conll.read_conll(_write(tmp_path, "Emma\nWoodhouse\n\nHartfield\n"))
    assert [(s.words, s.labels) for s in sentences] == [
        (["Emma", "Woodhouse"], None),
        (["Hartfield"], None),
    ]


@pytest.mark.parametrize("label_column", [0, 4, -4])
def test_a_label_column_the_file_lacks_names_file_and_line(tmp_path, label_column):
    path = _write(tmp_path, CONLL_2003)
    with pytest.raises(InputError, match=rf"train\.txt:3: label column {label_column} "):
        conll.read_conll(path, label_column=label_column)


def test_a_line_with_another_column_count_names_file_and_line(tmp_path):
    path = _write(tmp_path, CONLL_2003.replace("German JJ B-NP B-MISC", "German B-MISC"))
    with pytest.raises(
        InputError, match=r"train\.txt:5: 2 columns, but the first word line \(3\) has 4"
    ):
        conll.read_conll(path)


@pytest.mark.parametrize("text", ["", "\n\n", "-DOCSTART- -X- -X- O\n\n"])
def test_a_file_without_words_names_the_file(tmp_path, text):
    with pytest.raises(InputError, match=r"train\.txt: no sentences"):
        conll.read_conll(_write(tmp_path, text))


def test_a_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match=r"nope\.txt does not exist"):
        conll.read_conll(str(tmp_path / "nope.txt"))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = _write(tmp_path, b"EU B-ORG\n\nM\xfcnchen B-LOC\n")
    with pytest.raises(InputError, match=r"train\.txt:3: not valid UTF-8"):
        conll.read_conll(path)


def test_find_data_files_accepts_the_original_release_names(tmp_path):
    for name in ("train.txt", "valid.txt", "eng.testb"):
        _write(tmp_path, "x O\n", name)
    found = file_io.split_files(str(tmp_path), conll.CONLL_FILE_NAMES)
    assert found == {
        "train": str(tmp_path / "train.txt"),
        "dev": str(tmp_path / "valid.txt"),
        "test": str(tmp_path / "eng.testb"),
    }
    (tmp_path / "valid.txt").unlink()
    with pytest.raises(InputError, match="no dev file .*dev.txt, valid.txt, eng.testa"):
        file_io.require_split_file(str(tmp_path), conll.CONLL_FILE_NAMES, "dev")


# ---------------------------------------------------------------------------------------- labels


def test_labels_are_o_first_then_sorted_whatever_their_order_in_the_file():
    sentences = [
        _sentence(["a", "b", "c"], ["S-PER", "O", "B-LOC"]),
        _sentence(["d", "e"], ["E-LOC", "I-LOC"]),
    ]
    assert conll.labels_from_sentences(sentences) == ["O", "B-LOC", "E-LOC", "I-LOC", "S-PER"]
    assert conll.labels_from_sentences([_sentence(["a"], ["NNP"])]) == ["NNP"]


def test_sentences_without_labels_give_no_label_list():
    with pytest.raises(InputError, match="no labels"):
        conll.labels_from_sentences([_sentence(["a"])])


def test_a_label_unseen_in_training_names_file_and_line(tmp_path):
    path = _write(tmp_path, CONLL_2003, "dev.txt")
    sentences = conll.read_conll(path)
    with pytest.raises(InputError, match=r"dev\.txt:5: label 'B-MISC' does not occur"):
        conll.check_labels(sentences, ["O", "B-ORG", "B-PER", "I-PER", "B-LOC"], path)


# ---------------------------------------------------------------------------------------- features


def test_the_label_sits_on_the_first_piece_and_other_pieces_are_masked(tokenizer):
    sentence = _sentence(
        ["Emma", "Woodhouse", "visited", "Hartfield", "."], ["B-PER", "I-PER", "O", "B-LOC", "O"]
    )
    label_map = {"O": 0, "B-LOC": 1, "B-PER": 2, "I-PER": 3}
    (feature,) = conll.convert_sentence_to_features(sentence, 7, label_map, 12, tokenizer)
    assert feature["input_ids"] == [
        CLS,
        EMMA,
        WOOD,
        HOUSE,
        VISITED,
        HART,
        FIELD,
        PERIOD,
        SEP,
        0,
        0,
        0,
    ]
    assert feature["input_mask"] == [1] * 9 + [0] * 3
    assert feature["segment_ids"] == [0] * 12
    assert feature["label_ids"] == [0, 2, 3, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    assert feature["label_mask"] == [0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0]
    assert feature["word_ids"] == [-1, 0, 1, -1, 2, 3, -1, 4, -1, -1, -1, -1]
    assert (feature["sentence_index"], feature["is_real_example"]) == (7, 1)


def test_a_word_without_pieces_becomes_unk_and_is_predicted(tokenizer):
    (feature,) = conll.convert_sentence_to_features(
        _sentence(["Emma", "\x07"], ["B-PER", "O"]), 0, {"O": 0, "B-PER": 1}, 6, tokenizer
    )
    assert feature["input_ids"] == [CLS, EMMA, UNK, SEP, 0, 0]
    assert feature["label_mask"] == [0, 1, 1, 0, 0, 0]
    assert feature["label_ids"] == [0, 1, 0, 0, 0, 0]


def test_an_unlabelled_sentence_still_marks_every_word_for_prediction(tokenizer):
    (feature,) = conll.convert_sentence_to_features(
        _sentence(["Emma", "Woodhouse"]), 0, {}, 6, tokenizer
    )
    assert feature["label_ids"] == [0] * 6
    assert feature["label_mask"] == [0, 1, 1, 0, 0, 0]


def test_a_long_sentence_is_split_into_windows_each_word_owned_by_its_max_context_window(tokenizer):
    # Ten one-piece words, 4 pieces per window, stride 2: windows a-d, c-f, e-h, g-j. Worked by hand
    # with score = min(left, right) + 0.01 * 4: "c" scores 1.04 in the first window and 0.04 in the
    # second, "d" 0.04 and 1.04, so each middle pair splits between neighbouring windows.
    words = list("abcdefghij")
    features = conll.convert_sentence_to_features(
        _sentence(words, ["O"] * 10), 0, {"O": 0}, 6, tokenizer, doc_stride=2
    )
    assert [f["input_ids"] for f in features] == [
        [CLS, *(LETTERS[w] for w in window), SEP] for window in ("abcd", "cdef", "efgh", "ghij")
    ]
    assert [f["word_ids"] for f in features] == [
        [-1, 0, 1, 2, -1, -1],
        [-1, -1, 3, 4, -1, -1],
        [-1, -1, 5, 6, -1, -1],
        [-1, -1, 7, 8, 9, -1],
    ]
    assert [f["label_mask"] for f in features] == [
        [int(w >= 0) for w in f["word_ids"]] for f in features
    ]


def test_windows_hold_whole_words_and_none_adds_no_word(tokenizer):
    # "Weymouth" is we ##ym ##outh: with 4 pieces per window and stride 1, a window starting at "b"
    # would end before "Weymouth" as the first does, so the second window starts at "c". "c" scores
    # min(2, 0) + 0.03 in the first window and min(0, 3) + 0.04 in the second, which owns it.
    features = conll.convert_sentence_to_features(
        _sentence(["a", "b", "c", "Weymouth"]), 0, {}, 6, tokenizer, doc_stride=1
    )
    assert [f["input_ids"] for f in features] == [
        [CLS, LETTERS["a"], LETTERS["b"], LETTERS["c"], SEP, 0],
        [CLS, LETTERS["c"], 2057, 24335, 17167, SEP],
    ]
    assert [f["word_ids"] for f in features] == [[-1, 0, 1, -1, -1, -1], [-1, 2, 3, -1, -1, -1]]


def test_a_word_longer_than_the_window_keeps_its_first_pieces(tokenizer):
    # super ##cal ##if ##rag ##ilis ##tic: 6 pieces, 3 fit between [CLS] and [SEP].
    features = conll.convert_sentence_to_features(
        _sentence(["Emma", "supercalifragilistic", "Emma"], ["B-PER", "O", "B-PER"]),
        0,
        {"O": 0, "B-PER": 1},
        5,
        tokenizer,
    )
    assert [f["input_ids"] for f in features] == [
        [CLS, EMMA, SEP, 0, 0],
        [CLS, 3565, 9289, 10128, SEP],
        [CLS, EMMA, SEP, 0, 0],
    ]
    assert [f["word_ids"] for f in features] == [
        [-1, 0, -1, -1, -1],
        [-1, 1, -1, -1, -1],
        [-1, 2, -1, -1, -1],
    ]


@pytest.mark.parametrize(
    "max_seq_length, doc_stride", [(5, 1), (8, 2), (8, None), (11, 3), (11, 20)]
)
def test_merging_the_windows_gives_every_word_exactly_one_prediction(
    tokenizer, max_seq_length, doc_stride
):
    words = "Emma Woodhouse , handsome , clever , and rich , with a comfortable home at Hartfield ,".split()
    words += ["Weymouth", "Enscombe", "supercalifragilistic", "\x07", "Knightley", "."]
    labels = [f"L{i % 7}" for i in range(len(words))]
    label_list = sorted(set(labels))
    sentences = [
        _sentence(words, labels),
        _sentence(["Emma"], ["L3"]),
        _sentence(words[::-1], labels),
    ]
    features = conll.convert_sentences_to_features(
        sentences, label_list, max_seq_length, tokenizer, doc_stride
    )
    assert len(features) > len(sentences)
    assert all(sum(f["input_mask"]) <= max_seq_length for f in features)
    # Predicting the gold label ids must give back exactly the gold labels, each word once.
    predicted = np.array([f["label_ids"] for f in features])
    merged = conll.merge_window_predictions(sentences, features, predicted, label_list)
    assert merged == [s.labels for s in sentences]


def test_merge_refuses_a_word_predicted_twice_or_never(tokenizer):
    sentence = _sentence(["Emma", "Woodhouse"])
    (feature,) = conll.convert_sentence_to_features(sentence, 0, {}, 8, tokenizer)
    predictions = np.zeros([2, 8], np.int32)
    with pytest.raises(ValueError, match="sentence 0, word 0: predicted by two windows"):
        conll.merge_window_predictions([sentence], [feature, feature], predictions)
    with pytest.raises(ValueError, match="sentence 1, word 0: predicted by no window"):
        conll.merge_window_predictions([sentence, sentence], [feature], predictions[:1])


def _fake_window(max_seq_length):
    """The fake window that fills a last batch (run_ner.py's): no word, no sentence, not real."""
    spec = conll.tagging_feature_spec(max_seq_length)
    window = {name: [0] * max_seq_length if spec[name].shape else 0 for name in spec}
    return {**window, "word_ids": [-1] * max_seq_length, "sentence_index": -1}


def test_merge_reads_passed_through_features_and_skips_padding(tokenizer):
    sentences = [_sentence(["Emma", "Woodhouse"]), _sentence(["Hartfield"])]
    features = conll.convert_sentences_to_features(sentences, None, 6, tokenizer)
    features.append(_fake_window(6))
    passed = {
        "sentence_index": np.array([f["sentence_index"] for f in features]),
        "word_ids": np.array([f["word_ids"] for f in features]),
    }
    predictions = np.array([[0, 1, 2, 3, 0, 0], [0, 4, 5, 0, 0, 0], [9] * 6])
    assert conll.merge_window_predictions(sentences, passed, predictions) == [[1, 2], [4]]


def test_tokenize_words_gives_the_pieces_features_use(tokenizer):
    assert conll.tokenize_words(tokenizer, " Emma  Woodhouse\t\x07 ") == (
        ["Emma", "Woodhouse", "\x07"],
        [["emma"], ["wood", "##house"], ["[UNK]"]],
    )


def test_features_survive_a_tfrecord_round_trip(tmp_path, tokenizer):
    sentences = [_sentence(list("abcdefghij"), ["O", "B"] * 5), _sentence(["Emma"], ["B"])]
    features = conll.convert_sentences_to_features(sentences, ["O", "B"], 6, tokenizer)
    path = str(tmp_path / "eval.tf_record")
    write_records(path, [conll.serialize_tagging_feature(f) for f in features])
    dataset = make_feature_dataset(
        path,
        conll.tagging_feature_spec(6),
        batch_size=4,
        is_training=False,
        num_records=len(features),
        padding_features=_fake_window(6),
    )
    batches = list(dataset.as_numpy_iterator())
    read = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    padded = [*features, *[_fake_window(6)] * (-len(features) % 4)]
    for name, spec in conll.tagging_feature_spec(6).items():
        assert read[name].dtype == np.int32 and read[name].shape[1:] == tuple(spec.shape)
        np.testing.assert_array_equal(read[name], [f[name] for f in padded], err_msg=name)


# ---------------------------------------------------------------------------------------- writing


def test_the_predictions_file_appends_a_column_and_keeps_blank_and_docstart_lines(tmp_path):
    path = _write(tmp_path, CONLL_2003, "test.txt")
    sentences = conll.read_conll(path)
    predicted = [["B-ORG", "O", "O"], ["B-PER", "B-PER"], ["B-LOC"]]
    output = tmp_path / "test_predictions.txt"
    conll.write_conll_predictions(path, sentences, predicted, str(output))
    assert output.read_text() == (
        "-DOCSTART- -X- -X- O\n"
        "\n"
        "EU NNP B-NP B-ORG B-ORG\n"
        "rejects VBZ B-VP O O\n"
        "German JJ B-NP B-MISC O\n"
        "\n"
        "Peter NNP B-NP B-PER B-PER\n"
        "Blackburn NNP I-NP I-PER B-PER\n"
        "-DOCSTART- -X- -X- O\n"
        "BRUSSELS NNP B-NP B-LOC B-LOC\n"
        "\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.txt", "test_predictions.txt"]


def test_the_predictions_file_of_a_tab_separated_crlf_file_stays_so(tmp_path):
    path = _write(tmp_path, "New York\tB-LOC\r\n\r\nOK\tO\r\n")
    output = tmp_path / "out.txt"
    conll.write_conll_predictions(path, conll.read_conll(path), [["B-LOC"], ["O"]], str(output))
    assert output.read_bytes() == b"New York\tB-LOC\tB-LOC\r\n\r\nOK\tO\tO\r\n"


def test_predictions_that_do_not_match_the_sentences_are_refused(tmp_path):
    path = _write(tmp_path, CONLL_2003)
    with pytest.raises(ValueError, match="sentence 1: 1 predicted labels for 2 words"):
        conll.write_conll_predictions(
            path, conll.read_conll(path), [["O"] * 3, ["O"], ["O"]], str(tmp_path / "out.txt")
        )
