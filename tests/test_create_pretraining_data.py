"""create_pretraining_data.py and its engine (bert_tf.data.pretraining.writer), end to end."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data.pretraining import encoding as tfrecord_io
from bert_tf.data.pretraining import instances as pretraining_data
from bert_tf.data.pretraining import reader as pretraining
from bert_tf.data.pretraining import writer as pretraining_writer
from bert_tf.errors import InputError

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_SEQ_LENGTH, MAX_PREDICTIONS = 64, 10


@pytest.fixture(scope="module")
def tokenizer(sample_vocab_path):
    return tokenization.FullTokenizer(str(sample_vocab_path), do_lower_case=True)


@pytest.fixture(scope="module")
def options(tokenizer):
    return pretraining_data.InstanceOptions.from_vocab(
        tokenizer.vocab, max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS
    )


def _run(input_patterns, output_files, tokenizer, options, **kwargs):
    kwargs.setdefault("dupe_factor", 1)
    kwargs.setdefault("num_workers", 1)
    kwargs.setdefault("chunk_bytes", 8192)
    return pretraining_writer.create_pretraining_data(
        str(input_patterns), output_files, tokenizer, options, **kwargs
    )


def _read_all(pattern, compression_type=""):
    dataset = pretraining.make_pretraining_dataset(
        str(pattern),
        1,
        MAX_SEQ_LENGTH,
        MAX_PREDICTIONS,
        is_training=False,
        compression_type=compression_type,
    )
    return [{k: v.numpy()[0] for k, v in batch.items()} for batch in dataset]


def test_sample_text_round_trips_through_the_reader(tmp_path, sample_text_path, tokenizer, options):
    output = tmp_path / "out.tfrecord"
    summary = _run(sample_text_path, str(output), tokenizer, options, dupe_factor=2)
    examples = _read_all(output)
    assert len(examples) == summary.instances > 300
    assert summary.documents == 6
    cls_id, sep_id, mask_id = (tokenizer.vocab[t] for t in ("[CLS]", "[SEP]", "[MASK]"))
    for example in examples:
        length = int(example["input_mask"].sum())
        assert example["input_mask"].tolist() == [1] * length + [0] * (MAX_SEQ_LENGTH - length)
        assert example["input_ids"][0] == cls_id and example["input_ids"][length - 1] == sep_id
        assert not example["input_ids"][length:].any() and not example["segment_ids"][length:].any()
        num_predictions = int(example["masked_lm_weights"].sum())
        positions = example["masked_lm_positions"][:num_predictions]
        assert 1 <= num_predictions <= MAX_PREDICTIONS and (np.diff(positions) > 0).all()
        assert not example["masked_lm_ids"][num_predictions:].any()
        assert example["next_sentence_labels"].shape == (1,)
    masked = np.mean(
        [(e["input_ids"] == mask_id).sum() / e["masked_lm_weights"].sum() for e in examples]
    )
    assert 0.7 < masked < 0.9


def test_files_parse_with_plain_tf_data_and_the_original_feature_spec(
    tmp_path, sample_text_path, tokenizer, options
):
    output = tmp_path / "out.tfrecord"
    _run(sample_text_path, str(output), tokenizer, options)
    spec = pretraining.pretraining_feature_spec(MAX_SEQ_LENGTH, MAX_PREDICTIONS)
    for record in tf.data.TFRecordDataset(str(output)).take(5):
        example = tf.io.parse_single_example(record, spec)
        assert (
            example["input_ids"].dtype == tf.int64
            and example["masked_lm_weights"].dtype == tf.float32
        )


def test_output_is_byte_identical_for_any_worker_count_and_changes_with_the_seed(
    tmp_path, sample_text_path, tokenizer, options
):
    contents = []
    for name, workers, seed in (("a", 1, 1), ("b", 2, 1), ("c", 3, 1), ("d", 2, 2)):
        _run(
            sample_text_path,
            str(tmp_path / name),
            tokenizer,
            options,
            num_workers=workers,
            random_seed=seed,
        )
        contents.append((tmp_path / name).read_bytes())
    assert contents[0] == contents[1] == contents[2]
    assert contents[3] != contents[0]


def test_instances_are_dealt_round_robin_over_output_files(
    tmp_path, sample_text_path, tokenizer, options
):
    outputs = [str(tmp_path / f"part-{k}.tfrecord") for k in range(3)]
    summary = _run(sample_text_path, ",".join(outputs), tokenizer, options)
    counts = [len(_read_all(path)) for path in outputs]
    assert counts == summary.instances_per_file and sum(counts) == summary.instances
    assert max(counts) - min(counts) <= 1


def test_gzip_output_reads_back_the_same_examples(tmp_path, sample_text_path, tokenizer, options):
    _run(sample_text_path, str(tmp_path / "plain"), tokenizer, options)
    _run(sample_text_path, str(tmp_path / "packed.gz"), tokenizer, options, compression="gzip")
    plain, packed = _read_all(tmp_path / "plain"), _read_all(tmp_path / "packed.gz", "GZIP")
    assert len(plain) == len(packed)
    assert all((a["input_ids"] == b["input_ids"]).all() for a, b in zip(plain, packed, strict=True))
    assert (tmp_path / "packed.gz").stat().st_size < 0.6 * (tmp_path / "plain").stat().st_size


def test_random_next_segments_stay_inside_a_chunk_of_documents(tmp_path, tokenizer, options):
    # Two chunks of 5 documents (28 bytes each): chunk 0 says "apple", chunk 1 says "river".
    text = "\n\n".join(["apple apple .\napple apple ."] * 5 + ["river river .\nriver river ."] * 5)
    (tmp_path / "in.txt").write_text(text)
    _run(
        tmp_path / "in.txt",
        str(tmp_path / "out"),
        tokenizer,
        options,
        chunk_bytes=140,
        dupe_factor=3,
    )
    apple, river = tokenizer.vocab["apple"], tokenizer.vocab["river"]
    for example in _read_all(tmp_path / "out"):
        ids = set(example["input_ids"].tolist())
        assert not (apple in ids and river in ids)


def test_crlf_line_ends_and_a_bom_give_the_same_output(
    tmp_path, sample_text_path, tokenizer, options
):
    text = sample_text_path.read_text(encoding="utf-8")
    (tmp_path / "windows.txt").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    _run(sample_text_path, str(tmp_path / "unix.out"), tokenizer, options)
    _run(tmp_path / "windows.txt", str(tmp_path / "windows.out"), tokenizer, options)
    assert (tmp_path / "unix.out").read_bytes() == (tmp_path / "windows.out").read_bytes()


def test_globs_and_lists_of_inputs_read_every_file(tmp_path, sample_text_path, tokenizer, options):
    chapters = sample_text_path.read_text(encoding="utf-8").split("\n\n")
    for k, chapter in enumerate(chapters):
        (tmp_path / f"chapter-{k}.txt").write_text(chapter)
    summary = _run(
        f"{tmp_path}/chapter-[0-2].txt,{tmp_path}/chapter-[3-9].txt",
        str(tmp_path / "o"),
        tokenizer,
        options,
    )
    assert len(summary.input_files) == len(chapters) and summary.documents == len(chapters)


def test_odd_documents_are_handled(tmp_path, tokenizer, options):
    long_line = " ".join(["word"] * 500)
    text = f"\n\n\n   \none sentence only.\n\n{long_line}\n\n\x00\x01\n\nlast one.\nwithout a blank line"
    (tmp_path / "odd.txt").write_text(text)
    (tmp_path / "empty.txt").write_text("")
    summary = _run(
        f"{tmp_path}/odd.txt,{tmp_path}/empty.txt",
        str(tmp_path / "o"),
        tokenizer,
        options,
        dupe_factor=5,
    )
    assert summary.documents == 3  # the control characters tokenize to nothing
    examples = _read_all(tmp_path / "o")
    assert len(examples) == summary.instances >= 15
    assert max(int(e["input_mask"].sum()) for e in examples) == MAX_SEQ_LENGTH


def test_an_empty_corpus_writes_an_empty_file(tmp_path, tokenizer, options):
    (tmp_path / "empty.txt").write_text("\n\n")
    summary = _run(tmp_path / "empty.txt", str(tmp_path / "o"), tokenizer, options)
    assert summary.instances == 0 and (tmp_path / "o").read_bytes() == b""


def test_missing_inputs_are_named(tmp_path, tokenizer, options):
    with pytest.raises(FileNotFoundError, match="nope-"):
        _run(tmp_path / "nope-*.txt", str(tmp_path / "o"), tokenizer, options)
    with pytest.raises(FileNotFoundError, match="absent.txt"):
        _run(tmp_path / "absent.txt", str(tmp_path / "o"), tokenizer, options)
    (tmp_path / "in.txt").write_text("a sentence.\n")
    with pytest.raises(InputError, match="no-such-dir"):
        _run(tmp_path / "in.txt", str(tmp_path / "no-such-dir" / "o"), tokenizer, options)


def test_invalid_utf8_is_an_error_naming_file_and_line_or_skipped_on_request(
    tmp_path, tokenizer, options
):
    (tmp_path / "bad.txt").write_bytes(b"good line.\nanother good line.\nbad \xff line.\n\nmore.\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3: not valid UTF-8.*--skip_invalid_utf8"):
        _run(tmp_path / "bad.txt", str(tmp_path / "o"), tokenizer, options)
    assert list(tmp_path.iterdir()) == [tmp_path / "bad.txt"]  # nothing written, no temporary left
    summary = _run(
        tmp_path / "bad.txt", str(tmp_path / "o"), tokenizer, options, skip_invalid_utf8=True
    )
    assert summary.skipped_invalid_lines == 1 and summary.instances > 0


def test_a_failed_run_leaves_no_file_under_the_final_name(
    tmp_path, sample_text_path, tokenizer, options, monkeypatch
):
    (tmp_path / "o").write_bytes(b"previous complete output")
    real = pretraining_writer._process_chunk

    def fail_on_second_chunk(key, documents, job=None):
        if key == (0, 1):
            raise KeyboardInterrupt
        return real(key, documents, job)

    monkeypatch.setattr(pretraining_writer, "_process_chunk", fail_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        _run(sample_text_path, str(tmp_path / "o"), tokenizer, options)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]
    assert (tmp_path / "o").read_bytes() == b"previous complete output"


def test_an_output_named_twice_is_refused_before_anything_is_written(
    tmp_path, sample_text_path, tokenizer, options
):
    outputs = f"{tmp_path / 'a.tfrecord'},{tmp_path / 'b.tfrecord'},{tmp_path / 'a.tfrecord'}"
    with pytest.raises(ValueError, match=r"--output_file names '.*a\.tfrecord' more than once"):
        _run(sample_text_path, outputs, tokenizer, options)
    assert list(tmp_path.iterdir()) == []


def test_a_file_failing_to_finish_publishes_none_of_the_outputs(
    tmp_path, sample_text_path, tokenizer, options, monkeypatch
):
    real_finish = tfrecord_io.AtomicRecordFile.finish

    def disk_full_on_the_last_file(writer):
        if writer.path.endswith("c.tfrecord"):
            raise OSError(28, "No space left on device")
        real_finish(writer)

    monkeypatch.setattr(tfrecord_io.AtomicRecordFile, "finish", disk_full_on_the_last_file)
    outputs = ",".join(str(tmp_path / name) for name in ("a.tfrecord", "b.tfrecord", "c.tfrecord"))
    with pytest.raises(OSError, match="No space left"):
        _run(sample_text_path, outputs, tokenizer, options)
    assert list(tmp_path.iterdir()) == []


def test_read_document_chunks_splits_on_blank_lines_and_closes_chunks_by_size(tmp_path):
    (tmp_path / "a.txt").write_text("a1\na2\n\n \t\nb1\n\n\nc1\n")
    (tmp_path / "b.txt").write_text("d1\n")
    files = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]

    def chunks(chunk_bytes):
        return list(pretraining_writer.read_document_chunks(files, chunk_bytes=chunk_bytes))

    # A chunk never crosses a file; its key is (file index, chunk index in the file).
    assert chunks(1 << 20) == [((0, 0), [["a1", "a2"], ["b1"], ["c1"]]), ((1, 0), [["d1"]])]
    # Every document exceeds 4 bytes, but a chunk holds two at least ("random next" segments come
    # from another document of the chunk); the odd one out at a file's end joins its last chunk.
    assert chunks(4) == [((0, 0), [["a1", "a2"], ["b1"], ["c1"]]), ((1, 0), [["d1"]])]
    (tmp_path / "a.txt").write_text("a1\na2\n\nb1\n\nc1\n\nd1\n")
    assert chunks(4) == [
        ((0, 0), [["a1", "a2"], ["b1"]]),
        ((0, 1), [["c1"], ["d1"]]),
        ((1, 0), [["d1"]]),
    ]
    (tmp_path / "a.txt").write_text("a1\n")
    (tmp_path / "b.txt").write_text("")
    assert chunks(4) == [((0, 0), [["a1"]])]


def test_book_length_documents_draw_random_next_segments_from_other_documents(
    tmp_path, tokenizer, options
):
    # Three documents, each larger than a chunk, each of one repeated word: a segment's majority
    # word (masking hides or replaces a few) tells its document.
    books = ("apple", "boat", "cloud")
    assert all(len(tokenizer.tokenize(word)) == 1 for word in books)
    word_ids = [tokenizer.vocab[word] for word in books]
    text = "\n\n".join("\n".join([f"{word} {word} {word} {word}."] * 300) for word in books)
    (tmp_path / "books.txt").write_text(text + "\n")
    output = tmp_path / "out.tfrecord"
    _run(tmp_path / "books.txt", str(output), tokenizer, options, chunk_bytes=1024, dupe_factor=2)

    def book_of(ids, segment):
        return max(word_ids, key=lambda word_id: int(np.sum(ids[segment] == word_id)))

    random_next = 0
    for example in _read_all(output):
        real = example["input_mask"] == 1
        segment_a, segment_b = real & (example["segment_ids"] == 0), example["segment_ids"] == 1
        if example["next_sentence_labels"][0] == 1:
            random_next += 1
            ids = example["input_ids"]
            assert book_of(ids, segment_a) != book_of(ids, segment_b)
    assert random_next > 10


def test_a_vocab_with_a_repeated_token_is_one_line_naming_both_lines(tmp_path, sample_vocab_path):
    # A repeated token would leave its earlier id to no token (the later line wins): refused.
    lines = sample_vocab_path.read_text(encoding="utf-8").splitlines()
    vocab_path = tmp_path / "vocab.txt"
    vocab_path.write_text("\n".join([*lines, "zzqxw", "zzqxw"]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        tokenization.FullTokenizer(str(vocab_path), do_lower_case=True)
    message = str(error.value)
    assert "\n" not in message and str(vocab_path) in message
    assert f":{len(lines) + 2}:" in message and f"line {len(lines) + 1}" in message


def _script(*args):
    return subprocess.run(
        [sys.executable, os.path.join(REPO_DIR, "create_pretraining_data.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO_DIR,
        env={**os.environ, "PYTHONPATH": REPO_DIR},
        timeout=120,
    )


def test_script_writes_files_with_the_original_flags(tmp_path, sample_text_path, sample_vocab_path):
    output = tmp_path / "out.tfrecord"
    result = _script(
        f"--input_file={sample_text_path}",
        f"--output_file={output}",
        f"--vocab_file={sample_vocab_path}",
        "--do_lower_case=True",
        f"--max_seq_length={MAX_SEQ_LENGTH}",
        f"--max_predictions_per_seq={MAX_PREDICTIONS}",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        "--dupe_factor=2",
        "--short_seq_prob=0.1",
        "--do_whole_word_mask=True",
        "--num_workers=2",
        "--progress_interval_s=0",
    )
    assert result.returncode == 0, result.stderr
    assert "*** Example ***" in result.stderr
    assert "instances/s" in result.stderr and "documents 6, instances" in result.stderr
    assert "Wrote" in result.stderr
    assert len(_read_all(output)) > 300


def test_script_names_a_missing_input_pattern(tmp_path, sample_vocab_path):
    result = _script(
        f"--input_file={tmp_path}/missing-*.txt",
        f"--output_file={tmp_path}/o",
        f"--vocab_file={sample_vocab_path}",
    )
    assert result.returncode != 0 and "missing-*.txt" in result.stderr


def test_a_one_file_corpus_gives_the_records_earlier_versions_gave(tmp_path, sample_text_path):
    # Chunks became per-file (for Beam); the first file kept its seeds, so a one-file corpus gives the
    # bytes commit 4be38f8 wrote with the same flags (its output's SHA-256, recorded from that commit).
    output = tmp_path / "out.tfrecord"
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "create_pretraining_data.py"),
            f"--input_file={sample_text_path}", f"--output_file={output}",
            f"--vocab_file={os.path.join(REPO_DIR, 'sample_data', 'vocab.txt')}",
            "--num_workers=1", "--dupe_factor=3",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    digest = hashlib.sha256(output.read_bytes()).hexdigest()
    assert digest == "95298736f14ed463de29e417cc51e801357652dcbdf1947e503a8f9ee27b38fb"
