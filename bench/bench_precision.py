"""Reduced precision: mixed_bfloat16 against float32 for bert_tf's encoder inference and pretraining step.

bfloat16 is only faster where the hardware multiplies it natively: a GPU, or a CPU with AVX512_BF16 or
AMX. Elsewhere TensorFlow emulates it and a "speed-up" below 1 would measure the emulation, so the
bench prints why it skips and measures nothing (`--force` measures anyway, for the curious).

    .venv/bin/python bench/bench_precision.py                 # BERT-base inference + BERT-mini training

* inference: BertModel (`--inference_model`, random weights) with the same weights under both
  policies, batch 16 x 128, examples/s (median of `--repeats` batches), and the largest difference
  of the pooled and sequence outputs (target: within 2e-2);
* training: the run_pretraining Trainer (bench_pretraining.py's runner and flags: --models, --steps,
  --rounds, ...) under both policies, taking turns round by round.
"""

import os
import sys
import time

import numpy as np
from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_pretraining  # noqa: E402  (its flags: --models, --steps, --rounds, ...)
import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("inference_model", "bert_base", "bert_tf.modeling.PRESETS shape for inference.")
flags.DEFINE_integer("repeats", 10, "Timed inference batches per policy.")
flags.DEFINE_bool("force", False, "Measure even where bfloat16 is not native (emulated).")

FLAGS.set_default("models", ["mini"])
POLICIES = ("float32", "mixed_bfloat16")


def _inference(config, batch_size=16, seq_length=128):
    """{policy: (examples/s, pooled output, sequence output)} with the same weights under both."""
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
    keras.config.set_dtype_policy("float32")
    models["mixed_bfloat16"].set_weights(models["float32"].get_weights())
    calls = {
        policy: tf.function(lambda m=model: m(inputs, training=False))
        for policy, model in models.items()
    }
    seconds = {policy: [] for policy in POLICIES}
    outputs = {policy: call() for policy, call in calls.items()}
    for _ in range(FLAGS.repeats):
        for policy, call in calls.items():
            start = time.perf_counter()
            call()["pooled_output"].numpy()
            seconds[policy].append(time.perf_counter() - start)
    return {
        policy: (
            batch_size / float(np.median(seconds[policy])),
            tf.cast(outputs[policy]["pooled_output"], tf.float32).numpy(),
            tf.cast(outputs[policy]["sequence_output"], tf.float32).numpy(),
        )
        for policy in POLICIES
    }


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
            wall, _ = bench_pretraining._timed(run)
            speeds[policy].append(FLAGS.steps * FLAGS.batch_size / wall)
    return {policy: float(np.median(s)) for policy, s in speeds.items()}


def main(argv):
    del argv
    import tempfile

    from absl import logging

    from bert_tf.modeling import BertConfig

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
    result = _inference(BertConfig.from_preset(FLAGS.inference_model))
    base_speed, base_pooled, base_sequence = result["float32"]
    speed, pooled, sequence = result["mixed_bfloat16"]
    print(
        "| what | float32 examples/s | mixed_bfloat16 examples/s | speed-up | max abs output diff |"
    )
    print("|---|---|---|---|---|")
    diff = max(np.abs(pooled - base_pooled).max(), np.abs(sequence - base_sequence).max())
    print(
        f"| {FLAGS.inference_model} inference, batch 16 x 128 | {base_speed:.2f} | {speed:.2f} | "
        f"{speed / base_speed:.2f}x | {diff:.2e} |"
    )
    work_dir = tempfile.mkdtemp(prefix="bench_precision_")
    features = bench_pretraining._random_features(
        8 * FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
    )
    records = os.path.join(work_dir, "random.tfrecord")
    bench_pretraining._write_records(records, features)
    for shape in FLAGS.models:
        speeds = _training(shape, records, work_dir)
        print(
            f"| BERT-{shape} training step, batch {FLAGS.batch_size} x {FLAGS.seq_length} | "
            f"{speeds['float32']:.2f} | {speeds['mixed_bfloat16']:.2f} | "
            f"{speeds['mixed_bfloat16'] / speeds['float32']:.2f}x | | |"
        )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
