"""The TensorFlow runtimes TF Serving builds in, each as a venv of its own, built once and reused.

TF Serving links a TensorFlow core and a TensorFlow Text into its binary. Since no TF Serving binary is
reachable here, tests/test_serving_runtimes.py loads every export kind in a venv holding only those
two releases (and what pip brings with them):

- "tf2.20": tensorflow 2.20.0 + tensorflow-text 2.20.0, as in TF Serving 2.20.0;
- "tf2.12": tensorflow 2.12.1 + tensorflow-text 2.12.1: TF Serving 2.19 and earlier build in
  tensorflow-text 2.12.1, which installs only beside TensorFlow 2.12, the oldest core of that line.

Each venv lives in ~/.cache/bert_tf/serving_envs/<name>-py<X.Y>-<hash of its pins>/ (or under
$BERT_TF_SERVING_ENVS), outside the repo: the pins name the folder, so changing them builds a new one.
A build holds a lock file, so two pytest-xdist workers (or `make test` and a test) never build one
venv twice, and a folder counts as built only once its versions.json is written (a build killed half
way is redone; a failed one is removed). Each takes 2.3 GB (du -sh); the two of this
machine took 60 s and 113 s to build on 2026-11-27 (their folders' file times; README, "Where it is tested").

Usage: python scripts/serving_envs.py [NAME ...]  (default: all; prints each venv's python)
"""

import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

RUNTIMES = {
    "tf2.20": ("tensorflow==2.20.0", "tensorflow-text==2.20.0"),
    "tf2.12": ("tensorflow==2.12.1", "tensorflow-text==2.12.1"),
}
CACHE_DIR = pathlib.Path(
    os.environ.get("BERT_TF_SERVING_ENVS", pathlib.Path.home() / ".cache/bert_tf/serving_envs")
)
VERSIONS_FILE = "versions.json"  # written last: {"tensorflow": "2.20.0", "tensorflow-text": ...}
# pip's install of a runtime (a ~600 MB download) stops here rather than hang a CI run.
INSTALL_TIMEOUT_SECONDS = 1200


def env_dir(name):
    """The folder of runtime `name`'s venv, named by this Python's version and the pins."""
    pins = " ".join(RUNTIMES[name])
    digest = hashlib.sha256(pins.encode()).hexdigest()[:10]
    return CACHE_DIR / f"{name}-py{sys.version_info[0]}.{sys.version_info[1]}-{digest}"


def env_python(name):
    return env_dir(name) / "bin" / "python"


def installed_versions(name):
    """{"tensorflow": ..., "tensorflow-text": ...} of a built venv, or None if it is not built."""
    path = env_dir(name) / VERSIONS_FILE
    return json.loads(path.read_text()) if path.exists() else None


def _run(command):
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, command))} failed (exit {result.returncode}): "
            f"{result.stderr.strip()[-2000:]}"
        )
    return result.stdout


def _build(name, folder):
    shutil.rmtree(folder, ignore_errors=True)  # what a killed build left
    _run([sys.executable, "-m", "venv", folder])
    python = folder / "bin" / "python"
    _run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *RUNTIMES[name]]
    )
    names = [pin.split("==")[0] for pin in RUNTIMES[name]]
    report = _run(
        [
            python, "-c",
            "import json, sys; from importlib.metadata import version; "
            "print(json.dumps({n: version(n) for n in sys.argv[1:]}))", *names,
        ]
    )  # fmt: skip
    temp = folder / f"{VERSIONS_FILE}.tmp"
    temp.write_text(report)
    os.replace(temp, folder / VERSIONS_FILE)


def ensure(name):
    """Builds runtime `name`'s venv unless built; returns the path of its python.

    Raises:
      RuntimeError: naming the command that failed (no Python for the pins, no registry, ...).
    """
    folder = env_dir(name)
    if installed_versions(name) is None:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        with open(CACHE_DIR / f"{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process's build: wait for it, then reuse it
            if installed_versions(name) is None:
                try:
                    _build(name, folder)
                except BaseException:
                    shutil.rmtree(folder, ignore_errors=True)  # 2.3 GB not left half-built
                    raise
    return env_python(name)


def main(names):
    for name in names or RUNTIMES:
        if name not in RUNTIMES:
            print(f"error: unknown runtime {name!r}; known: {', '.join(RUNTIMES)}")
            return 1
        started = time.monotonic()
        try:
            python = ensure(name)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"error: serving runtime {name}: {error}")
            return 1
        print(
            f"{name}: {python} ({json.dumps(installed_versions(name))}, "
            f"{time.monotonic() - started:.0f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
