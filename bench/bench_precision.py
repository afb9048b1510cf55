"""Reduced precision: mixed_bfloat16 against float32, beside the machine's own matmul rate in each.

bfloat16 is only faster where the hardware multiplies it natively: a GPU, or a CPU with AVX512_BF16 or
AMX. Elsewhere TensorFlow emulates it and a "speed-up" below 1 would measure the emulation, so the
bench prints why it skips and measures nothing (`--force` measures anyway, for the curious).

    .venv/bin/python -m bench.bench_precision                 # every row below
    .venv/bin/python -m bench.bench_precision --repeats=3 --finetune_rounds=2 --models=  # quicker

Every row takes turns, float32 then mixed_bfloat16, repeat after repeat in one process, so that load
from other work on the machine falls on both alike; compare the ratios.

* matmul: tf.matmul of two 2048 x 2048 matrices, float32 and bfloat16 inputs, GFLOP/s (2 n^3 flops);
  the physical limit of each precision on this machine.
* inference: BertModel (`--inference_model`, random weights) with the same weights under both
  policies, batch 16 x 128, examples/s (median of `--repeats` batches), and the largest difference of
  the pooled and sequence outputs. Its FLOPs per example count the matmuls (multiply + add = 2):
  per layer 2 S (4 H^2 + 2 H I) for the query, key, value, attention-output, intermediate and output
  dense layers and 4 S^2 H for the attention scores and context, times L layers, plus 2 H^2 for the
  pooler (22.3 GFLOP for BERT-base at S = 128). That over the time gives each policy's GFLOP/s, and
  its share of the same precision's matmul rate (issue 32's target: mixed_bfloat16 >= 75%). A third
  model, mixed_bfloat16 with its Dense kernels and embedding tables stored in bfloat16
  (bert_tf.precision.store_in_compute_dtype, as the bfloat16 export is), takes its turns too: its
  speed, its share of the bfloat16 matmul rate, and whether its outputs are bit-identical.
* LayerNorm and softmax with bfloat16 inputs (issue 44), each op alone at the inference shape: in
  float32 between casts (how the model ran both) and in bfloat16 with float32 statistics (LayerNorm:
  mean and variance of the float32 values, the normalization in bfloat16; softmax: oneDNN's bfloat16
  kernel, which the model's inference now runs), ms per call and the largest error against float64.
* fine-tuning: the run_classifier ClassifierRun (its Trainer, the original's random batches of 32, each
  cut to its longest input) from all-MiniLM-L6-v2 (bench/minilm.py converts it) on real sentences:
  which half of tests/fixtures/austen_sentences.txt.xz (its first or last 92 chapters, different
  novels) a sentence comes from (`--finetune_train` of them). Both policies train
  `--finetune_steps` steps per round for `--finetune_rounds` rounds after one untimed round (tracing);
  examples/s is the median round. Then the float32 run's fine-tuned weights predict the
  `--finetune_dev` dev sentences under both policies: the share of equal predictions (target >= 99%).
* training: the run_pretraining Trainer (bench_pretraining.py's runner and flags: --models, --steps,
  --rounds, ...) under both policies, taking turns round by round.
"""

import os
import random
import tempfile
import time

import numpy as np
from absl import app, flags

from bench import (
    bench_pretraining,  # its flags: --models, --steps, --rounds, ...
    machine,
    minilm,
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
STORED = "mixed_bfloat16, stored in bfloat16"
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
    from bert_tf.precision import store_in_compute_dtype

    rng = np.random.default_rng(1)
    ids = tf.constant(rng.integers(1000, config.vocab_size, [batch_size, seq_length]), tf.int32)
    inputs = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
    models = {}
    for row, policy in zip((*POLICIES, STORED), (*POLICIES, "mixed_bfloat16"), strict=True):
        keras.config.set_dtype_policy(policy)
        models[row] = BertModel(config)
        models[row].build()
        models[row].set_weights(models["float32"].get_weights())
    keras.config.set_dtype_policy("float32")
    store_in_compute_dtype(models[STORED])
    functions = {
        row: tf.function(lambda m=model: m(inputs, training=False)) for row, model in models.items()
    }
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
        for row in models
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


def _classifier_runs(work_dir):
    """{policy: ClassifierRun} fine-tuning MiniLM on _novel_halves under each policy."""
    from bert_tf.tasks.classification.task import ClassifierRun, ClassifierSettings

    model_dir = minilm.converted(work_dir)
    data_dir = os.path.join(work_dir, "novel_halves")
    os.makedirs(data_dir, exist_ok=True)
    examples = _novel_halves(FLAGS.finetune_train + FLAGS.finetune_dev)
    splits = {
        "train.tsv": examples[: FLAGS.finetune_train],
        "dev.tsv": examples[FLAGS.finetune_train :],
    }
    for name, rows in splits.items():
        with open(os.path.join(data_dir, name), "w", encoding="utf-8") as writer:
            writer.writelines("\t".join(row) + "\n" for row in rows)
    steps = FLAGS.finetune_steps * (FLAGS.finetune_rounds + 1)
    runs = {}
    for policy in POLICIES:
        config = ClassifierSettings(
            bert_config_file=os.path.join(model_dir, "bert_config.json"),
            vocab_file=os.path.join(model_dir, "vocab.txt"),
            init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
            output_dir=tempfile.mkdtemp(prefix=f"{policy}_", dir=work_dir), data_dir=data_dir,
            task_name="tsv", label_column="0", text_a_column="1", do_train=True, do_eval=True,
            max_seq_length=128, train_batch_size=32, eval_batch_size=32, learning_rate=5e-5,
            num_train_epochs=steps * 32 / FLAGS.finetune_train, log_steps=10**6,
            save_checkpoints_steps=10**6, mixed_precision=policy,
        )  # fmt: skip
        runs[policy] = ClassifierRun(config)
    return runs


def _finetuning(work_dir):
    """({policy: training examples/s}, share of equal dev predictions, dev accuracy of each policy)."""
    runs = _classifier_runs(work_dir)
    trainers = {}
    for policy, run in runs.items():
        path, info = run.features("train")
        trainers[policy] = run.trainer(path, info["num_real_examples"])
        trainers[policy]._save = lambda step: None  # a bench: no checkpoint between rounds
        trainers[policy].train(until=FLAGS.finetune_steps)  # untimed: tracing
    speeds = {policy: [] for policy in POLICIES}
    for _ in range(FLAGS.finetune_rounds):
        for policy, trainer in trainers.items():
            start, step = time.perf_counter(), trainer.global_step
            trainer.train(until=step + FLAGS.finetune_steps)
            steps = trainer.global_step - step
            speeds[policy].append(steps * 32 / (time.perf_counter() - start))
    agreement, accuracies = _prediction_agreement(runs, trainers)
    return {p: float(np.median(s)) for p, s in speeds.items()}, agreement, accuracies


def _prediction_agreement(runs, trainers):
    """The float32 run's fine-tuned weights under both policies: (share of equal dev predictions,
    {policy: dev accuracy})."""
    trainers["mixed_bfloat16"].model.set_weights(trainers["float32"].model.get_weights())
    predictions = {}
    for policy, run in runs.items():
        path, info = run.features("eval")
        result = run.predict_features(path, info, 32, ["logits"], ["label_ids"])
        predictions[policy] = np.argmax(result["logits"], axis=-1)
        labels = result["label_ids"].reshape(-1)
    agreement = float(np.mean(predictions["float32"] == predictions["mixed_bfloat16"]))
    return agreement, {p: float(np.mean(v == labels)) for p, v in predictions.items()}


def _training(shape, records, work_dir):
    """{policy: examples/s (median of rounds)}, the policies taking turns."""
    runners = {}
    for policy in POLICIES:
        FLAGS.mixed_precision = policy
        runners[policy] = bench_pretraining.bert_tf_runner(shape, False, records, work_dir)
    FLAGS.mixed_precision = "float32"
    speeds = {policy: [] for policy in POLICIES}
    for _ in range(FLAGS.rounds):
        for policy, run in runners.items():
            wall, _, _ = timing.timed(run)
            speeds[policy].append(FLAGS.steps * FLAGS.batch_size / wall)
    return {policy: float(np.median(s)) for policy, s in speeds.items()}


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

    features = bench_pretraining.random_features(
        8 * FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
    )
    records = os.path.join(tempfile.mkdtemp(dir=work_dir), "random.tfrecord")
    bench_pretraining.write_records(records, features)
    for shape in FLAGS.models:
        speeds = _training(shape, records, work_dir)
        print(_row(
            f"BERT-{shape} pretraining step, batch {FLAGS.batch_size} x {FLAGS.seq_length}, examples/s",
            speeds["float32"], speeds["mixed_bfloat16"],
        ), flush=True)  # fmt: skip
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
