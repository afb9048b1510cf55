"""One request at a time: the exported SavedModel as a server runs it, against transformers and keras-hub.

An encoder of `--model`'s shape (random weights, the same seed-0 weights for no one: only the time is
compared) is exported by `bert_tf.tasks.encoder.export_model`, the writer behind
export_saved_model.py. Each runner then lives in a process of its own, with `--threads` intra-op and
inter-op threads, and is called with the same raw strings of exactly N wordpieces ([CLS] and [SEP]
included; batch x N of `--shapes`):

  * bert_tf text: the export's `serving_default` (tokenizing and packing in the graph, then the
    encoder), in a process that imports only tensorflow and tensorflow_text, as TF Serving holds it;
  * bert_tf ids: the same export's `serve_ids`, fed the ids of those strings: the gap to the row above
    is tokenization's share;
  * transformers text: BertTokenizerFast (same vocab) + BertModel on torch under inference_mode,
    padding to the batch's longest;
  * transformers ids: the same BertModel fed the ids;
  * keras-hub text: keras_hub's BertTokenizer + [CLS]/[SEP] packing to the batch's longest + its
    BertBackbone, in one tf.function.

The parent only sends "call i of shape s" down a pipe: the runners take turns call by call, so load
from other work on the machine falls on all of them alike, and each times its own call (the pipe is
not in the time). p50 and p95 over `--calls` calls per shape, after 5 untimed ones.

    .venv/bin/python bench/bench_latency.py                           # BERT-base, 200 calls per shape
    .venv/bin/python bench/bench_latency.py --model=bert_tiny --calls=5 --runners=bert_tf   # smoke
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl import app, flags

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path.insert(0, REPO_DIR)
sys.path.insert(0, BENCH_DIR)

import machine  # noqa: E402

SHARED_DIR = os.environ.get("BERT_TF_SHARED_DIR", os.path.join(REPO_DIR, "..", "shared"))

FLAGS = flags.FLAGS
flags.DEFINE_string("model", "bert_base", "A bert_tf.modeling.PRESETS name.")
flags.DEFINE_list(
    "shapes", ["1x8", "1x32", "1x128", "4x32"], "batch x wordpieces ([CLS], [SEP] included)."
)
flags.DEFINE_list(
    "runners", ["bert_tf", "transformers", "keras_hub"], "Processes to run (each has two rows)."
)
flags.DEFINE_integer("calls", 200, "Timed calls per shape and runner.")
flags.DEFINE_integer("threads", 2, "Intra-op and inter-op threads of every runner.")
flags.DEFINE_integer("max_seq_length", 128, "The export's max_seq_length.")
flags.DEFINE_string(
    "input_file",
    os.path.join(SHARED_DIR, "data", "austen_sentences.txt"),
    "Words to make texts of.",
)
flags.DEFINE_string("vocab_file", os.path.join(REPO_DIR, "sample_data", "vocab.txt"), "Vocabulary.")
flags.DEFINE_string("worker", None, "Internal: run as this runner's worker process.")
flags.DEFINE_string("work_dir", None, "Internal: the worker's inputs and export.")

WARMUP_CALLS = 5
# Each runner process answers for two rows: the raw-text path and the ids path.
ROWS = {
    "bert_tf": ("bert_tf text (serving_default)", "bert_tf ids (serve_ids)"),
    "transformers": ("transformers text (tokenizer + model)", "transformers ids (model)"),
    "keras_hub": ("keras-hub text (tokenizer + packer + backbone)", None),
}


def parse_shapes(shapes):
    """[(batch, wordpieces)] from "BxN" strings; a malformed one is a ValueError naming the flag."""
    parsed = []
    for shape in shapes:
        batch, _, length = shape.partition("x")
        if not (batch.isdigit() and length.isdigit() and int(batch) > 0 and int(length) > 2):
            raise ValueError(f"--shapes: {shape!r} is not batch x wordpieces, e.g. 1x32")
        parsed.append((int(batch), int(length)))
    return parsed


def texts_of_length(words, tokenizer, length, count, start=0):
    """`count` texts of exactly `length` - 2 wordpieces each, from consecutive words of `words`.

    A word that would overshoot is replaced by "the" (one wordpiece), so every text is exact.
    """
    texts, position = [], start
    for _ in range(count):
        chosen, pieces = [], 0
        while pieces < length - 2:
            word = words[position % len(words)]
            position += 1
            size = len(tokenizer.tokenize(word))
            if pieces + size > length - 2:
                word, size = "the", 1
            chosen.append(word)
            pieces += size
        texts.append(" ".join(chosen))
    return texts


def _inputs(shapes, calls):
    """{shape index: [batch of texts] * (WARMUP_CALLS + calls)}, different texts every call."""
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=True)
    with open(FLAGS.input_file, encoding="utf-8") as reader:
        words = reader.read().split()
    inputs = {}
    for index, (batch, length) in enumerate(shapes):
        texts = texts_of_length(words, tokenizer, length, batch * (WARMUP_CALLS + calls), 7 * index)
        inputs[index] = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    return inputs


def _export(work_dir):
    from bert_tf.modeling import BertConfig, BertModel
    from bert_tf.tasks.encoder import MODEL_TYPE, export_model
    from bert_tf.tasks.run_files import TaskInfo

    model = BertModel(BertConfig.from_preset(FLAGS.model))
    model.build()
    info = TaskInfo(
        model_type=MODEL_TYPE, bert_config=model.config, do_lower_case=True,
        max_seq_length=FLAGS.max_seq_length,
    )  # fmt: skip
    return export_model(model, info, FLAGS.vocab_file, os.path.join(work_dir, "export"))


# ---- the workers: each builds its runner, then answers "shape call" lines with timings ----


def _tf_threads(threads):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def _bert_tf_worker(setup):
    """(text call, ids call): the export's signatures, with only TensorFlow and TF Text imported."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

    _tf_threads(setup["threads"])
    loaded = tf.saved_model.load(setup["export"])
    serve_text = loaded.signatures["serving_default"]
    serve_ids = loaded.signatures["serve_ids"]
    preprocess = loaded.signatures["preprocess"]

    def text(texts):
        outputs = serve_text(text_a=tf.constant(texts))
        return outputs["sequence_output"].numpy().shape[1]

    def prepare_ids(texts):
        return preprocess(text_a=tf.constant(texts))

    def ids(features):
        return serve_ids(**features)["sequence_output"].numpy().shape[1]

    return text, (prepare_ids, ids)


def _transformers_worker(setup):
    import torch
    import transformers

    torch.set_num_threads(setup["threads"])
    torch.set_num_interop_threads(setup["threads"])
    torch.manual_seed(0)
    config = setup["config"]
    tokenizer = transformers.BertTokenizerFast(setup["vocab_file"], do_lower_case=True)
    model = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
            num_hidden_layers=config["num_hidden_layers"],
            num_attention_heads=config["num_attention_heads"],
            intermediate_size=config["intermediate_size"], hidden_act="gelu_new",
            max_position_embeddings=config["max_position_embeddings"],
        )
    ).eval()  # fmt: skip
    max_length = setup["max_seq_length"]

    def prepare_ids(texts):
        return tokenizer(
            texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )

    def ids(features):
        with torch.inference_mode():
            return model(**features).last_hidden_state.numpy().shape[1]

    def text(texts):
        return ids(prepare_ids(texts))

    return text, (prepare_ids, ids)


def _keras_hub_worker(setup):
    import keras_hub
    import tensorflow as tf

    _tf_threads(setup["threads"])
    config = setup["config"]
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=setup["vocab_file"], lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        max_sequence_length=config["max_position_embeddings"],
    )  # fmt: skip
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    keep = setup["max_seq_length"] - 2

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(texts):
        pieces = tokenizer(texts)[:, :keep]  # ragged [B, (n)]
        batch = tf.shape(texts)[:1]
        ends = [tf.fill(tf.concat([batch, [1]], 0), cls), tf.fill(tf.concat([batch, [1]], 0), sep)]
        ids = tf.concat([ends[0], tf.cast(pieces, tf.int32), ends[1]], axis=1)
        token_ids = ids.to_tensor()  # [B, S], padded to the batch's longest
        padding_mask = tf.ones_like(ids, tf.bool).to_tensor()
        features = {
            "token_ids": token_ids,
            "padding_mask": padding_mask,
            "segment_ids": tf.zeros_like(token_ids),
        }
        return backbone(features, training=False)["sequence_output"]

    def text(texts):
        return serve(tf.constant(texts)).numpy().shape[1]

    return text, None


WORKERS = {
    "bert_tf": _bert_tf_worker,
    "transformers": _transformers_worker,
    "keras_hub": _keras_hub_worker,
}


def _timed(call, argument):
    start = time.perf_counter()
    length = call(argument)
    return time.perf_counter() - start, length


def worker_main(runner, work_dir):
    """Builds `runner`, says "ready", then answers each "shape call" line with the JSON
    [text seconds, text length, ids seconds or null, ids length or null]."""
    with open(os.path.join(work_dir, "setup.json"), encoding="utf-8") as reader:
        setup = json.load(reader)
    inputs = {int(key): value for key, value in setup["inputs"].items()}
    try:
        text, ids_path = WORKERS[runner](setup)
    except ImportError as error:  # a peer not installed: the table says so
        print(f"skipped ({error}; pip install -e .[bench,compare])", flush=True)
        return
    ids = {}
    if ids_path is not None:  # tokenized ahead: the ids row times the model alone
        prepare_ids, ids_call = ids_path
        ids = {key: [prepare_ids(batch) for batch in batches] for key, batches in inputs.items()}
    print("ready", flush=True)
    for line in sys.stdin:
        shape, call = map(int, line.split())
        answer = list(_timed(text, inputs[shape][call]))
        answer += list(_timed(ids_call, ids[shape][call])) if ids else [None, None]
        print(json.dumps(answer), flush=True)


# ---- the parent: starts the workers, makes them take turns, prints the table ----


def _start(runner, work_dir):
    command = [sys.executable, os.path.abspath(__file__), f"--worker={runner}"]
    command.append(f"--work_dir={work_dir}")
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_DIR
    )
    return process


def _ask(process, runner, shape, call):
    process.stdin.write(f"{shape} {call}\n")
    process.stdin.flush()
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"the {runner} worker stopped (exit {process.wait()}); see its stderr")
    return json.loads(line)


def measure(workers, shapes, calls):
    """{row name: {shape index: ([seconds of each timed call], [its padded lengths])}}."""
    times = {}
    for shape in range(len(shapes)):
        for call in range(WARMUP_CALLS + calls):
            for runner, process in workers.items():
                text_s, text_len, ids_s, ids_len = _ask(process, runner, shape, call)
                if call < WARMUP_CALLS:
                    continue
                for row, seconds, length in zip(
                    ROWS[runner], (text_s, ids_s), (text_len, ids_len), strict=True
                ):
                    if row is not None:
                        entry = times.setdefault(row, {}).setdefault(shape, ([], []))
                        entry[0].append(seconds)
                        entry[1].append(length)
    return times


def _print_table(times, shapes):
    names = [f"{batch} x {length}" for batch, length in shapes]
    print("\n| runner | " + " | ".join(f"{n}: p50 / p95 ms" for n in names) + " |")
    print("|---|" + "---|" * len(shapes))
    p50 = {}
    for row, by_shape in times.items():
        cells = []
        for shape in range(len(shapes)):
            seconds, lengths = by_shape[shape]
            p50[row, shape] = 1e3 * float(np.percentile(seconds, 50))
            p95 = 1e3 * float(np.percentile(seconds, 95))
            padded = f" (S={np.mean(lengths):g})" if np.mean(lengths) != shapes[shape][1] else ""
            cells.append(f"{p50[row, shape]:.2f} / {p95:.2f}{padded}")
        print(f"| {row} | " + " | ".join(cells) + " |")
    ours_text, ours_ids = ROWS["bert_tf"]
    if (ours_text, 0) not in p50:
        return
    for row in times:
        if row in (ours_text, ours_ids):
            continue
        ratios = ", ".join(
            f"{n} {p50[row, s] / p50[ours_text, s]:.2f}x" for s, n in enumerate(names)
        )
        print(f"{row} p50 / bert_tf text p50: {ratios} (above 1 = bert_tf faster)")
    share = ", ".join(
        f"{n} {1 - p50[ours_ids, s] / p50[ours_text, s]:.0%}" for s, n in enumerate(names)
    )
    print(f"tokenization's share of bert_tf text p50 (1 - ids / text): {share}")


def _setup(work_dir, shapes):
    from bert_tf.modeling import BertConfig

    inputs = _inputs(shapes, FLAGS.calls)
    setup = dict(
        inputs=inputs, threads=FLAGS.threads, vocab_file=os.path.abspath(FLAGS.vocab_file),
        max_seq_length=FLAGS.max_seq_length, config=BertConfig.from_preset(FLAGS.model).to_dict(),
        export=_export(work_dir) if "bert_tf" in FLAGS.runners else None,
    )  # fmt: skip
    with open(os.path.join(work_dir, "setup.json"), "w", encoding="utf-8") as writer:
        json.dump(setup, writer)


def main(argv):
    del argv
    if FLAGS.worker:
        return worker_main(FLAGS.worker, FLAGS.work_dir)
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    shapes = parse_shapes(FLAGS.shapes)
    unknown = sorted(set(FLAGS.runners) - set(WORKERS))
    if unknown:
        raise ValueError(f"--runners: unknown {unknown}; known: {sorted(WORKERS)}")
    print(machine.header(with_tensorflow=False))
    print(
        f"{FLAGS.model}, random weights, float32; {FLAGS.calls} timed calls per shape after "
        f"{WARMUP_CALLS} untimed; {FLAGS.threads} intra-op and {FLAGS.threads} inter-op threads "
        "per runner process; runners taking turns call by call\n",
        flush=True,
    )
    work_dir = tempfile.mkdtemp(prefix="bench_latency_")
    _setup(work_dir, shapes)
    workers = {}
    for runner in FLAGS.runners:
        process = _start(runner, work_dir)
        said = process.stdout.readline().strip()
        if said != "ready":
            print(f"{runner}: {said or f'skipped (its worker failed, exit {process.wait()})'}")
            process.wait()
            continue
        workers[runner] = process
    times = measure(workers, shapes, FLAGS.calls)
    for process in workers.values():
        process.stdin.close()
        process.wait()
    shutil.rmtree(work_dir)  # the export: 420 MB at BERT-base
    _print_table(times, shapes)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
