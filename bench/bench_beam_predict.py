"""Batch prediction on Apache Beam: batch_predict.py's examples/s against a direct loop over the export.

A classifier (random weights, the --model shape, max_seq_length 128) exported by
BertTextClassifier.export predicts --rows sentences of ../shared/data/austen_sentences.txt (one TSV
file), each path writing the same JSON lines: a direct loop over serving_default in one process (the
peer), and batch_predict.py as a user runs it (its own process) on Beam's local runner (one worker)
and on DirectRunner with 2 worker processes. Each run is timed whole by the wall clock, --repeats
times in turns (the fastest shown, with its CPU time, this process's and its children's); each path
also runs on --startup_rows rows: its fixed cost, and (rows - startup_rows) / (time - fixed cost)
its steady rate.

    .venv/bin/python -m bench.bench_beam_predict
    .venv/bin/python -m bench.bench_beam_predict --model=bert_tiny --rows=500     # quick
"""

import glob
import json
import os
import tempfile
import time

from absl import app, flags

from bench import REPO_DIR, SHARED_DIR, machine, scripts

MULTI_PROCESS = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"

FLAGS = flags.FLAGS
flags.DEFINE_string("model", "bert_mini", "bert_tf.modeling.PRESETS shape (bert_mini: L-4_H-256).")
flags.DEFINE_integer("rows", 4000, "Sentences to predict.")
flags.DEFINE_integer("startup_rows", 64, "Rows of the small run that measures each fixed cost.")
flags.DEFINE_integer("batch_size", 64, "The direct loop's batch; batch_predict's --max_batch_size.")
flags.DEFINE_integer("repeats", 2, "Runs of each path and size; the table shows the fastest.")
flags.DEFINE_integer("max_seq_length", 128, "The export's max_seq_length.")
flags.DEFINE_string(
    "input_file", os.path.join(SHARED_DIR, "data", "austen_sentences.txt"), "One text per line."
)
flags.DEFINE_string("vocab_file", os.path.join(REPO_DIR, "sample_data", "vocab.txt"), "Vocabulary.")

PATHS = {
    "direct": "direct loop: serving_default, one process",
    "beam_default": "batch_predict, local runner, default options (1 worker, in process)",
    "beam_2_processes": "batch_predict, DirectRunner, 2 worker processes",
}


def _export(export_dir):
    """A two-label classifier of the --model shape (random weights), exported by the Keras API."""
    import keras

    from bert_tf import BertConfig, BertPreprocessor, BertTextClassifier

    keras.utils.set_random_seed(1)
    preprocessor = BertPreprocessor(FLAGS.vocab_file, max_seq_length=FLAGS.max_seq_length)
    classifier = BertTextClassifier(
        preprocessor, BertConfig.from_preset(FLAGS.model), num_classes=2, labels=["neg", "pos"],
        text_pairs=False,
    )  # fmt: skip
    classifier.export(export_dir)
    return export_dir


def _write_tsv(path, texts):
    with open(path, "w", encoding="utf-8") as file:
        file.write("text_a\n" + "".join(text.replace("\t", " ") + "\n" for text in texts))


def direct_loop(export_path, input_file, output_file):
    """The peer: batches of the TSV's rows through serving_default, one JSON line per row."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)

    serve = tf.saved_model.load(export_path).signatures["serving_default"]
    with open(input_file, encoding="utf-8") as file:
        texts = file.read().splitlines()[1:]
    with open(output_file, "w", encoding="utf-8") as out:
        for start in range(0, len(texts), FLAGS.batch_size):
            batch = texts[start : start + FLAGS.batch_size]
            outputs = serve(text_a=tf.constant(batch))
            labels = outputs["label"].numpy()
            probabilities = outputs["probabilities"].numpy()
            for i in range(len(batch)):
                record = {
                    "input_file": input_file,
                    "line": start + i + 2,
                    "label": labels[i].decode("utf-8"),
                    "probabilities": probabilities[i].tolist(),
                }
                out.write(json.dumps(record) + "\n")


def beam_run(export_path, input_file, output_file, options):
    """batch_predict.py as a user runs it, in a process of its own."""
    scripts.run(
        "batch_predict", export_dir=export_path, input_file=input_file, output_file=output_file,
        beam_pipeline_options=options, max_batch_size=FLAGS.batch_size,
    )  # fmt: skip


def _count_lines(pattern):
    total = 0
    for path in glob.glob(pattern):
        with open(path, encoding="utf-8") as file:
            total += sum(1 for _ in file)
    return total


def main(argv):
    del argv
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    with open(FLAGS.input_file, encoding="utf-8") as reader:
        texts = [line.strip() for line in reader if line.strip()][: FLAGS.rows]
    print(machine.header())
    work_dir = tempfile.mkdtemp(prefix="bench_beam_predict_")
    export_path = _export(os.path.join(work_dir, "export"))
    inputs = {}
    for size in (FLAGS.startup_rows, len(texts)):
        inputs[size] = os.path.join(work_dir, f"rows_{size}.tsv")
        _write_tsv(inputs[size], texts[:size])
    print(
        f"{FLAGS.input_file}: {len(texts)} sentences (fixed cost: {FLAGS.startup_rows}); "
        f"{FLAGS.model} classifier, max_seq_length {FLAGS.max_seq_length}, batches of at most "
        f"{FLAGS.batch_size}; {os.cpu_count()} cores\n",
        flush=True,
    )
    runs = {
        "direct": lambda i, o: direct_loop(export_path, i, o),
        "beam_default": lambda i, o: beam_run(export_path, i, o, ""),
        "beam_2_processes": lambda i, o: beam_run(export_path, i, o, MULTI_PROCESS),
    }
    seconds = {}
    for repeat in range(FLAGS.repeats):  # the paths take turns, so load falls on all of them
        for size in inputs:
            for path, call in runs.items():
                output_file = os.path.join(work_dir, f"out_{path}_{size}_{repeat}")
                start, start_cpu = time.perf_counter(), _cpu_seconds()
                call(inputs[size], output_file)
                elapsed, cpu = time.perf_counter() - start, _cpu_seconds() - start_cpu
                assert _count_lines(output_file + "*") == size, (path, size)
                if elapsed < seconds.get((path, size), (float("inf"), 0))[0]:
                    seconds[path, size] = (elapsed, cpu)
                print(f"{path}, {size} rows: {elapsed:.1f} s, {cpu:.1f} CPU s", flush=True)
    _print_table(seconds, FLAGS.startup_rows, len(texts))
    print(machine.load_line())


def _cpu_seconds():
    """User + system CPU time of this process and of its finished children (Beam's workers)."""
    import resource

    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _print_table(seconds, small, large):
    print(
        f"\n| path | examples/s ({large} rows, wall) | wall s | CPU s | examples per CPU s | "
        f"fixed cost s ({small} rows) | steady examples/s | examples/s vs direct loop |"
    )
    print("|---|---|---|---|---|---|---|---|")
    direct_rate = large / seconds["direct", large][0]
    for path, name in PATHS.items():
        (total, cpu), (fixed, _) = seconds[path, large], seconds[path, small]
        # Too little time past the fixed cost (a tiny run, or noise) gives no steady rate.
        steady = f"{(large - small) / (total - fixed):.0f}" if total > 1.1 * fixed else "n/a"
        print(
            f"| {name} | {large / total:.0f} | {total:.1f} | {cpu:.0f} | {large / cpu:.0f} | "
            f"{fixed:.1f} | {steady} | "
            f"{large / total / direct_rate:.2f}x |"
        )


if __name__ == "__main__":
    app.run(main)
