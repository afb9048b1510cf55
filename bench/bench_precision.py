"""Reduced precision: mixed_bfloat16 against float32, beside the machine's own matmul rate in each.

bfloat16 pays only where the hardware multiplies it natively (a GPU, AVX512_BF16, AMX); elsewhere
the bench says why it skips (`--force` measures the emulation anyway). Every row takes turns,
float32 then mixed_bfloat16, repeat after repeat, so that load falls on both alike.

    .venv/bin/python -m bench.bench_precision                 # every row below
    .venv/bin/python -m bench.bench_precision --repeats=3 --finetune_rounds=2 --models=  # quicker

* matmul: tf.matmul of two 2048 x 2048 matrices, float32 and bfloat16 inputs, GFLOP/s (2 n^3 flops);
  the physical limit of each precision on this machine.
* inference: BertModel (`--inference_model`, random weights) with the same weights under both
  policies, batch 16 x 128, examples/s (median of `--repeats` batches), and the largest difference
  of the outputs; GFLOP/s from machine.encoder_flops (the matmuls, 22.3 GFLOP for BERT-base at S =
  128) and each policy's share of its matmul rate (target: mixed_bfloat16 >= 75%). A third row,
  the same weights exported by export_saved_model.py --mixed_precision=mixed_bfloat16 (kernels and
  embeddings stored in bfloat16), its serve_ids: speed, share, and whether it is bit-identical.
* LayerNorm and softmax with bfloat16 inputs (issue 44), each op alone at the inference shape: in
  float32 between casts (how the model ran both) and in bfloat16 with float32 statistics (LayerNorm:
  mean and variance of the float32 values, the normalization in bfloat16; softmax: oneDNN's bfloat16
  kernel, which the model's inference now runs), ms per call and the largest error against float64.
* fine-tuning: run_classifier.py from all-MiniLM-L6-v2, one process per policy, on which half of
  tests/fixtures/austen_sentences.txt.xz (different novels) a sentence comes from: one untimed
  round, then `--finetune_rounds` rounds of `--finetune_steps` steps, each timed by its progress
  line (the median counts). The float32 run's model then predicts the `--finetune_dev` dev
  sentences under both policies (--do_predict): the share of equal predictions (target >= 99%).
* training: run_pretraining.py (bench_pretraining.py's runner and flags) under each policy.
"""

import os
import random
import tempfile

import numpy as np
from absl import app, flags

from bench import (
    bench_pretraining,  # its flags: --models, --steps, --rounds, ...
    corpora,
    machine,
    minilm,
    scripts,
    timing,
)

FLAGS = flags.FLAGS
flags.DEFINE_string("inference_model", "bert_base", "bert_tf.modeling.PRESETS shape for inference.")
flags.DEFINE_integer("repeats", 10, "Timed inference batches (and matmuls) per policy.")
flags.DEFINE_bool("force", False, "Measure even where bfloat16 is not native (emulated).")
flags.DEFINE_integer("finetune_train", 2048, "Fine-tuning training sentences (half of each novel).")
flags.DEFINE_integer("finetune_dev", 512, "Fine-tuning dev sentences for the prediction agreement.")
flags.DEFINE_integer("finetune_steps", 10, "Timed fine-tuning steps per round.")
flags.DEFINE_integer("finetune_rounds", 4, "Timed fine-tuning rounds per policy, taking turns.")
flags.DEFINE_string(
    "work_dir", os.path.join(tempfile.gettempdir(), "bench_precision"),
    "Where the converted MiniLM checkpoint (reused), the TSVs and the runs' files go.",
)  # fmt: skip

FLAGS.set_default("models", ["mini"])
POLICIES = ("float32", "mixed_bfloat16")
STORED = "the bfloat16 export's serve_ids"
VOCAB = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data", "vocab.txt"
)
SENTENCES_XZ = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "tests", "fixtures", "austen_sentences.txt.xz",
)  # fmt: skip


def _inference(config, batch_size=16, seq_length=128):
    """{row: (examples/s, pooled output, sequence output)} with the same weights in every row: float32,
    mixed_bfloat16, and mixed_bfloat16 with its kernels and embeddings stored in bfloat16 (STORED,
    what export_saved_model.py --mixed_precision=mixed_bfloat16 serves)."""
    import keras
    import tensorflow as tf

    from bert_tf.modeling import BertModel

    rng = np.random.default_rng(1)
    ids = tf.constant(rng.integers(1000, config.vocab_size, [batch_size, seq_length]), tf.int32)
    inputs = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
    models = {}
    for policy in POLICIES:
        keras.config.set_dtype_policy(policy)
        models[policy] = BertModel(config)
        models[policy].build()
        models[policy].set_weights(models["float32"].get_weights())
    keras.config.set_dtype_policy("float32")
    functions = {
        row: tf.function(lambda m=model: m(inputs, training=False)) for row, model in models.items()
    }
    # The same weights through export_saved_model.py --mixed_precision=mixed_bfloat16: its serve_ids.
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    folder = tempfile.mkdtemp(dir=FLAGS.work_dir)
    checkpoint, config_file = scripts.save_encoder(models["float32"], os.path.join(folder, "model"))
    export = scripts.export_encoder(
        checkpoint, config_file, VOCAB, os.path.join(folder, "export"),
        mixed_precision="mixed_bfloat16", max_seq_length=seq_length,
    )  # fmt: skip
    functions[STORED] = tf.saved_model.load(export).signatures["serve_ids"]
    functions[STORED] = lambda serve_ids=functions[STORED]: serve_ids(**inputs)
    outputs = {row: function() for row, function in functions.items()}
    seconds = timing.timed_in_turns(
        {p: lambda f=f: f()["pooled_output"].numpy() for p, f in functions.items()}, FLAGS.repeats
    )
    return {
        row: (
            batch_size / float(np.median(seconds[row])),
            tf.cast(outputs[row]["pooled_output"], tf.float32).numpy(),
            tf.cast(outputs[row]["sequence_output"], tf.float32).numpy(),
        )
        for row in functions
    }


def _novel_halves(num_examples, seed=12345):
    """[(label, sentence)]: real sentences of 5-60 words, labelled by the half of the corpus they come from
    (its first or last 92 chapters: different novels), half of each."""
    import lzma

    with lzma.open(SENTENCES_XZ, "rt", encoding="utf-8") as reader:
        chapters = [c.split("\n") for c in reader.read().strip().split("\n\n")]
    middle = len(chapters) // 2
    pools = {"first": chapters[:middle], "second": chapters[middle:]}
    rng = random.Random(seed)
    examples = []
    for label, pool in pools.items():
        sentences = [s for c in pool for s in c if 5 <= len(s.split()) <= 60 and "\t" not in s]
        examples += [(label, s) for s in rng.sample(sentences, num_examples // 2)]
    rng.shuffle(examples)
    return examples


def _finetuning(work_dir):
    """({policy: training examples/s}, share of equal dev predictions, dev accuracy of each policy).

    Each policy's run_classifier.py --do_train (one process each) trains one untimed round (tracing)
    and --finetune_rounds timed rounds of --finetune_steps steps, each timed by its progress line;
    then the float32 run's fine-tuned model predicts the dev sentences (run_classifier.py
    --do_predict, its test file the dev set) under each policy."""
    model_dir = minilm.converted(work_dir)
    data_dir = os.path.join(work_dir, "novel_halves")
    os.makedirs(data_dir, exist_ok=True)
    examples = _novel_halves(FLAGS.finetune_train + FLAGS.finetune_dev)
    dev = examples[FLAGS.finetune_train :]
    for name, rows in (("train.tsv", examples[: FLAGS.finetune_train]), ("test.tsv", dev)):
        with open(os.path.join(data_dir, name), "w", encoding="utf-8") as writer:
            writer.writelines("\t".join(row) + "\n" for row in rows)
    model = scripts.model_flags(model_dir)
    data = dict(data_dir=data_dir, task_name="tsv", label_column="0", text_a_column="1")
    steps = FLAGS.finetune_steps * (FLAGS.finetune_rounds + 1)
    speeds, runs = {}, {}
    for policy in POLICIES:
        runs[policy] = tempfile.mkdtemp(prefix=f"{policy}_", dir=work_dir)
        _, result = scripts.timed(
            "run_classifier", **model, **data, output_dir=runs[policy], do_train=True,
            max_seq_length=128, train_batch_size=32, learning_rate=5e-5,
            num_train_epochs=steps * 32 / FLAGS.finetune_train, log_steps=FLAGS.finetune_steps,
            iterations_per_loop=FLAGS.finetune_steps, save_checkpoints_steps=10**6,
            mixed_precision=policy,
        )  # fmt: skip
        seconds = scripts.round_seconds(result.stderr, FLAGS.finetune_steps, 32)[1:]
        speeds[policy] = FLAGS.finetune_steps * 32 / float(np.median(seconds))
    predictions = {}
    for policy in POLICIES:
        output_dir = tempfile.mkdtemp(prefix=f"predict_{policy}_", dir=work_dir)
        scripts.run(
            "run_classifier", **{**model, "init_checkpoint": runs["float32"]}, **data,
            output_dir=output_dir, do_predict=True, max_seq_length=128, predict_batch_size=32,
            mixed_precision=policy,
        )  # fmt: skip
        predictions[policy] = scripts.test_predictions(output_dir)
    agreement = float(np.mean([a == b for a, b in zip(*predictions.values(), strict=True)]))
    accuracies = {
        p: float(np.mean([label == row[0] for label, row in zip(v, dev, strict=True)]))
        for p, v in predictions.items()
    }
    return speeds, agreement, accuracies


def _training(shape, records, work_dir):
    """{policy: examples/s (median of rounds)}: bench_pretraining.py's run_pretraining.py runner."""
    speeds = {}
    for policy in POLICIES:
        FLAGS.mixed_precision = policy
        rates = bench_pretraining.bert_tf_rounds(shape, False, records, work_dir)
        speeds[policy] = float(np.median(rates))
    FLAGS.mixed_precision = "float32"
    return speeds


def _row(what, base, mixed, unit_digits=2, extra=""):
    return f"| {what} | {base:.{unit_digits}f} | {mixed:.{unit_digits}f} | {mixed / base:.2f}x | {extra} |"


def _inference_rows(rates):
    """The inference rows: examples/s, GFLOP/s and the share of each precision's matmul rate."""
    from bert_tf.modeling import BertConfig

    config = BertConfig.from_preset(FLAGS.inference_model)
    result = _inference(config)
    (base_speed, base_pooled, base_sequence), (speed, pooled, sequence) = (
        result[p] for p in POLICIES
    )
    diff = max(np.abs(pooled - base_pooled).max(), np.abs(sequence - base_sequence).max())
    gflop = machine.encoder_flops(config, 128) / 1e9
    print(_row(
        f"{FLAGS.inference_model} inference, batch 16 x 128, examples/s", base_speed, speed,
        extra=f"max abs output diff {diff:.2e}",
    ))  # fmt: skip
    shares = {p: result[p][0] * gflop / rates[p] for p in POLICIES}
    print(_row(
        f"{FLAGS.inference_model} inference, GFLOP/s ({gflop:.1f} GFLOP per example)",
        base_speed * gflop, speed * gflop, 0,
        extra=f"share of the matmul rate: float32 {shares['float32']:.0%}, "
        f"mixed_bfloat16 {shares['mixed_bfloat16']:.0%}",
    ), flush=True)  # fmt: skip
    stored_speed, stored_pooled, stored_sequence = result[STORED]
    stored_share = stored_speed * gflop / rates["mixed_bfloat16"]
    identical = np.array_equal(stored_pooled, pooled) and np.array_equal(stored_sequence, sequence)
    print(_row(
        f"{FLAGS.inference_model} inference, kernels and embeddings stored in bfloat16 (the "
        "bfloat16 export's), examples/s", base_speed, stored_speed,
        extra=f"{stored_speed * gflop:.0f} GFLOP/s, {stored_share:.0%} "
        f"of the bfloat16 matmul rate; {stored_speed / speed:.2f}x mixed_bfloat16 cast per call; "
        f"outputs {'bit-identical to' if identical else 'DIFFERENT from'} it",
    ), flush=True)  # fmt: skip


def _layer_norms(x, gamma, beta, epsilon=1e-12):
    """{variant: function of a bfloat16 [T, H] x}: LayerNorm as the model runs it under mixed_bfloat16
    (Keras casts to float32, normalizes, casts back) and with bfloat16 inputs and float32 statistics
    (mean and variance of the float32 values, the normalization applied in bfloat16)."""
    import tensorflow as tf

    def between_casts(x):
        x32 = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(x32, [-1], keepdims=True)
        return tf.cast((x32 - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta, x.dtype)

    def float32_statistics(x):
        mean, variance = tf.nn.moments(tf.cast(x, tf.float32), [-1], keepdims=True)
        scale = tf.cast(tf.math.rsqrt(variance + epsilon), x.dtype)
        return (x - tf.cast(mean, x.dtype)) * scale * tf.cast(gamma, x.dtype) + tf.cast(
            beta, x.dtype
        )

    return {"float32": between_casts, "bfloat16": float32_statistics}


def _softmaxes(scores, adder, scale):
    """{variant: function of bfloat16 [B, N, S, S] scores}: the attention softmax in float32 between
    casts (training's) and in bfloat16 (inference's since issue 44), bert_tf.layers.attention's two
    paths."""
    import tensorflow as tf

    def between_casts(scores):
        return tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32) * scale + adder), scores.dtype)

    def in_bfloat16(scores):
        scaled = scores * tf.constant(scale, scores.dtype) + tf.cast(adder, scores.dtype)
        return tf.nn.softmax(scaled)

    return {"float32": between_casts, "bfloat16": in_bfloat16}


def _norm_softmax_rows(batch_size=16, seq_length=128):
    """Issue 44's LayerNorm and softmax with bfloat16 inputs, each op alone at the inference shape:
    ms per call (float32 between casts, then bfloat16, taking turns), the speed-up, and the largest
    error against float64 on the same bfloat16 inputs."""
    import tensorflow as tf

    from bert_tf.modeling import BertConfig

    config = BertConfig.from_preset(FLAGS.inference_model)

    rng = np.random.default_rng(2)
    hidden, heads = config.hidden_size, config.num_attention_heads
    x = rng.normal(0.5, 3.0, [batch_size * seq_length, hidden])
    gamma, beta = rng.normal(1.0, 0.1, hidden), rng.normal(0.0, 0.1, hidden)
    scores = rng.normal(0.0, 3.0, [batch_size, heads, seq_length, seq_length])
    mask = np.ones([batch_size, 1, 1, seq_length])
    mask[batch_size // 2 :, ..., seq_length * 3 // 4 :] = 0  # half the batch padded by a quarter
    adder, scale = (1.0 - mask) * -10000.0, 1.0 / np.sqrt(hidden // heads)
    x, scores = (tf.cast(tf.constant(a, tf.float32), tf.bfloat16) for a in (x, scores))
    x64, scores64 = (tf.cast(a, tf.float64).numpy() for a in (x, scores))
    mean, variance = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    logits = scores64 * scale + adder
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    cases = {
        f"LayerNorm of [{batch_size * seq_length}, {hidden}] (float32 statistics)": (
            _layer_norms(x, tf.constant(gamma, tf.float32), tf.constant(beta, tf.float32)), x,
            (x64 - mean) / np.sqrt(variance + 1e-12) * gamma + beta,
        ),
        f"softmax of [{batch_size}, {heads}, {seq_length}, {seq_length}] masked scores": (
            _softmaxes(scores, tf.constant(adder, tf.float32), scale), scores,
            probabilities / probabilities.sum(-1, keepdims=True),
        ),
    }  # fmt: skip
    for what, (variants, value, expected) in cases.items():
        functions = {name: tf.function(f) for name, f in variants.items()}
        errors = {
            name: np.abs(tf.cast(f(value), tf.float64).numpy() - expected).max()
            for name, f in functions.items()
        }
        seconds = timing.timed_in_turns(
            {name: lambda f=f, v=value: f(v).numpy() for name, f in functions.items()},
            5 * FLAGS.repeats,
        )
        base, mixed = (1e3 * float(np.median(seconds[name])) for name in ("float32", "bfloat16"))
        print(
            f"| {what}, ms per call (float32 between casts; bfloat16) | {base:.2f} | {mixed:.2f} | {base / mixed:.2f}x | largest error against "
            f"float64: {errors['float32']:.1e} in float32, {errors['bfloat16']:.1e} in bfloat16 |",
            flush=True,
        )


def main(argv):
    del argv
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    machine.set_threads(FLAGS.threads)
    print(machine.header())
    supported, why = machine.bfloat16_support()
    if not supported and not FLAGS.force:
        print(
            f"mixed_bfloat16: skipped, {why}. Nothing is measured here (--force measures anyway)."
        )
        return
    print(f"bfloat16: {why if supported else 'EMULATED (--force): not a result'}\n", flush=True)
    print("| what | float32 | mixed_bfloat16 | speed-up | notes |")
    print("|---|---|---|---|---|")
    by_dtype = machine.matmul_rates(("float32", "bfloat16"), repeats=FLAGS.repeats)
    rates = {"float32": by_dtype["float32"], "mixed_bfloat16": by_dtype["bfloat16"]}
    print(
        _row("matmul 2048 x 2048, GFLOP/s", rates["float32"], rates["mixed_bfloat16"], 0),
        flush=True,
    )

    _inference_rows(rates)
    _norm_softmax_rows()

    work_dir = FLAGS.work_dir
    os.makedirs(work_dir, exist_ok=True)
    if FLAGS.finetune_rounds > 0:
        speeds, agreement, accuracies = _finetuning(work_dir)
        print(_row(
            "all-MiniLM-L6-v2 fine-tuning step, batch 32 real sentences (cut), examples/s",
            speeds["float32"], speeds["mixed_bfloat16"],
            extra=f"float32-trained weights on {FLAGS.finetune_dev} dev sentences: "
            f"{agreement:.1%} equal predictions; accuracy float32 {accuracies['float32']:.3f}, "
            f"mixed_bfloat16 {accuracies['mixed_bfloat16']:.3f}",
        ), flush=True)  # fmt: skip

    features = corpora.random_features(
        8 * FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
    )
    records = os.path.join(tempfile.mkdtemp(dir=work_dir), "random.tfrecord")
    corpora.write_records(records, features)
    for shape in FLAGS.models:
        speeds = _training(shape, records, work_dir)
        print(_row(
            f"BERT-{shape} pretraining step, batch {FLAGS.batch_size} x {FLAGS.seq_length}, examples/s",
            speeds["float32"], speeds["mixed_bfloat16"],
        ), flush=True)  # fmt: skip
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
