"""build_vocab.py: Google's WordPiece learner on BasicTokenizer word counts, on one machine and on Beam.

The reference is tensorflow-text's own `bert_vocab_from_dataset` (its BasicTokenizer op and its learner)
on the same lines; the Beam run is Beam's local runner with two worker processes.
"""

import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

import build_vocab
import create_pretraining_data
from bert_tf import tokenization, vocabulary
from bert_tf.data.pretraining import writer
from bert_tf.errors import InputError

from conftest import REPO_DIR, SUBPROCESS_ENV

TWO_PROCESSES = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
TRAIN_LINES, HELD_OUT_LINES = 2000, 1000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, austen_sentences_path):
    """Two training files (2,000 Austen sentences) and a held-out file (the next 1,000)."""
    folder = tmp_path_factory.mktemp("vocab_corpus")
    lines = austen_sentences_path.read_text(encoding="utf-8").splitlines()
    half = TRAIN_LINES // 2
    (folder / "train-0.txt").write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    (folder / "train-1.txt").write_text("\n".join(lines[half:TRAIN_LINES]) + "\n", encoding="utf-8")
    held_out = lines[TRAIN_LINES : TRAIN_LINES + HELD_OUT_LINES]
    (folder / "held_out.txt").write_text("\n".join(held_out) + "\n", encoding="utf-8")
    return folder


def _config(corpus, vocab_file, **flags):
    values = dict(
        input_file=f"{corpus}/train-*.txt", vocab_file=str(vocab_file), vocab_size=800,
        do_lower_case=True, num_unused=3,
    )  # fmt: skip
    values.update(flags)
    return vocabulary.VocabSettings(**values)


@pytest.fixture(scope="module")
def uncased_vocab(corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("uncased") / "vocab.txt"
    build_vocab.run(_config(corpus, path))
    return path


def _reference(corpus, vocab_size, reserved, lower_case):
    lines = []
    for name in ("train-0.txt", "train-1.txt"):
        lines += (corpus / name).read_text(encoding="utf-8").splitlines()
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(256)
    return bert_vocab_from_dataset.bert_vocab_from_dataset(
        dataset, vocab_size, reserved, bert_tokenizer_params={"lower_case": lower_case}
    )


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_reserved_tokens_come_first_then_the_unused_slots(uncased_vocab):
    vocab = _lines(uncased_vocab)
    assert vocab[:8] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
        f"[unused{k}]" for k in range(3)
    ]
    assert len(vocab) == len(set(vocab)) and 600 < len(vocab) <= 800


@pytest.mark.parametrize(
    "lower_case", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["uncased", "cased"]
)
def test_learned_tokens_match_tensorflow_text_bert_vocab_from_dataset(
    corpus, uncased_vocab, tmp_path, lower_case
):
    if lower_case:
        ours = _lines(uncased_vocab)
    else:
        build_vocab.run(_config(corpus, tmp_path / "cased.txt", do_lower_case=False))
        ours = _lines(tmp_path / "cased.txt")
    reference = _reference(corpus, 800, vocabulary.reserved_tokens(3), lower_case)
    assert len(set(ours) & set(reference)) >= 0.98 * max(len(ours), len(reference))
    learned = ours[len(vocabulary.reserved_tokens(3)) :]
    assert any(token != token.lower() for token in learned) != lower_case  # the casing held


def test_held_out_words_are_almost_never_unknown(corpus, uncased_vocab):
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    words = [
        word
        for line in _lines(corpus / "held_out.txt")
        for word in tokenizer.basic_tokenizer.tokenize(line)
    ]
    unknown = sum(tokenizer.tokenize(word) == ["[UNK]"] for word in words)
    assert len(words) > 20000
    assert unknown <= 0.001 * len(words)


@pytest.mark.slow
def test_the_beam_run_writes_the_same_file(corpus, uncased_vocab, tmp_path):
    path = tmp_path / "beam_vocab.txt"
    build_vocab.run(_config(corpus, path, beam_pipeline_options=TWO_PROCESSES))
    assert path.read_bytes() == uncased_vocab.read_bytes()


def test_create_pretraining_data_accepts_the_vocabulary(corpus, uncased_vocab, tmp_path):
    output = tmp_path / "out.tfrecord"
    summary = create_pretraining_data.run(
        writer.CreateSettings(
            input_file=str(corpus / "held_out.txt"), output_file=str(output),
            vocab_file=str(uncased_vocab), max_seq_length=64, max_predictions_per_seq=10,
            dupe_factor=1, num_workers=1,
        )
    )  # fmt: skip
    assert summary.instances > 50
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    record = next(iter(tf.data.TFRecordDataset(str(output))))
    ids = tf.train.Example.FromString(record.numpy()).features.feature["input_ids"].int64_list
    assert tokenizer.convert_ids_to_tokens(ids.value[:1]) == ["[CLS]"]


def _script(*flags):
    return subprocess.run(
        [sys.executable, os.path.join(REPO_DIR, "build_vocab.py"), *flags],
        capture_output=True, text=True, cwd=REPO_DIR, env=SUBPROCESS_ENV, timeout=120,
    )  # fmt: skip


_TF_CPP_LINE = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages before absl)")


def test_a_pattern_matching_nothing_is_one_error_line(tmp_path):
    output = tmp_path / "vocab.txt"
    result = _script(f"--input_file={tmp_path}/missing-*.txt", f"--vocab_file={output}")
    assert result.returncode == 1
    # Ours is one line; TensorFlow's own start-up lines (I0000, E0000, ...: `import bert_tf` loads it)
    # are not ours to count.
    ours = [line for line in result.stderr.splitlines() if not _TF_CPP_LINE.match(line)]
    assert ours == [f"error: --input_file={tmp_path}/missing-*.txt: no file matches it"]
    assert os.listdir(tmp_path) == []


def test_invalid_utf8_is_named_by_file_and_line_and_nothing_is_written(corpus, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"first line\nsecond line\ncaf\xe9 au lait\n")
    with pytest.raises(InputError, match=rf"{bad}:3: not valid UTF-8"):
        build_vocab.run(_config(corpus, tmp_path / "vocab.txt", input_file=f"{corpus}/*.txt,{bad}"))
    assert os.listdir(tmp_path) == ["bad.txt"]


def test_a_size_too_small_for_the_alphabet_is_refused(corpus, tmp_path):
    characters = len(
        vocabulary.alphabet(vocabulary.count_file_words([corpus / "train-0.txt"], True))
    )
    assert 30 < characters < 100
    with pytest.raises(InputError, match=r"--vocab_size=60 is too small.*alphabet of \d+ char"):
        build_vocab.run(_config(corpus, tmp_path / "vocab.txt", vocab_size=60))
    assert os.listdir(tmp_path) == []


def test_words_are_counted_by_the_originals_rules():
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    lines = iter(["Hello, world!", "HELLO Ça va? 中文"])  # any iterable: the files are streamed
    counts = vocabulary.count_words(lines, basic)
    # Lower-cased, accents stripped, punctuation and each CJK ideograph a word of its own.
    expected = {"hello": 2, ",": 1, "world": 1, "!": 1, "ca": 1, "va": 1, "?": 1, "中": 1, "文": 1}
    assert counts == expected
    cased = vocabulary.count_words(["Ça va"], tokenization.BasicTokenizer(do_lower_case=False))
    assert cased == {"Ça": 1, "va": 1}


def test_a_learned_vocabulary_over_the_size_loses_its_rarest_pieces(
    austen_sentences_path, tmp_path
):
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    lines = austen_sentences_path.read_text(encoding="utf-8").splitlines()[:300]
    counts = vocabulary.count_words(lines, tokenization.BasicTokenizer(do_lower_case=True))
    reserved = vocabulary.reserved_tokens()
    # tensorflow-text's learner ends its threshold search on a vocabulary of 301 tokens here.
    reference = learner.learn(sorted(counts.items()), 297, reserved, lower_thresh=1)
    assert len(reference) == 301
    ours = vocabulary.learn_vocab(counts, 297, reserved, {"lower_thresh": 1})
    assert len(ours) == 297 and set(ours) < set(reference)
    assert ours == [token for token in reference if token in set(ours)]  # the order is kept
    # The dropped are the last learned pieces (the rarest): after the first of them come only
    # the others and characters ("x", "##x"), which stay.
    dropped = set(reference) - set(ours)
    after = reference[min(reference.index(token) for token in dropped) :]
    assert all(token in dropped or len(token.removeprefix("##")) == 1 for token in after)
    path = tmp_path / "vocab.txt"
    vocabulary.write_vocab(path, ours)
    tokenizer = tokenization.FullTokenizer(str(path))
    assert all("[UNK]" not in tokenizer.tokenize(line) for line in lines)  # every character kept
