"""The attention block's two forms: einsum over [B, S, N, D] heads vs batched matmuls after one transpose.

bert_tf.layers.attention.SelfAttention used two `tf.einsum`s ("bqnd,bknd->bnqk", "bnqk,bknd->bqnd"); it now
transposes the heads to [B, N, S, D] once and uses `tf.matmul`. Both compute the same products and sums.
This times forward + backward (the gradient with respect to query, key and value) of each form, as
training runs them, at BERT-mini shapes (batch 32, sequence 128, 4 heads of 64), taking turns round
by round:

    .venv/bin/python bench/bench_attention.py
    .venv/bin/python bench/bench_attention.py --batch_size=16 --heads=12   # BERT-base heads
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 32, "Batch.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("heads", 4, "Attention heads.")
flags.DEFINE_integer("head_size", 64, "Size of each head.")
flags.DEFINE_integer("calls", 30, "Timed calls per form and round.")
flags.DEFINE_integer("rounds", 3, "Rounds; in each, both forms run --calls calls in turn.")
flags.DEFINE_integer("threads", 0, "Compute threads (0 = one per core).")


def _forms():
    b, s, n, d = FLAGS.batch_size, FLAGS.seq_length, FLAGS.heads, FLAGS.head_size
    scale = 1.0 / np.sqrt(d)

    def heads(x):
        return tf.reshape(x, [b, s, n, d])

    def einsum_form(q, k, v):
        probs = tf.nn.softmax(tf.einsum("bqnd,bknd->bnqk", heads(q), heads(k)) * scale, axis=-1)
        return tf.reshape(tf.einsum("bnqk,bknd->bqnd", probs, heads(v)), [b, s, n * d])

    def matmul_form(q, k, v):
        q, k, v = (tf.transpose(heads(x), [0, 2, 1, 3]) for x in (q, k, v))
        probs = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) * scale, axis=-1)
        return tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]), [b, s, n * d])

    def with_gradient(form):
        @tf.function
        def step(q, k, v):
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                out = form(q, k, v)
                loss = tf.reduce_sum(out * out)
            return out, tape.gradient(loss, [q, k, v])

        return step

    return {"einsum": with_gradient(einsum_form), "matmul": with_gradient(matmul_form)}


def main(argv):
    del argv
    threads = machine.set_threads(FLAGS.threads)
    print(machine.header())
    b, s, h = FLAGS.batch_size, FLAGS.seq_length, FLAGS.heads * FLAGS.head_size
    print(
        f"batch {b}, seq {s}, {FLAGS.heads} heads of {FLAGS.head_size}, float32, {threads} threads; "
        f"{FLAGS.rounds} rounds of {FLAGS.calls} calls per form\n"
    )
    q, k, v = (tf.random.stateless_normal([b, s, h], seed=[i, 0]) for i in range(3))
    forms = _forms()
    outputs = {name: step(q, k, v) for name, step in forms.items()}  # traces
    difference = float(tf.reduce_max(tf.abs(outputs["einsum"][0] - outputs["matmul"][0])))
    times = {name: [] for name in forms}
    for _ in range(FLAGS.rounds):
        for name, step in forms.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(FLAGS.calls):
                step(q, k, v)
            times[name].append(
                (
                    (time.perf_counter() - wall) / FLAGS.calls,
                    (time.process_time() - cpu) / FLAGS.calls,
                )
            )
    print("| form | wall ms per call (median of rounds) | CPU ms per call (best round) |")
    print("|---|---|---|")
    for name, rounds in times.items():
        wall = 1e3 * float(np.median([w for w, _ in rounds]))
        cpu = 1e3 * min(c for _, c in rounds)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")
    einsum_cpu = min(c for _, c in times["einsum"])
    matmul_cpu = min(c for _, c in times["matmul"])
    print(
        f"matmul form: {einsum_cpu / matmul_cpu:.2f}x less CPU than einsum; largest output "
        f"difference {difference:.2e}"
    )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
