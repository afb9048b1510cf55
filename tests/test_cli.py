"""The installed console commands: each one's --helpshort lists the flags of its script."""

import os
import shutil
import subprocess
import sys

import pytest

from bert_tf.tasks import RUNS, TASKS

BIN_DIR = os.path.dirname(sys.executable)


@pytest.mark.parametrize(
    "command, flags",
    [
        ("bert-create-pretraining-data", ["input_file", "dupe_factor", "num_workers"]),
        ("bert-run-pretraining", ["bert_config_file", "num_train_steps", "jit_compile"]),
        ("bert-convert-checkpoint", ["hf_model_dir", "output_dir", "overwrite"]),
    ],
)
def test_console_command_helpshort_lists_its_flags(command, flags):
    path = shutil.which(command, path=BIN_DIR) or shutil.which(command)
    if path is None:
        pytest.skip(f"{command} is not installed (pip install -e . creates it)")
    result = subprocess.run(
        [path, "--helpshort"], capture_output=True, text=True, timeout=120, check=False
    )
    # absl exits with status 1 after printing usage.
    assert "USAGE" in result.stdout, result.stderr[-2000:]
    listed = result.stdout.replace("--[no]", "--")  # boolean flags are shown as --[no]name
    for flag in flags:
        assert f"--{flag}:" in listed, f"{command} --helpshort does not list --{flag}"


def _fine_tuning_scripts():
    """{model_type: script}: the top-level run_*.py of each registered task (its module's TASK)."""
    import importlib

    from conftest import REPO_DIR

    scripts = {}
    for path in sorted(REPO_DIR.glob("run_*.py")):
        task = getattr(importlib.import_module(path.stem), "TASK", None)
        if task is not None:
            scripts[task.name] = path.name
    return scripts


# The fine-tuning scripts by the task they run (bert_tf.tasks.make_run): a variant's flags are its
# task's script's.
FINE_TUNING_SCRIPTS = _fine_tuning_scripts()
# Every other script with its settings dataclass: --helpshort must list each of its flags.
SCRIPTS = [
    ("run_pretraining.py", "bert_tf.tasks.pretraining", "PretrainingSettings"),
    ("build_vocab.py", "bert_tf.vocabulary", "VocabSettings"),
    ("create_pretraining_data.py", "bert_tf.data.pretraining.writer", "CreateSettings"),
    ("extract_features.py", "bert_tf.tasks.extract_features_run", "ExtractSettings"),
    ("export_saved_model.py", "bert_tf.tasks.exporting", "ExportSettings"),
    ("convert_checkpoint.py", "bert_tf.formats.convert", "ConvertSettings"),
    ("batch_predict.py", "bert_tf.beam.batch_prediction", "BatchPredictSettings"),
]


@pytest.fixture(scope="module")
def helpshort():
    """{script: (stdout, stderr)} of `python <script> --helpshort`, run side by side."""
    from conftest import REPO_DIR, SUBPROCESS_ENV

    env = {key: value for key, value in SUBPROCESS_ENV.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    started = {
        script: subprocess.Popen(
            [sys.executable, os.path.join(REPO_DIR, script), "--helpshort"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        for script in [*(script for script, _, _ in SCRIPTS), *FINE_TUNING_SCRIPTS.values()]
    }
    return {script: process.communicate(timeout=300) for script, process in started.items()}


@pytest.mark.parametrize("script, module, config", SCRIPTS, ids=[s for s, _, _ in SCRIPTS])
def test_helpshort_lists_every_flag_of_the_script(helpshort, script, module, config):
    import importlib

    from bert_tf.settings import flag_fields

    fields = flag_fields(getattr(importlib.import_module(module), config))
    stdout, stderr = helpshort[script]
    listed = stdout.replace("--[no]", "--")
    missing = [field.name for field in fields if f"--{field.name}:" not in listed]
    assert not missing, f"{script} --helpshort does not list {missing}\n{stderr[-2000:]}"
    assert len(fields) >= 3


def test_every_registered_task_has_its_script():
    tasks = sorted(
        name for name, spec in TASKS.items() if spec.settings_class and not spec.variant_of
    )
    assert sorted(FINE_TUNING_SCRIPTS) == tasks and len(tasks) >= 5
    assert sorted(RUNS) == sorted(name for name, spec in TASKS.items() if spec.settings_class)


@pytest.mark.parametrize("model_type", sorted(RUNS))
def test_helpshort_lists_every_flag_of_each_task_and_variant(helpshort, model_type):
    from bert_tf.settings import flag_fields

    spec = TASKS[model_type]
    script = FINE_TUNING_SCRIPTS[(spec.variant_of or spec).name]
    fields = flag_fields(spec.settings_class)
    stdout, stderr = helpshort[script]
    listed = stdout.replace("--[no]", "--")
    missing = [field.name for field in fields if f"--{field.name}:" not in listed]
    assert not missing, f"{script} --helpshort does not list {missing}\n{stderr[-2000:]}"
    assert len(fields) >= 3


@pytest.mark.skipif(
    any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0")), reason="a GPU is present"
)
def test_no_cuda_errors_are_printed_on_a_machine_without_a_gpu(helpshort):
    for script, (_, stderr) in helpshort.items():
        assert "cuInit" not in stderr and "cuda" not in stderr.lower(), (
            f"{script}: {stderr[-2000:]}"
        )


@pytest.mark.parametrize("verbosity", [None, 1])
def test_a_script_prints_no_line_over_300_characters_unless_verbosity_asks(tmp_path, verbosity):
    # An export logs TensorFlow's signature_serialization lines, each listing every input name.
    from conftest import REPO_DIR, SAMPLE_DIR

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO_DIR)
    command = [
        sys.executable, str(REPO_DIR / "run_classifier.py"), "--task_name=tsv", "--has_header",
        f"--data_dir={SAMPLE_DIR / 'word_order'}", "--text_a_column=sentence",
        "--label_column=label", f"--vocab_file={SAMPLE_DIR / 'vocab.txt'}",
        f"--bert_config_file={SAMPLE_DIR / 'bert_config_tiny.json'}", "--do_train=True",
        "--max_seq_length=16", "--num_train_epochs=0.02", "--train_batch_size=32",
        f"--output_dir={tmp_path / 'out'}", f"--export_dir={tmp_path / 'export'}",
    ]  # fmt: skip
    if verbosity is not None:
        command.append(f"--verbosity={verbosity}")
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (result.stdout + result.stderr).splitlines()
    long_lines = [line for line in lines if len(line) > 300]
    if verbosity is None:
        assert not long_lines, long_lines[0][:400]
        assert any(line.endswith("--verbosity=1 shows them]") for line in lines)
    else:
        assert any("signature_serialization" in line for line in long_lines)
