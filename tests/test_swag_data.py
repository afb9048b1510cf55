"""SWAG multiple-choice data: CSV and JSON lines reading, packing and truncation, TFRecords, bad input."""

import json

import numpy as np
import pytest

from bert_tf import file_io
from bert_tf.data.feature_cache import make_feature_dataset, write_records
from bert_tf.errors import InputError
from bert_tf.tasks.multiple_choice import swag
from bert_tf.tokenization import FullTokenizer

# The header of SWAG's real files (the first, unnamed column is pandas' row index); fields with commas,
# doubled quotes and a newline, quoted as SWAG's files quote them.
SWAG_CSV = (
    ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    '7,anetv_dm5,18313,"Someone opens it, and smiles. She","Someone opens it, and ""smiles"".",She,gold,'
    'walks to the door.,"sits, then stands.","says ""hi""\nagain.",waves.,2\n'
    "8,lsmdc_1052,18419,He rides. He,He rides.,He,gen,stops.,goes.,falls.,waits.,0\n"
)

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefgh"]  # "a" is id 4 ... "h" is 11
PAD, UNK, CLS, SEP = 0, 1, 2, 3
A, B, C, D, E, F, G, H = range(4, 12)


def _write(tmp_path, text, name="train.csv"):
    """Writes `text` (str or bytes) to tmp_path/name; returns the path as a str."""
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


def _jsonl(tmp_path, records, name="train.jsonl"):
    return _write(tmp_path, "".join(json.dumps(r) + "\n" for r in records), name)


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(f"{token}\n" for token in TINY_VOCAB))
    return FullTokenizer(str(path), do_lower_case=True)


def _example(context, start_ending, endings, label=1):
    return swag.MultipleChoiceExample("0", context, start_ending, endings, label, 2)


# ---------------------------------------------------------------------------------------- CSV


def test_read_swag_csv_keeps_commas_quotes_and_newlines_inside_fields(tmp_path):
    examples = swag.read_swag_csv(_write(tmp_path, SWAG_CSV))
    assert examples == [
        swag.MultipleChoiceExample(
            id="7",
            context='Someone opens it, and "smiles".',
            start_ending="She",
            endings=["walks to the door.", "sits, then stands.", 'says "hi"\nagain.', "waves."],
            label=2,
            line=2,
        ),
        swag.MultipleChoiceExample(
            "8", "He rides.", "He", ["stops.", "goes.", "falls.", "waits."], 0, line=4
        ),
    ]


def test_columns_are_found_by_name_in_any_order(tmp_path):
    path = _write(
        tmp_path,
        "label,ending1,sent2,ending0,sent1,extra\r\n1,no,He,yes,He rides.,x\r\n\r\n0,b,,a,c,y\r\n",
    )
    examples = swag.read_swag_csv(path)
    assert [(e.id, e.context, e.start_ending, e.endings, e.label, e.line) for e in examples] == [
        ("0", "He rides.", "He", ["yes", "no"], 1, 2),
        ("1", "c", "", ["a", "b"], 0, 4),
    ]


def test_a_test_file_without_labels_reads_with_label_none(tmp_path):
    text = SWAG_CSV.replace(",label\n", "\n").replace(",2\n", "\n").replace(",0\n", "\n")
    path = _write(tmp_path, text, "test.csv")
    assert [e.label for e in swag.read_swag_csv(path)] == [None, None]
    with pytest.raises(InputError, match=r"test\.csv:1: no column label"):
        swag.read_swag_csv(path, has_labels=True)


def test_has_labels_false_ignores_a_label_column(tmp_path):
    examples = swag.read_swag_csv(_write(tmp_path, SWAG_CSV), has_labels=False)
    assert [e.label for e in examples] == [None, None]


def test_a_missing_column_names_file_and_line(tmp_path):
    with pytest.raises(InputError, match=r"train\.csv:1: no column sent2"):
        swag.read_swag_csv(_write(tmp_path, "sent1,ending0,label\na,b,0\n"))
    with pytest.raises(InputError, match=r"train\.csv:1: the header needs ending columns"):
        swag.read_swag_csv(_write(tmp_path, "sent1,sent2,ending1,label\na,b,c,0\n"))


def test_a_row_with_another_field_count_names_file_and_line(tmp_path):
    path = _write(tmp_path, SWAG_CSV.replace("waits.,0", "waits.,0,extra"))
    with pytest.raises(InputError, match=r"train\.csv:4: 13 fields, but the header has 12"):
        swag.read_swag_csv(path)


@pytest.mark.parametrize("label", ["4", "-1", "x", ""])
def test_a_label_that_is_not_a_choice_index_names_file_and_line(tmp_path, label):
    path = _write(tmp_path, SWAG_CSV.replace("waits.,0", f"waits.,{label}"))
    with pytest.raises(InputError, match=r"train\.csv:4: label .* not a choice index in \[0, 4\)"):
        swag.read_swag_csv(path)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = _write(tmp_path, SWAG_CSV.encode("utf-8").replace(b"stops.", b"st\xffops."))
    with pytest.raises(InputError, match=r"train\.csv:4: not valid UTF-8"):
        swag.read_swag_csv(path)


@pytest.mark.parametrize(
    "text, message", [("", "empty file"), ("sent1,sent2,ending0\n", "no examples")]
)
def test_a_file_without_examples_names_the_file(tmp_path, text, message):
    with pytest.raises(InputError, match=rf"train\.csv: {message}"):
        swag.read_swag_csv(_write(tmp_path, text))


# ---------------------------------------------------------------------------------------- JSON lines


def test_read_jsonl_takes_question_id_and_label_when_given(tmp_path):
    path = _jsonl(
        tmp_path,
        [
            {"context": "He rides.", "choices": ["stops.", "goes."], "label": 1, "id": "q7"},
            {"context": "She sits.", "question": "Then she", "choices": ["x", "y"], "label": 0},
        ],
    )
    assert swag.read_multiple_choice_jsonl(path) == [
        swag.MultipleChoiceExample("q7", "He rides.", "", ["stops.", "goes."], 1, 1),
        swag.MultipleChoiceExample("1", "She sits.", "Then she", ["x", "y"], 0, 2),
    ]


def test_jsonl_without_labels_reads_with_label_none(tmp_path):
    path = _write(
        tmp_path,
        '{"context": "a", "choices": ["b", "c"]}\n\n{"context": "d", "choices": ["e", "f"]}\n',
        "train.jsonl",
    )
    examples = swag.read_multiple_choice_jsonl(path)
    assert [(e.label, e.line) for e in examples] == [(None, 1), (None, 3)]


def test_jsonl_with_a_varying_choice_count_names_file_and_line(tmp_path):
    path = _jsonl(
        tmp_path,
        [
            {"context": "a", "choices": ["b", "c"], "label": 0},
            {"context": "d", "choices": ["e", "f"], "label": 1},
            {"context": "g", "choices": ["h", "i", "j"], "label": 2},
        ],
    )
    with pytest.raises(
        InputError, match=r"train\.jsonl:3: 3 choices, but the first example \(line 1\) has 2"
    ):
        swag.read_multiple_choice_jsonl(path)


@pytest.mark.parametrize(
    "second_line, message",
    [
        ('{"context": "d", "choices": ["e", "f"]}', "a label on some examples but not others"),
        (
            '{"context": "d", "choices": ["e", "f"], "label": 2}',
            r"label 2 is not a choice index in \[0, 2\)",
        ),
        (
            '{"context": "d", "choices": ["e", "f"], "label": true}',
            "label True is not a choice index",
        ),
        ('{"context": "d", "choices": "ef", "label": 0}', '"choices" must be a non-empty list'),
        ('{"choices": ["e", "f"], "label": 0}', '"context" .* must be strings'),
        ('["d", "e"]', "expected a JSON object, got list"),
        ('{"context": "d",', "not valid JSON"),
    ],
)
def test_bad_jsonl_lines_name_file_and_line(tmp_path, second_line, message):
    path = _write(
        tmp_path,
        '{"context": "a", "choices": ["b", "c"], "label": 0}\n' + second_line + "\n",
        "train.jsonl",
    )
    with pytest.raises(InputError, match=rf"train\.jsonl:2: {message}"):
        swag.read_multiple_choice_jsonl(path)


def test_an_empty_jsonl_file_names_the_file(tmp_path):
    with pytest.raises(InputError, match=r"train\.jsonl: no examples"):
        swag.read_multiple_choice_jsonl(_write(tmp_path, "\n", "train.jsonl"))


def test_find_swag_files_prefers_csv_and_accepts_jsonl_names(tmp_path):
    for name in ("train.csv", "train.jsonl", "dev.jsonl", "test.jsonl"):
        _write(tmp_path, "", name)
    assert file_io.split_files(str(tmp_path), swag.SWAG_FILE_NAMES) == {
        "train": str(tmp_path / "train.csv"),
        "dev": str(tmp_path / "dev.jsonl"),
        "test": str(tmp_path / "test.jsonl"),
    }
    (tmp_path / "test.jsonl").unlink()
    with pytest.raises(InputError, match="no test file .*test.csv, test.jsonl"):
        file_io.require_split_file(str(tmp_path), swag.SWAG_FILE_NAMES, "test")


def test_read_multiple_choice_file_picks_the_reader_by_extension(tmp_path):
    csv_path = _write(tmp_path, SWAG_CSV)
    jsonl_path = _jsonl(tmp_path, [{"context": "a", "choices": ["b"]}], "dev.jsonl")
    assert [e.id for e in swag.read_multiple_choice_file(csv_path)] == ["7", "8"]
    assert [e.endings for e in swag.read_multiple_choice_file(jsonl_path)] == [["b"]]


# ---------------------------------------------------------------------------------------- features


def test_each_choice_is_packed_as_context_then_start_and_ending(tiny_tokenizer):
    feature = swag.convert_example_to_multiple_choice_feature(
        _example("a b", "C", ["d", "e f"]), 9, tiny_tokenizer
    )
    assert feature["input_ids"] == [
        [CLS, A, B, SEP, C, D, SEP, PAD, PAD],
        [CLS, A, B, SEP, C, E, F, SEP, PAD],
    ]
    assert feature["input_mask"] == [[1] * 7 + [0] * 2, [1] * 8 + [0]]
    assert feature["segment_ids"] == [[0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1, 0]]
    assert (feature["label_ids"], feature["is_real_example"]) == (1, 1)


def test_a_long_choice_is_truncated_longest_first_ties_from_the_ending(tiny_tokenizer):
    # 8 = [CLS] + [SEP] * 2 + 5 pieces. Choice 0: 5 + 1 pieces, the context loses one. Choice 1:
    # 5 + 3 -> 4 + 3 -> 3 + 3, then a tie, so the ending loses one -> 3 + 2.
    feature = swag.convert_example_to_multiple_choice_feature(
        _example("a b c d e", "", ["f", "f g h"], label=None), 8, tiny_tokenizer
    )
    assert feature["input_ids"] == [
        [CLS, A, B, C, D, SEP, F, SEP],
        [CLS, A, B, C, SEP, F, G, SEP],
    ]
    assert feature["input_mask"] == [[1] * 8, [1] * 8]
    assert feature["segment_ids"] == [[0] * 6 + [1] * 2, [0] * 5 + [1] * 3]
    assert feature["label_ids"] == 0


def test_features_survive_a_tfrecord_round_trip(tmp_path, tiny_tokenizer):
    examples = [
        _example("a b", "c", ["d", "e f", "g"], label=2),
        _example("h", "", ["a", "b", "c"], 0),
    ]
    features = [
        swag.convert_example_to_multiple_choice_feature(e, 8, tiny_tokenizer) for e in examples
    ]
    path = str(tmp_path / "eval.tf_record")
    write_records(path, [swag.serialize_multiple_choice_feature(f) for f in features])
    spec = swag.multiple_choice_feature_spec(3, 8)
    # A fake example: zeros, is_real_example 0.
    padding = {name: np.zeros(spec[name].shape, np.int64).tolist() for name in spec}
    dataset = make_feature_dataset(
        path, spec, batch_size=3, is_training=False, num_records=2, padding_features=padding
    )
    (batch,) = list(dataset.as_numpy_iterator())
    expected = [*features, padding]
    assert batch["input_ids"].shape == (3, 3, 8)
    for name in spec:
        np.testing.assert_array_equal(batch[name], [f[name] for f in expected], err_msg=name)
    np.testing.assert_array_equal(batch["is_real_example"], [1, 1, 0])
