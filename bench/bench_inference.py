"""Encoder inference: bert_tf's BertModel vs keras-hub's BertBackbone (TF) vs transformers' BertModel (torch).

BERT-base shape, float32, random weights, the same token ids and thread pools for every runner:

    .venv/bin/python -m bench.bench_inference                 # batch 16 x 128 throughput, batch-1 latency
    .venv/bin/python -m bench.bench_inference --model=bert_mini --repeats=3 --latency_calls=10   # quick

Throughput: examples/s over `--repeats` batches (median, best) and CPU time per batch; latency: p50
and p95 of `--latency_calls` batch-1 calls at each of `--latency_lengths`; GFLOP/s and the share
of this machine's matmul rate. The runners (tf.functions of [None, None] inputs; torch eager under
inference_mode) take turns batch by batch and call by call; a missing peer is reported as skipped.
"""

import numpy as np
from absl import app, flags

from bench import machine, timing

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "model", "bert_base", "A bert_tf.modeling.PRESETS name (bert_base, bert_mini, ...)."
)
flags.DEFINE_list("runners", ["bert_tf", "keras_hub", "transformers"], "Implementations to run.")
flags.DEFINE_integer("batch_size", 16, "Batch of the throughput measurement.")
flags.DEFINE_integer("seq_length", 128, "Sequence length of the throughput measurement.")
flags.DEFINE_integer("repeats", 10, "Timed batches of the throughput measurement.")
flags.DEFINE_list("latency_lengths", ["32", "128"], "Sequence lengths of the batch-1 latency.")
flags.DEFINE_integer("latency_calls", 50, "Timed batch-1 calls per length.")
flags.DEFINE_integer("threads", 0, "Compute threads of every runner (0 = one per core).")
flags.DEFINE_string(
    "mixed_precision", "float32", "float32, or mixed_bfloat16 (run only where bfloat16 is native)."
)

NAMES = {
    "bert_tf": "bert_tf BertModel",
    "keras_hub": "keras-hub BertBackbone (TF)",
    "transformers": "transformers BertModel (torch)",
}


def _inputs(batch_size, seq_length, vocab_size, seed):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(1000, vocab_size, [batch_size, seq_length]).astype(np.int32),
        "input_mask": np.ones([batch_size, seq_length], np.int32),
        "segment_ids": np.repeat(
            [[0] * (seq_length // 2) + [1] * (seq_length - seq_length // 2)], batch_size, 0
        ).astype(np.int32),
    }


def _tf_runner(call):
    """(numpy inputs -> [B, H] pooled output as numpy) around a traced-once tf.function."""
    import tensorflow as tf

    spec = [tf.TensorSpec([None, None], tf.int32)] * 3
    function = tf.function(call, input_signature=spec)

    def run(inputs):
        return function(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]).numpy()

    return run


def build_bert_tf(config):
    import tensorflow as tf

    from bert_tf.modeling import BertModel

    model = BertModel(config)
    model.build()

    def call(input_ids, input_mask, segment_ids):
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        return tf.cast(model(features, training=False)["pooled_output"], tf.float32)

    return _tf_runner(call)


def build_keras_hub(config):
    import keras_hub
    import tensorflow as tf

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, max_sequence_length=config.max_position_embeddings,
    )  # fmt: skip

    def call(input_ids, input_mask, segment_ids):
        inputs = {
            "token_ids": input_ids,
            "padding_mask": tf.cast(input_mask, tf.bool),
            "segment_ids": segment_ids,
        }
        return tf.cast(backbone(inputs, training=False)["pooled_output"], tf.float32)

    return _tf_runner(call)


def build_transformers(config):
    import torch
    import transformers

    torch.manual_seed(0)
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act="gelu_new",
        max_position_embeddings=config.max_position_embeddings,
    )  # fmt: skip
    model = transformers.BertModel(hf_config).eval()
    if FLAGS.mixed_precision == "mixed_bfloat16":
        model = model.to(torch.bfloat16)

    def run(inputs):
        with torch.inference_mode():
            output = model(
                input_ids=torch.from_numpy(inputs["input_ids"].astype(np.int64)),
                attention_mask=torch.from_numpy(inputs["input_mask"].astype(np.int64)),
                token_type_ids=torch.from_numpy(inputs["segment_ids"].astype(np.int64)),
            )
        return output.pooler_output.float().numpy()

    return run


BUILDERS = {
    "bert_tf": build_bert_tf,
    "keras_hub": build_keras_hub,
    "transformers": build_transformers,
}


def _take_turns(runs, inputs, calls):
    """{runner: [(wall s, CPU s)] * calls}: 3 untimed calls each, then the runners take turns."""
    for run in runs.values():
        for _ in range(3):  # the first traces
            run(inputs)
    seconds = {name: [] for name in runs}
    for _ in range(calls):
        for name, run in runs.items():
            seconds[name].append(timing.timed(run, inputs)[:2])
    return seconds


def measure(runs, vocab_size):
    """{runner: {"examples_per_sec", "best_examples_per_sec", "cpu_s_per_batch", "latency"}}.

    "latency" maps each of --latency_lengths to (p50 ms, p95 ms) of batch-1 calls.
    """
    batch = _inputs(FLAGS.batch_size, FLAGS.seq_length, vocab_size, seed=1)
    throughput = _take_turns(runs, batch, FLAGS.repeats)
    results = {}
    for name, calls in throughput.items():
        walls = [wall for wall, _ in calls]
        results[name] = {
            "examples_per_sec": FLAGS.batch_size / float(np.median(walls)),
            "best_examples_per_sec": FLAGS.batch_size / min(walls),
            "cpu_s_per_batch": float(np.median([cpu for _, cpu in calls])),
            "latency": {},
        }
    for length in map(int, FLAGS.latency_lengths):
        one = _inputs(1, length, vocab_size, seed=2)
        for name, calls in _take_turns(runs, one, FLAGS.latency_calls).items():
            walls = [wall for wall, _ in calls]
            results[name]["latency"][length] = (
                1e3 * float(np.percentile(walls, 50)),
                1e3 * float(np.percentile(walls, 95)),
            )
    return results


def main(argv):
    del argv
    import keras

    from bert_tf.modeling import BertConfig

    threads = machine.set_threads(FLAGS.threads)
    if machine.skips_precision(FLAGS.mixed_precision):
        return
    if FLAGS.mixed_precision != "float32":
        keras.config.set_dtype_policy(FLAGS.mixed_precision)
    config = BertConfig.from_preset(FLAGS.model)
    print(machine.header())
    print(
        f"{FLAGS.model}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads, random weights, {FLAGS.mixed_precision}; "
        f"{machine.threads_line(threads)}; runners taking turns batch by batch\n",
        flush=True,
    )
    runs = {}
    for runner in FLAGS.runners:
        keras.utils.set_random_seed(0)
        try:
            runs[runner] = BUILDERS[runner](config)
        except ImportError as error:
            print(f"{NAMES[runner]}: skipped ({error}; see the module docstring)")
    results = measure(runs, config.vocab_size)
    # The physical limit, in the compute dtype, measured after the runners (same process, same load).
    dtype = "bfloat16" if FLAGS.mixed_precision == "mixed_bfloat16" else "float32"
    rate = machine.matmul_rates((dtype,), repeats=FLAGS.repeats)[dtype]
    gflop = machine.encoder_flops(config, FLAGS.seq_length) / 1e9
    for runner, result in results.items():
        print(runner, result, flush=True)

    lengths = [int(length) for length in FLAGS.latency_lengths]
    columns = [f"batch 1 x {n}: p50 / p95 ms" for n in lengths]
    print(
        f"\n| implementation | batch {FLAGS.batch_size} x {FLAGS.seq_length}: examples/s (median) | best | "
        f"CPU s per batch (median) | GFLOP/s (share of {dtype} matmul's {rate:.0f}) | "
        + " | ".join(columns)
        + " |"
    )
    print("|---|---|---|---|---|" + "---|" * len(columns))
    for runner, result in results.items():
        latency = " | ".join(
            f"{result['latency'][n][0]:.1f} / {result['latency'][n][1]:.1f}" for n in lengths
        )
        print(
            f"| {NAMES[runner]} | {result['examples_per_sec']:.2f} | "
            f"{result['best_examples_per_sec']:.2f} | {result['cpu_s_per_batch']:.2f} | "
            f"{result['examples_per_sec'] * gflop:.0f} ({result['examples_per_sec'] * gflop / rate:.0%}) | "
            f"{latency} |"
        )
    if "bert_tf" in results:
        ours = results["bert_tf"]
        for runner, result in results.items():
            if runner == "bert_tf":
                continue
            ratios = [
                f"throughput {ours['examples_per_sec'] / result['examples_per_sec']:.2f}x",
                f"CPU per batch {result['cpu_s_per_batch'] / ours['cpu_s_per_batch']:.2f}x",
            ]
            ratios += [
                f"seq {n} p50 latency {result['latency'][n][0] / ours['latency'][n][0]:.2f}x"
                for n in lengths
            ]
            print(
                f"bert_tf vs {NAMES[runner]}: " + ", ".join(ratios) + " (above 1 = bert_tf faster)"
            )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
