"""bench/RESULTS.md as one report of one `bench/run_all.py` run, above a dated appendix it keeps.

The file has two parts. Above `APPENDIX_MARKER`: what the last run printed, every step in the order of
run_all.STEPS (the order of README's performance table), each step's command above its output,
with the machine, date, commit and load of the run at the top. run_all.py rewrites this part and
nothing else. From the marker on: older results and accuracy studies (each with its own command,
machine and date), kept verbatim by every run.

A step's output becomes markdown line by line: the tables the benches print (lines starting with
"|") stay tables; every other run of lines (machine header, ratios, notes) goes into a fenced
block, so that nothing is reflowed or reinterpreted.
"""

import importlib.metadata
import subprocess

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
