"""Sentence embeddings: retrieval before and after fine-tuning all-MiniLM-L6-v2, and the export's
throughput against sentence-transformers on torch, in one run.

Pairs are built offline from Jane Austen's novels (tests/fixtures/austen_sentences.txt.xz: one
sentence per line, a blank line between chapters): each sentence of at least --min_words words with
the next one of a chapter, (anchor, positive). Chapters are split, by --seed, into training and dev
chapters (--dev_fraction of them), so no dev sentence is seen in training; --train_pairs and
--dev_pairs are sampled from each side.

Part 1, retrieval (`--parts=retrieval`): all-MiniLM-L6-v2 converted by convert_checkpoint.py (mean
pooling, normalized: its embedding.json), evaluated by run_embedding.py's EmbeddingRun as it is
(--do_eval only), then fine-tuned on the training pairs (in-batch negatives, scale 20) and
evaluated again: recall@1, recall@10 and MRR@10 of each dev anchor's positive among all
--dev_pairs dev positives.

Part 2, throughput (`--parts=throughput`): the converted model exported with
export_saved_model.py --model_type=embedding (max_seq_length 256, the model's) embeds
--throughput_texts dev sentences in batches of --batch_size through serving_default (raw text in,
tokenization in the graph), against `SentenceTransformer(folder).encode` (torch, CPU) in a child
process of --peer_python (a venv with torch and sentence-transformers: the `compare` extra), on the
same texts and batch size. Each side is timed --repeats times after one warm-up pass, taking turns;
both use --threads intra-op and inter-op threads. The peer's vectors are compared to the export's.

    .venv/bin/python -m bench.bench_embedding --work_dir=/tmp/bench_embedding \\
        --peer_python=/tmp/st-venv/bin/python
"""

import json
import lzma
import os
import random
import subprocess
import textwrap
import time

import numpy as np
from absl import app, flags, logging

from bench import machine, minilm

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN_XZ = os.path.join(REPO_DIR, "tests", "fixtures", "austen_sentences.txt.xz")

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/bench_embedding", "Where data, runs and exports are written.")
flags.DEFINE_list("parts", ["retrieval", "throughput"], "retrieval, throughput.")
flags.DEFINE_integer("train_pairs", 4000, "Training pairs sampled from the training chapters.")
flags.DEFINE_integer("dev_pairs", 1000, "Dev pairs (and candidates) from the dev chapters.")
flags.DEFINE_float("dev_fraction", 0.2, "Share of the chapters held out for dev.")
flags.DEFINE_integer("min_words", 5, "Shortest anchor and positive, in words.")
flags.DEFINE_integer("seed", 12345, "Seed of the chapter split, the sampling and the run.")
flags.DEFINE_integer("max_seq_length", 128, "Fine-tuning and evaluation: longest input.")
flags.DEFINE_integer("train_batch_size", 32, "Fine-tuning batch (in-batch negatives: 31 each).")
flags.DEFINE_float("learning_rate", 2e-5, "Fine-tuning peak learning rate.")
flags.DEFINE_float("num_train_epochs", 1.0, "Fine-tuning epochs.")
flags.DEFINE_integer("throughput_texts", 512, "Texts embedded per timed pass.")
flags.DEFINE_integer("batch_size", 32, "Texts per call, both sides.")
flags.DEFINE_integer("repeats", 3, "Timed passes per side, taking turns.")
flags.DEFINE_integer("threads", 2, "Intra-op and inter-op threads of each side (0: one per core).")
flags.DEFINE_string(
    "peer_python", "/tmp/st-venv/bin/python", "A python with torch and sentence-transformers."
)


def chapters():
    """The novels' chapters: lists of sentences."""
    with lzma.open(AUSTEN_XZ, "rt", encoding="utf-8") as f:
        text = f.read()
    return [block.splitlines() for block in text.split("\n\n") if block.strip()]


def adjacent_pairs(chapter_list, min_words):
    return [
        (first, second)
        for chapter in chapter_list
        for first, second in zip(chapter, chapter[1:], strict=False)
        if len(first.split()) >= min_words and len(second.split()) >= min_words
    ]


def write_data(data_dir):
    """train.tsv and dev.tsv of adjacent sentences, from disjoint chapters; returns the dev pairs."""
    rng = random.Random(FLAGS.seed)
    chapter_list = chapters()
    rng.shuffle(chapter_list)
    num_dev = int(len(chapter_list) * FLAGS.dev_fraction)
    dev = adjacent_pairs(chapter_list[:num_dev], FLAGS.min_words)
    train = adjacent_pairs(chapter_list[num_dev:], FLAGS.min_words)
    dev = rng.sample(dev, min(FLAGS.dev_pairs, len(dev)))
    train = rng.sample(train, min(FLAGS.train_pairs, len(train)))
    os.makedirs(data_dir, exist_ok=True)
    for name, pairs in (("train.tsv", train), ("dev.tsv", dev)):
        with open(os.path.join(data_dir, name), "w", encoding="utf-8") as f:
            f.writelines(f"{a.replace(chr(9), ' ')}\t{b.replace(chr(9), ' ')}\n" for a, b in pairs)
    print(
        f"Data: {len(chapter_list)} chapters, {num_dev} held out; {len(train)} training pairs, "
        f"{len(dev)} dev pairs (adjacent sentences of >= {FLAGS.min_words} words)"
    )
    return dev


def _config(release, data_dir, output_dir, **overrides):
    from bert_tf.tasks.embedding import task as embedding

    values = dict(
        bert_config_file=os.path.join(release, "bert_config.json"),
        vocab_file=os.path.join(release, "vocab.txt"),
        init_checkpoint=os.path.join(release, "bert_model.ckpt"),
        output_dir=output_dir, data_dir=data_dir, max_seq_length=FLAGS.max_seq_length,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=64,
        learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.num_train_epochs,
        iterations_per_loop=50, log_steps=20, save_checkpoints_steps=100000, seed=FLAGS.seed,
    )  # fmt: skip
    values.update(overrides)
    return embedding.EmbeddingSettings(**values)


def retrieval(release, data_dir):
    from bert_tf.tasks import run_script
    from bert_tf.tasks.embedding import task as embedding

    runs = {}
    for name, steps in (("before fine-tuning", {}), ("after fine-tuning", {"do_train": True})):
        output_dir = os.path.join(FLAGS.work_dir, name.replace(" ", "_"))
        start = time.time()
        config = _config(release, data_dir, output_dir, do_eval=True, **steps)
        outcome = run_script(embedding.SPEC, config)
        runs[name] = {**outcome["eval"], "seconds": round(time.time() - start, 1)}
        print(f"{name}: {json.dumps(runs[name])}  ({machine.load_line()})", flush=True)
    print("\n| all-MiniLM-L6-v2 | dev recall@1 | recall@10 | MRR@10 | eval_loss |")
    print("|---|---|---|---|---|")
    for name, results in runs.items():
        print(
            f"| {name} | {results['eval_recall@1']:.3f} | {results['eval_recall@10']:.3f} | "
            f"{results['eval_mrr@10']:.3f} | {results['eval_loss']:.3f} |"
        )
    return runs


# The peer: one warm-up pass, then one timed pass; prints its seconds and writes its vectors.
_PEER = textwrap.dedent(
    """
    import json, os, sys, time
    os.environ["HF_HUB_OFFLINE"] = "1"
    import numpy as np, torch, sentence_transformers
    folder, texts_file, batch_size, threads, vectors_file = sys.argv[1:6]
    torch.set_num_threads(int(threads)); torch.set_num_interop_threads(int(threads))
    texts = json.load(open(texts_file))
    model = sentence_transformers.SentenceTransformer(folder, device="cpu")
    model.encode(texts, batch_size=int(batch_size))
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=int(batch_size))
    seconds = time.perf_counter() - start
    np.save(vectors_file, vectors)
    print(json.dumps({"seconds": seconds, "versions": [torch.__version__,
          sentence_transformers.__version__]}))
    """
)


def throughput(release, texts):
    import tensorflow as tf

    from bert_tf.tasks.exporting import ExportSettings, export_checkpoint

    export_dir = os.path.join(FLAGS.work_dir, "export")
    path = export_checkpoint(
        ExportSettings(
            init_checkpoint=release, export_dir=export_dir, model_type="embedding",
            vocab_file=os.path.join(release, "vocab.txt"),
        )
    )  # fmt: skip
    serve = tf.saved_model.load(path).signatures["serving_default"]
    batches = [texts[i : i + FLAGS.batch_size] for i in range(0, len(texts), FLAGS.batch_size)]

    def ours():
        return np.concatenate([serve(text_a=tf.constant(b))["embeddings"].numpy() for b in batches])

    texts_file = os.path.join(FLAGS.work_dir, "throughput_texts.json")
    with open(texts_file, "w", encoding="utf-8") as f:
        json.dump(texts, f)
    vectors_file = os.path.join(FLAGS.work_dir, "peer_vectors.npy")

    def peer():
        result = subprocess.run(
            [FLAGS.peer_python, "-c", _PEER, minilm.hf_model_dir(), texts_file,
             str(FLAGS.batch_size), str(FLAGS.threads), vectors_file],
            capture_output=True, text=True, check=True, timeout=1800,
        )  # fmt: skip
        return json.loads(result.stdout.strip().splitlines()[-1])

    vectors = ours()  # warm-up (traces nothing: the export is already a graph)
    times = {"bert_tf export": [], "sentence-transformers": []}
    versions = None
    for _ in range(FLAGS.repeats):
        start = time.perf_counter()
        vectors = ours()
        times["bert_tf export"].append(time.perf_counter() - start)
        result = peer()
        times["sentence-transformers"].append(result["seconds"])
        versions = result["versions"]
    difference = float(np.abs(vectors - np.load(vectors_file)).max())
    print(f"\nPeer: torch {versions[0]}, sentence-transformers {versions[1]} ({FLAGS.peer_python})")
    print(f"Largest |export - sentence-transformers| over the vectors: {difference:.2e}")
    print(f"\n| {len(texts)} texts, batch {FLAGS.batch_size} | best s | texts/s | every pass (s) |")
    print("|---|---|---|---|")
    rates = {}
    for name, seconds in times.items():
        best = min(seconds)
        rates[name] = len(texts) / best
        passes = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"| {name} | {best:.2f} | {rates[name]:.1f} | {passes} |")
    ratio = rates["bert_tf export"] / rates["sentence-transformers"]
    print(
        f"\nexport / sentence-transformers: {ratio:.2f}x the texts per second ({machine.load_line()})"
    )
    return {"times": times, "max_difference": difference, "ratio": ratio}


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    num_threads = machine.set_threads(FLAGS.threads)
    print(machine.header())
    print(machine.threads_line(num_threads))
    release = minilm.converted(FLAGS.work_dir)
    data_dir = os.path.join(FLAGS.work_dir, "data")
    dev = write_data(data_dir)
    results = {}
    if "retrieval" in FLAGS.parts:
        results["retrieval"] = retrieval(release, data_dir)
    if "throughput" in FLAGS.parts:
        texts = [text for pair in dev for text in pair][: FLAGS.throughput_texts]
        results["throughput"] = throughput(release, texts)
    with open(os.path.join(FLAGS.work_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print(f"\n{machine.load_line()}")


if __name__ == "__main__":
    app.run(main)
