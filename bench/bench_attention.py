"""The attention block's forms, each timed forward + backward, taking turns round by round.

1. The heads: einsum over [B, S, N, D] against batched matmuls after one transpose to [B, N, S, D]
   (what SelfAttention now runs), timed from query, key and value.
2. The query/key/value projections: three [H, H] matmuls against one fused [H, 3H] matmul split
   in three, each followed by 1's matmul form, timed from the hidden states.

At BERT-mini training shapes by default (batch 32, sequence 128, 4 heads of 64):

    .venv/bin/python -m bench.bench_attention
    .venv/bin/python -m bench.bench_attention --batch_size=16 --heads=12   # BERT-base heads
"""

import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from bench import machine

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 32, "Batch.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("heads", 4, "Attention heads.")
flags.DEFINE_integer("head_size", 64, "Size of each head.")
flags.DEFINE_integer("calls", 30, "Timed calls per form and round.")
flags.DEFINE_integer("rounds", 3, "Rounds; in each, both forms run --calls calls in turn.")
flags.DEFINE_integer("threads", 0, "Intra-op and inter-op threads (0 = one per core).")


def _with_gradient(form, *variables):
    """A tf.function: form(x) and the gradient of sum(form(x)^2) with respect to x and variables."""

    @tf.function
    def step(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = form(*inputs)
            loss = tf.reduce_sum(out * out)
        return out, tape.gradient(loss, [*inputs, *variables])

    return step


def _heads(x):
    b, s, n, d = FLAGS.batch_size, FLAGS.seq_length, FLAGS.heads, FLAGS.head_size
    return tf.reshape(x, [b, s, n, d])  # [B, S, N, D]


def _matmul_attention(q, k, v):
    b, s, n, d = FLAGS.batch_size, FLAGS.seq_length, FLAGS.heads, FLAGS.head_size
    q, k, v = (tf.transpose(_heads(x), [0, 2, 1, 3]) for x in (q, k, v))  # [B, N, S, D]
    probs = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / np.sqrt(d), axis=-1)  # [B, N, S, S]
    return tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]), [b, s, n * d])  # [B, S, H]


def _einsum_attention(q, k, v):
    b, s, n, d = FLAGS.batch_size, FLAGS.seq_length, FLAGS.heads, FLAGS.head_size
    scores = tf.einsum("bqnd,bknd->bnqk", _heads(q), _heads(k)) / np.sqrt(d)  # [B, N, S, S]
    probs = tf.nn.softmax(scores, axis=-1)
    return tf.reshape(tf.einsum("bnqk,bknd->bqnd", probs, _heads(v)), [b, s, n * d])  # [B, S, H]


def _head_forms():
    """{name: step(q, k, v)}: the two ways of multiplying the heads."""
    return {
        "einsum": _with_gradient(_einsum_attention),
        "matmul": _with_gradient(_matmul_attention),
    }


def _projection_forms():
    """{name: step(x)}: separate and fused query/key/value projections, then the matmul form."""
    h = FLAGS.heads * FLAGS.head_size
    kernels = [tf.Variable(tf.random.stateless_normal([h, h], seed=[10 + i, 0])) for i in range(3)]
    biases = [tf.Variable(tf.zeros([h])) for _ in range(3)]
    fused_kernel = tf.Variable(tf.concat(kernels, axis=1))  # [H, 3H]
    fused_bias = tf.Variable(tf.concat(biases, axis=0))

    def separate(x):
        q, k, v = (
            tf.matmul(x, kernel) + bias for kernel, bias in zip(kernels, biases, strict=True)
        )
        return _matmul_attention(q, k, v)

    def fused(x):
        q, k, v = tf.split(tf.matmul(x, fused_kernel) + fused_bias, 3, axis=-1)  # 3 x [B, S, H]
        return _matmul_attention(q, k, v)

    return {
        "separate (3 x [H, H])": _with_gradient(separate, *kernels, *biases),
        "fused ([H, 3H], split)": _with_gradient(fused, fused_kernel, fused_bias),
    }


def _take_turns(steps, inputs):
    """{name: [(wall s, CPU s) per call, one pair per round]}, the forms taking turns round by round."""
    times = {name: [] for name in steps}
    for _ in range(FLAGS.rounds):
        for name, step in steps.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(FLAGS.calls):
                step(*inputs)
            times[name].append(
                (
                    (time.perf_counter() - wall) / FLAGS.calls,
                    (time.process_time() - cpu) / FLAGS.calls,
                )
            )
    return times


def _print_table(times):
    print("| form | wall ms per call (median of rounds) | CPU ms per call (best round) |")
    print("|---|---|---|")
    for name, rounds in times.items():
        wall = 1e3 * float(np.median([w for w, _ in rounds]))
        cpu = 1e3 * min(c for _, c in rounds)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")


def _compare(times, name, baseline, steps, inputs):
    """Prints baseline's CPU time over name's, and the largest difference of their outputs."""
    cpu = {key: min(c for _, c in times[key]) for key in (name, baseline)}
    difference = float(tf.reduce_max(tf.abs(steps[name](*inputs)[0] - steps[baseline](*inputs)[0])))
    print(
        f"CPU per call (best round), {baseline} / {name}: {cpu[baseline] / cpu[name]:.2f} (above 1: "
        f"{name} uses less); largest output difference {difference:.2e}\n"
    )


def main(argv):
    del argv
    threads = machine.set_threads(FLAGS.threads)
    print(machine.header())
    b, s, h = FLAGS.batch_size, FLAGS.seq_length, FLAGS.heads * FLAGS.head_size
    print(
        f"batch {b}, seq {s}, {FLAGS.heads} heads of {FLAGS.head_size}, float32, "
        f"{machine.threads_line(threads)}; {FLAGS.rounds} rounds of {FLAGS.calls} calls per form\n"
    )
    q, k, v = (tf.random.stateless_normal([b, s, h], seed=[i, 0]) for i in range(3))
    steps = _head_forms()
    for step in steps.values():
        step(q, k, v)  # traces
    times = _take_turns(steps, (q, k, v))
    print("1. Multiplying the heads (from query, key and value):\n")
    _print_table(times)
    _compare(times, "matmul", "einsum", steps, (q, k, v))

    x = tf.random.stateless_normal([b, s, h], seed=[3, 0])
    steps = _projection_forms()
    for step in steps.values():
        step(x)  # traces
    times = _take_turns(steps, (x,))
    print("2. The query/key/value projections (from the hidden states):\n")
    _print_table(times)
    separate, fused = steps
    _compare(times, separate, fused, steps, (x,))
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
