"""Do the bfloat16 export and the LiteRT files answer as the float32 export? Rotten Tomatoes dev.

all-MiniLM-L6-v2 (6 layers x 384 hidden, 12 heads, 22.7M weights: real pretrained weights,
bench/minilm.py) is fine-tuned on bench_real_text.py's Rotten Tomatoes split (its flags:
--rotten_tomatoes_sizes, --split_seed, --short_max_seq_length, --batch_size, --threads, --work_dir)
with `ClassifierRun` (run_classifier.py's code), then exported by export_saved_model.py's code
(`export_checkpoint`): float32; --mixed_precision=mixed_bfloat16 (kernels and tables stored in
bfloat16; only on CPUs with a bfloat16 matmul); and the float32 export's serve_ids as float32 and
int8 (dynamic-range) LiteRT files, run by ai-edge-litert's interpreter on the float32 export's
`preprocess` ids. Every export answers every dev text; the table gives each one's dev accuracy, the
share of its predictions equal to the float32 export's, and its largest probability difference.

    .venv/bin/python -m bench.bench_quantized_agreement --rotten_tomatoes_sizes=4000,1000,0
"""

import os
import shutil
import sys
import time

import numpy as np
from absl import app, flags, logging

from bench import bench_real_text, machine, minilm

FLAGS = flags.FLAGS
flags.DEFINE_float("agreement_learning_rate", 5e-5, "Peak learning rate of the fine-tuning.")
flags.DEFINE_float("agreement_epochs", 3.0, "Training epochs.")
flags.DEFINE_integer("agreement_seed", 1, "Seed of the head's initialization and dropout.")

SET = "rotten_tomatoes"
BATCH = 64  # dev texts per serving call


def fine_tune(data_dir, model_dir, run_dir):
    """Fine-tunes MiniLM on data_dir's train.tsv into run_dir (run_classifier.py --do_train
    --do_eval: the checkpoint and task.json the export reads); returns the dev accuracy."""
    from bert_tf.tasks.classification.task import ClassifierRun

    config = bench_real_text.tsv_classifier_config(
        data_dir, model_dir, run_dir, do_train=True, do_eval=True,
        max_seq_length=FLAGS.short_max_seq_length, train_batch_size=FLAGS.batch_size,
        eval_batch_size=BATCH, learning_rate=FLAGS.agreement_learning_rate,
        num_train_epochs=FLAGS.agreement_epochs, seed=FLAGS.agreement_seed,
    )  # fmt: skip
    shutil.rmtree(run_dir, ignore_errors=True)  # a run cut off earlier starts again
    return float(ClassifierRun(config).run()["eval"]["eval_accuracy"])


def export(run_dir, model_dir, export_dir, mixed_precision="float32"):
    """The run exported as export_saved_model.py exports it; returns the version folder."""
    from bert_tf.tasks.exporting import ExportSettings, export_checkpoint

    config = ExportSettings(
        init_checkpoint=run_dir, export_dir=export_dir,
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        mixed_precision=mixed_precision,
    )  # fmt: skip
    return export_checkpoint(config)


def saved_model_probabilities(path, texts):
    """[len(texts), labels] float32: the export's serving_default, BATCH texts a call."""
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    return np.concatenate(
        [
            serve(text_a=tf.constant(texts[i : i + BATCH]))["probabilities"].numpy()
            for i in range(0, len(texts), BATCH)
        ]
    )


def litert_probabilities(tflite_file, saved_model_path, texts):
    """The same from a LiteRT file, fed the export's own `preprocess` ids, BATCH texts a call."""
    import tensorflow as tf

    from bert_tf import litert

    preprocess = tf.saved_model.load(saved_model_path).signatures["preprocess"]
    runner = litert.signature_runner(tflite_file, num_threads=FLAGS.threads or None)
    probabilities = []
    for i in range(0, len(texts), BATCH):
        ids = preprocess(text_a=tf.constant(texts[i : i + BATCH]))
        outputs = runner(**{name: value.numpy() for name, value in ids.items()})
        probabilities.append(outputs["probabilities"])
    return np.concatenate(probabilities)


def agreement(reference, probabilities, labels, label_names):
    """(accuracy, share of argmax equal to the reference's, max |probability difference|)."""
    predicted = probabilities.argmax(-1)
    names = np.asarray(label_names)[predicted]
    accuracy = float(np.mean(names == np.asarray(labels)))
    equal = float(np.mean(predicted == reference.argmax(-1)))
    return accuracy, equal, float(np.abs(probabilities - reference).max())


def variants(run_dir, model_dir, work_dir, texts):
    """({name: probabilities [texts, labels]} of every export that runs here, float32 first;
    the label of each probability column, from the export's assets/labels.txt)."""
    from bert_tf import litert

    float32 = export(run_dir, model_dir, os.path.join(work_dir, "export_float32"))
    with open(os.path.join(float32, "assets", "labels.txt"), encoding="utf-8") as reader:
        label_names = reader.read().splitlines()
    results = {"float32 SavedModel (serving_default)": saved_model_probabilities(float32, texts)}
    if not machine.skips_precision("mixed_bfloat16"):
        bfloat16 = export(
            run_dir, model_dir, os.path.join(work_dir, "export_bfloat16"), "mixed_bfloat16"
        )
        results["bfloat16 SavedModel (serving_default)"] = saved_model_probabilities(
            bfloat16, texts
        )
    for quantization in litert.QUANTIZATIONS:
        try:
            tflite_file = litert.write_tflite(float32, quantization)
        except Exception as error:  # ai-edge-litert missing: the table says so
            print(f"LiteRT {quantization}: skipped ({error})")
            continue
        results[f"LiteRT {quantization} (serve_ids)"] = litert_probabilities(
            tflite_file, float32, texts
        )
    return results, label_names


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    try:
        bench_real_text.read_set(SET)
    except FileNotFoundError as error:
        print(f"bench_quantized_agreement.py: {error}", file=sys.stderr)
        sys.exit(2)
    threads = machine.set_threads(FLAGS.threads)
    work_dir = os.path.join(FLAGS.work_dir, "quantized_agreement")
    os.makedirs(work_dir, exist_ok=True)
    model_dir = minilm.converted(FLAGS.work_dir)
    print(machine.header())
    data_dir, (train, dev, _), notes = bench_real_text.prepare(SET, work_dir)
    print(
        f"all-MiniLM-L6-v2 (6 layers x 384 hidden, 12 heads) fine-tuned on {len(train)} Rotten "
        f"Tomatoes texts ({notes}), max_seq_length {FLAGS.short_max_seq_length}, batch "
        f"{FLAGS.batch_size}, learning rate {FLAGS.agreement_learning_rate}, "
        f"{FLAGS.agreement_epochs:g} epochs, seed {FLAGS.agreement_seed}; "
        f"{machine.threads_line(threads)}; {machine.load_line()}",
        flush=True,
    )
    start = time.perf_counter()
    run_dir = os.path.join(work_dir, "run")
    eval_accuracy = fine_tune(data_dir, model_dir, run_dir)
    print(f"fine-tuned in {time.perf_counter() - start:.0f} s; run_classifier's dev accuracy "
          f"{100 * eval_accuracy:.2f}%", flush=True)  # fmt: skip
    labels, texts = [label for label, _ in dev], [text for _, text in dev]
    results, label_names = variants(run_dir, model_dir, work_dir, texts)
    reference = next(iter(results.values()))
    print(f"\n{len(texts)} dev texts\n")
    print("| export | dev accuracy | predictions equal to float32's | max abs probability diff |")
    print("|---|---|---|---|")
    for name, probabilities in results.items():
        accuracy, equal, diff = agreement(reference, probabilities, labels, label_names)
        print(f"| {name} | {100 * accuracy:.2f}% | {100 * equal:.2f}% | {diff:.2e} |")
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
