"""The one file helper set: atomic writes, UTF-8 text with file:line errors, glob expansion.

Every file a run writes goes through `atomic_write` (or `atomic_path`, for writers that take a path):
it is written under a temporary name beside its final one and renamed when complete, and the
temporary file is removed if writing fails, so a reader never sees half a file and a failed run
leaves nothing behind; a write the disk refuses (full, over a size limit, read-only) becomes one
`WriteError` naming the final path (`reporting_write_errors`; checkpoints: `writing_checkpoint`). Every text a user hands in is read by `read_lines` / `read_text`, whose
errors name the file and line.

Local paths go through `os`; URLs (gs://, hdfs://, ...) through `tf.io.gfile`, imported only for
them, so the TensorFlow-free tools (create_pretraining_data.py's writer) stay fast to start.
"""

import codecs
import contextlib
import errno
import glob
import gzip
import os
import shutil
import sys
import uuid

from bert_tf.errors import InputError, WriteError


class MissingFileError(InputError, FileNotFoundError):
    """An input file that does not exist: an InputError that callers may catch as FileNotFoundError."""


def is_url(path):
    return "://" in os.fspath(path)


def _gfile():
    import tensorflow as tf  # only for URLs: see the module docstring

    return tf.io.gfile


def exists(path):
    path = os.fspath(path)
    return _gfile().exists(path) if is_url(path) else os.path.exists(path)


def _remove(path):
    """Removes a file or folder if it exists."""
    if is_url(path):
        gfile = _gfile()
        if gfile.isdir(path):
            gfile.rmtree(path)
        elif gfile.exists(path):
            gfile.remove(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def _rename(source, target):
    """Renames source to target, replacing a file there, or a folder (moved aside, then removed)."""
    if is_url(source):
        gfile = _gfile()
        if gfile.isdir(target):
            gfile.rmtree(target)
        gfile.rename(source, target, overwrite=True)
    elif os.path.isdir(target) and not os.path.islink(target):
        old = temporary_name(target)
        os.replace(target, old)
        os.replace(source, target)
        _remove(old)
    else:
        os.replace(source, target)


def temporary_name(path):
    """A name beside `path` (same folder, so renaming is atomic) that no other writer uses."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.tmp-{uuid.uuid4().hex[:12]}")


class PendingFile:
    """A file (or folder) written under a temporary name, then published under its final one.

    For writers that finish several files and publish them together (create_pretraining_data's
    output shards); a single file is simpler with `atomic_write` or `atomic_path`.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self.temp_path = temporary_name(self.path)

    def publish(self):
        """Moves the finished temporary file to its final name (replacing a file there)."""
        _rename(self.temp_path, self.path)

    def discard(self):
        """Removes the temporary file; the final name is never touched."""
        _remove(self.temp_path)


# What a write refused by the disk or its permissions fails with.
_WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}
)


def _write_failure(error, written):
    """Why writing under `written` (a path or prefix) failed, if `error` says so; else None."""
    if isinstance(error, OSError):
        if error.errno not in _WRITE_ERRNOS:
            return None
        if error.filename and not os.fspath(error.filename).startswith(written):
            return None  # another file, e.g. an input that cannot be read
        return error.strerror
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(error, tf.errors.OpError) and written in error.message:
        # TF's file errors end "<path>; No space left on device [Op:SaveV2]".
        return error.message.splitlines()[0].split("; ")[-1].split(" [Op:")[0].strip()
    return None


@contextlib.contextmanager
def reporting_write_errors(path, written=None):
    """Turns a refused write under `written` (default `path`) into a WriteError naming `path`.

    A full disk, a file-size limit or a read-only folder then ends a script in one line,
    `error: cannot write <path>: No space left on device`; other errors pass unchanged.
    """
    try:
        yield
    except Exception as error:
        reason = _write_failure(error, os.fspath(written or path))
        if reason is None:
            raise
        raise WriteError(f"cannot write {os.fspath(path)}: {reason}") from None


@contextlib.contextmanager
def writing_checkpoint(prefix):
    """Around a writer of the checkpoint `<prefix>.*` (tf.train.CheckpointManager.save).

    A refused write raises WriteError naming `prefix` and removes what this save wrote, so the
    folder's earlier checkpoints stay the latest and usable (TF updates its `checkpoint` file last).
    """
    prefix = os.fspath(prefix)
    pattern = glob.escape(prefix) + "*"
    before = set() if is_url(prefix) else set(glob.glob(pattern))
    try:
        with reporting_write_errors(prefix):
            yield
    except WriteError:
        if not is_url(prefix):
            for leftover in set(glob.glob(pattern)) - before:
                _remove(leftover)
        raise


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path to write `path` through; renamed to `path` when the block succeeds.

    On an exception the temporary file (or folder) is removed and `path` is left as it was.

    Example:
    ```python
    with atomic_path("train.tf_record") as temp_path:
        with tf.io.TFRecordWriter(temp_path) as writer:
            ...
    ```
    """
    pending = PendingFile(path)
    try:
        with reporting_write_errors(path, pending.temp_path):
            yield pending.temp_path
            pending.publish()
    finally:
        pending.discard()  # after a publish there is nothing left to remove


@contextlib.contextmanager
def atomic_write(path, mode="w"):
    """Opens `path` for writing ("w": UTF-8 text, "wb": bytes) through `atomic_path`."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes with mode 'w' or 'wb', not {mode!r}")
    with atomic_path(path) as temp_path:
        if is_url(temp_path):
            file = _gfile().GFile(temp_path, mode)
        else:
            file = open(temp_path, mode, encoding="utf-8" if mode == "w" else None)  # noqa: SIM115
        with file:
            yield file


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_write(path) as f:
        f.write(text)


def open_binary(path):
    """Opens an input file for reading bytes; ".gz" files are read through gzip.

    Raises:
      MissingFileError: if it does not exist; InputError if it cannot be opened.
    """
    path = os.fspath(path)
    if is_url(path):
        gfile = _gfile()
        if not gfile.exists(path):
            raise MissingFileError(f"{path} does not exist")
        file = gfile.GFile(path, "rb")
    else:
        try:
            file = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            raise MissingFileError(f"{path} does not exist") from None
        except IsADirectoryError:
            raise InputError(f"{path} is a folder, not a file") from None
        except OSError as error:
            raise InputError(f"{path}: cannot open it ({error.strerror})") from None
    return gzip.GzipFile(fileobj=file, mode="rb") if path.endswith(".gz") else file


def _invalid_utf8(path, number, raw, error):
    return InputError(
        f"{path}:{number}: not valid UTF-8 (byte {raw[error.start : error.start + 1]!r} at "
        f"column {error.start + 1}); save the file as UTF-8"
    )


def read_lines(path, keep_ends=False, on_invalid=None):
    """Yields (line number from 1, line) of a UTF-8 text file; a byte-order mark at its start is dropped.

    Lines end at "\\n" only (a "\\r" before it is dropped too), so a stray "\\r" inside a line stays
    text.

    Args:
      path: a local path or a tf.io.gfile URL; ".gz" files are decompressed.
      keep_ends: keep each line's "\\n" (for the csv module).
      on_invalid: called with (line number, InputError) for a line that is not UTF-8, which is then
        skipped; by default such a line raises the InputError.

    Raises:
      MissingFileError: if the file does not exist.
      InputError: naming the file and line, for a line that is not valid UTF-8.
    """
    with open_binary(path) as f:
        yield from decode_lines(f, path, keep_ends, on_invalid)


def decode_lines(binary_file, path, keep_ends=False, on_invalid=None):
    """`read_lines` of a file opened elsewhere (Beam's file systems): `path` names it in errors."""
    for number, raw in enumerate(iter(binary_file.readline, b""), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            invalid = _invalid_utf8(path, number, raw, error)
            if on_invalid is None:
                raise invalid from None
            on_invalid(number, invalid)
            continue
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not keep_ends:
            line = line.removesuffix("\n").removesuffix("\r")
        yield number, line


def check_utf8(path):
    """Raises `read_lines`' InputError (file and line) if the file is not all UTF-8.

    Decodes large blocks at once (about a second per GB), and reads lines only to name the line.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open_binary(path) as f:
        try:
            while block := f.read(1 << 24):
                decoder.decode(block)
            decoder.decode(b"", final=True)
            return
        except UnicodeDecodeError:
            pass
    for _ in read_lines(path):  # raises at the line
        pass


def read_text(path):
    """A UTF-8 text file's content, a leading byte-order mark dropped; errors as `read_lines`'."""
    with open_binary(path) as f:
        data = f.read()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        start = data.rfind(b"\n", 0, error.start) + 1
        line_number = data.count(b"\n", 0, error.start) + 1
        error.start -= start
        raise _invalid_utf8(path, line_number, data[start:], error) from None


def expand_globs(patterns, flag):
    """Comma-separated file globs (or a list of them) -> the files, each pattern's matches sorted.

    A pattern without wildcards names one file. Folders never match.

    Args:
      patterns: "a.txt,data/*.tfrecord" or ["a.txt", ...]; local paths or tf.io.gfile URLs.
      flag: the flag the patterns came from, for errors ("--input_file").

    Raises:
      MissingFileError: naming the flag and the first pattern that matches no file.
    """
    if isinstance(patterns, str | os.PathLike):
        patterns = os.fspath(patterns).split(",")
    files = []
    for pattern in (os.fspath(p).strip() for p in patterns):
        if not pattern:
            continue
        if is_url(pattern):
            gfile = _gfile()
            matches = [m for m in sorted(gfile.glob(pattern)) if not gfile.isdir(m)]
        else:
            matches = [m for m in sorted(glob.glob(pattern)) if os.path.isfile(m)]
        if not matches:
            raise MissingFileError(f"{flag}={pattern}: no file matches it")
        files.extend(matches)
    if not files:
        raise MissingFileError(f"{flag} names no file")
    return files


def check_writable_folder(path, flag):
    """Creates the folder `path` if need be; raises InputError naming `flag` if it cannot be written."""
    path = os.fspath(path)
    if is_url(path):
        _gfile().makedirs(path)
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"{flag}={path} is a file, not a folder")
    parent = path
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        raise InputError(f"{flag}={path}: {parent} is a file, not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise InputError(f"{flag}={path}: cannot create it ({error.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{flag}={path}: the folder is not writable")


def split_files(folder, names_by_split):
    """{split: the path of the first of its file names that exists in `folder`, or None}."""
    return {
        split: next(
            (os.path.join(folder, name) for name in names if exists(os.path.join(folder, name))),
            None,
        )
        for split, names in names_by_split.items()
    }


def require_split_file(folder, names_by_split, split):
    """The path of `split`'s file in `folder`; InputError listing the names it looked for if none is."""
    path = split_files(folder, {split: names_by_split[split]})[split]
    if path is None:
        names = ", ".join(names_by_split[split])
        raise InputError(f"{folder}: no {split} file (expected one of {names})")
    return path


def read_json(path):
    """The parsed content of a UTF-8 JSON file; InputError naming the file, line and column if invalid."""
    import json

    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path}:{error.lineno}: not valid JSON (column {error.colno}: {error.msg})"
        ) from None


def read_json_object(path):
    """read_json of a file that must hold a JSON object (a config); InputError naming it if not."""
    value = read_json(path)
    if not isinstance(value, dict):
        raise InputError(f"{path} must hold a JSON object")
    return value


@contextlib.contextmanager
def atomic_files(prefix):
    """Yields a temporary prefix for a writer of several files `<prefix>.*` (a TF checkpoint).

    The files are written in a temporary folder beside `prefix`; when the block succeeds each is
    renamed to its final name (replacing one there), and the folder is removed either way.
    """
    prefix = os.fspath(prefix)
    folder, name = os.path.split(prefix)
    temp_folder = temporary_name(os.path.join(folder, name + ".files"))
    if is_url(temp_folder):
        _gfile().makedirs(temp_folder)
    else:
        os.makedirs(temp_folder)
    try:
        with reporting_write_errors(prefix, temp_folder):
            temp_prefix = os.path.join(temp_folder, name)
            yield temp_prefix
            folder_files = _gfile().listdir if is_url(temp_folder) else os.listdir
            for file_name in folder_files(temp_folder):
                if file_name.startswith(name):
                    _rename(os.path.join(temp_folder, file_name), prefix + file_name[len(name) :])
    finally:
        _remove(temp_folder)
