"""The speed of BertTextClassifier.fit against keras-hub's BertTextClassifier.fit, same model, same run.

Both start from all-MiniLM-L6-v2 (6 layers x 384, converted by convert_checkpoint.py), set to the
tanh GELU that keras-hub's BERT computes (MiniLM's own is the erf form, which keras-hub cannot
express; the speed is the same); keras-hub's BertBackbone reads the preset convert_checkpoint.py
--output_format=keras_hub writes from that folder, so both hold the same weights (checked: the
pooled outputs of a few texts agree before timing). Each gets a new 2-class head and fits the same
Rotten Tomatoes sentences (bench_real_text.py's split) as Python lists:
`fit(x=texts, y=labels, batch_size, epochs)`.

What is the same: the texts, batch size, epochs, max_seq_length (keras-hub's sequence_length), the
head (dropout 0.1 on the pooled output, then a dense layer), the loss (sparse categorical
cross-entropy of logits), the optimizer (the original's AdamW, 10% warmup, linear decay over the
fit's steps: ours by its default compile, keras-hub compiled with bert_tf.optimization's
create_optimizer of the same length), jit_compile=False, and the threads. What differs is each
library's own: ours pads each batch to its longest text, keras-hub pads every text to
sequence_length; the "keras_hub_xla" system is keras-hub compiled with jit_compile=True (what its
compile's default "auto" picks where XLA can compile the model).

The systems take turns, round after round; each fit's epochs after the first (which traces the
graphs) are timed. Prints one JSON line per fit and a table of examples/s (mean ± SE over rounds).

    .venv/bin/python -m bench.bench_keras_hub_fit --work_dir=/tmp/keras_hub_fit --rounds=3
"""

import json
import os
import shutil
import time

import keras
import numpy as np
from absl import app, flags

from bench import corpora, machine, minilm, stats
from bench.bench_real_text import read_set, stratified_split

# bench_real_text.py's flags name the data and split (--work_dir, --rotten_tomatoes_sizes,
# --split_seed, --short_max_seq_length, --threads, --batch_size).
FLAGS = flags.FLAGS
flags.DEFINE_integer("rounds", 3, "Rounds; each fits every system once, in turn.")
flags.DEFINE_integer("epochs", 3, "Epochs of each fit; the first is not timed (tracing).")
flags.DEFINE_list("hub_systems", ["ours", "keras_hub", "keras_hub_xla"], "The systems to time.")

LEARNING_RATE = 5e-5


class EpochTimes(keras.callbacks.Callback):
    """The wall seconds of each epoch."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)


def tanh_gelu_copy(model_dir, work_dir):
    """A copy of the converted model computing the tanh GELU, the one keras-hub's BERT computes
    (MiniLM's own is the erf form): both systems then run the same function of the same weights."""
    folder = os.path.join(work_dir, "all-MiniLM-L6-v2-tanh-gelu")
    if not os.path.exists(os.path.join(folder, "bert_model.ckpt.index")):
        shutil.copytree(model_dir, folder, dirs_exist_ok=True)
        os.remove(os.path.join(folder, "embedding.json"))  # a classifier's encoder, not embeddings
        config_path = os.path.join(folder, "bert_config.json")
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump({**config, "hidden_act": "gelu"}, f, indent=2)
    return folder


def keras_hub_preset(model_dir, work_dir):
    """The keras-hub preset of model_dir (convert_checkpoint.py --output_format=keras_hub)."""
    from bert_tf.formats.convert import ConvertSettings, run

    folder = os.path.join(work_dir, "all-MiniLM-L6-v2-keras-hub")
    if not os.path.exists(os.path.join(folder, "model.weights.h5")):
        run(
            ConvertSettings(
                init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
                vocab_file=os.path.join(model_dir, "vocab.txt"),
                output_format="keras_hub",
                output_dir=folder,
            )
        )
    return folder


def ours(model_dir, seed):
    from bert_tf import BertTextClassifier

    keras.utils.set_random_seed(seed)
    return BertTextClassifier.from_preset(
        model_dir, num_classes=2, max_seq_length=FLAGS.short_max_seq_length
    )


def keras_hub_classifier(preset, seed, num_train_steps, jit_compile):
    import keras_hub

    from bert_tf.optimization import create_optimizer

    keras.utils.set_random_seed(seed)
    tokenizer = keras_hub.models.BertTokenizer.from_preset(preset)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=FLAGS.short_max_seq_length
    )
    backbone = keras_hub.models.BertBackbone.from_preset(preset)
    model = keras_hub.models.BertTextClassifier(
        backbone, num_classes=2, preprocessor=preprocessor, activation=None, dropout=0.1
    )
    warmup = int(num_train_steps * 0.1)
    model.compile(
        optimizer=create_optimizer(LEARNING_RATE, num_train_steps, warmup),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
    return model


def pooled_difference(model_dir, preset, texts):
    """The largest difference between the two encoders' pooled outputs of `texts` (the same
    weights and tokenizer give float32 rounding)."""
    import keras_hub

    model = ours(model_dir, seed=0)
    pooled = model.task_model.bert(model.preprocessor.features(texts), training=False)
    tokenizer = keras_hub.models.BertTokenizer.from_preset(preset)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=FLAGS.short_max_seq_length
    )
    backbone = keras_hub.models.BertBackbone.from_preset(preset)
    hub_pooled = backbone(preprocessor(texts), training=False)["pooled_output"]
    return float(np.max(np.abs(pooled["pooled_output"].numpy() - np.asarray(hub_pooled))))


def fit_once(system, model_dir, preset, texts, labels, seed):
    """{system, seed, epoch_s, examples_per_s (epochs after the first), accuracy (last epoch)}."""
    batch_size, epochs = FLAGS.batch_size, FLAGS.epochs
    num_train_steps = -(-len(texts) // batch_size) * epochs
    if system == "ours":
        model = ours(model_dir, seed)
    else:
        model = keras_hub_classifier(preset, seed, num_train_steps, system == "keras_hub_xla")
    timer = EpochTimes()
    history = model.fit(
        x=texts, y=labels, batch_size=batch_size, epochs=epochs, verbose=0, callbacks=[timer]
    )
    later = timer.seconds[1:]
    return {
        "system": system,
        "seed": seed,
        "epoch_s": [round(s, 2) for s in timer.seconds],
        "examples_per_s": len(texts) * len(later) / sum(later),
        "train_accuracy": round(float(history.history["accuracy"][-1]), 4),
    }


def main(argv):
    del argv
    if FLAGS.epochs < 2:
        raise ValueError(f"--epochs={FLAGS.epochs}: at least 2 (the first is not timed)")
    unknown = set(FLAGS.hub_systems) - {"ours", "keras_hub", "keras_hub_xla"}
    if unknown:
        raise ValueError(f"--hub_systems: unknown {sorted(unknown)}")
    machine.set_threads(FLAGS.threads)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    model_dir = tanh_gelu_copy(minilm.converted(FLAGS.work_dir), FLAGS.work_dir)
    preset = keras_hub_preset(model_dir, FLAGS.work_dir)
    rows, _ = corpora.deduplicated(read_set("rotten_tomatoes"))
    sizes = [int(s) for s in FLAGS.rotten_tomatoes_sizes]
    train, _, _ = stratified_split(rows, sizes, FLAGS.split_seed)
    texts, labels = [t for _, t in train], np.array([int(label) for label, _ in train])
    print(machine.header(), flush=True)
    difference = pooled_difference(model_dir, preset, texts[:8])
    print(f"pooled outputs of 8 texts, ours vs keras-hub: max difference {difference:.2e}")
    if difference > 1e-4:
        raise ValueError(f"the two encoders differ by {difference:.2e}: not the same model")
    results = {}
    for round_index in range(FLAGS.rounds):
        for system in FLAGS.hub_systems:  # taking turns, round by round
            row = fit_once(system, model_dir, preset, texts, labels, seed=round_index + 1)
            results.setdefault(system, []).append(row["examples_per_s"])
            print(
                json.dumps({**row, "examples_per_s": round(row["examples_per_s"], 2)}), flush=True
            )
    print(machine.load_line())
    print(
        f"\nRotten Tomatoes {len(texts)} train sentences, all-MiniLM-L6-v2 (6 x 384), batch "
        f"{FLAGS.batch_size}, max_seq_length {FLAGS.short_max_seq_length}, {FLAGS.epochs} epochs "
        f"(epochs 2..{FLAGS.epochs} timed), {FLAGS.threads or os.cpu_count()} threads"
    )
    print("| system | fits | examples/s (mean ± SE) | ours / system |\n|---|---|---|---|")
    ours_mean = np.mean(results["ours"]) if "ours" in results else None
    for system, values in results.items():
        ratio = f"{ours_mean / np.mean(values):.2f}x" if ours_mean is not None else "-"
        print(f"| {system} | {len(values)} | {stats.format_mean(values, digits=1)} | {ratio} |")


if __name__ == "__main__":
    app.run(main)
