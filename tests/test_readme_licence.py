"""The licence and the citation: LICENSE is Apache-2.0 as google-research/bert's, setup.py declares it,
CITATION.cff is valid CFF 1.2.0 that cites the BERT paper, and the README says both."""

import ast
import shutil
import subprocess

import pytest
import yaml

from conftest import REPO_DIR

# Sentences of the Apache License 2.0 (https://www.apache.org/licenses/LICENSE-2.0.txt), one from each
# part, so a truncated or different licence fails.
APACHE_2_SENTENCES = (
    "Apache License\n                           Version 2.0, January 2004",
    "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
    '"Derivative Works" shall mean any work',
    "3. Grant of Patent License.",
    "4. Redistribution.",
    "7. Disclaimer of Warranty.",
    "9. Accepting Warranty or Additional Liability.",
    "END OF TERMS AND CONDITIONS",
    "APPENDIX: How to apply the Apache License to your work.",
)


def test_license_holds_the_whole_apache_2_text():
    text = (REPO_DIR / "LICENSE").read_text(encoding="utf-8")
    for sentence in APACHE_2_SENTENCES:
        assert sentence in text, sentence
    assert 10_000 < len(text) < 12_000  # the licence is 11,357 characters


def _setup_keywords():
    tree = ast.parse((REPO_DIR / "setup.py").read_text(encoding="utf-8"))
    (call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"
    ]
    return {keyword.arg: keyword.value for keyword in call.keywords}


def test_setup_declares_the_apache_2_licence():
    keywords = _setup_keywords()
    assert ast.literal_eval(keywords["license"]) == "Apache-2.0"
    classifiers = ast.literal_eval(keywords["classifiers"])
    assert "License :: OSI Approved :: Apache Software License" in classifiers


def _citation():
    return yaml.safe_load((REPO_DIR / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_is_cff_1_2_0_and_cites_the_bert_paper():
    citation = _citation()
    assert citation["cff-version"] == "1.2.0"
    assert citation["license"] == "Apache-2.0"
    for key in ("message", "title", "authors"):
        assert citation[key], key
    paper = citation["preferred-citation"]
    assert paper["title"].startswith("BERT: Pre-training of Deep Bidirectional Transformers")
    assert [a["family-names"] for a in paper["authors"]] == ["Devlin", "Chang", "Lee", "Toutanova"]
    assert paper["year"] == 2019
    assert "NAACL" in paper["conference"]["name"]
    assert any(i["value"] == "arXiv:1810.04805" for i in paper["identifiers"])


@pytest.mark.skipif(
    shutil.which("cffconvert") is None and not (REPO_DIR / ".venv/bin/cffconvert").exists(),
    reason="cffconvert is not installed (pip install cffconvert)",
)
def test_cffconvert_validates_the_citation():
    binary = shutil.which("cffconvert") or str(REPO_DIR / ".venv/bin/cffconvert")
    result = subprocess.run(
        [binary, "--validate", "-i", str(REPO_DIR / "CITATION.cff")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_names_the_licence_and_the_citation():
    text = (REPO_DIR / "README.md").read_text(encoding="utf-8")
    assert "Apache-2.0" in text and "](LICENSE)" in text
    assert "](CITATION.cff)" in text and "Devlin" in text
