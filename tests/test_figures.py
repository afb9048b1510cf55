"""README's results table and docs/performance.md's are what bench/figures.py writes from the records
in bench/results/; every number links to a record heading that exists, and appears in that section.

No TensorFlow: bench.figures reads JSON and markdown only.
"""

import copy
import re
import sys

import pytest

from conftest import REPO_DIR

sys.path.insert(0, str(REPO_DIR))
from bench import figures  # noqa: E402

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _table_rows(text):
    start, end = text.index(figures.TABLE_BEGIN), text.index(figures.TABLE_END)
    return [
        line for line in text[start:end].splitlines() if line.startswith("| ") and "---" not in line
    ][1:]


def test_the_readme_and_performance_tables_and_the_records_are_what_the_generator_writes():
    for path, text in figures.expected().items():
        with open(path, encoding="utf-8") as reader:
            assert reader.read() == text, f"{path} differs: run .venv/bin/python -m bench.figures"


def _section_of(link):
    path, _, anchor = link.partition("#")
    target = REPO_DIR / path
    assert target.is_file(), f"README links to {link}: no such file"
    text = target.read_text(encoding="utf-8")
    headings = {figures.slug(h): h for h in re.findall(r"^## (.*)$", text, re.MULTILINE)}
    assert anchor in headings, f"README links to {link}: no heading with that anchor in {path}"
    return figures.section(text, headings[anchor])


def test_every_number_of_the_results_table_links_to_a_record_section_that_holds_it():
    rows = _table_rows((REPO_DIR / "README.md").read_text(encoding="utf-8"))
    assert len(rows) == len(figures.ROWS)
    for row in rows:
        links = LINK.findall(row)
        assert links, f"a results row links to no record: {row}"
        sections = {link: _section_of(link) for _, link in links}
        for shown, link in links:
            for value in NUMBER.findall(shown):
                assert value in sections[link], f"{value} ({shown}) is not in {link}'s section"
        unlinked = LINK.sub("", row)
        for value in NUMBER.findall(unlinked):
            assert any(value in s for s in sections.values()), (
                f"{value} of row {row[:60]} is in no record"
            )


def test_every_figure_is_transcribed_from_what_its_record_printed():
    for bench in figures.RECORD_FILES:
        path = REPO_DIR / "bench" / "results" / f"{bench}.json"
        text = path.with_suffix(".md").read_text(encoding="utf-8")
        for record in figures.load(path.stem):
            printed = figures.section(text, record["heading"]).split(figures.BLOCK_END, 1)[1]
            for figure in record["figures"]:
                for key in ("ours", "theirs", "ours_se"):
                    if figure.get(key) is not None:
                        assert figure[key] in printed, (
                            f"{path.name} {figure['id']} {key} {figure[key]}"
                        )
                for value in NUMBER.findall(figure.get("spread") or ""):
                    assert value in printed, f"{path.name} {figure['id']} spread {value}"


def _record(**changes):
    record = dict(quiet=True, rounds=3, cpu_kind="AMD EPYC with AVX512_BF16")
    record.update(changes)
    return record


def _speed(ours, theirs, kind="time"):
    return dict(id="x", label="x", kind=kind, ours=ours, theirs=theirs)


@pytest.mark.parametrize(
    ("record", "figure", "expected"),
    [
        (_record(), _speed("50.27", "67.23"), "win"),
        (_record(), _speed("67.23", "50.27"), "loss"),
        (_record(), _speed("67.23", "50.27", kind="throughput"), "win"),
        (_record(quiet=False), _speed("50.27", "67.23"), "not judged: a loaded run"),
        (
            _record(quiet=None),
            _speed("50.27", "67.23"),
            "not judged: whether the run was quiet is not recorded",
        ),
        (_record(rounds=2), _speed("50.27", "67.23"), "not judged: 2 rounds, fewer than 3"),
        (_record(cpu_kind="unknown"), _speed("50.27", "67.23"), "not judged: CPU kind"),
    ],
)
def test_a_speed_is_judged_only_from_a_quiet_run_of_three_rounds_on_a_named_cpu(
    record, figure, expected
):
    assert figures.verdict(record, figure).startswith(expected)


@pytest.mark.parametrize(
    ("ours", "se", "theirs", "expected"),
    [("75.67", "1.07", "62.00", "win"), ("64.54", "1.63", "61.48", "tie"), ("0.6631", "0.0062", "0.6766", "loss"),
     ("79.17", "0.88", "77.50", "tie"), ("79.17", None, "77.50", "not judged: no standard error")],
)  # fmt: skip
def test_accuracy_is_a_win_or_loss_only_beyond_two_standard_errors(ours, se, theirs, expected):
    figure = dict(id="a", label="a", kind="accuracy", ours=ours, theirs=theirs, ours_se=se)
    assert figures.verdict(_record(quiet=False, rounds=None), figure) == expected


def test_a_ratio_is_ours_over_theirs_and_says_its_direction():
    figure = _speed("33.08", "42.19")
    record = dict(_record(), heading="Record: x", figures=[figure])
    text = figures._group_text("latency", record, ("x",), "")
    assert "[0.78×](bench/results/latency.md#record-x)" in text
    assert "ours ÷ theirs in time, lower is faster" in text


def test_a_changed_record_makes_the_readme_stale(monkeypatch):
    original = figures.load
    changed = copy.deepcopy(original("latency"))
    changed[0]["figures"][0]["ours"] = "43.08"
    monkeypatch.setattr(
        figures, "load", lambda bench: changed if bench == "latency" else original(bench)
    )
    readme = str(REPO_DIR / "README.md")
    assert figures.expected()[readme] != (REPO_DIR / "README.md").read_text(encoding="utf-8")


def test_every_readme_link_into_a_record_resolves_and_its_numbers_are_there():
    text = (REPO_DIR / "README.md").read_text(encoding="utf-8")
    links = [
        (shown, link) for shown, link in LINK.findall(text) if link.startswith("bench/results/")
    ]
    assert len(links) > len(figures.ROWS)
    for shown, link in links:
        if "#" not in link:
            continue
        section = _section_of(link)
        for value in NUMBER.findall(shown):
            assert value in section, (
                f"README shows {shown} linked to {link}, whose section lacks {value}"
            )
