"""The project's scripts as a user runs them: `python <script>.py --flag=value ...` in a process of its own."""

import os
import re
import subprocess
import sys
import time

from bench import REPO_DIR


def command(script, **flags):
    """The command line of `script` (a top-level script's name, no .py) with `flags`; a None is left out."""
    arguments = [f"--{name}={value}" for name, value in flags.items() if value is not None]
    return [sys.executable, os.path.join(REPO_DIR, f"{script}.py"), *arguments]


def run(script, **flags):
    """Runs `script` with `flags`; returns its subprocess.CompletedProcess (stdout, stderr: the
    absl log, progress lines included).

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
    return result


def timed(script, **flags):
    """(wall seconds, run()'s result): what a user waits for, the process's start included."""
    start = time.perf_counter()
    result = run(script, **flags)
    return time.perf_counter() - start, result


def training_rates(stderr):
    """[(global step, examples/s)] of a run's training progress lines ("step 40/50  loss 0.41  lr
    2e-05  812.3 examples/s  ETA 0:00:03"), each line's rate over the steps since the one before."""
    lines = re.findall(r"step (\d+)/\d+ .* ([0-9.]+) examples/s", stderr)
    return [(int(step), float(rate)) for step, rate in lines]


def round_seconds(stderr, steps_per_round, batch_size):
    """The seconds of each round of `steps_per_round` steps of a run, from its progress lines (each
    line's rate covers the steps since the line before; a run logging at every round's end)."""
    seconds, previous, rounds = 0.0, 0, []
    for step, examples_per_second in training_rates(stderr):
        seconds += (step - previous) * batch_size / examples_per_second
        previous = step
        if step % steps_per_round == 0:
            rounds.append(seconds)
            seconds = 0.0
    return rounds


def eval_results(output_dir):
    """{name: float} of the eval_results.txt (`name = value` lines) a run's --do_eval wrote."""
    with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as reader:
        pairs = [line.split(" = ", 1) for line in reader if " = " in line]
    return {name.strip(): float(value) for name, value in pairs}


def model_flags(model_dir):
    """--bert_config_file, --vocab_file and --init_checkpoint of a Google release's folder."""
    return dict(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
    )


def test_predictions(output_dir):
    """The label of each row of the test_results.tsv a run's --do_predict wrote (its highest
    probability's, of the run's labels.txt)."""
    with open(os.path.join(output_dir, "labels.txt"), encoding="utf-8") as reader:
        labels = reader.read().splitlines()
    with open(os.path.join(output_dir, "test_results.tsv"), encoding="utf-8") as reader:
        rows = [[float(p) for p in line.split("\t")] for line in reader.read().splitlines()]
    return [labels[max(range(len(row)), key=row.__getitem__)] for row in rows]


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
    return printed.stdout.strip().splitlines()[-1]
