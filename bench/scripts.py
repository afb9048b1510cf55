"""The project's scripts as a user runs them: `python <script>.py --flag=value ...` in a process of its own."""

import os
import subprocess
import sys

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command(script, **flags):
    """The command line of `script` (a top-level script's name, no .py) with `flags`; a None is left out."""
    arguments = [f"--{name}={value}" for name, value in flags.items() if value is not None]
    return [sys.executable, os.path.join(REPO_DIR, f"{script}.py"), *arguments]


def run(script, **flags):
    """Runs `script` with `flags` and returns what it printed (stdout).

    Raises:
      RuntimeError: when it exits non-zero; the message holds the command and the end of its stderr.
    """
    line = command(script, **flags)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
    result = subprocess.run(
        line, capture_output=True, text=True, cwd=REPO_DIR, env=env, check=False
    )
    if result.returncode:
        raise RuntimeError(f"{' '.join(line)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.stdout


def save_encoder(model, folder):
    """Writes `model` (a bert_tf.BertModel) as a Google release does: folder/bert_model.ckpt and
    folder/bert_config.json. Returns (checkpoint prefix, config path)."""
    from bert_tf import save_google_checkpoint

    os.makedirs(folder, exist_ok=True)
    config_file = os.path.join(folder, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as writer:
        writer.write(model.config.to_json_string())
    return save_google_checkpoint(model, os.path.join(folder, "bert_model.ckpt")), config_file


def export_encoder(checkpoint, config_file, vocab_file, export_dir, **flags):
    """export_saved_model.py --model_type=encoder of a checkpoint (save_encoder's); `flags` are the
    script's other flags. Returns the version folder it wrote."""
    printed = run(
        "export_saved_model", model_type="encoder", init_checkpoint=checkpoint,
        bert_config_file=config_file, vocab_file=vocab_file, export_dir=export_dir, **flags,
    )  # fmt: skip
    return printed.strip().splitlines()[-1]
