"""bench/ measures what a user gets: it imports only what a user imports (bert_tf's public names,
the original BERT's public modules, the scripts), and it stays a fifth of the project's code at most."""

import ast
import subprocess

import pytest

from conftest import REPO_DIR

BENCH_DIR = REPO_DIR / "bench"
# The modules a user of google-research/bert imports by name; bert_tf's package itself gives
# only the names in its __all__.
PUBLIC_MODULES = {"bert_tf.modeling", "bert_tf.tokenization", "bert_tf.optimization"}
MAX_BENCH_SHARE = 0.20  # of the code outside tests/


def _public_names():
    """bert_tf.__all__, read from bert_tf/__init__.py without importing TensorFlow."""
    tree = ast.parse((REPO_DIR / "bert_tf" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError("bert_tf/__init__.py has no __all__")


def _private_imports(source, public_names):
    """The imports of bert_tf in `source` that a user could not write: [(line, what)]."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "bert_tf":
                names = [
                    alias.name if alias.name in public_names else f"bert_tf.{alias.name}"
                    for alias in node.names
                ]
            else:
                names = [node.module]
        else:
            continue
        for name in names:
            if name.startswith("bert_tf.") and name not in PUBLIC_MODULES:
                found.append((node.lineno, name))
    return found


def _lines(paths):
    return sum(len((REPO_DIR / path).read_bytes().splitlines()) for path in paths)


def test_bench_imports_only_what_a_user_imports():
    public_names = _public_names()
    private = {
        f"{path.relative_to(REPO_DIR)}:{line}": name
        for path in sorted(BENCH_DIR.rglob("*.py"))
        for line, name in _private_imports(path.read_text(encoding="utf-8"), public_names)
    }
    assert not private, (
        "bench/ imports bert_tf's internals; use bert_tf's public names, bert_tf.modeling, "
        f"bert_tf.tokenization, bert_tf.optimization, or run a script with its flags: {private}"
    )


@pytest.mark.parametrize(
    "source, private",
    [
        ("from bert_tf import BertConfig, modeling, tokenization", []),
        ("from bert_tf.modeling import BertModel\nimport bert_tf.tokenization", []),
        ("import run_classifier\nfrom bert_tf import optimization", []),
        ("from bert_tf import file_io", [(1, "bert_tf.file_io")]),
        ("def f():\n    from bert_tf.tasks.classification import task", [(2, "bert_tf.tasks.classification")]),
        ("import bert_tf.checkpoints as checkpoints", [(1, "bert_tf.checkpoints")]),
    ],
)  # fmt: skip
def test_the_import_rule_tells_public_from_private_imports(source, private):
    assert _private_imports(source, _public_names()) == private


def test_bench_is_at_most_a_fifth_of_the_code_outside_tests():
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=REPO_DIR, capture_output=True, text=True, check=False
    )
    if listed.returncode:
        pytest.skip(f"not a git checkout: {listed.stderr.strip()}")
    code = [
        p for p in listed.stdout.split() if not p.startswith("tests/") and (REPO_DIR / p).exists()
    ]
    bench = [p for p in code if p.startswith("bench/")]
    share = _lines(bench) / _lines(code)
    assert share <= MAX_BENCH_SHARE, (
        f"bench/ is {_lines(bench)} of {_lines(code)} lines of code outside tests/ ({share:.1%}); "
        f"at most {MAX_BENCH_SHARE:.0%}"
    )
