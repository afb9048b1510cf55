"""The from-scratch study's downstream half (bench/bench_from_scratch.py): fine-tuning and its tables.

Each model (a folder of bert_config.json, vocab.txt, bert_model.ckpt) is fine-tuned on each set by
bench_real_text.ours (run_classifier's ClassifierRun: 10% warmup, linear decay, the original's
AdamW), one run a seed; the bag of words is bench_real_text.bag_of_words("tfidf_svm") (TF-IDF +
LinearSVC, n-grams and C chosen on dev), deterministic, so one run. Every finished run is written as
<finetune_dir>/results/<set>__<model>__<seed>.json, so a stopped stage resumes and two processes can
share the work; finetune_dir names the split sizes, learning rate and epochs, so other settings never
read these runs.
"""

import glob
import json
import math
import os
import statistics

from bench import bench_real_text, stats
from bert_tf import file_io

FINETUNE_SETS = ("rotten_tomatoes", "tweets")


def result_file(results_dir, name, model, seed):
    return os.path.join(results_dir, f"{name}__{model}__{seed}.json")


def read_tsv(path):
    """[(label, text)] of corpora.write_tsv's lines."""
    with open(path, encoding="utf-8") as reader:
        return [tuple(line.rstrip("\n").split("\t", 1)) for line in reader]


def split(name, work_dir):
    """(data_dir, (train, dev, test)) of bench_real_text's split of a set, written on first use and
    read back after, so that processes sharing work_dir never rewrite a file another one reads."""
    data_dir = os.path.join(work_dir, name)
    files = [os.path.join(data_dir, f"{part}.tsv") for part in ("train", "dev", "test")]
    if not all(os.path.exists(file) for file in files):
        data_dir, splits, _ = bench_real_text.prepare(name, work_dir)
        return data_dir, splits
    return data_dir, tuple(read_tsv(file) for file in files)


def finetune_all(work_dir, model_dirs, seeds, learning_rate, epochs, pairs=None):
    """Runs every missing (set, model, seed) and the bag of words of each set.

    Args:
      work_dir: the settings' finetune_dir (splits, runs and results go there).
      model_dirs: {model name: its folder}.
      seeds: fine-tuning seeds.
      pairs: only these (set, model) pairs (None: all).
    """
    results_dir = os.path.join(work_dir, "results")
    os.makedirs(results_dir, exist_ok=True)
    splits = {name: split(name, work_dir) for name in FINETUNE_SETS}
    for name, (_, (train, dev, test)) in splits.items():
        path = result_file(results_dir, name, "tfidf_svm", 0)
        if not os.path.exists(path):
            row = bench_real_text.bag_of_words("tfidf_svm", train, dev, test)
            file_io.write_text(path, json.dumps(row) + "\n")
    # Seed by seed over both sets: a stage stopped early leaves both sets with as many seeds.
    for seed in seeds:
        for name, (data_dir, (_, _, test)) in splits.items():
            for model, model_dir in model_dirs.items():
                path = result_file(results_dir, name, model, seed)
                if os.path.exists(path) or (pairs is not None and (name, model) not in pairs):
                    continue
                run_dir = os.path.join(work_dir, "runs", f"{name}__{model}__{seed}")
                row = bench_real_text.ours(
                    name, data_dir, model_dir, run_dir, learning_rate, epochs, seed, test
                )
                file_io.write_text(path, json.dumps(row) + "\n")
                print(f"{name} {model} seed {seed}: test accuracy {row['test_accuracy']:.4f}")


def read_results(work_dir):
    """{(set, model): [result rows (with their "seed"), by seed]}."""
    found = {}
    for path in glob.glob(os.path.join(work_dir, "results", "*.json")):
        name, model, seed = os.path.basename(path)[: -len(".json")].split("__")
        with open(path, encoding="utf-8") as reader:
            row = {**json.load(reader), "seed": int(seed)}
        found.setdefault((name, model), []).append(row)
    return {key: sorted(rows, key=lambda row: row["seed"]) for key, rows in found.items()}


def choose_on_dev(by_rate):
    """{(set, model): (rate, rows)}: for each set and model, the rate of the best mean dev accuracy,
    as the paper chose its fine-tuning rate on dev (never on test), with every run at that rate.

    by_rate: {rate: read_results of its finetune_dir}, in the flags' order, which breaks ties. The
    rates are compared on the seeds they have all run (--more_seeds run only at the chosen rate); a
    rate sharing no seed with the others is left out until it has run theirs.
    """
    runs = {}
    for rate, results in by_rate.items():
        for key, rows in results.items():
            runs.setdefault(key, []).append((rate, {row["seed"]: row for row in rows}))
    chosen = {}
    for key, candidates in runs.items():
        while True:
            shared = set.intersection(*(set(by_seed) for _, by_seed in candidates))
            if shared:
                break
            fewest = min(range(len(candidates)), key=lambda i: (len(candidates[i][1]), -i))
            del candidates[fewest]
        scores = [
            (statistics.fmean(by_seed[seed]["dev_accuracy"] for seed in shared), -i)
            for i, (_, by_seed) in enumerate(candidates)
        ]
        rate, by_seed = candidates[scores.index(max(scores))]
        chosen[key] = (rate, [by_seed[seed] for seed in sorted(by_seed)])
    return chosen


def rate_table(by_rate, models, labels):
    """Markdown: a row a (model, rate), dev and test accuracy of both sets, mean ± SE in percent."""
    lines = [
        "| model | rate | Rotten Tomatoes dev | Rotten Tomatoes test | tweets dev | tweets test "
        "| runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for model in models:
        if model == "tfidf_svm":  # no learning rate
            continue
        for rate, results in by_rate.items():
            cells, runs = [], []
            for name in FINETUNE_SETS:
                rows = results.get((name, model), [])
                runs.append(str(len(rows)))
                cells += [
                    bench_real_text.cell([row[f"{part}_accuracy"] for row in rows])
                    for part in ("dev", "test")
                ]
            if any(cell != "-" for cell in cells):
                cells.append(" / ".join(runs))
                lines.append(f"| {labels[model]} | {rate:g} | {' | '.join(cells)} |")
    return "\n".join(lines)


def seed_lines(by_rate, models, labels):
    """One line a (model, rate, set): its test accuracy seed by seed, in percent."""
    lines = []
    for model in models:
        if model == "tfidf_svm":
            continue
        for rate, results in by_rate.items():
            for name in FINETUNE_SETS:
                rows = results.get((name, model), [])
                if rows:
                    runs = ", ".join(
                        f"{row['seed']}: {100 * row['test_accuracy']:.1f}" for row in rows
                    )
                    lines.append(f"- {labels[model]}, {rate:g}, {name}: {runs}")
    return lines


def margin(better, worse):
    """(difference of means, that difference over its standard error sqrt(SE1^2 + SE2^2)); the second
    is None when either side has fewer than 2 runs."""
    mean_b, error_b = stats.mean_and_error(better)
    mean_w, error_w = stats.mean_and_error(worse)
    if error_b is None or error_w is None:
        return mean_b - mean_w, None
    difference, error = mean_b - mean_w, math.sqrt(error_b**2 + error_w**2)
    if not error:  # every run of both sides scored the same
        return difference, math.copysign(math.inf, difference) if difference else 0.0
    return difference, difference / error


def accuracy_table(results, models, labels, chosen):
    """Markdown: a row a model, test accuracy (and the tweets' macro F1) mean ± SE in percent, with
    the rates `chosen` (choose_on_dev) picked."""
    lines = [
        "| model | Rotten Tomatoes accuracy | tweets accuracy | tweets macro F1 | runs "
        "| rates (RT / tweets) |",
        "|---|---|---|---|---|---|",
    ]
    for model in models:
        rt = [row["test_accuracy"] for row in results.get(("rotten_tomatoes", model), [])]
        tw = results.get(("tweets", model), [])
        cells = [
            bench_real_text.cell(rt),
            bench_real_text.cell([row["test_accuracy"] for row in tw]),
            bench_real_text.cell([row["test_macro_f1"] for row in tw]),
        ]
        rates = " / ".join(
            "-" if model == "tfidf_svm" or (name, model) not in chosen
            else f"{chosen[name, model][0]:g}"
            for name in FINETUNE_SETS
        )  # fmt: skip
        runs = f"{len(rt)} / {len(tw)}"
        lines.append(f"| {labels[model]} | {' | '.join(cells)} | {runs} | {rates} |")
    return "\n".join(lines)


def target_lines(results, pretrained, baseline, labels, pairs=None):
    """One line a (pretrained model, set): its margin over `baseline` in points and standard errors
    (only the (set, model) `pairs` when given)."""
    lines = []
    for model in pretrained:
        for name in FINETUNE_SETS:
            if pairs is not None and (name, model) not in pairs:
                continue
            ours = [row["test_accuracy"] for row in results.get((name, model), [])]
            theirs = [row["test_accuracy"] for row in results.get((name, baseline), [])]
            if not ours or not theirs:
                lines.append(f"- {labels[model]} on {name}: not run")
                continue
            difference, in_errors = margin(ours, theirs)
            if baseline == "tfidf_svm":  # deterministic: one run, no SE
                verdict = "reaches it" if difference >= 0 else "does NOT reach it"
                errors = "the bag of words is one deterministic run"
            elif in_errors is None:
                verdict, errors = "does NOT meet the target", "a side of one run: no SE"
            else:
                verdict = "meets" if in_errors >= 2 else "does NOT meet"
                verdict += " the target (>= 2 SE)"
                errors = f"{in_errors:.1f} SE of the difference"
            lines.append(
                f"- {labels[model]} on {name}: {100 * difference:+.2f} points over "
                f"{labels[baseline]} ({errors}): {verdict}"
            )
    return lines
