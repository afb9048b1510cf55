"""docs/ builds as a site: `mkdocs build --strict` (mkdocs.yml), as `make docs` runs it.

Under --strict every warning fails the build; mkdocs.yml's `validation` makes warnings of a link to a
missing page or anchor and of a page left out of the navigation.
"""

import os
import subprocess
import sys

import pytest

from conftest import REPO_DIR

pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') builds the site")
pytest.importorskip("material", reason="the docs extra (pip install -e '.[docs]') builds the site")


def _build(tmp_path, docs_dir=None):
    """Runs `mkdocs build --strict` into tmp_path/site; returns the finished process."""
    config = REPO_DIR / "mkdocs.yml"
    if docs_dir is not None:  # the same configuration over another copy of the pages
        text = config.read_text(encoding="utf-8").replace("docs_dir: docs", f"docs_dir: {docs_dir}")
        config = tmp_path / "mkdocs.yml"
        config.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(tmp_path / "site")],
        cwd=REPO_DIR, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip


def test_the_docs_build_strictly(tmp_path):
    result = _build(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for page in (REPO_DIR / "docs").glob("*.md"):
        html = "index.html" if page.stem == "index" else f"{page.stem}/index.html"
        assert (tmp_path / "site" / html).is_file(), page.name


@pytest.mark.parametrize(
    ("page", "added", "warning"),
    [
        ("beam.md", "[a page](no_such_page.md)", "no_such_page.md"),
        ("beam.md", "[an anchor](serving.md#no-such-heading)", "no-such-heading"),
        ("not_in_the_nav.md", "# A page nobody listed", "not_in_the_nav.md"),
    ],
)
def test_a_broken_link_or_a_page_missing_from_the_nav_fails_the_build(
    tmp_path, page, added, warning
):
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in (REPO_DIR / "docs").glob("*.md"):
        (docs / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    with open(docs / page, "a", encoding="utf-8") as f:
        f.write(f"\n{added}\n")
    result = _build(tmp_path, docs_dir=docs)
    assert result.returncode == 1
    assert warning in result.stdout + result.stderr
