"""The README's shell blocks: each reads only what exists, and the quick tour runs as written.

A block's input paths (the flags that name files to read, evaluate_squad.py's arguments) must be in the
repo, named by a variable the reader sets ($BERT_BASE_DIR, ...), or written by an earlier block (its
--output_file / --output_dir / --export_dir, or a `> file` redirection). Blocks that name no variable
run, with /tmp/bert_tf_tour moved into the test's folder.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO_DIR, SUBPROCESS_ENV

README = REPO_DIR / "README.md"
INPUT_FLAGS = {
    "input_file", "vocab_file", "bert_config_file", "init_checkpoint", "data_dir", "train_file",
    "predict_file", "hf_model_dir", "na-prob-file",
}  # fmt: skip
OUTPUT_FLAGS = {"output_file", "output_dir", "export_dir"}
# Scripts that read --export_dir rather than write it.
READS_EXPORT_DIR = {"scripts/classify_with_export.py"}
TOUR_DIR = "/tmp/bert_tf_tour"


def shell_blocks():
    """The ```bash blocks of the README, in order."""
    return re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def commands(block):
    """Each command of a block as an argument list (continuation lines joined, comments dropped)."""
    joined = block.replace("\\\n", " ")
    pending = ""
    for line in joined.splitlines():
        if not pending and (not line.strip() or line.strip().startswith("#")):
            continue
        pending += line + "\n"
        try:
            argv = shlex.split(pending, comments=True)
        except ValueError:  # a quoted argument spans lines (curl -d '{...}')
            continue
        pending = ""
        if argv:
            yield argv


def reads_and_writes(argv):
    """(paths read, paths written) by one command, as the README writes them."""
    reads, writes = [], []
    if ">" in argv:
        writes.append(argv[argv.index(">") + 1])
    if argv[0].startswith("bert-"):  # a console command: bert-run-pretraining = run_pretraining.py
        argv = ["python", argv[0].removeprefix("bert-").replace("-", "_") + ".py", *argv[1:]]
    if argv[0] != "python":
        return reads, writes
    script = argv[1]
    args = argv[2:]
    for index, arg in enumerate(args):
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            if not value and index + 1 < len(args) and not args[index + 1].startswith("--"):
                value = args[index + 1]  # evaluate_squad.py's "--na-prob-file FILE"
            if name == "export_dir" and script in READS_EXPORT_DIR:
                reads.append(value)
            elif name in INPUT_FLAGS:
                reads.extend(value.split(","))
            elif name in OUTPUT_FLAGS:
                writes.append(value)
        elif script == "evaluate_squad.py" and (index == 0 or not args[index - 1].startswith("--")):
            reads.append(arg)  # its positional data and predictions files
    return reads, writes


def _written_before(path, written):
    path = os.path.normpath(path)
    return any(path == w or path.startswith(w + os.sep) for w in written)


def test_every_block_reads_what_the_repo_or_an_earlier_block_holds():
    blocks = shell_blocks()
    assert len(blocks) >= 10
    written = set()
    for number, block in enumerate(blocks, 1):
        for argv in commands(block):
            reads, writes = reads_and_writes(argv)
            for path in reads:
                if "$" in path or not path:
                    continue  # a variable the reader sets (a release, GLUE_DIR, ...)
                # Only the repo's own files count: not /tmp leftovers, not ../shared (a clone lacks it).
                in_repo = not os.path.isabs(path) and not path.startswith("..")
                exists = in_repo and (REPO_DIR / path).exists()
                assert exists or _written_before(path, written), (
                    f"README block {number} reads {path}, which neither the repo holds nor an "
                    f"earlier block writes: {' '.join(argv)}"
                )
            written.update(os.path.normpath(path.rstrip("/")) for path in writes if "$" not in path)


def _tour_blocks():
    return [block for block in shell_blocks() if TOUR_DIR in block and "$" not in block]


@pytest.mark.slow
def test_the_quick_tour_runs_as_written(tmp_path):
    (tour,) = _tour_blocks()
    outputs = []
    for argv in commands(tour.replace(TOUR_DIR, str(tmp_path))):
        assert argv[0] == "python", argv
        result = subprocess.run(
            [sys.executable, *argv[1:]],
            cwd=REPO_DIR, capture_output=True, text=True, timeout=600, env=SUBPROCESS_ENV,
        )  # fmt: skip
        assert result.returncode == 0, f"{' '.join(argv)}\n{result.stderr[-3000:]}"
        outputs.append(result.stdout)
    assert (tmp_path / "pretraining" / "bert_model.ckpt.index").exists()
    assert "eval_accuracy" in (tmp_path / "classifier" / "eval_results.txt").read_text()
    rows = (tmp_path / "predicted" / "test_results.tsv").read_text().splitlines()
    assert len(rows) == 200  # sample_data/word_order/test.tsv's rows
    assert (tmp_path / "export" / "1" / "saved_model.pb").exists()
    labels = re.findall(r"\b(original|shuffled)\b", outputs[-1])
    assert len(labels) >= 2, outputs[-1]
