"""Serving: what the in-graph tokenizer costs in an exported SavedModel, and what dynamic padding saves.

An encoder (random weights, `--models` shapes) exported by `export_saved_model.py
--model_type=encoder` and loaded back as a server holds it is timed on batches of real sentences
(../shared/data/austen_sentences.txt) at batch 1 and 32 through `serving_default` (raw strings),
`serve_ids` (the same strings' ids from `preprocess`, padded to the batch's longest: the difference
is what tokenizing in the graph costs), `serve_ids` fed ids padded to max_seq_length (what a
fixed-length export computes), and `preprocess` alone.
The calls alternate batch by batch, so load from other work hits every row alike.

    .venv/bin/python -m bench.bench_serving
    .venv/bin/python -m bench.bench_serving --models=bert_mini --calls=20     # quick
"""

import os
import tempfile
import time

import numpy as np
from absl import app, flags

from bench import REPO_DIR, SHARED_DIR, machine, scripts

FLAGS = flags.FLAGS
flags.DEFINE_list(
    "models", ["bert_base", "bert_mini"], "bert_tf.modeling.PRESETS shapes to export."
)
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes of the serving calls.")
flags.DEFINE_integer("calls", 100, "Timed calls per batch size and path.")
flags.DEFINE_integer("max_seq_length", 128, "The export's max_seq_length.")
flags.DEFINE_integer("threads", 0, "Compute threads (0 = one per core).")
flags.DEFINE_string(
    "input_file", os.path.join(SHARED_DIR, "data", "austen_sentences.txt"), "One text per line."
)
flags.DEFINE_string("vocab_file", os.path.join(REPO_DIR, "sample_data", "vocab.txt"), "Vocabulary.")

PATHS = {
    "text": "serving_default (raw strings)",
    "ids": "serve_ids (ids padded to the batch's longest)",
    "ids_fixed": "serve_ids (ids padded to max_seq_length)",
    "preprocess": "preprocess only (tokenize + pack)",
}


def _export(model_name, export_dir):
    """export_saved_model.py --model_type=encoder of a `model_name` encoder (its initial weights)."""
    from bert_tf.modeling import BertConfig, BertModel

    model = BertModel(BertConfig.from_preset(model_name))
    model.build()
    checkpoint, config_file = scripts.save_encoder(model, export_dir + "_checkpoint")
    return scripts.export_encoder(
        checkpoint, config_file, FLAGS.vocab_file, export_dir, max_seq_length=FLAGS.max_seq_length
    )


def _batches(lines, batch_size, count):
    return [
        [lines[(i * batch_size + j) % len(lines)] for j in range(batch_size)] for i in range(count)
    ]


def measure(export_path, lines, batch_size):
    """{path: per-call seconds} over FLAGS.calls batches, plus the mean padded length."""
    import tensorflow as tf

    loaded = tf.saved_model.load(export_path)
    serve_text = loaded.signatures["serving_default"]
    serve_ids = loaded.signatures["serve_ids"]
    preprocess = loaded.signatures["preprocess"]
    batches = [tf.constant(b) for b in _batches(lines, batch_size, FLAGS.calls + 3)]
    ids = [preprocess(text_a=b) for b in batches]
    fixed = [
        {
            name: tf.pad(value, [[0, 0], [0, FLAGS.max_seq_length - value.shape[1]]])
            for name, value in features.items()
        }
        for features in ids
    ]
    calls = {
        "text": lambda i: serve_text(text_a=batches[i]),
        "ids": lambda i: serve_ids(**ids[i]),
        "ids_fixed": lambda i: serve_ids(**fixed[i]),
        "preprocess": lambda i: preprocess(text_a=batches[i]),
    }
    seconds = {path: [] for path in calls}
    for i in range(len(batches)):
        for path, call in calls.items():
            start = time.perf_counter()
            outputs = call(i)
            next(iter(outputs.values())).numpy()
            if i >= 3:  # the first calls warm up
                seconds[path].append(time.perf_counter() - start)
    length = float(np.mean([features["input_ids"].shape[1] for features in ids]))
    return seconds, length


def main(argv):
    del argv
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    threads = machine.set_threads(FLAGS.threads)
    with open(FLAGS.input_file, encoding="utf-8") as reader:
        lines = [line.strip() for line in reader if line.strip()]
    print(machine.header())
    print(
        f"{FLAGS.input_file}: {len(lines)} lines; {FLAGS.calls} timed calls per row, "
        f"{threads} compute threads, max_seq_length {FLAGS.max_seq_length}\n",
        flush=True,
    )
    rows = []
    work_dir = tempfile.mkdtemp(prefix="bench_serving_")
    for model_name in FLAGS.models:
        export_path = _export(model_name, os.path.join(work_dir, model_name))
        for batch_size in map(int, FLAGS.batch_sizes):
            seconds, length = measure(export_path, lines, batch_size)
            p50 = {path: 1e3 * float(np.median(s)) for path, s in seconds.items()}
            p95 = {path: 1e3 * float(np.percentile(s, 95)) for path, s in seconds.items()}
            rows.append((model_name, batch_size, length, p50, p95))
            print(model_name, batch_size, length, p50, flush=True)

    print(
        "\n| model | batch | mean padded length | "
        + " | ".join(f"{name}: p50 (p95) ms" for name in PATHS.values())
        + " | tokenizer overhead (text vs ids, p50) | dynamic vs fixed padding |"
    )
    print("|---|---|---|" + "---|" * len(PATHS) + "---|---|")
    for model_name, batch_size, length, p50, p95 in rows:
        cells = " | ".join(f"{p50[path]:.2f} ({p95[path]:.2f})" for path in PATHS)
        overhead = p50["text"] / p50["ids"] - 1
        speedup = p50["ids_fixed"] / p50["ids"]
        print(
            f"| {model_name} | {batch_size} | {length:.1f} | {cells} | {overhead:+.1%} | {speedup:.2f}x |"
        )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
