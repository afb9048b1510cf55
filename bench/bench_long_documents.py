"""Long documents classified whole: BBC News with run_classifier's --doc_stride windows vs the first 128.

finetune_real.py's data, split and model (BBC News: 1,781 train / 444 dev articles of a median ~430
wordpieces; MiniLM, max_seq_length 128). Per training seed, one run of each mode: truncated (the
first 126 wordpieces, the default) and windows (--doc_stride=N: windows of 126 wordpieces N apart,
each a training example with its article's label; eval combines an article's windows).

Each run is run_classifier.py --do_train; its model is then read by --do_eval runs with each
--window_combination rule (weighted_mean, the default: the windows' log-probabilities averaged,
weighted by their wordpieces; mean; max: each label's largest) and without --doc_stride (the first
window alone), at --doc_stride and at each of --eval_doc_strides. Each run's dev articles'
probabilities by the default rule (--do_predict) are saved under work_dir/dev_probabilities/: the
table is followed by the dev articles the default rule gets wrong in every seed of a mode, and how
many of those a reader of whole articles, TF-IDF + LinearSVC, gets wrong too (their label is in
doubt). Every run is one line of --results (machine.Runs); --summarize_only trains nothing. A
mode's own reading of dev (the first column) is the mean rule for windows, the first window else.

    .venv/bin/python -m bench.bench_long_documents --work_dir=/tmp/long --seeds=1,2,3
    .venv/bin/python -m bench.bench_long_documents --work_dir=/tmp/long --summarize_only
    .venv/bin/python -m bench.bench_long_documents --max_articles=200 --num_train_epochs=1 \\
        --seeds=1 --work_dir=/tmp/long_smoke                                  # smoke test

The flags --work_dir, --num_train_epochs, --max_seq_length, --train_batch_size, --eval_batch_size,
--learning_rate, --dev_fraction, --seed (of the split), --max_articles and --threads are
finetune_real.py's.
"""

import hashlib
import json
import os
import re
import shutil
import statistics

import numpy as np
from absl import app, flags, logging

from bench import (
    finetune_real,  # defines the shared flags
    machine,
    minilm,
    scripts,
    stats,
)

FLAGS = flags.FLAGS
MODES = ("truncated", "windows")
RULES = ("weighted_mean", "mean", "max")  # --window_combination's, the default first
flags.DEFINE_list("seeds", ["1", "2", "3"], "Training seeds (head init, dropout, input order).")
flags.DEFINE_list("modes", list(MODES), f"Any of {', '.join(MODES)}.")
flags.DEFINE_integer("doc_stride", 126, "--doc_stride of the windowed runs (wordpieces).")
flags.DEFINE_list(
    "eval_doc_strides",
    [],
    "More --doc_stride values to score each trained model's dev windows with.",
)
flags.DEFINE_string("results", None, "JSON lines of the runs (default: work_dir/runs.jsonl).")
flags.DEFINE_bool("summarize_only", False, "Train nothing: print the table of --results.")


def _flags(model_dir, data_dir, output_dir, seed):
    """run_classifier.py's flags of a run on data_dir's label<TAB>text files from model_dir."""
    return dict(
        **scripts.model_flags(model_dir), output_dir=output_dir, data_dir=data_dir,
        task_name="tsv", text_a_column="1", label_column="0", max_seq_length=FLAGS.max_seq_length,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.eval_batch_size, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.num_train_epochs, seed=seed, length_bucketing=FLAGS.length_bucketing,
        log_steps=100, save_checkpoints_steps=10**6,
        cut_batches_to_longest=False,  # padded batches, as RESULTS' runs were made
    )  # fmt: skip


def rule_accuracies(flags, trained_dir, stride):
    """{rule: dev accuracy} of the trained run read in windows `stride` apart, each rule of
    --window_combination (run_classifier.py --do_eval --init_checkpoint=<the run>), and
    "first_window": the same model without --doc_stride (the first window alone)."""
    scores = {}
    for rule, doc_stride in [*((rule, stride) for rule in RULES), ("first_window", None)]:
        eval_dir = os.path.join(trained_dir + "_eval", f"{rule}_{stride}")
        scripts.run(
            "run_classifier", **{**flags, "init_checkpoint": trained_dir, "output_dir": eval_dir},
            do_eval=True, doc_stride=doc_stride,
            window_combination=rule if doc_stride else None,
        )  # fmt: skip
        scores[rule] = float(scripts.eval_results(eval_dir)["eval_accuracy"])
    return scores


def train_and_score(mode, seed, data_dir, model_dir, work_dir):
    """One run of `mode`: {"accuracy" (its own reading of dev), each rule's, "first_window", speeds}."""
    output_dir = os.path.join(work_dir, "runs", f"{mode}_seed{seed}")
    shutil.rmtree(output_dir, ignore_errors=True)  # a run cut off earlier starts again
    shutil.rmtree(output_dir + "_eval", ignore_errors=True)
    doc_stride = FLAGS.doc_stride if mode == "windows" else None
    flags = _flags(model_dir, data_dir, output_dir, seed)
    train_seconds, trained = scripts.timed(
        "run_classifier", **flags, do_train=True, doc_stride=doc_stride,
        window_combination="mean" if doc_stride else None,
    )  # fmt: skip
    steps = int(re.findall(r"step \d+/(\d+)", trained.stderr)[-1])
    row = {
        "train_inputs": round(steps * FLAGS.train_batch_size / FLAGS.num_train_epochs),
        "steps": steps,
        "train_seconds": train_seconds,
        "train_examples_per_sec": steps * FLAGS.train_batch_size / train_seconds,
    }
    # The trained model reads the dev articles whole through the windows of each prediction
    # stride (the truncated model too: windows at prediction only).
    for stride in eval_doc_strides():
        scores = rule_accuracies(flags, output_dir, stride)
        if stride == FLAGS.doc_stride:
            row.update(scores)
        row.setdefault("by_eval_stride", {})[str(stride)] = scores
    row["accuracy"] = row["mean"] if doc_stride else row["first_window"]
    # Each dev article's probabilities by the default rule (--do_predict; test.tsv is dev.tsv).
    predict_dir = os.path.join(output_dir + "_eval", "predict")
    scripts.run(
        "run_classifier", **{**flags, "init_checkpoint": output_dir, "output_dir": predict_dir},
        do_predict=True, doc_stride=FLAGS.doc_stride,
    )  # fmt: skip
    path = dump_path(work_dir, mode, seed, settings())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copy(os.path.join(predict_dir, "test_results.tsv"), path)
    with open(os.path.join(output_dir, "labels.txt"), encoding="utf-8") as reader:
        row["labels"] = reader.read().splitlines()  # test_results.tsv's columns
    shutil.rmtree(output_dir, ignore_errors=True)
    shutil.rmtree(output_dir + "_eval", ignore_errors=True)
    return row


def dump_path(work_dir, mode, seed, run_settings):
    """The test_results.tsv of a run's dev articles (probabilities, --doc_stride, the default rule)."""
    digest = hashlib.sha1(json.dumps(run_settings, sort_keys=True).encode()).hexdigest()[:10]
    return os.path.join(work_dir, "dev_probabilities", f"{mode}_seed{seed}_{digest}.tsv")


def saved_probabilities(row, work_dir):
    """A run's dev articles' probabilities [articles, labels] (labels sorted), or None."""
    path = dump_path(work_dir, row["mode"], row["seed"], row["settings"])
    return np.loadtxt(path, delimiter="\t", ndmin=2) if os.path.exists(path) else None


def bag_of_words_wrong(train, dev):
    """The dev articles (indices) a bag-of-words peer gets wrong: TF-IDF of words and word pairs
    (sublinear tf, in 2 articles or more) and a linear SVM, over whole articles. It tells articles
    that a reader of every word misfiles too (their label is in doubt) from those only BERT does."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2)
    inputs = vectorizer.fit_transform([text for _, text in train])
    model = LinearSVC(random_state=0).fit(inputs, [label for label, _ in train])
    predicted = model.predict(vectorizer.transform([text for _, text in dev]))
    return {
        index
        for index, ((label, _), guess) in enumerate(zip(dev, predicted, strict=True))
        if label != guess
    }


def eval_doc_strides():
    """--doc_stride first, then --eval_doc_strides' others."""
    more = [int(stride) for stride in FLAGS.eval_doc_strides]
    return [FLAGS.doc_stride] + [stride for stride in more if stride != FLAGS.doc_stride]


def settings():
    return {
        name: getattr(FLAGS, name)
        for name in (
            "num_train_epochs", "max_seq_length", "train_batch_size", "learning_rate",
            "dev_fraction", "seed", "length_bucketing", "max_articles", "doc_stride",
        )
    }  # fmt: skip


def summarize(rows, work_dir, dev, peer_wrong):
    """Per mode: each rule's dev accuracy over seeds (mean, standard error, min - max); the articles
    wrong in every seed; the bag-of-words peer (`peer_wrong`: its wrong dev articles)."""
    saved = {(row["mode"], row["seed"]): saved_probabilities(row, work_dir) for row in rows}
    print(
        "\n| training input | seeds | eval: its own reading (mean rule) | windows, weighted_mean rule "
        "(default) | windows, mean rule | windows, max rule | first window only | training inputs "
        "| train examples/s (median) | train s (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in MODES:
        runs = [row for row in rows if row["mode"] == mode]
        if not runs:
            continue
        keys = ("accuracy", *RULES, "first_window")
        cells = [_mean_cell([r[key] for r in runs if key in r]) for key in keys]
        print(
            f"| {mode} | {len(runs)} | " + " | ".join(cells) + f" | {runs[0]['train_inputs']} | "
            f"{statistics.median(r['train_examples_per_sec'] for r in runs):.1f} | "
            f"{statistics.median(r['train_seconds'] for r in runs):.0f} |"
        )
    print(
        f"\nPeer: TF-IDF + LinearSVC over whole articles: {1 - len(peer_wrong) / len(dev):.2%} "
        f"({len(peer_wrong)} of {len(dev)} dev articles wrong)"
    )
    for mode in MODES:
        runs = [row for row in rows if row["mode"] == mode]
        if len(runs) < 2:
            continue
        combined = [saved[mode, row["seed"]] for row in runs]
        if any(probabilities is None for probabilities in combined):
            print(
                f"{mode}: the dev probabilities of some seeds are not in {work_dir}/dev_probabilities"
            )
        else:
            labels = np.array([runs[0]["labels"].index(topic) for topic, _ in dev])
            counts = sum((run.argmax(-1) != labels).astype(int) for run in combined)
            always = set(np.flatnonzero(counts == len(runs)).tolist())
            # The seeds' errors of their own, averaged away: how far more seeds could go.
            ensemble = np.mean(sum(np.log(p) for p in combined).argmax(-1) == labels)
            print(
                f"{mode}: {len(always)} dev articles wrong ({RULES[0]} rule) in all {len(runs)} "
                f"seeds ({len(always & peer_wrong)} of them wrong for the bag-of-words peer too), "
                f"{int(np.sum(counts == len(runs) - 1))} more in all but one; the seeds' "
                f"log-probabilities summed (an ensemble): {ensemble:.2%}"
            )
    for mode in MODES:
        for row in (row for row in rows if row["mode"] == mode):
            others = "".join(
                f", mean at prediction stride {stride} {scores['mean']:.4f}"
                for stride, scores in row.get("by_eval_stride", {}).items()
                if stride != str(FLAGS.doc_stride)
            )
            rules = "".join(f", {rule} {row[rule]:.4f}" for rule in RULES if rule in row)
            print(
                f"{mode} seed {row['seed']}: its own reading {row['accuracy']:.4f}{rules}, first window "
                f"{row['first_window']:.4f}{others}"
            )


def _mean_cell(values):
    """'mean (standard error) [min - max]' of accuracies, as percentages ("-" for none)."""
    if not values:
        return "-"
    mean, error = stats.mean_and_error(values)
    return (
        f"{100 * mean:.2f}% ({stats.error_text(error, 2, 100)}) "
        f"[{100 * min(values):.2f} - {100 * max(values):.2f}]"
    )


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    work_dir = FLAGS.work_dir or "/tmp/bench_long_documents"
    runs = machine.Runs(FLAGS.results or os.path.join(work_dir, "runs.jsonl"))
    data_dir, train, dev = finetune_real.write_bbc_news(work_dir)
    shutil.copy(os.path.join(data_dir, "dev.tsv"), os.path.join(data_dir, "test.tsv"))
    peer_wrong = bag_of_words_wrong(train, dev)
    if not FLAGS.summarize_only:
        threads = machine.set_threads(FLAGS.threads)
        model_dir = minilm.converted(work_dir)
        print(machine.header())
        print(
            f"BBC News: {len(train)} train / {len(dev)} dev articles; all-MiniLM-L6-v2, "
            f"max_seq_length {FLAGS.max_seq_length}, doc_stride {FLAGS.doc_stride}, "
            f"{FLAGS.num_train_epochs:g} epochs, batch {FLAGS.train_batch_size}, lr "
            f"{FLAGS.learning_rate:g}, length bucketing {FLAGS.length_bucketing}, "
            f"{machine.threads_line(threads)}\n",
            flush=True,
        )
        for seed in (int(seed) for seed in FLAGS.seeds):
            for mode in FLAGS.modes:
                key = {"mode": mode, "seed": seed, "settings": settings()}
                runs.get(key, train_and_score, mode, seed, data_dir, model_dir, work_dir)
    rows = [r for r in runs.rows if r["settings"] == settings()]
    summarize(rows, work_dir, dev, peer_wrong)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
