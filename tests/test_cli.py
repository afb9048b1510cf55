"""The installed console commands: each one's --helpshort lists the flags of its script."""

import os
import shutil
import subprocess
import sys

import pytest

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
