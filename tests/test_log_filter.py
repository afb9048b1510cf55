"""Quiet logs: no line over 300 characters at the default verbosity; --verbosity=1 shows them whole."""

import os
import subprocess
import sys
import textwrap

import pytest

from bert_tf.log_filter import MAX_LINE_CHARS, shorten

from conftest import REPO_DIR

# A script as the scripts run: absl's app, its flags parsed, then TensorFlow's own long line (as an
# export logs it: `signature_serialization ... input name(s) 29198, ...`) and a long multi-line record.
SCRIPT = textwrap.dedent(
    """
    import logging
    from absl import app
    from absl import logging as absl_logging
    from bert_tf.log_filter import shorten_long_lines

    def main(argv):
        shorten_long_lines()
        names = ", ".join(str(29198 + i) for i in range(400))
        absl_logging.info("Function `serving` contains input name(s) %s with unsupported characters", names)
        logging.getLogger("tensorflow").warning("tf: " + "x" * 1000)
        absl_logging.info("*** Example ***\\ntokens: %s\\nis_random_next: False", " ".join(["[MASK]"] * 200))
        absl_logging.info("a short line")

    app.run(main)
    """
)


def _run(*flags):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *flags],
        capture_output=True, text=True, timeout=120, cwd=REPO_DIR,
        env={**os.environ, "PYTHONPATH": REPO_DIR},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stderr.splitlines()


def test_no_line_is_longer_than_300_characters_at_the_default_verbosity():
    lines = _run()
    assert max(len(line) for line in lines) <= MAX_LINE_CHARS
    cut = [line for line in lines if "more characters; --verbosity=1 shows them]" in line]
    assert any("input name(s) 29198, 29199," in line for line in cut)  # absl's
    assert any("tf: xxxx" in line for line in cut)  # TensorFlow's logger's
    assert any(line.startswith("tokens: [MASK] [MASK]") for line in cut)  # a multi-line record's
    assert any(line.endswith("a short line") for line in lines)
    assert "is_random_next: False" in lines


def test_verbosity_1_shows_the_long_lines_whole():
    lines = _run("--verbosity=1")
    assert max(len(line) for line in lines) > 2000
    assert not any("more characters" in line for line in lines)


@pytest.mark.parametrize("length", [219, 220, 221, 5000])
def test_shorten_cuts_a_line_to_the_limit_and_counts_what_it_left_out(length):
    text = "".join(str(i % 10) for i in range(length))
    short = shorten(text, limit=220)
    if length <= 220:
        assert short == text
        return
    assert 219 <= len(short) <= 220  # a digit less in the count can leave one character spare
    kept, note = short.split("... [")
    assert text.startswith(kept)
    assert note == f"{length - len(kept)} more characters; --verbosity=1 shows them]"
