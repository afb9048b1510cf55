"""bench/run_all.py's report: one run's steps above the appendix, which every run keeps word for word."""

import importlib.metadata
import json
import os
import re
import subprocess
import sys

from bench import report

from conftest import REPO_DIR, SUBPROCESS_ENV

BENCH_DIR = os.path.join(REPO_DIR, "bench")

STDOUT = """CPU: Some CPU, 2 logical cores
load average 1.00 / 1.00 / 1.00 (1 / 5 / 15 min)

| task | runner | examples/s |
|---|---|---|
| one | ours | 10.0 |
sst2_like: ours vs peer: training 2.00x
mrpc_like: ours vs peer: training 1.50x
"""


def test_tables_stay_tables_and_other_lines_are_fenced_verbatim():
    markdown = report.output_to_markdown(STDOUT)
    assert markdown == (
        "```\nCPU: Some CPU, 2 logical cores\nload average 1.00 / 1.00 / 1.00 (1 / 5 / 15 min)\n```"
        "\n\n| task | runner | examples/s |\n|---|---|---|\n| one | ours | 10.0 |\n\n"
        "```\nsst2_like: ours vs peer: training 2.00x\nmrpc_like: ours vs peer: training 1.50x\n```"
    )


def _run(**changes):
    run = dict(
        command=".venv/bin/python bench/run_all.py --only=finetune", started="2026-11-26 22:00 UTC",
        finished="2026-11-26 22:40 UTC", commit="abc1234", versions="tensorflow 2.21.0",
        machine="CPU: Some CPU", load_before="load average 0.10", load_after="load average 2.00",
    )  # fmt: skip
    run.update(changes)
    return run


def _step(label, returncode=0):
    return dict(
        label=label, command=f"bench/{label}.py --x=1", output=STDOUT, load_before="load 1",
        load_after="load 2", seconds=12.4, returncode=returncode,
    )  # fmt: skip


def test_render_names_the_run_and_each_step_under_its_command_in_order():
    text = report.render(_run(), [_step("first"), _step("second", returncode=3)], ["serving"])
    for fact in ("2026-11-26 22:00 UTC", "abc1234", "tensorflow 2.21.0", "load average 0.10"):
        assert fact in text
    assert "Not in this run: serving." in text
    first, second = text.index("## 1. first"), text.index("## 2. second")
    assert (
        first < text.index("`bench/first.py --x=1` (12 s;") < text.index("| one | ours |") < second
    )
    assert "**failed with exit 3**" in text[second:]
    assert "failed" not in text[first:second]


def test_a_run_rewrites_its_part_and_keeps_the_appendix(tmp_path):
    results = tmp_path / "RESULTS.md"
    old_appendix = f"{report.APPENDIX_MARKER}\n\n## Older runs\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    results.write_text("# Benchmark results\n\nan old run's tables\n\n" + old_appendix)
    assert report.appendix(str(results)) == old_appendix
    assert report.appendix(str(tmp_path / "absent.md")) == ""

    # The whole writer, as `make bench` runs it, on a step that prints a table without TensorFlow.
    step = tmp_path / "bench_fake.py"  # run as `python -m bench_fake`, from PYTHONPATH
    step.write_text(
        "print('| x | y |')\nprint('|---|---|')\nprint('| 1 | 2 |')\nprint('ratio 2.0x')\n"
    )
    code = (
        "import sys; sys.argv = sys.argv[:1] + sys.argv[2:]; from bench import run_all; "
        "run_all.STEPS = {'fake': [('a fake step', 'bench_fake', [], [])]}; "
        "sys.exit(run_all.main())"
    )
    command = [sys.executable, "-c", code, "-", f"--results={results}", f"--log={tmp_path / 'log'}"]
    env = {**SUBPROCESS_ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_DIR)])}
    subprocess.run(command, cwd=REPO_DIR, env=env, check=True, timeout=60, capture_output=True)
    text = results.read_text()
    assert "an old run's tables" not in text
    assert text.endswith(old_appendix)
    assert "## 1. a fake step" in text and "| 1 | 2 |" in text and "```\nratio 2.0x\n```" in text
    # Beside it, the same run as a JSON record: the fields bench/figures.py's rule reads.
    (record,) = json.loads((tmp_path / "RESULTS.json").read_text())["records"]
    assert record["heading"] == "1. a fake step" and record["tables"] == [[["x", "y"], ["1", "2"]]]
    assert record["quiet"] is None  # not declared with --quiet: unknown, so no speed is judged
    for key in (
        "command",
        "commit",
        "cpu_model",
        "cpu_flags",
        "cpu_kind",
        "load_before",
        "load_after",
    ):
        assert record[key] is not None, key

    # --quick is a smoke run: the report stays as it was.
    before = results.read_text()
    subprocess.run(
        command + ["--quick"], cwd=REPO_DIR, env=env, check=True, timeout=60, capture_output=True
    )
    assert results.read_text() == before


def test_the_cpu_kind_is_one_the_rule_judges_only_with_its_flag():
    assert report.cpu_kind("AMD EPYC 9B14", {"avx512_bf16"}) == "AMD EPYC with AVX512_BF16"
    assert report.cpu_kind("AMD EPYC 7B12", {"avx2"}) == "AMD EPYC 7B12"
    assert report.cpu_kind("Intel(R) Xeon(R) Processor", {"amx_bf16"}) == "Intel Xeon with AMX"


def _installed_versions():
    """{normalized distribution name: version} of every distribution this Python sees."""
    return {
        re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower(): dist.version
        for dist in importlib.metadata.distributions()
    }


def test_versions_name_what_is_installed_and_what_is_not(monkeypatch):
    # A name no distribution has, so that "absent" is checked whichever peers this venv holds.
    missing = "bert-tf-no-such-distribution"
    monkeypatch.setattr(report, "PEERS", (*report.PEERS, missing))
    installed = _installed_versions()
    assert "tensorflow" in installed and missing not in installed
    printed = [entry.split(" ", 1) for entry in report.versions().split(", ")]
    assert [name for name, _ in printed] == list(report.PEERS)
    for name, version in printed:
        assert version == installed.get(name, "absent"), name


def test_bench_serving_exports_and_times_every_path_on_the_sample_text(tmp_path):
    # A step the report runs must not break unseen when the code under it changes (it once did: the
    # export's signature changed and only `make bench` found out).
    repo_dir = os.path.dirname(BENCH_DIR)
    result = subprocess.run(
        [
            sys.executable, "-m", "bench.bench_serving", "--models=bert_tiny",
            "--batch_sizes=1,4", "--calls=5", "--threads=1",
            f"--input_file={os.path.join(repo_dir, 'sample_data', 'sample_text.txt')}",
        ],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**SUBPROCESS_ENV, "TMPDIR": str(tmp_path)},  # its exports go to a temporary folder
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [
        line.split(" | ") for line in result.stdout.splitlines() if line.startswith("| bert_tiny")
    ]
    assert [row[1] for row in rows] == ["1", "4"]
    for row in rows:  # every path timed: p50 (p95) in ms, the overhead and the padding ratio
        assert all(cell.endswith(")") and float(cell.split()[0]) > 0 for cell in row[3:7])
        assert row[-1].rstrip(" |").endswith("x")


def test_bench_latency_times_the_export_one_request_at_a_time(tmp_path):
    # make bench's batch-1 step: a worker process per runner; peers not installed say "skipped".
    repo_dir = os.path.dirname(BENCH_DIR)
    result = subprocess.run(
        [
            sys.executable, "-m", "bench.bench_latency", "--model=bert_tiny",
            "--shapes=1x8,2x16", "--calls=3", "--threads=1", "--runners=bert_tf",
            f"--input_file={os.path.join(repo_dir, 'sample_data', 'sample_text.txt')}",
        ],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**SUBPROCESS_ENV, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [
        line.split(" | ") for line in result.stdout.splitlines() if line.startswith("| bert_tf")
    ]
    # Back to back times the text path; taking turns, the text and the ids paths.
    assert [row[0] for row in rows] == [
        "| bert_tf text (serving_default)",
        "| bert_tf text (serving_default)",
        "| bert_tf ids (serve_ids)",
    ]
    for row in rows:  # p50 / p95 in ms, no "(S=...)": every text had exactly the asked wordpieces
        cells = [cell.rstrip(" |") for cell in row[1:]]
        assert len(cells) == 2 and all("S=" not in cell for cell in cells), row
        assert all(0 < float(c.split(" / ")[0]) <= float(c.split(" / ")[1]) for c in cells), row
    assert "tokenization's share of bert_tf text p50" in result.stdout
    assert not list(tmp_path.glob("bench_latency_*"))  # its export removed (420 MB at BERT-base)


def test_texts_of_length_give_exactly_the_asked_wordpieces():
    from bench import bench_latency
    from bert_tf.tokenization import FullTokenizer

    repo_dir = os.path.dirname(BENCH_DIR)
    tokenizer = FullTokenizer(os.path.join(repo_dir, "sample_data", "vocab.txt"))
    words = (
        "Unbelievably, Mr. Knightley's disposition was quite extraordinarily agreeable .".split()
    )
    texts = bench_latency.texts_of_length(words, tokenizer, 9, count=4)
    assert [len(tokenizer.tokenize(text)) for text in texts] == [7, 7, 7, 7]
    assert len(set(texts)) > 1  # consecutive words, not one text repeated
