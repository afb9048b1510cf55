"""Tests for bert_tf.tokenization against the original FullTokenizer's recorded outputs."""

import json
import pickle
import random

import pytest

from bert_tf import tokenization
from bert_tf.errors import InputError

# The vocab of the original's own unit test: enough to show "##" continuation pieces.
_TOY_VOCAB_TOKENS = [
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "want",
    "##want",
    "##ed",
    "wa",
    "un",
    "runn",
    "##ing",
]


@pytest.fixture(scope="module")
def uncased_tokenizer(sample_vocab_path):
    return tokenization.FullTokenizer(sample_vocab_path, do_lower_case=True)


@pytest.fixture(scope="module")
def cased_tokenizer(sample_vocab_path):
    return tokenization.FullTokenizer(sample_vocab_path, do_lower_case=False)


@pytest.fixture()
def toy_wordpiece():
    vocab = {token: index for index, token in enumerate(_TOY_VOCAB_TOKENS)}
    return tokenization.WordpieceTokenizer(vocab)


def test_every_fixture_case_matches_original_tokens_and_ids(tokenization_dir):
    tokenizers = {
        do_lower_case: tokenization.FullTokenizer(
            tokenization_dir / "vocab_uncased.txt", do_lower_case=do_lower_case
        )
        for do_lower_case in (True, False)
    }
    mismatches = []
    with open(tokenization_dir / "cases.jsonl", encoding="utf-8") as cases:
        for line_number, line in enumerate(cases, start=1):
            case = json.loads(line)
            tokenizer = tokenizers[case["do_lower_case"]]
            tokens = tokenizer.tokenize(case["text"])
            ids = tokenizer.convert_tokens_to_ids(tokens)
            if tokens != case["tokens"] or ids != case["ids"]:
                mismatches.append(
                    f"cases.jsonl line {line_number}: text={case['text'][:80]!r} "
                    f"do_lower_case={case['do_lower_case']}\n"
                    f"  expected {case['tokens'][:12]}\n  got      {tokens[:12]}"
                )
    assert line_number == 950
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:10])


def test_lower_casing_strips_accents():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHäLLo!how  \n Are yoU?  ") == [
        "hallo",
        "!",
        "how",
        "are",
        "you",
        "?",
    ]


def test_accents_are_kept_without_lower_casing():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHäLLo!how  \n Are yoU?  ") == [
        "HäLLo",
        "!",
        "how",
        "Are",
        "yoU",
        "?",
    ]


def test_cjk_ideographs_become_separate_words():
    tokenizer = tokenization.BasicTokenizer()
    assert tokenizer.tokenize("ah博推zz") == ["ah", "博", "推", "zz"]


def test_kana_is_not_split_like_cjk_ideographs():
    # Without lower-casing, so NFD accent stripping keeps the dakuten of "が".
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize("ひらがな漢字") == ["ひらがな", "漢", "字"]


@pytest.mark.parametrize(
    "text",
    ["ab\x00cd\x07ef\x7fgh", "ab\x00cd\ufffdef\u200bgh\x07", "ab\x0bcd\x0cef\x1fgh\x85"],
    ids=["ascii", "unicode", "vertical_tab_form_feed"],
)
def test_control_characters_are_dropped_without_splitting(text):
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(text) == ["abcdefgh"]


def test_tab_newline_and_unicode_spaces_split_words():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize("a\tb\r\nc\u3000d\u00a0e") == ["a", "b", "c", "d", "e"]


def test_ascii_symbols_outside_unicode_punctuation_are_split():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize("a^b$c`d") == ["a", "^", "b", "$", "c", "`", "d"]


def test_wordpiece_marks_continuation_pieces_with_hashes(toy_wordpiece):
    assert toy_wordpiece.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]


def test_wordpiece_word_without_full_segmentation_is_unk(toy_wordpiece):
    assert toy_wordpiece.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_wordpiece_word_over_200_chars_is_unk():
    tokenizer = tokenization.WordpieceTokenizer({"a": 0, "##a": 1, "[UNK]": 2})
    assert tokenizer.tokenize("a" * 200) == ["a"] + ["##a"] * 199
    assert tokenizer.tokenize("a" * 201) == ["[UNK]"]


def test_word_cache_stays_bounded(monkeypatch, toy_wordpiece):
    monkeypatch.setattr(tokenization, "_WORD_CACHE_SIZE", 3)
    for word in ["un", "want", "wa", "runn", "unwanted", "running"]:
        toy_wordpiece.tokenize(word)
    assert len(toy_wordpiece._cache) <= 3
    assert toy_wordpiece.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_ascii_fast_path_matches_per_char_algorithm_on_random_strings(do_lower_case):
    tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    rng = random.Random(1234)
    # Every ASCII code point, with letters and spaces repeated so that words form.
    alphabet = [chr(cp) for cp in range(128)] + list("aAzZ09  ") * 8
    for _ in range(3000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 40)))
        assert tokenizer.tokenize(text) == tokenizer._tokenize_per_char(text), repr(text)


def test_bytes_input_is_decoded_as_utf8(uncased_tokenizer):
    text = "Héllo, wörld 博!"
    assert uncased_tokenizer.tokenize(text.encode("utf-8")) == uncased_tokenizer.tokenize(text)


def test_pickled_tokenizer_tokenizes_the_same(uncased_tokenizer):
    text = "The unaffable Mr. Darcy, naïvely: 博推!"
    expected = uncased_tokenizer.tokenize(text)
    restored = pickle.loads(pickle.dumps(uncased_tokenizer))
    assert restored.tokenize(text) == expected
    assert restored.vocab == uncased_tokenizer.vocab
    assert restored.basic_tokenizer.do_lower_case


def test_pickle_leaves_out_word_cache(uncased_tokenizer):
    uncased_tokenizer.tokenize("pride and prejudice")
    restored = pickle.loads(pickle.dumps(uncased_tokenizer))
    assert restored.wordpiece_tokenizer._cache == {}


def test_load_vocab_assigns_ids_in_line_order(sample_vocab_path):
    vocab = tokenization.load_vocab(sample_vocab_path)
    assert len(vocab) == 30522
    assert list(vocab.values()) == list(range(30522))
    assert [vocab[t] for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]] == [
        0,
        100,
        101,
        102,
        103,
    ]


def test_load_vocab_reads_a_tf_io_gfile_url():
    import tensorflow as tf

    # ram:// is TF's in-memory file system: a stand-in for gs:// that needs no network.
    path = "ram://test_load_vocab/vocab.txt"
    with tf.io.gfile.GFile(path, "w") as f:
        f.write("[PAD]\n[UNK]\nhello\n##s\n")
    assert tokenization.load_vocab(path) == {"[PAD]": 0, "[UNK]": 1, "hello": 2, "##s": 3}
    assert tokenization.FullTokenizer(path).tokenize("Hellos") == ["hello", "##s"]


def test_load_vocab_strips_line_endings(tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_bytes("[UNK]\r\nhello \nwörld\n".encode())
    assert tokenization.load_vocab(vocab_file) == {"[UNK]": 0, "hello": 1, "wörld": 2}


def test_ids_round_trip_to_tokens(uncased_tokenizer):
    tokens = uncased_tokenizer.tokenize("It is a truth universally acknowledged.")
    ids = uncased_tokenizer.convert_tokens_to_ids(tokens)
    assert ids == tokenization.convert_tokens_to_ids(uncased_tokenizer.vocab, tokens)
    assert uncased_tokenizer.convert_ids_to_tokens(ids) == tokens
    assert tokenization.convert_ids_to_tokens(uncased_tokenizer.inv_vocab, ids) == tokens


def test_cased_tokenizer_keeps_case_and_misses_uncased_vocab(cased_tokenizer):
    assert cased_tokenizer.tokenize("Hello, world!") == ["[UNK]", ",", "world", "!"]


def test_a_token_twice_in_the_vocab_is_one_error_naming_the_file_and_both_lines(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text(
        "[PAD]\n[UNK]\nhello\n[CLS]\nhello \n[SEP]\n"
    )  # line 5 strips to line 3's token
    with pytest.raises(InputError) as error:
        tokenization.load_vocab(str(path))
    assert str(error.value) == (
        f"{path}:5: the token 'hello' is already on line 3; a vocabulary holds each token once"
    )
