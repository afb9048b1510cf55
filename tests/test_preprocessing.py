"""GraphPreprocessor: in-graph ids equal FullTokenizer's; offsets; packing; SavedModel serving."""

import functools
import json
import random
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.preprocessing import GraphPreprocessor, normalized_path
from bert_tf.tokenization import BasicTokenizer, FullTokenizer, load_vocab

from conftest import REPO_DIR

TEXT_SPEC = [tf.TensorSpec([None], tf.string)]
BENCH_DIR = REPO_DIR / "bench"


@functools.cache
def _preprocessor(vocab_file, do_lower_case):
    """One GraphPreprocessor per vocab and casing for the whole module (max_seq_length 16)."""
    return GraphPreprocessor(vocab_file, do_lower_case=do_lower_case, max_seq_length=16)


@functools.cache
def _traced(preprocessor, method_name):
    """`preprocessor.<method_name>` under tf.function with a [None] string signature, traced once."""
    return tf.function(getattr(preprocessor, method_name), input_signature=TEXT_SPEC)


def _ids(preprocessor, texts):
    """Lists of ids of `texts` (str or bytes) through `tokenize` under a traced tf.function."""
    encoded = [text.encode("utf-8") if isinstance(text, str) else text for text in texts]
    return _traced(preprocessor, "tokenize")(tf.constant(encoded, tf.string)).to_list()


def _offsets(preprocessor, texts):
    """Lists of (ids, starts, ends) of `texts` through `tokenize_with_offsets` in a tf.function."""
    tokenize = _traced(preprocessor, "tokenize_with_offsets")
    ids, starts, ends = tokenize(tf.constant([text.encode("utf-8") for text in texts]))
    return list(zip(ids.to_list(), starts.to_list(), ends.to_list(), strict=True))


def _reference_ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


@pytest.fixture(scope="module")
def fixture_vocab(tokenization_dir):
    return str(tokenization_dir / "vocab_uncased.txt")


@pytest.fixture(scope="module")
def uncased(fixture_vocab):
    return _preprocessor(fixture_vocab, do_lower_case=True)


# ---------------------------------------------------------------------------------------------
# Exactness against the original's outputs and against FullTokenizer.


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_fixture_cases_give_the_original_ids(tokenization_dir, fixture_vocab, do_lower_case):
    with open(tokenization_dir / "cases.jsonl", encoding="utf-8") as reader:
        cases = [json.loads(line) for line in reader]
    cases = [case for case in cases if case["do_lower_case"] == do_lower_case]
    assert len(cases) == 475
    got = _ids(_preprocessor(fixture_vocab, do_lower_case), [case["text"] for case in cases])
    mismatches = [case["text"] for case, ids in zip(cases, got, strict=True) if ids != case["ids"]]
    assert mismatches == []


# Code points the fuzz draws from: every rule of BasicTokenizer has characters here.
_FUZZ_POOLS = [
    [chr(cp) for cp in range(0x20, 0x7F)],
    list("\t\n\r \x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"),
    list("\x00\x01\x1b\x7f\x9f\xad\u200b\u200d\u200e\u202e\u2060\ufeff\ufffd\U000e0001"),
    [chr(cp) for cp in range(0xA0, 0x250)] + list("\u0130\u0131\u1e9e\u2126\u212a\ufb01\u1f88"),
    [chr(cp) for cp in range(0x300, 0x370)] + list("\u0900\u093a\u1ab0\u20d0\u302a\u3099"),
    [chr(cp) for cp in range(0x370, 0x400)] + list("\u03a3" * 20 + "\u0345'.\u00b7\u02b0"),
    [chr(cp) for cp in range(0x400, 0x530)],
    # Marks kept by accent stripping whose combining class is not 0 (canonical reordering).
    list("\U0001d165\U0001d166\U0001d16d\U0001d16e\u302e\u302f\U00016ff0\u1b44\ua953\u0301"),
    [chr(0xAC00 + 37 * i) for i in range(300)] + [chr(cp) for cp in range(0x1100, 0x1200, 7)],
    [chr(cp) for cp in range(0x3000, 0x3100)],
    [chr(0x4E00 + 53 * i) for i in range(300)] + [chr(cp) for cp in range(0xF900, 0xFB00, 3)],
    [chr(cp) for cp in range(0x2F800, 0x2FA20, 5)] + list("\U00020001\U0002a700\U0002b820\u3400"),
    [chr(cp) for cp in range(0x1F300, 0x1F700, 3)] + ["\u2764\ufe0f", "\U0001f468\u200d"],
    [chr(cp) for cp in range(0x2000, 0x2070)] + [chr(cp) for cp in range(0xFF00, 0xFF70)],
    [chr(cp) for cp in range(0x600, 0x700)] + [chr(cp) for cp in range(0x900, 0x980)],
]
_FUZZ_WORDS = ["the ", "Word", "\u0391\u03a3 ", "\u03a3", " ", "ing", ".", "caf\u00e9 "]


def _fuzz_texts(seed, count):
    """Seeded random texts: mixed Unicode blocks, words of 195 to 205 characters, any code point."""
    rng = random.Random(seed)

    def char():
        if rng.random() < 0.03:
            code_point = rng.randrange(0x110000)
            return chr(code_point) if not 0xD800 <= code_point < 0xE000 else "x"
        return rng.choice(rng.choice(_FUZZ_POOLS))

    texts = []
    for _ in range(count):
        if rng.random() < 0.04:
            length = rng.randint(195, 205)
            word = rng.choice(["\u00e9", "a", "\u03a3\u03b1", "\uac00", "x\u0301"]) * length
            texts.append(word[:length] + rng.choice(["", " ", "!"]))
        else:
            pieces = [char() if rng.random() < 0.6 else rng.choice(_FUZZ_WORDS) for _ in range(40)]
            texts.append("".join(pieces[: rng.randint(0, 40)]))
    return texts


# Hand-picked contexts of the two context-dependent rules: final sigma, mark reordering.
_CONTEXT_TEXTS = [
    "\u0391\u03a3",
    "\u0391\u03a3.",
    "\u0391\u03a3.\u0392",
    "\u03a3",
    "\u0391\u03a3\xad\u0392",
    "\u0391\u03a3\x01\u0392",
    "\u0391\u03a3\u4e2d",
    "\u4e2d\u0391\u03a3",
    "\u0391\u03a3\u2028\u0392",
    "\u0391\u03a3'\u0392",
    "a\U0001d16d\U0001d165b",
    "a\U0001d16d\u0900\U0001d165",
    "a\U0001d16d\u0301\U0001d165 x",
    "a\u0301\U0001d16d\u0301\U0001d165\U0001d16e",
]


@pytest.fixture(scope="module")
def fuzz_texts():
    return _fuzz_texts(seed=20240607, count=2500) + _CONTEXT_TEXTS


@pytest.fixture(scope="module")
def covering_vocab(tmp_path_factory, fixture_vocab, fuzz_texts):
    """The fixture vocab plus every character of the fuzz texts' words, alone and as "##" piece,
    and some whole words: with it few words are [UNK], so a wrong character changes the ids."""
    words = set()
    for do_lower_case in (True, False):
        basic = BasicTokenizer(do_lower_case=do_lower_case)
        for text in fuzz_texts:
            words.update(basic.tokenize(text))
    chars = sorted({char for word in words for char in word})
    rng = random.Random(7)
    extra = chars + ["##" + char for char in chars]
    extra += sorted(word for word in words if len(word) < 30 and rng.random() < 0.3)
    base = list(load_vocab(fixture_vocab))
    known = set(base)
    lines = base + [token for token in dict.fromkeys(extra) if token not in known]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_unicode_fuzz_gives_full_tokenizer_ids(covering_vocab, fuzz_texts, do_lower_case):
    reference = FullTokenizer(covering_vocab, do_lower_case=do_lower_case)
    got = _ids(_preprocessor(covering_vocab, do_lower_case), fuzz_texts)
    expected = [_reference_ids(reference, text) for text in fuzz_texts]
    mismatches = [text for text, g, e in zip(fuzz_texts, got, expected, strict=True) if g != e]
    assert mismatches == []
    unk_share = sum(ids.count(reference.vocab["[UNK]"]) for ids in expected) / sum(
        map(len, expected)
    )
    assert unk_share < 0.01  # the vocab covers the fuzz, so the comparison sees every character


def test_ascii_fuzz_gives_full_tokenizer_ids(uncased, fixture_vocab):
    rng = random.Random(5)
    alphabet = [chr(cp) for cp in range(128)]
    common = list("abcdefghij  ABCD.,'") + ["the", "ing", "un", "##"]
    texts = [
        "".join(rng.choice(alphabet if rng.random() < 0.3 else common) for _ in range(60))
        for _ in range(2000)
    ]
    texts += ["a" * 200, "a" * 201, "ab" * 100 + " x", "x" * 199 + "!"]
    reference = FullTokenizer(fixture_vocab, do_lower_case=True)
    got = _ids(uncased, texts)
    assert [
        text for text, ids in zip(texts, got, strict=True) if ids != _reference_ids(reference, text)
    ] == []


def test_invalid_utf8_is_skipped_as_full_tokenizer_does_for_bytes(uncased, fixture_vocab):
    rng = random.Random(3)
    fragments = [b"caf\xc3\xa9", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xff", b" "]
    fragments += [b"Hello", b",", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\x80"]
    texts = [b"".join(rng.choice(fragments) for _ in range(rng.randint(0, 12))) for _ in range(500)]
    reference = FullTokenizer(fixture_vocab, do_lower_case=True)
    got = _ids(uncased, texts)
    assert [
        text for text, ids in zip(texts, got, strict=True) if ids != _reference_ids(reference, text)
    ] == []


def test_empty_and_odd_vocab_lines_keep_full_tokenizer_ids(tmp_path):
    vocab = tmp_path / "vocab.txt"
    # Each token once (a vocabulary with a token twice is refused: test_tokenization.py).
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "runs", "", "##ning", "run", "a b", "##", "!"]
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    texts = ["running run!", "## a b", "", "runrun"]
    reference = FullTokenizer(str(vocab), do_lower_case=True)
    got = _ids(GraphPreprocessor(str(vocab)), texts)
    assert got == [_reference_ids(reference, text) for text in texts]
    assert got[0] == [7, 6, 7, 10]  # "run" has the id of its line, the empty line counted


def test_vocab_tokens_that_never_match_are_accepted_and_too_long_ones_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    never = ["a\x00b", "x" * 201, "##" + "y" * 201, "\ufffd"]  # no word can hold these
    vocab.write_text("\n".join(["[UNK]", "[CLS]", "[SEP]", "x", *never]) + "\n", encoding="utf-8")
    texts = ["x" * 201, "x a\x00b"]
    reference = FullTokenizer(str(vocab), do_lower_case=True)
    assert _ids(GraphPreprocessor(str(vocab)), texts) == [
        _reference_ids(reference, t) for t in texts
    ]
    # 150 characters, 300 bytes: a word could match it, FastWordpieceTokenizer cannot hold it.
    vocab.write_text("[UNK]\n[CLS]\n[SEP]\n" + "\u00e9" * 150 + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 4: token longer than 256 UTF-8 bytes"):
        GraphPreprocessor(str(vocab))


def test_vocab_without_unk_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt has no \[UNK\]"):
        GraphPreprocessor(str(vocab))


def test_special_ids_and_vocab_size(uncased):
    assert (uncased.cls_id, uncased.sep_id, uncased.unk_id, uncased.pad_id) == (101, 102, 100, 0)
    assert uncased.vocab_size == 30522


# ---------------------------------------------------------------------------------------------
# The normalized path (tensorflow-text kernels with BERT's mapping) and the code point path.


def _takes_normalized_path(texts, do_lower_case):
    """Whether each text matches the row pattern that admits it to the normalized path."""
    pattern = normalized_path.normalized_path_tables(do_lower_case).row_pattern
    return tf.strings.regex_full_match(tf.constant(texts), pattern).numpy().tolist()


@pytest.fixture(scope="module")
def multilingual_texts():
    """bench/multilingual_sentences.jsonl: French, German, Greek, Russian, Chinese, control."""
    with open(BENCH_DIR / "multilingual_sentences.jsonl", encoding="utf-8") as reader:
        return [json.loads(line)["text"] for line in reader]


@pytest.mark.parametrize(
    "vocab_name, do_lower_case",
    [("uncased fixture", True), ("bench multilingual cased", False), ("bench multilingual", True)],
)
def test_multilingual_sentences_give_full_tokenizer_ids(
    fixture_vocab, multilingual_texts, vocab_name, do_lower_case
):
    vocab = fixture_vocab
    if vocab_name.startswith("bench"):
        vocab = str(BENCH_DIR / "vocab_multilingual_cased.txt")
    reference = FullTokenizer(vocab, do_lower_case=do_lower_case)
    got = _ids(_preprocessor(vocab, do_lower_case), multilingual_texts)
    expected = [_reference_ids(reference, text) for text in multilingual_texts]
    assert [t for t, g, e in zip(multilingual_texts, got, expected, strict=True) if g != e] == []
    # Every sentence takes the normalized path (the one this test is about).
    assert all(_takes_normalized_path(multilingual_texts, do_lower_case))


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_normalizer_model_maps_each_character_as_basic_tokenizer(do_lower_case):
    """Every assigned code point (and CJK block) alone: the normalizer's output without the
    spaces it puts around punctuation and ideographs is BasicTokenizer's words, joined."""
    with_rules = list(normalized_path._code_points_with_rules())
    texts = [chr(cp) for cp in with_rules]
    model = normalized_path.normalized_path_tables(do_lower_case).model_buffer
    normalizer = tf_text.FastBertNormalizer(model_buffer=model)
    normalized = normalizer.normalize(tf.constant(texts))
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    mismatches = [
        f"U+{ord(text):04X}"
        for text, output in zip(texts, normalized.numpy(), strict=True)
        if output.decode("utf-8").replace(" ", "") != "".join(basic.tokenize(text))
    ]
    assert mismatches == []
    # The rest (unassigned, private use) are not in the trie: the normalizer leaves them alone.
    others = sorted(set(range(0x110000)) - set(with_rules) - set(range(0xD800, 0xE000)))
    others = tf.constant([chr(cp) for cp in others])
    assert int(tf.reduce_sum(tf.cast(normalizer.normalize(others) != others, tf.int32))) == 0


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_unicode_fuzz_on_the_normalized_path_gives_full_tokenizer_ids(
    covering_vocab, fuzz_texts, do_lower_case
):
    """The fuzz without what sends a string to the code point path (capital sigma, characters
    refused alone), so that nearly every string goes through the normalized path."""
    texts = [text.replace("\u03a3", "\u0391") for text in fuzz_texts]
    chars = sorted({char for text in texts for char in text})
    admitted = _takes_normalized_path(chars, do_lower_case)
    refused = {char for char, ok in zip(chars, admitted, strict=True) if not ok}
    texts = ["".join(char for char in text if char not in refused) for text in texts]
    assert sum(_takes_normalized_path(texts, do_lower_case)) > 0.95 * len(texts)
    reference = FullTokenizer(covering_vocab, do_lower_case=do_lower_case)
    got = _ids(_preprocessor(covering_vocab, do_lower_case), texts)
    expected = [_reference_ids(reference, text) for text in texts]
    assert [t for t, g, e in zip(texts, got, expected, strict=True) if g != e] == []


def test_capital_sigma_takes_the_normalized_path_only_where_it_cannot_be_final(uncased):
    texts = [
        "\u03a3\u03ae\u03bc\u03b5\u03c1\u03b1",
        "(\u03a3\u03b5",
        "\u03b1 \u03a3\u03b5",
        "\u03a3",
    ]
    final = [
        "\u039f\u0394\u03a5\u03a3",
        "\u0391\u03a3.",
        "\u0391\u03a3\u03a3\u0391",
        "\u0391\u200b\u03a3",
    ]
    assert _takes_normalized_path(texts + final, True) == [True] * 4 + [False] * 4
    assert _takes_normalized_path(final, False) == [True] * 4  # no lower-casing, no sigma rule
    vocab = str(BENCH_DIR / "vocab_multilingual_cased.txt")
    reference = FullTokenizer(vocab, do_lower_case=True)
    got = _ids(_preprocessor(vocab, True), texts + final)
    assert got == [_reference_ids(reference, text) for text in texts + final]


def test_invalid_utf8_never_takes_the_normalized_path():
    # The normalizer would write a space for an invalid byte; the original skips it.
    texts = [b"a\xffb", b"\xed\xa0\x80", b"\xc0\xaf", b"caf\xc3", b"\xe2\x82x", b"\xf4\x90\x80\x80"]
    for do_lower_case in (True, False):
        assert _takes_normalized_path(texts, do_lower_case) == [False] * len(texts)


def test_a_word_over_200_bytes_takes_the_code_point_path(covering_vocab):
    """150 "é" are 300 bytes: the kernel makes one [UNK] of them, the original splits them."""
    reference = FullTokenizer(covering_vocab, do_lower_case=True)
    texts = ["\u00e9" * 150, "caf\u00e9 " + "\u00e9" * 201, "na\u00efve " + "\u00e9" * 100 + " x"]
    assert len(_reference_ids(reference, texts[0])) > 1
    for batch in (texts, texts[:1], ["a b", *texts, "\u00e9t\u00e9"]):
        expected = [_reference_ids(reference, text) for text in batch]
        assert _ids(_preprocessor(covering_vocab, True), batch) == expected


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_code_point_path_alone_gives_full_tokenizer_ids(covering_vocab, fuzz_texts, do_lower_case):
    """The path for the strings the normalized path cannot take, run on every fuzz text."""
    preprocessor = _preprocessor(covering_vocab, do_lower_case)
    texts = fuzz_texts[:1200]
    pieces = tf.function(
        lambda text: preprocessor._code_point_path.pieces(text, with_offsets=False),
        input_signature=TEXT_SPEC,
    )
    row_splits, ids = pieces(tf.constant([text.encode("utf-8") for text in texts]))
    got = tf.RaggedTensor.from_row_splits(ids, row_splits).to_list()
    reference = FullTokenizer(covering_vocab, do_lower_case=do_lower_case)
    expected = [_reference_ids(reference, text) for text in texts]
    assert [t for t, g, e in zip(texts, got, expected, strict=True) if g != e] == []


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_normalized_path_offsets_equal_the_code_point_path_offsets(
    covering_vocab, fuzz_texts, do_lower_case
):
    preprocessor = _preprocessor(covering_vocab, do_lower_case)
    texts = [
        t
        for t, ok in zip(fuzz_texts, _takes_normalized_path(fuzz_texts, do_lower_case), strict=True)
        if ok
    ]
    texts = [text for text in texts if not text.isascii()][:600]
    pieces = tf.function(
        lambda text: preprocessor._code_point_path.pieces(text, with_offsets=True),
        input_signature=TEXT_SPEC,
    )
    row_splits, *flat = pieces(tf.constant([text.encode("utf-8") for text in texts]))
    code_point = [tf.RaggedTensor.from_row_splits(v, row_splits).to_list() for v in flat]
    got = _offsets(preprocessor, texts)
    assert got == list(zip(*code_point, strict=True))


# ---------------------------------------------------------------------------------------------
# Offsets.


def test_offsets_of_accented_words_with_runs_of_spaces(uncased):
    [(ids, starts, ends)] = _offsets(uncased, ["  H\u00e9llo,  w\u00f6rld!"])
    assert ids == [7592, 1010, 2088, 999]  # hello , world !
    assert list(zip(starts, ends, strict=True)) == [(2, 8), (8, 9), (11, 17), (17, 18)]


def test_offsets_of_a_length_changing_lowercase(uncased, fixture_vocab):
    # "\u0130" (2 bytes) lower-cases to "i" + U+0307, and accent stripping keeps the "i".
    text = "\u0130stanbul \u0130"
    [(ids, starts, ends)] = _offsets(uncased, [text])
    reference = FullTokenizer(fixture_vocab, do_lower_case=True)
    assert ids == _reference_ids(reference, text)
    assert starts[0] == 0 and ends[-1] == len(text.encode("utf-8"))
    assert (starts[-1], ends[-1]) == (10, 12)


def test_offsets_of_the_pieces_of_one_word_are_contiguous(uncased):
    [(ids, starts, ends)] = _offsets(uncased, ["Unaffable"])
    assert len(ids) > 1
    assert starts[0] == 0 and ends[-1] == 9
    assert all(end == start for end, start in zip(ends[:-1], starts[1:], strict=True))


_OFFSET_TEXTS = [
    "  H\u00e9llo,  w\u00f6rld!",
    "na\u00efve caf\u00e9s r\u00e9sum\u00e9",
    "\u4e2d\u6587\u5b57 and \u65e5\u672c\u8a9e\u3067\u3059",
    "\u0130stanbul \u0130I",
    "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u0391\u03a3.",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "tab\there\nnew\u00a0line\u3000wide",
    "soft\u00adhyphen zero\u200bwidth",
    "punct!!?? (x) [y] {z} ^$`",
    "\U0001f600 emoji\U0001f600s",
    "x\u0301\u0301y a\U0001d16d\U0001d165b",
    "don't stop-believing...",
    "a" * 210 + " \u00e9" * 3,
    "unaffable antidisestablishmentarianism",
]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_each_piece_comes_from_the_bytes_its_offsets_span(
    covering_vocab, fixture_vocab, fuzz_texts, do_lower_case
):
    """Re-tokenizing text[start:end] gives the piece's characters (and the whole word for an
    [UNK]): checked on hand-made texts with both vocabs, and on the fuzz texts."""
    for vocab, texts in ((fixture_vocab, _OFFSET_TEXTS), (covering_vocab, fuzz_texts[:800])):
        reference = FullTokenizer(vocab, do_lower_case=do_lower_case)
        preprocessor = _preprocessor(vocab, do_lower_case)
        for text, (ids, starts, ends) in zip(texts, _offsets(preprocessor, texts), strict=True):
            data = text.encode("utf-8")
            assert ids == _reference_ids(reference, text)
            for token, start, end in zip(
                reference.convert_ids_to_tokens(ids), starts, ends, strict=True
            ):
                assert 0 <= start < end <= len(data), (text, token, start, end)
                # A sigma alone lower-cases to the non-final form; compare both as non-final.
                span = "".join(reference.basic_tokenizer.tokenize(data[start:end]))
                span = span.replace("\u03c2", "\u03c3")
                if token == "[UNK]":
                    assert span, (text, start, end)
                else:
                    assert token.removeprefix("##").replace("\u03c2", "\u03c3") in span, (
                        text,
                        token,
                        data[start:end],
                    )


# ---------------------------------------------------------------------------------------------
# Packing.


def _original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """The original run_classifier.py's _truncate_seq_pair, on copies."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()
    return tokens_a, tokens_b


def _reference_pack(rows_a, rows_b, max_seq_length, cls=101, sep=102):
    """Padded lists of input_ids / input_mask / segment_ids by the original's rules.

    As the original's `if tokens_b:`, a second segment without pieces makes a single-segment row.
    """
    packed = []
    for index, a in enumerate(rows_a):
        if rows_b is None or not rows_b[index]:
            ids = [cls] + a[: max_seq_length - 2] + [sep]
            segments = [0] * len(ids)
        else:
            a, b = _original_truncate_seq_pair(a, rows_b[index], max_seq_length - 3)
            ids = [cls] + a + [sep] + b + [sep]
            segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        packed.append((ids, segments))
    length = max((len(ids) for ids, _ in packed), default=0)
    return {
        "input_ids": [ids + [0] * (length - len(ids)) for ids, _ in packed],
        "input_mask": [[1] * len(ids) + [0] * (length - len(ids)) for ids, _ in packed],
        "segment_ids": [segs + [0] * (length - len(segs)) for _, segs in packed],
    }


def _pack(preprocessor, rows_a, rows_b=None, max_seq_length=None):
    segments = [tf.ragged.constant(rows_a, tf.int32, row_splits_dtype=tf.int64)]
    if rows_b is not None:
        segments.append(tf.ragged.constant(rows_b, tf.int32, row_splits_dtype=tf.int64))
    features = preprocessor.pack(segments, max_seq_length)
    assert all(tensor.dtype == tf.int32 for tensor in features.values())
    return {name: tensor.numpy().tolist() for name, tensor in features.items()}


def test_pair_truncation_follows_the_original_hand_worked(uncased):
    # max_seq_length 10 leaves 7 pieces. (9, 1) -> (6, 1); (5, 5) -> (4, 3) (ties pop from b);
    # (2, 9) -> (2, 5); (4, 4) -> (4, 3); (3, 3) fits.
    lengths = [(9, 1), (5, 5), (2, 9), (4, 4), (3, 3)]
    rows_a = [list(range(1, 1 + la)) for la, _ in lengths]
    rows_b = [list(range(21, 21 + lb)) for _, lb in lengths]
    packed = _pack(uncased, rows_a, rows_b, max_seq_length=10)
    assert packed == _reference_pack(rows_a, rows_b, 10)
    kept_a = [sum(1 <= i <= 20 for i in row) for row in packed["input_ids"]]
    kept_b = [sum(21 <= i <= 40 for i in row) for row in packed["input_ids"]]
    assert (kept_a, kept_b) == ([6, 4, 2, 4, 3], [1, 3, 5, 3, 3])
    assert packed["input_ids"][1] == [101, 1, 2, 3, 4, 102, 21, 22, 23, 102]
    assert packed["segment_ids"][1] == [0] * 6 + [1] * 4


def test_an_empty_second_segment_packs_as_a_single_segment(uncased):
    # The original's `if tokens_b:`: no [SEP] for the empty b, and a keeps max_seq_length - 2 pieces.
    packed = _pack(uncased, [list(range(1, 10)), [1, 2]], [[], [21]], max_seq_length=8)
    assert packed["input_ids"] == [[101, 1, 2, 3, 4, 5, 6, 102], [101, 1, 2, 102, 21, 102, 0, 0]]
    assert packed["segment_ids"] == [[0] * 8, [0, 0, 0, 0, 1, 1, 0, 0]]


def test_pair_truncation_matches_the_original_on_all_small_lengths(uncased):
    lengths = [(la, lb) for la in range(12) for lb in range(12)]
    rows_a = [list(range(1, 1 + la)) for la, _ in lengths]
    rows_b = [list(range(21, 21 + lb)) for _, lb in lengths]
    for max_seq_length in (3, 4, 9, 12, 30):
        packed = _pack(uncased, rows_a, rows_b, max_seq_length)
        assert packed == _reference_pack(rows_a, rows_b, max_seq_length), max_seq_length


def test_single_segment_matches_the_original_on_all_small_lengths(uncased):
    rows = [list(range(1, 1 + length)) for length in range(21)]
    for max_seq_length in (2, 3, 9, 30):
        packed = _pack(uncased, rows, max_seq_length=max_seq_length)
        assert packed == _reference_pack(rows, None, max_seq_length), max_seq_length


def test_single_segment_is_cut_to_max_seq_length_minus_two(uncased):
    rows = [list(range(1, 20)), [5], []]
    packed = _pack(uncased, rows, max_seq_length=8)
    assert packed == _reference_pack(rows, None, 8)
    assert packed["input_ids"][0] == [101, 1, 2, 3, 4, 5, 6, 102]
    assert packed["input_ids"][2] == [101, 102, 0, 0, 0, 0, 0, 0]


def test_packed_length_is_the_longest_row_of_the_batch(uncased):
    texts = tf.constant(["a b", "a b c d e", ""])
    features = uncased(texts)
    assert features["input_ids"].shape == (3, 7)
    assert features["input_mask"].numpy().sum(axis=1).tolist() == [4, 7, 2]
    long_texts = tf.constant(["word " * 100, "short"])
    assert uncased(long_texts)["input_ids"].shape == (2, 16)  # capped at max_seq_length


def test_call_packs_the_tokenized_texts(uncased, fixture_vocab):
    reference = FullTokenizer(fixture_vocab, do_lower_case=True)
    texts_a = ["Is this the question?", "", "x " * 30, "caf\u00e9 \u4e2d\u6587"]
    texts_b = ["Yes, it is.", "", "y", "Na\u00efve \u03a3"]
    call = tf.function(lambda a, b: uncased(a, b), input_signature=TEXT_SPEC * 2)
    features = call(tf.constant(texts_a), tf.constant(texts_b))
    expected = _reference_pack(
        [_reference_ids(reference, text) for text in texts_a],
        [_reference_ids(reference, text) for text in texts_b],
        16,
    )
    assert {name: tensor.numpy().tolist() for name, tensor in features.items()} == expected
    assert features["input_ids"].numpy()[1].tolist()[:3] == [101, 102, 0]  # "" and "": [CLS] [SEP]


def test_empty_batch_and_empty_strings(uncased):
    empty = tf.constant([], tf.string)
    assert uncased.tokenize(empty).shape[0] == 0
    ids, starts, ends = uncased.tokenize_with_offsets(empty)
    assert ids.shape[0] == starts.shape[0] == ends.shape[0] == 0
    assert uncased(empty)["input_ids"].shape[0] == 0
    assert uncased(empty, empty)["segment_ids"].shape[0] == 0
    features = uncased(tf.constant(["", " \t"]), tf.constant(["", "\x00"]))
    assert features["input_ids"].numpy().tolist() == [[101, 102]] * 2


def test_pack_refuses_too_small_max_seq_length(uncased):
    segment = tf.ragged.constant([[1, 2]], tf.int32)
    with pytest.raises(ValueError, match="max_seq_length=2"):
        uncased.pack([segment, segment], max_seq_length=2)
    with pytest.raises(ValueError, match="1 or 2 segments"):
        uncased.pack([segment] * 3)


# ---------------------------------------------------------------------------------------------
# SavedModel.


class _Exported(tf.Module):
    def __init__(self, preprocessor):
        super().__init__()
        self.preprocessor = preprocessor

    @tf.function(input_signature=TEXT_SPEC * 2)
    def serve(self, text_a, text_b):
        """Packed pair features, and the offsets of text_a's pieces (padded with -1)."""
        ids_a, starts, ends = self.preprocessor.tokenize_with_offsets(text_a)
        features = self.preprocessor.pack([ids_a, self.preprocessor.tokenize(text_b)])
        features.update(starts=starts.to_tensor(-1), ends=ends.to_tensor(-1))
        return features


def test_saved_model_serves_the_same_ids_with_only_tensorflow_text(uncased, tmp_path):
    module = _Exported(uncased)
    export_dir = tmp_path / "export"
    tf.saved_model.save(module, str(export_dir), signatures={"serving_default": module.serve})
    assert (export_dir / "assets" / "vocab_uncased.txt").is_file()

    texts = ["Hello, World!", "H\u00e9llo \u4e2d\u6587 \u0391\u03a3.", "", "x" * 300]
    pairs = ["a b", "\u0130stanbul", "", "y"]
    outputs = module.serve(tf.constant(texts), tf.constant(pairs))
    expected = {name: tensor.numpy().tolist() for name, tensor in outputs.items()}
    script = textwrap.dedent(
        f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops)
        assert "bert_tf" not in sys.modules
        serve = tf.saved_model.load({str(export_dir)!r}).signatures["serving_default"]
        outputs = serve(text_a=tf.constant({texts!r}), text_b=tf.constant({pairs!r}))
        print(json.dumps({{name: tensor.numpy().tolist() for name, tensor in outputs.items()}}))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == expected
    first_row = expected["input_ids"][0]
    assert first_row[:9] == [101, 7592, 1010, 2088, 999, 102, 1037, 1038, 102]
    assert set(first_row[9:]) == {0}
    assert expected["starts"][0][:4] == [0, 5, 7, 12] and expected["ends"][0][:4] == [5, 6, 12, 13]
