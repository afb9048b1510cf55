"""The trail: from each training script's `cli_main` to the first gradient in a few calls of our code.

docs/architecture.md promises a short, visible path from a command to the place its loss is
differentiated: at most MAX_CALLS calls of the project's own code, in at most MAX_FILES files. Each
script runs here in a fresh Python, as from the command line, on tiny data; the first
`tf.GradientTape.gradient` records the Python stack and ends the process. Calls count the frames of
the project's files (the top-level scripts and bert_tf/); a function autograph converted counts
once, as itself (its `tf__<name>` frame; the loop and branch bodies autograph cuts out of it are
parts of it, not calls).
"""

import json
import os
import subprocess
import sys

import pytest
from test_embedding import write_pairs
from test_run_classifier import write_sentiment_tsv
from test_run_ner import write_austen_ner
from test_run_pretraining import write_original_records
from test_run_squad import squad_file
from test_run_swag import write_swag

from conftest import FIXTURES_DIR, REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

MAX_CALLS = 10
MAX_FILES = 6

# Runs a script (argv[2:]) as `python <script>` does; at its first gradient, writes the project's
# frames of the stack, outermost first, as JSON to argv[1] and ends the process.
_RECORDER = r"""
import json, os, runpy, sys

import tensorflow as tf

REPO = os.path.realpath(os.getcwd())
OUT, SCRIPT = sys.argv[1], sys.argv[2]


def own(frame):
    # (file, function) of a frame of the project's code, or None.
    path = os.path.realpath(frame.f_globals.get("__file__") or "")
    relative = os.path.relpath(path, REPO)
    if relative.startswith("..") or not relative.endswith(".py"):
        return None
    if not (relative.startswith("bert_tf" + os.sep) or os.sep not in relative):
        return None
    name = frame.f_code.co_name
    if "__autograph_generated_file" in frame.f_code.co_filename:
        if not name.startswith("tf__"):
            return None  # a loop or branch body of the converted function below it
        name = name[len("tf__"):]
    return relative, name


def gradient(self, *args, **kwargs):
    frames, frame = [], sys._getframe(1)
    while frame is not None:
        found = own(frame)
        if found is not None and found[1] != "<module>":
            frames.append(found)
        frame = frame.f_back
    with open(OUT, "w") as f:
        json.dump(frames[::-1], f)
    os._exit(0)


tf.GradientTape.gradient = gradient
sys.argv = sys.argv[2:]
runpy.run_path(SCRIPT, run_name="__main__")
"""

TINY_CONFIG = str(SAMPLE_DIR / "bert_config_tiny.json")
VOCAB = str(SAMPLE_DIR / "vocab.txt")


def _flags(**values):
    return [f"--{name}={value}" for name, value in values.items()]


def _common(output_dir, **values):
    return _flags(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, output_dir=output_dir, do_train=True,
        max_seq_length=32, train_batch_size=8, **{"num_train_epochs": 1, **values},
    )  # fmt: skip


def _tiny_teacher(output_dir, data_dir):
    """A run_classifier.py folder of one training step: run_distillation.py's teacher."""
    from bert_tf.tasks import run_script
    from bert_tf.tasks.classification.task import SPEC, ClassifierSettings

    config = ClassifierSettings(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, output_dir=str(output_dir),
        task_name="tsv", data_dir=str(data_dir), text_a_column="0", label_column="1",
        max_seq_length=32, train_batch_size=16, num_train_epochs=1.0, do_train=True,
    )  # fmt: skip
    run_script(SPEC, config)
    return output_dir


def _commands(root, austen_sentences_path):
    """{script: its command line's flags}: every training script on tiny data in `root`."""
    import numpy as np

    write_sentiment_tsv(root / "tsv", sizes=(("train", 16), ("dev", 8), ("test", 4)))
    write_austen_ner(root / "ner", austen_sentences_path)
    write_swag(root / "swag", sizes=(("train", 16), ("val", 8), ("test", 4)))
    write_pairs(root / "pairs")
    squad = squad_file(root / "squad.json", version_2=False)
    with np.load(FIXTURES_DIR / "google_ckpt_tiny" / "reference.npz") as npz:
        records = write_original_records(root / "pretraining.tfrecord", dict(npz))
    teacher = _tiny_teacher(root / "teacher", root / "tsv")
    out = {
        name: str(root / f"out_{name}")
        for name in ("cls", "ner", "squad", "swag", "emb", "pre", "distil")
    }
    return {
        "run_classifier.py": _common(
            out["cls"], task_name="tsv", data_dir=root / "tsv", text_a_column=0, label_column=1
        ),
        "run_ner.py": _common(out["ner"], data_dir=root / "ner"),
        "run_squad.py": _common(
            out["squad"], train_file=squad, doc_stride=16, max_query_length=8, num_train_epochs=8
        ),
        "run_swag.py": _common(out["swag"], data_dir=root / "swag"),
        # The student's encoder, vocab and config come from the teacher's run folder.
        "run_distillation.py": _flags(
            teacher_dir=teacher,
            student_layers=1,
            output_dir=out["distil"],
            do_train=True,
            task_name="tsv",
            data_dir=root / "tsv",
            text_a_column=0,
            label_column=1,
            max_seq_length=32,
            train_batch_size=8,
            num_train_epochs=1,
        ),  # fmt: skip
        "run_embedding.py": _common(out["emb"], data_dir=root / "pairs"),
        "run_pretraining.py": _flags(
            bert_config_file=FIXTURES_DIR / "google_ckpt_tiny" / "bert_config.json",
            input_file=records,
            output_dir=out["pre"],
            do_train=True,
            max_seq_length=23,
            max_predictions_per_seq=5,
            train_batch_size=4,
            num_train_steps=2,
            num_warmup_steps=1,
        ),  # fmt: skip
    }


@pytest.fixture(scope="module")
def trails(tmp_path_factory, austen_sentences_path):
    """{script: [(file, function), ...]}: the stack of its first gradient, outermost call first."""
    root = tmp_path_factory.mktemp("trail")
    env = {**SUBPROCESS_ENV, "CUDA_VISIBLE_DEVICES": ""}
    started = {}
    for script, flags in _commands(root, austen_sentences_path).items():
        out = root / f"{script}.json"
        command = [sys.executable, "-c", _RECORDER, out, REPO_DIR / script, *flags]
        process = subprocess.Popen(
            [str(part) for part in command], cwd=REPO_DIR, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        started[script] = (process, out)
    recorded = {}
    for script, (process, out) in started.items():
        _, stderr = process.communicate(timeout=600)
        assert out.exists(), (
            f"{script} reached no gradient (exit {process.returncode})\n{stderr[-3000:]}"
        )
        recorded[script] = [tuple(frame) for frame in json.loads(out.read_text())]
    return recorded


SCRIPTS = [
    "run_classifier.py", "run_ner.py", "run_squad.py", "run_swag.py", "run_embedding.py",
    "run_pretraining.py", "run_distillation.py",
]  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_first_gradient_is_a_few_calls_from_the_script(trails, script):
    trail = trails[script]
    shown = "\n".join(f"  {path}: {function}" for path, function in trail)
    assert trail[0] == (script, "cli_main"), shown
    assert trail[-1][0] == os.path.join("bert_tf", "training", "steps.py"), shown
    files = list(dict.fromkeys(path for path, _ in trail))
    assert len(trail) <= MAX_CALLS, f"{len(trail)} calls > {MAX_CALLS}:\n{shown}"
    assert len(files) <= MAX_FILES, f"{len(files)} files > {MAX_FILES}: {files}\n{shown}"


def test_every_training_script_is_traced():
    scripts = sorted(path.name for path in REPO_DIR.glob("run_*.py"))
    assert scripts == sorted(SCRIPTS)
