"""bench/results/run_all.md as one report of one `bench/run_all.py` run, above a dated appendix it keeps,
and bench/results/run_all.json beside it: the same run as a machine-readable record.

The file has two parts. Above `APPENDIX_MARKER`: what the last run printed, every step in the order of
run_all.STEPS (the order of README's performance table), each step's command above its output,
with the machine, date, commit and load of the run at the top. run_all.py rewrites this part and
nothing else. From the marker on: older results and accuracy studies (each with its own command,
machine and date), kept verbatim by every run.

A step's output becomes markdown line by line: the tables the benches print (lines starting with
"|") stay tables; every other run of lines (machine header, ratios, notes) goes into a fenced
block, so that nothing is reflowed or reinterpreted.

The JSON record (`records()`) holds, for each step, what bench/figures.py's rule reads: the command,
commit, CPU model, flags and kind, the load before and after, whether the run was declared quiet
(`run_all.py --quiet`; unknown otherwise), the rounds its command asked for, and its printed tables,
row by row, as the figures with their spread.
"""

import importlib.metadata
import json
import re
import subprocess

from bench import machine

APPENDIX_MARKER = "<!-- APPENDIX: bench/run_all.py keeps everything from here on -->"
PEERS = ("tensorflow", "keras", "keras-hub", "torch", "transformers")


def output_to_markdown(text):
    """A bench's stdout as markdown: table lines as they are, other lines fenced, blank lines dropped."""
    blocks, fenced = [], []

    def close_fence():
        if fenced:
            blocks.append("```\n" + "\n".join(fenced) + "\n```")
            fenced.clear()

    table = []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            close_fence()
            table.append(line.strip())
            continue
        if table:
            blocks.append("\n".join(table))
            table = []
        if line.strip():
            fenced.append(line.rstrip())
    close_fence()
    if table:
        blocks.append("\n".join(table))
    return "\n\n".join(blocks)


def appendix(path):
    """The part of the report at `path` from APPENDIX_MARKER on ("" when the file or marker is absent)."""
    try:
        with open(path, encoding="utf-8") as reader:
            text = reader.read()
    except FileNotFoundError:
        return ""
    start = text.find(APPENDIX_MARKER)
    return text[start:] if start >= 0 else ""


def commit(repo_dir):
    """The short commit of repo_dir, with "+ uncommitted changes" when its tree differs from it."""

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=repo_dir, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + (" + uncommitted changes" if dirty else "")


def versions():
    """'name version' of TensorFlow, Keras and the peers, 'name absent' for one not installed."""
    found = []
    for name in PEERS:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return ", ".join(found)


def render(run, steps, not_run):
    """The report's first part.

    Args:
      run: dict of command, started, finished (UTC strings), commit, machine (header lines),
        versions, load_before, load_after.
      steps: [dict(label, command, output, load_before, load_after, seconds, returncode)] in order.
      not_run: names of run_all steps this run left out.
    """
    lines = [
        "# Benchmark results",
        "",
        "One run of `bench/run_all.py` on one machine, written by the run itself (`make bench`; do not "
        "edit this part by hand). Every table is a step's own output, below the command that printed "
        "it. The peers take turns with ours inside each step, so the ratios hold for this machine "
        "under this run's load; absolute speeds hold only for it.",
        "",
        f"- Command: `{run['command']}`",
        f"- Date: {run['started']} to {run['finished']}",
        f"- Commit: {run['commit']}",
        f"- Versions: {run['versions']}",
        f"- Load: {run['load_before']} before the first step, {run['load_after']} after the last",
        "- Machine:",
        "",
        "```",
        run["machine"],
        "```",
        "",
    ]
    if not_run:
        lines += [
            f"Not in this run: {', '.join(not_run)}. Their latest tables are in the appendix below, "
            "from earlier runs on other days (each says its machine).",
            "",
        ]
    for number, step in enumerate(steps, 1):
        outcome = "" if step["returncode"] == 0 else f", **failed with exit {step['returncode']}**"
        lines += [
            f"## {number}. {step['label']}",
            "",
            f"`{step['command']}` ({step['seconds']:.0f} s{outcome}; {step['load_before']} before, "
            f"{step['load_after']} after)",
            "",
            output_to_markdown(step["output"]) or "(no output)",
            "",
        ]
    return "\n".join(lines)


def cpu_kind(model, flags):
    """The CPU kind bench/figures.py judges speeds on, or the model name for any other CPU."""
    if "EPYC" in model and "avx512_bf16" in flags:
        return "AMD EPYC with AVX512_BF16"
    if "Xeon" in model and "amx_bf16" in flags:
        return "Intel Xeon with AMX"
    return model


def tables(output):
    """The markdown tables a step printed, each as a list of rows (lists of cells), header first."""
    found, current = [], []
    for line in [*output.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def _rounds(command):
    """The rounds, repeats or seeds a step's command asked for (None when it names none)."""
    match = re.search(r"--(?:rounds|repeats|seeds)=([\d,]+)", command)
    if match is None:
        return None
    values = match.group(1).split(",")
    return int(values[0]) if len(values) == 1 else len(values)


def records(run, steps, quiet=None):
    """The run as a JSON-ready dict: one record per step, with the fields bench/figures.py reads."""
    flags = sorted(machine.cpu_flags() & set(machine.CPU_FLAGS))
    model = machine.cpu_model()
    base = dict(commit=run["commit"], date=run["started"], cpu_model=model, cpu_flags=flags,
                cpu_kind=cpu_kind(model, flags), quiet=quiet, versions=run["versions"])  # fmt: skip
    return {
        "bench": "run_all",
        "command": run["command"],
        "records": [
            dict(base, heading=f"{number}. {step['label']}", command=step["command"],
                 load_before=step["load_before"], load_after=step["load_after"],
                 rounds=_rounds(step["command"]), seconds=round(step["seconds"], 1),
                 returncode=step["returncode"], tables=tables(step["output"]), figures=[])
            for number, step in enumerate(steps, 1)
        ],
    }  # fmt: skip


def render_json(run, steps, quiet=None):
    """records() as the text of the JSON file beside the report."""
    return json.dumps(records(run, steps, quiet), indent=1, ensure_ascii=False) + "\n"
