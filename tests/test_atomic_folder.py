"""A folder swapped in whole: an --overwrite killed at any point leaves the old folder or the new one.

The kills are real (SIGKILL of a process paused at a chosen rename); the module is loaded from its
file alone there, so that each process starts in a fraction of a second.
"""

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bert_tf import atomic_folder
from bert_tf.file_io import temporary_name

from conftest import REPO_DIR

OLD = {
    "config.json": "old config",
    "model.safetensors": "old weights",
    "model.safetensors.index.json": "stale",
}
NEW = {"config.json": "new config", "model.safetensors": "new weights", "vocab.txt": "new vocab"}

# Swaps `new` in for `target`, pausing (after touching `marker`) at the chosen point: "before 1" or
# "before 2" (the two renames, exchange disabled), "removing" (the old folder's removal).
SCRIPT = textwrap.dedent(
    """
    import errno, importlib.util, os, shutil, sys, time
    spec = importlib.util.spec_from_file_location("atomic_folder", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    new, target, marker, pause, exchange = sys.argv[2:7]

    def paused():
        open(marker, "w").close()
        time.sleep(120)

    if exchange == "no":
        def no_exchange(source, target):
            raise OSError(errno.EINVAL, "no exchange here")
        module._exchange = no_exchange
    real_replace, calls = os.replace, []

    def replace(source, destination):
        calls.append(source)
        if pause == f"before {len(calls)}":
            paused()
        real_replace(source, destination)

    os.replace = replace
    if pause == "removing":
        shutil.rmtree = lambda path, *args, **kwargs: paused()
    module.replace_folder(new, target)
    """
)


def _write(folder, files):
    os.makedirs(folder)
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


def _read(folder):
    return {name: open(os.path.join(folder, name)).read() for name in os.listdir(folder)}


def _killed_swap(tmp_path, pause, exchange):
    target = str(tmp_path / "model_hf")
    _write(target, OLD)
    new = temporary_name(target)
    _write(new, NEW)
    marker = tmp_path / "paused"
    path = os.path.join(REPO_DIR, "bert_tf", "atomic_folder.py")
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, path, new, target, str(marker), pause, exchange],
        env={**os.environ, "PYTHONPATH": REPO_DIR},
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the swap never reached its pause"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    marker.unlink()
    return target


@pytest.mark.parametrize(
    "pause, exchange, after_kill",
    [
        ("before 1", "no", OLD),  # nothing moved yet
        ("before 2", "no", None),  # the old folder aside, the new one not yet in
        ("removing", "no", NEW),
        ("removing", "yes", NEW),  # exchanged in one call
    ],
)
def test_a_swap_killed_at_any_point_leaves_the_old_folder_or_the_new_one_whole(
    tmp_path, pause, exchange, after_kill
):
    target = _killed_swap(tmp_path, pause, exchange)
    if after_kill is not None:
        assert _read(target) == after_kill
    # The next run's start: leftovers removed, or the old folder put back.
    atomic_folder.remove_leftovers(target)
    assert sorted(os.listdir(tmp_path)) == ["model_hf"]
    assert _read(target) in (OLD, NEW)
    if after_kill is None:
        assert _read(target) == OLD


def test_an_old_file_that_cannot_be_removed_leaves_the_new_folder_whole(
    tmp_path, monkeypatch, caplog
):
    target = str(tmp_path / "model_hf")
    _write(target, OLD)
    new = temporary_name(target)
    _write(new, NEW)

    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", os.path.join(path, "config.json"))

    monkeypatch.setattr(atomic_folder.shutil, "rmtree", refused)
    with caplog.at_level(logging.WARNING, logger="absl"), caplog.at_level(logging.WARNING):
        atomic_folder.replace_folder(new, target)
    assert _read(target) == NEW  # no mix of old and new files
    (warning,) = [
        r.getMessage() for r in caplog.records if "could not be removed" in r.getMessage()
    ]
    assert "the next run removes it" in warning
    monkeypatch.undo()
    assert len(atomic_folder.remove_leftovers(target)) == 1
    assert sorted(os.listdir(tmp_path)) == ["model_hf"]


def test_only_this_module_s_own_names_count_as_leftovers(tmp_path):
    target = tmp_path / "model_hf"
    target.mkdir()
    mine = [
        ".model_hf.tmp-notes",
        "model_hf.tmp-0123456789ab",
        ".model_hf.tmp-0123456789abc",
        ".other.tmp-0123456789ab",
    ]
    for name in mine:
        (tmp_path / name).write_text("a user's")
    (tmp_path / ".model_hf.tmp-0123456789ab").mkdir()
    (tmp_path / ".model_hf.old-ba9876543210").mkdir()
    removed = atomic_folder.remove_leftovers(str(target))
    assert sorted(os.path.basename(p) for p in removed) == [
        ".model_hf.old-ba9876543210",
        ".model_hf.tmp-0123456789ab",
    ]
    assert sorted(os.listdir(tmp_path)) == sorted([*mine, "model_hf"])
