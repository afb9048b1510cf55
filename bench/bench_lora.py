"""LoRA adapters (backbone.enable_lora) against full fine-tuning of the same MiniLM, and TF-IDF + SVM.

From the converted all-MiniLM-L6-v2, on bench_real_text.py's sets and splits, for each seed: full
fine-tuning (`BertTextClassifier.from_preset(...).fit`, the default compile), LoRA
(`model.backbone.enable_lora(rank)` for each --ranks and --lora_learning_rates; "default" is the
default compile's LoRA rate) and TF-IDF + LinearSVC.
Each run prints one JSON line (test accuracy, weights, adapter file size, seconds per step); a
summary gives the mean ± standard error over the seeds.

    .venv/bin/python -m bench.bench_lora --work_dir=/tmp/bench_lora --sets=tweets --seeds=1,2,3
"""

import json
import os
import time

import numpy as np
from absl import app, flags

from bench import corpora, machine, minilm, stats
from bench.bench_real_text import bag_of_words, read_set, stratified_split

# bench_real_text.py's flags name the data, split, seeds and work_dir (--work_dir, --sets,
# --tweets_sizes, --rotten_tomatoes_sizes, --split_seed, --seeds, --short_max_seq_length,
# --batch_size, --threads).
FLAGS = flags.FLAGS
flags.DEFINE_list("ranks", ["8"], "LoRA ranks.")
flags.DEFINE_list(
    "lora_learning_rates", ["default"], 'LoRA peak rates; "default" = the default compile\'s.'
)
flags.DEFINE_integer("full_epochs", 3, "Epochs of full fine-tuning.")
flags.DEFINE_integer("lora_epochs", 6, "Epochs of LoRA.")


def _sizes(name):
    return [int(size) for size in getattr(FLAGS, f"{name}_sizes")]


def _accuracy(test, predicted, label_ids):
    return float(
        np.mean([label_ids[label] == p for (label, _), p in zip(test, predicted, strict=True)])
    )


def _weights_bytes(model):
    """The bytes of the model's weights as stored (float32, int8), without optimizer state."""
    return int(sum(v.numpy().nbytes for v in model.weights))


def fine_tune(model_dir, sets, seed, rank=None, learning_rate="default"):
    """One fit of a fresh classifier (LoRA of `rank`, or full with rank None): a JSON-able dict."""
    import keras

    from bert_tf import BertTextClassifier

    train, test, label_ids = sets
    keras.utils.set_random_seed(seed)
    model = BertTextClassifier.from_preset(
        model_dir, num_classes=len(label_ids), max_seq_length=FLAGS.short_max_seq_length
    )
    if rank is not None:
        model.backbone.enable_lora(rank=rank)
    if learning_rate != "default":
        model.compile(learning_rate=float(learning_rate))
    epochs = FLAGS.full_epochs if rank is None else FLAGS.lora_epochs
    x, y = [text for _, text in train], [label_ids[label] for label, _ in train]
    start = time.perf_counter()
    model.fit(x=x, y=y, batch_size=FLAGS.batch_size, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - start
    steps = -(-len(x) // FLAGS.batch_size) * epochs
    predicted = model.predict([t for _, t in test], batch_size=64, verbose=0).argmax(-1)
    row = {
        "system": "full" if rank is None else f"lora_r{rank}",
        "learning_rate": model._recipe_rate(),
        "epochs": epochs,
        "seed": seed,
        "test_accuracy": _accuracy(test, predicted, label_ids),
        "trainable_weights": int(sum(np.prod(v.shape) for v in model.trainable_weights)),
        "all_weights": int(sum(np.prod(v.shape) for v in model.weights)),
        "seconds_per_step": seconds / steps,
    }
    folder = os.path.join(FLAGS.work_dir, "files")
    os.makedirs(folder, exist_ok=True)
    row["full_weights_bytes"] = _weights_bytes(model)
    if rank is not None:
        path = os.path.join(folder, "adapters.npz")
        model.save_lora_weights(path)
        row["adapter_file_bytes"] = os.path.getsize(path)
    return row


def run_set(name, model_dir):
    rows, _ = corpora.deduplicated(read_set(name))
    train, dev, test = stratified_split(rows, _sizes(name), FLAGS.split_seed)
    label_ids = {label: i for i, label in enumerate(sorted({label for label, _ in rows}))}
    results = [{"set": name, "system": "tfidf_svm", **bag_of_words("tfidf_svm", train, dev, test)}]
    print(json.dumps(results[0]), flush=True)
    for seed in (int(seed) for seed in FLAGS.seeds):
        runs = [(None, "default")] + [
            (int(rank), rate) for rank in FLAGS.ranks for rate in FLAGS.lora_learning_rates
        ]
        for rank, rate in runs:
            row = {"set": name, **fine_tune(model_dir, (train, test, label_ids), seed, rank, rate)}
            print(json.dumps(row), flush=True)
            results.append(row)
    return results


def summary(results):
    """One line per (set, system, rate): mean ± standard error of the test accuracy, and the rest."""
    groups = {}
    for row in results:
        key = (row["set"], row["system"], row.get("learning_rate"))
        groups.setdefault(key, []).append(row)
    lines = []
    for (name, system, rate), rows in groups.items():
        accuracy = [row.get("test_accuracy", 0.0) for row in rows]
        line = f"{name} {system}" + (f" lr {rate:g}" if rate else "")
        line += f": test accuracy {stats.format_mean(accuracy, 2, 100)} ({len(rows)} runs)"
        if "trainable_weights" in rows[0]:
            row = rows[0]
            share = row["trainable_weights"] / row["all_weights"]
            line += f", trainable {row['trainable_weights']:,} ({share:.2%})"
            line += f", {np.mean([r['seconds_per_step'] for r in rows]):.3f} s/step"
            if "adapter_file_bytes" in row:
                line += (
                    f", adapter file {row['adapter_file_bytes']:,} B "
                    f"({row['adapter_file_bytes'] / row['full_weights_bytes']:.2%} of the weights)"
                )
        lines.append(line)
    return lines


def main(argv):
    del argv
    machine.set_threads(FLAGS.threads)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    print(machine.header(), flush=True)
    model_dir = minilm.converted(FLAGS.work_dir)
    results = []
    for name in FLAGS.sets:
        results += run_set(name, model_dir)
    print("\n".join(summary(results)), flush=True)


if __name__ == "__main__":
    app.run(main)
