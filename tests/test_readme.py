"""The README's blocks: each reads only what exists, the quick tour and the Python examples run as
written, and its links resolve.

A shell block's input paths (the flags that name files to read, evaluate_squad.py's arguments) must be
in the repo, named by a variable the reader sets ($BERT_BASE_DIR, ...), or written by an earlier block
(its --output_file / --output_dir / --export_dir, or a `> file` redirection); the same holds for the
shell blocks of docs/, each page after the README's. The tour (the block of /tmp/bert_tf_tour that
names no variable) runs, with /tmp/bert_tf_tour moved into the test's folder, and then every ```python
block of the README, with the same folder.
"""

import json
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
# Scripts that read --export_dir rather than write it, and the one that writes --vocab_file.
READS_EXPORT_DIR = {"scripts/classify_with_export.py"}
WRITES_VOCAB_FILE = {"build_vocab.py"}
TOUR_DIR = "/tmp/bert_tf_tour"


def shell_blocks(path=README):
    """The ```bash blocks of a markdown file (the README unless said), in order."""
    return re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.DOTALL)


def python_blocks():
    """The ```python blocks of the README, in order."""
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


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
            elif name == "vocab_file" and script in WRITES_VOCAB_FILE:
                writes.append(value)
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


def _check_reads(blocks, written, where):
    """Fails on a block that reads a path neither the repo holds nor `written` (updated as it goes)."""
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
                    f"{where} block {number} reads {path}, which neither the repo holds nor an "
                    f"earlier block writes: {' '.join(argv)}"
                )
            written.update(os.path.normpath(path.rstrip("/")) for path in writes if "$" not in path)


def test_every_block_reads_what_the_repo_or_an_earlier_block_holds():
    blocks = shell_blocks()
    assert len(blocks) >= 10
    _check_reads(blocks, set(), "README")


@pytest.mark.parametrize("page", sorted(path.name for path in (REPO_DIR / "docs").glob("*.md")))
def test_every_docs_block_reads_what_the_repo_the_readme_or_an_earlier_block_holds(page):
    written = set()
    _check_reads(shell_blocks(), written, "README")
    _check_reads(shell_blocks(REPO_DIR / "docs" / page), written, f"docs/{page}")


def _slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_of_the_readme_resolves():
    text = README.read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    anchors = {_slug(heading) for heading in re.findall(r"^#+ (.*)$", prose, re.MULTILINE)}
    links = re.findall(r"\]\(([^)\s]+)\)", prose)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue  # the web is not reachable from a test; Google's links are checked below
        path, _, anchor = link.partition("#")
        if path:
            assert (REPO_DIR / path).exists(), f"README links to {link}, which is not in the repo"
        else:
            assert anchor in anchors, (
                f"README links to #{anchor}: no such heading {sorted(anchors)}"
            )


def test_the_readme_links_google_s_checkpoints_and_every_docs_page():
    text = README.read_text(encoding="utf-8")
    # The releases as google-research/bert's README links them.
    for release in (
        "2018_10_18/uncased_L-12_H-768_A-12.zip", "2018_10_18/cased_L-12_H-768_A-12.zip",
        "2018_10_18/uncased_L-24_H-1024_A-16.zip", "2018_10_18/cased_L-24_H-1024_A-16.zip",
        "2018_11_23/multi_cased_L-12_H-768_A-12.zip", "2020_02_20/uncased_L-4_H-256_A-4.zip",
    ):  # fmt: skip
        assert f"](https://storage.googleapis.com/bert_models/{release})" in text, release
    for page in sorted((REPO_DIR / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"](docs/{page.name})" in text, f"README's docs index lacks docs/{page.name}"


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
    # The Python examples, on the tour's outputs.
    blocks = python_blocks()
    assert blocks, "the README shows no Python example"
    for block in blocks:
        result = subprocess.run(
            [sys.executable, "-c", block.replace(TOUR_DIR, str(tmp_path))],
            cwd=REPO_DIR, capture_output=True, text=True, timeout=600, env=SUBPROCESS_ENV,
        )  # fmt: skip
        assert result.returncode == 0, f"{block}\n{result.stderr[-3000:]}"


def _from_scratch_block():
    (block,) = [b for b in shell_blocks() if "build_vocab.py" in b and "/tmp/scratch" in b]
    return block


def test_the_from_scratch_path_learns_a_vocabulary_and_pretrains_without_a_checkpoint():
    block = _from_scratch_block()
    steps = [argv for argv in commands(block)]
    scripts = [argv[1] for argv in steps]
    assert scripts == [
        "build_vocab.py", "-c", "create_pretraining_data.py", "run_pretraining.py", "run_classifier.py"
    ]  # fmt: skip
    for argv in steps[2:4]:
        assert "--dynamic_masking=True" in argv, argv
    assert not any(arg.startswith("--init_checkpoint") for arg in steps[3])
    assert "--init_checkpoint=/tmp/scratch/pretraining/bert_model.ckpt" in steps[4]


@pytest.mark.slow
def test_the_from_scratch_block_runs_as_written(tmp_path):
    block = _from_scratch_block().replace("/tmp/scratch", str(tmp_path))
    env = {
        **SUBPROCESS_ENV,
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]),
    }
    result = subprocess.run(
        ["bash", "-euc", block], cwd=REPO_DIR, capture_output=True, text=True, timeout=900, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    vocab_size = len((tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines())
    config = json.loads((tmp_path / "bert_config.json").read_text(encoding="utf-8"))
    assert config["vocab_size"] == vocab_size < 30522
    assert (tmp_path / "pretraining" / "bert_model.ckpt.index").exists()
    assert "eval_accuracy" in (tmp_path / "classifier" / "eval_results.txt").read_text()


def test_the_docs_site_starts_with_the_readme_s_install_and_quick_tour():
    index = shell_blocks(REPO_DIR / "docs" / "index.md")
    readme = shell_blocks()
    tour = [b for b in readme if TOUR_DIR in b and "$" not in b]
    install = [b for b in readme if b.startswith("make demo") or "pip install -e ." in b]
    assert index[:3] == install + tour
    text = (REPO_DIR / "docs" / "index.md").read_text(encoding="utf-8")
    assert text.index("## Install") < text.index("## Quick start") < text.index("## The pages")


def test_no_install_line_names_the_package_as_if_it_were_on_the_index():
    needle = "pip install " + "bert_tf["  # split, so that this file does not hold it
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_DIR, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in tracked:
        path = REPO_DIR / name
        if (
            path.suffix in {".md", ".py", ".txt", ".cfg", ".toml", ".yml"}
            or path.name == "Makefile"
        ):
            text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
            assert needle not in text, f"{name}: the package is not on the index"
