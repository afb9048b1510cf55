"""A folder written beside its final place, then swapped in whole: an overwrite is all or nothing.

`replace_folder(new, target)` puts the finished folder `new` at `target`. Where one is there, the
two are exchanged in one system call (Linux renameat2 RENAME_EXCHANGE), else by two renames (the
old folder aside to `.<name>.old-<hex>`, the new one in); the old folder is then removed. A
process killed at any point leaves at `target` the old folder or the new one, whole, plus at most
a hidden leftover beside it, which `remove_leftovers(target)` (called by the next run at its
start) removes, or renames back when the kill came between the two renames. Stale files of the
old folder never survive into the new one.

Only stdlib: the names it handles are this module's own (`.<name>.tmp-<12 hex>`, the names of
bert_tf.file_io.temporary_name, and `.<name>.old-<12 hex>`), never a user's file.
"""

import ctypes
import errno
import os
import re
import shutil
import uuid

from absl import logging

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_HEX = "[0-9a-f]{12}"


def _leftover_pattern(name):
    return re.compile(rf"^\.{re.escape(name)}\.(tmp|old)-{_HEX}$")


def aside_name(path):
    """The hidden name beside `path` its old folder takes during a two-rename swap."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.old-{uuid.uuid4().hex[:12]}")


def _exchange(source, target):
    """Swaps the two paths in one system call; OSError where the kernel or file system cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    result = renameat2(
        _AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE
    )
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), source)


def replace_folder(new, target):
    """Moves the finished folder `new` (beside `target`, same file system) to `target`, whole.

    Args:
      new: the folder written, named by bert_tf.file_io.temporary_name(target).
      target: the folder's final place; an empty or absent one is simply replaced.
    """
    if not os.path.isdir(target) or not os.listdir(target):
        os.replace(new, target)  # one rename; POSIX lets it replace an empty folder
        return
    try:
        _exchange(new, target)
        old = new  # the old folder now has the new one's hidden name
    except OSError as error:
        if error.errno not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EPERM):
            raise
        old = aside_name(target)
        os.replace(target, old)
        os.replace(new, target)
    _remove_old(old)


def _remove_old(old):
    try:
        shutil.rmtree(old)
    except OSError as error:
        logging.warning(
            "The replaced folder %s could not be removed (%s); the next run removes it",
            old,
            error.strerror or error,
        )


def remove_leftovers(target):
    """Removes the hidden leftovers of killed writes of `target` (this module's names only).

    A `.old-` folder while `target` is missing is the old folder of a swap killed between its two
    renames: it is renamed back to `target`. Returns the leftovers removed or restored.
    """
    folder, name = os.path.split(os.path.abspath(target))
    if not os.path.isdir(folder):
        return []
    pattern = _leftover_pattern(name)
    found = sorted(entry for entry in os.listdir(folder) if pattern.match(entry))
    for entry in found:
        path = os.path.join(folder, entry)
        if ".old-" in entry and not os.path.exists(target):
            os.replace(path, target)
            logging.warning("Restored %s from %s, left by a killed overwrite", target, path)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
    if found:
        logging.info("Removed %d leftover(s) of killed writes beside %s", len(found), target)
    return [os.path.join(folder, entry) for entry in found]
