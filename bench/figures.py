"""README's results table and docs/performance.md's, written from the records in bench/results/, by one rule.

    .venv/bin/python -m bench.figures           # rewrites both tables and each record's figures block
    .venv/bin/python -m bench.figures --check   # exit 1, naming the file, when any of them differs

A record is `bench/results/<bench>.json` (`{"bench": ..., "records": [...]}`) beside `<bench>.md`, whose
`## <heading>` section holds the figures block this module writes and, below it, what the bench
printed. Each record names its command, commit, CPU (model, flags and kind), the load before and after,
whether nothing else ran (`quiet`: true, false, or null when it was not recorded), its rounds or seeds,
and its figures: a name (the record's table) and a short label (README's), ours and theirs as printed
(strings), the standard errors where there are some, and the spread. bench/report.py writes the same fields for every `make bench` step.

The rule, here and nowhere else:
- accuracy is a win or a loss only when ours and theirs differ by more than 2 standard errors of the
  difference (a peer without one counts as exact), else a tie; without our standard error it is not
  judged;
- a speed is judged only from a quiet run of at least 3 rounds on a CPU kind of CPU_KINDS; any other
  run is "not judged", a loaded one says so;
- a ratio is ours ÷ theirs: in time (or memory) lower is faster, in throughput higher is faster, and
  every ratio says which.
"""

import argparse
import json
import math
import os
import re
import sys

from bench import BENCH_DIR, REPO_DIR

RESULTS_DIR = os.path.join(BENCH_DIR, "results")
README = os.path.join(REPO_DIR, "README.md")
PERFORMANCE = os.path.join(REPO_DIR, "docs", "performance.md")
CPU_KINDS = ("AMD EPYC with AVX512_BF16", "Intel Xeon with AMX")
MIN_ROUNDS = 3
LOWER_IS_BETTER = {"time": "in time, lower is faster", "memory": "in memory, lower is less"}
HIGHER_IS_BETTER = {"throughput": "in throughput, higher is faster"}
BLOCK_BEGIN, BLOCK_END = "<!-- FIGURES:begin -->", "<!-- FIGURES:end -->"
TABLE_BEGIN, TABLE_END = "<!-- FIGURES:table -->", "<!-- /FIGURES:table -->"

# README's rows: what, against, and the figures they show as (bench, record index, figure ids).
ROWS = (
    ("pretraining data, 1 worker", "the original's algorithm, one process",
     [("create_pretraining_data", 0, ("wall", "cpu", "rss"))]),
    ("fine-tuning MiniLM, one sentence / pairs", "keras-hub `BertClassifier`; transformers",
     [("finetune", 0, ("kh_sst2_rounds", "kh_mrpc_rounds", "kh_sst2_total", "kh_mrpc_total",
                       "tr_sst2_total", "tr_mrpc_total"))]),
    ("pretraining step, BERT-mini and BERT-small", "keras-hub `BertMaskedLM`",
     [("pretraining", 0, ("mini1", "mini2", "small1", "small2"))]),
    ("one raw-text request back to back, BERT-base", "transformers + tokenizer",
     [("latency", 0, ("p50_8", "p50_32", "p50_128")), ("latency", 2, ("xeon",))]),
    ("one raw-text request back to back, bfloat16 and LiteRT int8 exports", "torch bf16 autocast; torch dynamic int8",
     [("latency", 1, ("bf16_8", "bf16_32", "bf16_128", "int8_8", "int8_32", "int8_128"))]),
    ("in-graph tokenizer, English", "tf-text `FastBertTokenizer`", [("tokenizer", 0, ("cpu",))]),
    ("accuracy, 400 training texts", "TF-IDF + linear model", [("real_text", 0, ("rt", "tweets", "imdb"))]),
    ("multi-label, 400 / 800 training texts", "TF-IDF + one-vs-rest LR", [("multi_label", 0, ("m400", "m800"))]),
    ("BBC News, long articles read whole", "TF-IDF + LinearSVC", [("long_documents", 0, ("split12345", "split777"))]),
    ("LoRA rank 8 on 1,500 training texts", "full fine-tuning of the same MiniLM", [("lora", 0, ("tweets", "rt"))]),
    ("a 2-layer student distilled from MiniLM, tweets", "its 6-layer teacher",
     [("distillation", 0, ("acc", "p50_32", "int8_32"))]),
    ("`batch_predict.py`, 1 and 2 local workers", "a loop over the export, same 2 cores", [("beam", 0, ("w1", "w2"))]),
)  # fmt: skip

# The records README cites, each written by hand from what its bench printed; bench/results/run_all.json,
# which `make bench` writes, is read by none of them until a row names it.
RECORD_FILES = (
    *sorted({bench for _, _, sources in ROWS for bench, _, _ in sources}),
    "readme_figures",
)


def load(bench):
    """The records of bench/results/<bench>.json."""
    with open(os.path.join(RESULTS_DIR, f"{bench}.json"), encoding="utf-8") as reader:
        return json.load(reader)["records"]


def number(text):
    """The value of a printed figure ("7.17 M" -> 7.17, "1,224" -> 1224.0)."""
    match = re.search(r"-?\d[\d,]*(?:\.\d+)?", str(text))
    if match is None:
        raise ValueError(f"bench/results: {text!r} holds no number")
    return float(match.group().replace(",", ""))


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def speed_gate(record):
    """None when the record's speeds may be judged, else why not ("not judged: ...")."""
    if record.get("quiet") is False:
        return "not judged: a loaded run"
    if record.get("quiet") is not True:
        return "not judged: whether the run was quiet is not recorded"
    if (record.get("rounds") or 0) < MIN_ROUNDS:
        return f"not judged: {record.get('rounds') or 'unrecorded'} rounds, fewer than {MIN_ROUNDS}"
    if record.get("cpu_kind") not in CPU_KINDS:
        return (
            f"not judged: CPU kind {record.get('cpu_kind')!r} is not one of {', '.join(CPU_KINDS)}"
        )
    return None


def ratio(figure):
    """ours ÷ theirs, as printed to two decimals."""
    return number(figure["ours"]) / number(figure["theirs"])


def verdict(record, figure):
    """'win', 'loss', 'tie' or 'not judged: why' for one figure of one record, by the rule above."""
    kind = figure["kind"]
    if kind == "accuracy":
        if figure.get("ours_se") is None:
            return "not judged: no standard error"
        se = math.hypot(number(figure["ours_se"]), number(figure.get("theirs_se") or 0))
        difference = number(figure["ours"]) - number(figure["theirs"])
        return "win" if difference > 2 * se else "loss" if difference < -2 * se else "tie"
    if kind not in LOWER_IS_BETTER and kind not in HIGHER_IS_BETTER:
        raise ValueError(f"bench/results: figure {figure['id']!r} has an unknown kind {kind!r}")
    gate = speed_gate(record)
    if gate:
        return gate
    value = round(ratio(figure), 2)
    if value == 1.0:
        return "tie"
    faster = value < 1.0 if kind in LOWER_IS_BETTER else value > 1.0
    return "win" if faster else "loss"


def _shown(figure):
    """A figure as the tables show it: '0.78×' for a speed, '75.67 ± 1.07 against 62.00' for accuracy."""
    if figure["kind"] == "accuracy":
        se = f" ± {figure['ours_se']}" if figure.get("ours_se") is not None else ""
        return f"{figure['ours']}{se} against {figure['theirs']}"
    return f"{ratio(figure):.2f}×"


def _bold(word):
    return f"**{word}**" if word in ("win", "loss", "tie") else word


def record_link(bench, record, prefix):
    return f"{prefix}bench/results/{bench}.md#{slug(record['heading'])}"


def _linked(text, bench, record, prefix):
    """text as a link to the record's heading; with prefix None (the docs site, which cannot link
    outside docs/), the text alone."""
    return text if prefix is None else f"[{text}]({record_link(bench, record, prefix)})"


def _direction(kind):
    return "ours ÷ theirs " + {**LOWER_IS_BETTER, **HIGHER_IS_BETTER}[kind]


def _group_text(bench, record, ids, prefix):
    """One record's part of a row's result cell: for speeds its CPU kind, the verdict (once when all
    figures share it), and each figure linked, with the ratio's direction wherever the kind changes."""
    figures = {figure["id"]: figure for figure in record["figures"]}
    chosen = [figures[i] for i in ids]
    verdicts = [verdict(record, figure) for figure in chosen]
    same = len(set(verdicts)) == 1
    parts, last_kind = [], None
    for figure, said in zip(chosen, verdicts, strict=True):
        text = f"{figure['label']} {_linked(_shown(figure), bench, record, prefix)}"
        if figure["kind"] != "accuracy" and figure["kind"] != last_kind:
            text = f"{_direction(figure['kind'])}: {text}"
        last_kind = figure["kind"]
        parts.append(text if same else f"{text} {_bold(said)}")
    speed = any(figure["kind"] != "accuracy" for figure in chosen)
    kind = record.get("cpu_kind", "unknown")
    head = (f"{kind}, " if kind != "unknown" else "CPU kind not recorded, ") if speed else ""
    head += f"{_bold(verdicts[0])}: " if same else ""
    return head + "; ".join(parts)


def rows(prefix=""):
    """The results table (markdown lines): every figure linked to its record, the link relative to the
    repo with `prefix` before it; with prefix None, unlinked (docs/performance.md)."""
    lines = ["| what | against | result | record |", "|---|---|---|---|"]
    for what, against, sources in ROWS:
        groups, records = [], []
        for bench, index, ids in sources:
            record = load(bench)[index]
            groups.append(_group_text(bench, record, ids, prefix))
            name = f"`bench/results/{bench}.md`" if prefix is None else bench
            records.append(_linked(name, bench, record, prefix))
        lines.append(f"| {what} | {against} | {' / '.join(groups)} | {', '.join(records)} |")
    return lines


def block(record):
    """The figures block of one record's section (what README's numbers are checked against)."""
    rounds = record.get("rounds") or record.get("seeds")
    lines = [
        BLOCK_BEGIN,
        f"Command: `{record['command']}`; commit {record['commit']}; {record['date']}.",
        f"CPU: {record['cpu_model']} ({record['cpu_kind']}; flags: {', '.join(record['cpu_flags']) or 'not recorded'}).",
        f"Load: {record['load_before']} before, {record['load_after']} after; quiet: "
        f"{ {True: 'yes', False: 'no'}.get(record.get('quiet'), 'unknown') } "
        f"({record.get('quiet_note', 'not recorded')}); rounds or seeds: {rounds or 'unknown'}.",
        "",
        "| figure | ours | theirs | shown | spread | verdict |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for figure in record["figures"]:
        ours = figure["ours"] + (f" ± {figure['ours_se']}" if figure.get("ours_se") else "")
        shown = _shown(figure)
        if figure["kind"] != "accuracy":
            shown += (
                " (ours ÷ theirs " + {**LOWER_IS_BETTER, **HIGHER_IS_BETTER}[figure["kind"]] + ")"
            )
        lines.append(
            f"| {figure.get('name', figure['label'])} | {ours} | {figure['theirs']} | {shown} | "
            f"{figure.get('spread') or '-'} | {verdict(record, figure)} |"
        )
    for name, value in record.get("facts", {}).items():
        lines.append(f"| {name} | {value} | - | - | - | - |")
    return "\n".join([*lines, BLOCK_END])


def section(text, heading):
    """The section of markdown `text` under `## heading`, up to the next `## Record:` heading."""
    start = text.find(f"\n## {heading}\n")
    if start < 0:
        raise ValueError(f"bench/results: no heading '## {heading}'")
    end = text.find("\n## Record:", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _replace(text, begin, end, new, where):
    """text with the part from `begin` to `end` (both kept) replaced by `new`."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{where}: the markers {begin} ... {end} are missing")
    return text[:start] + new + text[stop + len(end) :]


def _with_blocks(text, records, where):
    """A record file's text with each record's figures block rewritten."""
    for record in records:
        start = text.find(f"\n## {record['heading']}\n")
        if start < 0:
            raise ValueError(f"{where}: no heading '## {record['heading']}'")
        head, tail = text[:start], text[start:]
        text = head + _replace(tail, BLOCK_BEGIN, BLOCK_END, block(record), where)
    return text


def expected():
    """{path: text} of every file the generator writes, as it would write them now."""
    out = {}
    for bench in RECORD_FILES:
        path = os.path.join(RESULTS_DIR, f"{bench}.md")
        with open(path, encoding="utf-8") as reader:
            out[path] = _with_blocks(reader.read(), load(bench), path)
    for path, prefix in ((README, ""), (PERFORMANCE, None)):
        with open(path, encoding="utf-8") as reader:
            text = reader.read()
        table = "\n".join([TABLE_BEGIN, *rows(prefix), TABLE_END])
        out[path] = _replace(text, TABLE_BEGIN, TABLE_END, table, path)
    return out


def _write(path, text):
    """Writes text to path whole or not at all (a temporary file beside it, then a rename)."""
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as writer:
        writer.write(text)
    os.replace(temporary, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected().items():
        with open(path, encoding="utf-8") as reader:
            if reader.read() == text:
                continue
        stale.append(os.path.relpath(path, REPO_DIR))
        if not args.check:
            _write(path, text)
    if stale:
        print(("differs from the records: " if args.check else "rewrote: ") + ", ".join(stale))
    return 1 if (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
