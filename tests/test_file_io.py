"""bert_tf.file_io: atomic writes that leave nothing half-written, UTF-8 text with file:line errors, globs."""

import errno
import gzip
import os
import subprocess
import sys

import pytest

from bert_tf import file_io
from bert_tf.errors import InputError, WriteError

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV


def test_atomic_write_replaces_the_file_only_when_complete(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError, match="disk full"):
        with file_io.atomic_write(path) as f:
            f.write("half of the new")
            assert path.read_text() == "old\n"  # the final name is untouched while writing
            raise RuntimeError("disk full")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["results.txt"]  # no temporary file left behind
    with file_io.atomic_write(path) as f:
        f.write("new\n")
    assert path.read_text() == "new\n"
    assert os.listdir(tmp_path) == ["results.txt"]


def test_atomic_path_publishes_a_folder_and_removes_a_failed_one(tmp_path):
    target = tmp_path / "export" / "1"
    target.parent.mkdir()
    with pytest.raises(ValueError):
        with file_io.atomic_path(target) as temp:
            os.makedirs(os.path.join(temp, "variables"))
            raise ValueError("tracing failed")
    assert os.listdir(target.parent) == []
    with file_io.atomic_path(target) as temp:
        os.makedirs(os.path.join(temp, "variables"))
    assert os.listdir(target.parent) == ["1"] and (target / "variables").is_dir()


def test_read_lines_drops_a_bom_and_line_ends_and_names_the_line_that_is_not_utf8(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"\xef\xbb\xbffirst\r\nsecond\tcol\n\nbad \xff byte\n")
    lines = file_io.read_lines(path)
    assert [next(lines), next(lines), next(lines)] == [(1, "first"), (2, "second\tcol"), (3, "")]
    with pytest.raises(
        InputError, match=r"train\.tsv:4: not valid UTF-8 \(byte b'\\xff' at column 5\)"
    ):
        next(lines)
    skipped = []
    kept = list(file_io.read_lines(path, on_invalid=lambda number, error: skipped.append(number)))
    assert [number for number, _ in kept] == [1, 2, 3] and skipped == [4]


def test_read_lines_reads_gzip_and_reports_a_missing_file(tmp_path):
    path = tmp_path / "corpus.txt.gz"
    with gzip.open(path, "wb") as f:
        f.write("één\ntwee\n".encode())
    assert list(file_io.read_lines(path)) == [(1, "één"), (2, "twee")]
    with pytest.raises(file_io.MissingFileError, match=r"nope\.txt does not exist"):
        list(file_io.read_lines(tmp_path / "nope.txt"))


def test_read_text_and_read_json_name_the_line_of_an_error(tmp_path):
    path = tmp_path / "data.json"
    path.write_bytes(b'{"a": 1,\n "b": "\xc3"\n}')
    with pytest.raises(InputError, match=r"data\.json:2: not valid UTF-8"):
        file_io.read_text(path)
    path.write_text('{"a": 1,\n "b": ]\n}')
    with pytest.raises(InputError, match=r"data\.json:2: not valid JSON \(column 7"):
        file_io.read_json(path)
    path.write_text('\ufeff{"a": [1, 2]}')
    assert file_io.read_json(path) == {"a": [1, 2]}


def test_expand_globs_sorts_each_pattern_skips_folders_and_names_an_empty_pattern(tmp_path):
    for name in ("b.txt", "a.txt", "c.rec"):
        (tmp_path / name).write_text("x")
    (tmp_path / "d.txt").mkdir()
    files = file_io.expand_globs(f"{tmp_path}/*.txt, {tmp_path}/c.rec", "--input_file")
    assert files == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), str(tmp_path / "c.rec")]
    with pytest.raises(InputError, match=r"^--input_file=.*/none-\*: no file matches it$"):
        file_io.expand_globs([str(tmp_path / "a.txt"), str(tmp_path / "none-*")], "--input_file")
    with pytest.raises(InputError, match=r"^--input_file=.*/missing\.txt: no file matches it$"):
        file_io.expand_globs(str(tmp_path / "missing.txt"), "--input_file")


def test_check_writable_folder_refuses_a_folder_under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(
        InputError, match=r"^--output_dir=.*/file/out: .*/file is a file, not a folder$"
    ):
        file_io.check_writable_folder(tmp_path / "file" / "out", "--output_dir")
    with pytest.raises(InputError, match="is a file, not a folder"):
        file_io.check_writable_folder(tmp_path / "file", "--output_dir")
    file_io.check_writable_folder(tmp_path / "new" / "deeper", "--output_dir")
    assert (tmp_path / "new" / "deeper").is_dir()


def test_split_files_take_the_first_name_found(tmp_path):
    (tmp_path / "valid.txt").write_text("x")
    names = {"train": ["train.txt"], "dev": ["dev.txt", "valid.txt"]}
    assert file_io.split_files(tmp_path, names) == {
        "train": None,
        "dev": str(tmp_path / "valid.txt"),
    }
    with pytest.raises(InputError, match=r"no train file \(expected one of train\.txt\)"):
        file_io.require_split_file(tmp_path, names, "train")


def test_a_full_disk_is_one_line_naming_the_file_and_the_old_file_stays(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text("old\n")
    with pytest.raises(WriteError) as error:
        with file_io.atomic_write(path) as f:
            f.write("half of the new")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what write() raises then
    assert str(error.value) == f"cannot write {path}: No space left on device"
    assert os.listdir(tmp_path) == ["results.txt"] and path.read_text() == "old\n"


def test_another_os_error_inside_a_write_is_not_called_a_full_disk(tmp_path):
    # An input that cannot be read while writing keeps its own error (and file name).
    with pytest.raises(PermissionError) as error:
        with file_io.atomic_write(tmp_path / "out.txt"):
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "input.txt"))
    assert not isinstance(error.value, WriteError)
    assert os.listdir(tmp_path) == []


def test_a_refused_write_ends_a_script_in_one_line_and_leaves_nothing(tmp_path):
    # create_pretraining_data.py (no TensorFlow: quick) under a 2 KB file-size limit.
    import resource
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))

    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "create_pretraining_data.py"),
            f"--input_file={SAMPLE_DIR / 'sample_text.txt'}", f"--output_file={out / 'x.tfrecord'}",
            f"--vocab_file={SAMPLE_DIR / 'vocab.txt'}", "--num_workers=0", "--dupe_factor=1",
        ],
        env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=120, preexec_fn=limit,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"error: cannot write {out / 'x.tfrecord'}: File too large", last
    assert os.listdir(out) == []
