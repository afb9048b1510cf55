"""Distillation: all-MiniLM-L6-v2 fine-tuned as a teacher, distilled into 1-, 2- and 3-layer students.

For each set (bench_real_text.py's Rotten Tomatoes and tweets, or --questions_file's `label<TAB>text`
lines), training size and seed: the teacher (run_classifier.py from MiniLM, 6 layers), student_<n>
(run_distillation.py --student_layers=n from it, the set's other texts as --transfer_file),
alone_<n> (the same n MiniLM layers, spread as the student's, fine-tuned on the labels alone) and
tfidf_svm (TF-IDF 1-2 grams + LinearSVC).
Then batch-1 p50 of each export at --lengths word pieces (raw text, back to back, in this
process), in float32 and as LiteRT int8 (export_saved_model.py --litert=int8, with ai-edge-litert),
with each figure's share of the machine's matmul limit; --plot writes accuracy against latency (PNG).
Prints one JSON line per run, then the tables.

    .venv/bin/python -m bench.bench_distillation --work_dir=/tmp/distillation --seeds=1,2,3
    .venv/bin/python -m bench.bench_distillation --work_dir=/tmp/distillation_quick --quick
"""

import importlib.util
import json
import os
import random
import shutil

import numpy as np
from absl import app, flags

from bench import machine, minilm, scripts, stats, timing
from bench.bench_real_text import read_set, stratified_split

# bench_real_text.py's flags: --work_dir, --seeds, --split_seed, --short_max_seq_length, --threads.
FLAGS = flags.FLAGS
flags.DEFINE_list("distillation_sets", ["rotten_tomatoes", "tweets"], "Sets (and questions).")
flags.DEFINE_string("questions_file", None, "label<TAB>question lines: the questions set.")
flags.DEFINE_list("train_sizes", ["400", "2000"], "Training texts of each teacher and student.")
flags.DEFINE_integer("dev_size", 500, "Dev texts.")
flags.DEFINE_integer("test_size", 1000, "Test texts.")
flags.DEFINE_integer("transfer_size", 4000, "Transfer texts at most (the set's others).")
flags.DEFINE_list("layers", ["1", "2", "3"], "Student layers.")
flags.DEFINE_float("epochs", 3.0, "Epochs of every run.")
flags.DEFINE_float("temperature", 2.0, "run_distillation.py --temperature.")
flags.DEFINE_float("hard_label_weight", 0.5, "run_distillation.py --hard_label_weight.")
flags.DEFINE_list("lengths", ["8", "32", "128"], "Word pieces of the timed texts.")
flags.DEFINE_integer("timed_calls", 50, "Timed calls of each model at each length.")
flags.DEFINE_string("plot", None, "Where to write the accuracy-against-latency PNG.")
flags.DEFINE_bool("quick", False, "A smoke run: 64 texts, 1 seed, 1 epoch, 1 layer, 5 calls.")

QUICK = dict(
    train_sizes=["64"], dev_size=32, test_size=64, transfer_size=64, seeds=["1"], layers=["1"],
    epochs=1.0, timed_calls=5, lengths=["8", "32"], short_max_seq_length=32,
)  # fmt: skip


def split_set(name, train_size, seed):
    """(train, dev, test, transfer): [(label, text)] each; transfer the set's other texts."""
    from bench.corpora import deduplicated

    if name == "questions":
        with open(FLAGS.questions_file, encoding="utf-8") as lines:
            rows = [tuple(line.rstrip("\n").split("\t", 1)) for line in lines if "\t" in line]
    else:
        rows = read_set(name)
    rows, _ = deduplicated(rows)
    train, dev, test = stratified_split(
        rows, (train_size, FLAGS.dev_size, FLAGS.test_size), FLAGS.split_seed
    )
    used = {text for _, text in train + dev + test}
    others = [row for row in rows if row[1] not in used]
    random.Random(seed).shuffle(others)
    return train, dev, test, others[: FLAGS.transfer_size]


def write_data(folder, train, dev, test, transfer):
    os.makedirs(folder, exist_ok=True)
    for split, rows in (("train", train), ("dev", dev), ("test", test)):
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.writelines(f"{label}\t{text}\n" for label, text in rows)
    with open(os.path.join(folder, "transfer.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{text}\n" for _, text in transfer)


def _settings(data_dir, output_dir, seed, labels):
    return dict(
        data_dir=data_dir, output_dir=output_dir, task_name="tsv", text_a_column="1",
        label_column="0", labels=",".join(labels), do_train=True, do_predict=True,
        max_seq_length=FLAGS.short_max_seq_length, train_batch_size=32, predict_batch_size=64,
        learning_rate=5e-5, num_train_epochs=FLAGS.epochs, seed=seed, log_steps=50,
        save_checkpoints_steps=10**6, export_dir=os.path.join(output_dir, "export"),
    )  # fmt: skip


def _accuracy(output_dir, test):
    predicted = scripts.test_predictions(output_dir)
    return float(np.mean([p == label for p, (label, _) in zip(predicted, test, strict=True)]))


def _export(output_dir):
    """The version folder the run's --export_dir holds (a run writes one)."""
    export_dir = os.path.join(output_dir, "export")
    return os.path.join(export_dir, max(os.listdir(export_dir), key=int))


def teacher_run(model_dir, data_dir, output_dir, seed, labels):
    """run_classifier.py from model_dir's checkpoint; returns its export."""
    scripts.run(
        "run_classifier",
        **scripts.model_flags(model_dir),
        **_settings(data_dir, output_dir, seed, labels),
    )
    return _export(output_dir)


def student_run(teacher_dir, data_dir, output_dir, seed, labels, layers):
    """run_distillation.py --student_layers=layers from the teacher's run; returns its export."""
    scripts.run(
        "run_distillation", teacher_dir=teacher_dir, student_layers=layers,
        transfer_file=os.path.join(data_dir, "transfer.txt"), temperature=FLAGS.temperature,
        hard_label_weight=FLAGS.hard_label_weight, **_settings(data_dir, output_dir, seed, labels),
    )  # fmt: skip
    return _export(output_dir)


def shallow_minilm(model_dir, layers, folder):
    """The pretrained MiniLM with `layers` of its layers, spread as run_distillation.py spreads a
    student's (the top layer of each of `layers` equal groups), in Google's layout: the start of
    the student fine-tuned without its teacher."""
    import dataclasses

    from bert_tf import BertConfig, BertModel, load_google_checkpoint

    if os.path.exists(os.path.join(folder, "bert_model.ckpt.index")):
        return folder
    config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
    teacher_layers = config.num_hidden_layers
    chosen = [(index + 1) * teacher_layers // layers - 1 for index in range(layers)]
    full = BertModel(config)
    shallow = BertModel(dataclasses.replace(config, num_hidden_layers=layers))
    for model in (full, shallow):
        model(model.dummy_inputs(), training=False)
    load_google_checkpoint(full, os.path.join(model_dir, "bert_model.ckpt"))
    shallow.embeddings.set_weights(full.embeddings.get_weights())
    shallow.pooler.set_weights(full.pooler.get_weights())
    for student_layer, teacher_layer in enumerate(chosen):
        shallow.encoder_layers[student_layer].set_weights(
            full.encoder_layers[teacher_layer].get_weights()
        )
    scripts.save_encoder(shallow, folder)
    shutil.copy(os.path.join(model_dir, "vocab.txt"), folder)
    return folder


def tfidf_svm(train, test):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    svm = LinearSVC().fit(vectorizer.fit_transform([t for _, t in train]), [y for y, _ in train])
    predicted = svm.predict(vectorizer.transform([t for _, t in test]))
    return float(np.mean([p == y for p, (y, _) in zip(predicted, test, strict=True)]))


def latency(exports):
    """{model: {length: p50 ms}} of batch-1 raw-text calls, float32 and LiteRT int8, back to back."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    calls = {}
    for name, (output_dir, path) in exports.items():
        serve = tf.saved_model.load(path).signatures["serving_default"]
        calls[name] = lambda texts, serve=serve: serve(text_a=tf.constant(texts))
        if importlib.util.find_spec("ai_edge_litert") is not None:
            calls[f"{name}_int8"] = _litert_call(output_dir)
    results = {name: {} for name in calls}
    for length in (int(n) for n in FLAGS.lengths):
        text = [" ".join(["the"] * (length - 2))]  # length word pieces with [CLS] and [SEP]
        for name, call in calls.items():
            call(text)  # the first call traces
            seconds = [timing.timed(call, text)[0] for _ in range(FLAGS.timed_calls)]
            results[name][length] = 1e3 * float(np.median(seconds))
    return results


def _litert_call(output_dir):
    """A raw-text call of the run's LiteRT int8 serve_ids (export_saved_model.py --litert=int8),
    tokenized by its export's preprocess."""
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    export_dir = os.path.join(output_dir, "export_litert")
    version = scripts.run(
        "export_saved_model", init_checkpoint=output_dir, export_dir=export_dir, litert="int8",
        vocab_file=os.path.join(output_dir, "vocab.txt"),
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    preprocess = tf.saved_model.load(version).signatures["preprocess"]
    # --threads=0 leaves TensorFlow's choice; LiteRT needs a count: the machine's cores.
    interpreter = Interpreter(
        model_path=f"{version.rstrip('/')}_serve_ids_int8.tflite",
        num_threads=FLAGS.threads or os.cpu_count(),
    )
    runner = interpreter.get_signature_runner("serve_ids")

    def call(texts):
        features = preprocess(text_a=tf.constant(texts))
        return runner(**{name: np.asarray(value) for name, value in features.items()})

    return call


def limits_ms(bert_config, models):
    """{model: {length: ms}}: batch-1 encoder matmul FLOPs (the model's layers) over the measured
    float32 matmul rate (int8 rows are held to it too)."""
    import dataclasses

    rate = machine.matmul_rates(("float32",))["float32"]
    limits = {}
    for model in models:
        base = model.removesuffix("_int8")
        layers = bert_config.num_hidden_layers if base == "teacher" else int(base.split("_")[1])
        config = dataclasses.replace(bert_config, num_hidden_layers=layers)
        limits[model] = {
            int(n): 1e3 * machine.encoder_flops(config, int(n)) / rate / 1e9 for n in FLAGS.lengths
        }
    return limits


def run_one(name, train_size, seed, model_dir, work_dir):
    """Every model of one set, size and seed: its accuracies (JSON lines) and its exports."""
    folder = os.path.join(work_dir, name, f"{train_size}_seed{seed}")
    train, dev, test, transfer = split_set(name, train_size, seed)
    labels = sorted({label for label, _ in train})
    data_dir = os.path.join(folder, "data")
    write_data(data_dir, train, dev, test, transfer)
    teacher_dir = os.path.join(folder, "teacher")
    exports = {
        "teacher": (teacher_dir, teacher_run(model_dir, data_dir, teacher_dir, seed, labels))
    }
    accuracies = {"teacher": _accuracy(teacher_dir, test)}
    for layers in (int(n) for n in FLAGS.layers):
        student_dir = os.path.join(folder, f"student_{layers}")
        export = student_run(teacher_dir, data_dir, student_dir, seed, labels, layers)
        accuracies[f"student_{layers}"] = _accuracy(student_dir, test)
        exports[f"student_{layers}"] = (student_dir, export)
        shallow = shallow_minilm(model_dir, layers, os.path.join(work_dir, f"minilm_{layers}"))
        alone_dir = os.path.join(folder, f"alone_{layers}")
        teacher_run(shallow, data_dir, alone_dir, seed, labels)
        accuracies[f"alone_{layers}"] = _accuracy(alone_dir, test)
    accuracies["tfidf_svm"] = tfidf_svm(train, test)
    row = {"set": name, "train": train_size, "seed": seed, "transfer": len(transfer),
           "test": len(test), "accuracy": accuracies}  # fmt: skip
    print(json.dumps(row), flush=True)
    return row, exports


def print_tables(rows, times, limits):
    print("\nTest accuracy, mean ± standard error over the seeds (%)")
    for (name, size), group in _grouped(rows).items():
        cells = []
        for model in group[0]["accuracy"]:
            values = [row["accuracy"][model] for row in group]
            cells.append(f"{model} {stats.format_mean(values, digits=1, scale=100)}")
        print(f"  {name} {size}: " + ", ".join(cells))
    print("\nBatch-1 p50 of the exports (ms; share of the machine's limit in brackets)")
    for model, by_length in times.items():
        shown = [f"{n}: {ms:.2f} ({limits[model][n] / ms:.0%})" for n, ms in by_length.items()]
        print(f"  {model:<18} " + ", ".join(shown))


def _grouped(rows):
    groups = {}
    for row in rows:
        groups.setdefault((row["set"], row["train"]), []).append(row)
    return groups


def plot(rows, times, path):
    """Mean test accuracy (all sets and seeds) against the 32-piece p50 (else the longest timed),
    one labelled point a model (an int8 point at its float32 model's accuracy: int8's own is not
    measured), as a PNG drawn with Pillow (matplotlib is not installed here)."""
    from PIL import Image, ImageDraw, ImageFont

    lengths = next(iter(times.values()))
    length = 32 if 32 in lengths else max(lengths)
    points = {
        model: (by_length[length], 100 * float(np.mean(
            [row["accuracy"][model.removesuffix("_int8")] for row in rows]
        )))
        for model, by_length in times.items()
    }  # fmt: skip
    xs, ys = [x for x, _ in points.values()], [y for _, y in points.values()]
    x_range, y_range = (0.0, 1.1 * max(xs)), (min(ys) - 2, max(ys) + 2)
    left, top, right, bottom = 70, 30, 560, 330
    image = Image.new("RGB", (600, 380), "white")
    draw, font = ImageDraw.Draw(image), ImageFont.load_default()

    def to_pixel(x, y):
        fx = (x - x_range[0]) / (x_range[1] - x_range[0])
        fy = (y - y_range[0]) / (y_range[1] - y_range[0])
        return left + fx * (right - left), bottom - fy * (bottom - top)

    draw.rectangle([left, top, right, bottom], outline=(0, 0, 0))
    for fraction in (0, 0.25, 0.5, 0.75, 1):
        x = x_range[0] + fraction * (x_range[1] - x_range[0])
        y = y_range[0] + fraction * (y_range[1] - y_range[0])
        draw.text((to_pixel(x, y_range[0])[0] - 10, bottom + 6), f"{x:.1f}", fill=0, font=font)
        draw.text((8, to_pixel(x_range[0], y)[1] - 6), f"{y:.1f}", fill=0, font=font)
    draw.text((left + 120, bottom + 28), f"batch-1 p50 at {length} word pieces (ms)", fill=0)
    draw.text((left, 10), "test accuracy (%) against latency", fill=0, font=font)
    for model, (x, y) in points.items():
        px, py = to_pixel(x, y)
        color = (214, 39, 40) if model.endswith("_int8") else (31, 119, 180)
        draw.ellipse([px - 4, py - 4, px + 4, py + 4], fill=color)
        draw.text((px + 6, py - 6), model, fill=color, font=font)
    image.save(path)


def main(argv):
    del argv
    if FLAGS.quick:
        for name, value in QUICK.items():
            setattr(FLAGS, name, value)
    machine.set_threads(FLAGS.threads)
    print(machine.header())
    model_dir = minilm.converted(FLAGS.work_dir)
    rows, exports = [], {}
    for name in FLAGS.distillation_sets:
        for size in (int(n) for n in FLAGS.train_sizes):
            for seed in (int(s) for s in FLAGS.seeds):
                row, exports = run_one(name, size, seed, model_dir, FLAGS.work_dir)
                rows.append(row)
    # The latency of the last run's exports (every run's models have the same shapes).
    from bert_tf import BertConfig

    times = latency(exports)
    config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
    limits = limits_ms(config, times)
    print_tables(rows, times, limits)
    if FLAGS.plot:
        plot(rows, times, FLAGS.plot)
        print(f"plot: {FLAGS.plot}")


if __name__ == "__main__":
    app.run(main)
