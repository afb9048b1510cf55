"""Pretraining throughput: bert_tf's run_pretraining loop vs keras-hub's BertMaskedLM (TF backend, model.fit).

Same shapes, batch, sequence length, masked positions, float32, with and without XLA, in one run:

    .venv/bin/python -m bench.bench_pretraining --models=mini,small --batch_size=32 --steps=20

Ours is run_pretraining.py as a user runs it (MLM + NSP, the original optimizer and records), in a
process of its own: warm-up rounds, then `--rounds` rounds of `--steps` steps (one
--iterations_per_loop call each), each timed by its progress line (its CPU time is not told apart
from the process's start: n/a). keras-hub trains its masked-LM head only (it has no NSP head) with
keras AdamW, compiled with `steps_per_execution` = a round's steps (its warm-up rounded up to whole
rounds). The in-process runners are warmed up (tracing, XLA compilation), then take turns round by
round; each round is timed from outside the call (wall clock, and the CPU time of the process's
threads). Prints training examples/s (median and best round) and CPU milliseconds per example.

`--runners=...,transformers` adds BertForPreTraining on torch (CPU, eager; it scores the masked-LM head
at every position). `--mixed_precision=mixed_bfloat16` runs only where bfloat16 is native.
"""

import json
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf
from absl import app, flags, logging

from bench import corpora, machine, scripts, timing

FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["mini", "small"], "Shapes to run: mini, small.")
flags.DEFINE_list(
    "runners",
    ["bert_tf", "keras_hub"],
    "Implementations to run: bert_tf, keras_hub, transformers (needs `pip install -e .[compare]`).",
)
flags.DEFINE_list("jit_compile", ["no", "yes"], "XLA settings of the TF runners: no, yes.")
flags.DEFINE_integer("batch_size", 32, "Global batch.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("steps", 20, "Timed steps per round.")
flags.DEFINE_integer("rounds", 3, "Rounds; in each, every runner trains --steps steps in turn.")
flags.DEFINE_integer("warmup_steps", 5, "Untimed steps first (tracing, XLA compilation).")
flags.DEFINE_integer("threads", 0, "Compute threads of every runner (0 = one per core).")
flags.DEFINE_string(
    "mixed_precision", "float32", "float32, or mixed_bfloat16 (run only where bfloat16 is native)."
)

SHAPES = {  # the BERT release's small models (Turc et al., 2019)
    "mini": dict(
        num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024
    ),
    "small": dict(
        num_hidden_layers=4, hidden_size=512, num_attention_heads=8, intermediate_size=2048
    ),
}
VOCAB_SIZE = 30522


def bert_tf_rounds(shape, jit_compile, records, work_dir):
    """[examples/s of each timed round] of one run_pretraining.py process, as a user runs it: the
    warm-up rounds, then --rounds rounds of --steps steps, one `--iterations_per_loop` call and one
    progress line each (a line's rate covers the steps since the line before)."""
    from bert_tf import BertConfig

    folder = tempfile.mkdtemp(dir=work_dir)
    config_file = os.path.join(folder, "bert_config.json")
    config = BertConfig(
        vocab_size=VOCAB_SIZE, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02, **SHAPES[shape],
    )  # fmt: skip
    with open(config_file, "w", encoding="utf-8") as writer:
        writer.write(config.to_json_string())
    warmup_rounds = -(-FLAGS.warmup_steps // FLAGS.steps)  # whole rounds, as keras-hub's
    _, result = scripts.timed(
        "run_pretraining", bert_config_file=config_file, input_file=records, do_train=True,
        output_dir=os.path.join(folder, "run"), train_batch_size=FLAGS.batch_size,
        max_seq_length=FLAGS.seq_length, max_predictions_per_seq=FLAGS.max_predictions,
        num_train_steps=(warmup_rounds + FLAGS.rounds) * FLAGS.steps, num_warmup_steps=100,
        learning_rate=1e-4, iterations_per_loop=FLAGS.steps, log_steps=FLAGS.steps,
        save_checkpoints_steps=10**9, jit_compile=jit_compile,
        mixed_precision=FLAGS.mixed_precision, seed=1,
    )  # fmt: skip
    seconds = scripts.round_seconds(result.stderr, FLAGS.steps, FLAGS.batch_size)
    return [
        FLAGS.steps * FLAGS.batch_size / round_seconds for round_seconds in seconds[warmup_rounds:]
    ]


def keras_hub_runner(shape, jit_compile, features):
    import keras_hub

    sizes = SHAPES[shape]
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB_SIZE, num_layers=sizes["num_hidden_layers"],
        num_heads=sizes["num_attention_heads"], hidden_dim=sizes["hidden_size"],
        intermediate_dim=sizes["intermediate_size"], max_sequence_length=512,
    )  # fmt: skip
    model = keras_hub.models.BertMaskedLM(backbone)
    model.compile(
        optimizer=keras.optimizers.AdamW(
            1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[],
        jit_compile=jit_compile,
        # A round's steps in one call, as ours runs them in one steps_per_loop call.
        steps_per_execution=FLAGS.steps,
    )
    inputs = {
        "token_ids": features["input_ids"].astype(np.int32),
        "padding_mask": features["input_mask"].astype(bool),
        "segment_ids": features["segment_ids"].astype(np.int32),
        "mask_positions": features["masked_lm_positions"].astype(np.int32),
    }
    data = (inputs, features["masked_lm_ids"].astype(np.int32), features["masked_lm_weights"])
    dataset = (
        tf.data.Dataset.from_tensor_slices(data)
        .repeat()
        .batch(FLAGS.batch_size, drop_remainder=True)
    )
    # Keras runs whole executions: the warm-up is --warmup_steps rounded up to whole rounds.
    warmup_rounds = -(-FLAGS.warmup_steps // FLAGS.steps)
    model.fit(dataset, steps_per_epoch=warmup_rounds * FLAGS.steps, epochs=1, verbose=0)

    def run():
        model.fit(dataset, steps_per_epoch=FLAGS.steps, epochs=1, verbose=0)

    return run


def transformers_runner(shape, features):
    """transformers' BertForPreTraining on torch (CPU, eager): MLM + NSP, torch AdamW, clipping 1.0."""
    import torch
    import transformers

    torch.manual_seed(0)
    sizes = SHAPES[shape]
    config = transformers.BertConfig(
        vocab_size=VOCAB_SIZE, hidden_size=sizes["hidden_size"],
        num_hidden_layers=sizes["num_hidden_layers"], num_attention_heads=sizes["num_attention_heads"],
        intermediate_size=sizes["intermediate_size"], hidden_act="gelu_new", max_position_embeddings=512,
    )  # fmt: skip
    model = transformers.BertForPreTraining(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    # Its MLM labels are [B, S], -100 where nothing is predicted: the head scores every position.
    ids = torch.tensor(features["input_ids"])
    labels = torch.full_like(ids, -100)
    rows = np.arange(len(ids))[:, np.newaxis]
    labels[rows, features["masked_lm_positions"]] = torch.tensor(features["masked_lm_ids"])
    tensors = dict(
        input_ids=ids, attention_mask=torch.tensor(features["input_mask"]),
        token_type_ids=torch.tensor(features["segment_ids"]), labels=labels,
        next_sentence_label=torch.tensor(features["next_sentence_labels"]),
    )  # fmt: skip
    step = 0

    def train(num_steps):
        nonlocal step
        for _ in range(num_steps):
            start = (step * FLAGS.batch_size) % len(ids)
            batch = {k: v[start : start + FLAGS.batch_size] for k, v in tensors.items()}
            model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            step += 1

    train(FLAGS.warmup_steps)
    return lambda: train(FLAGS.steps)


NAMES = {
    "bert_tf": "bert_tf run_pretraining (MLM+NSP)",
    "keras_hub": "keras-hub BertMaskedLM (MLM)",
    "transformers": "transformers BertForPreTraining, torch (MLM+NSP)",
}


def _row(shape, runner, jit_compile, speeds, cpu_ms_per_example):
    return dict(
        model=shape, runner=runner, jit_compile=jit_compile,
        examples_per_sec=round(float(np.median(speeds)), 2), best_examples_per_sec=round(max(speeds), 2),
        cpu_ms_per_example=None if cpu_ms_per_example is None else round(cpu_ms_per_example, 1),
    )  # fmt: skip


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    threads = machine.set_threads(FLAGS.threads)
    if machine.skips_precision(FLAGS.mixed_precision):
        return
    print(machine.header())
    print(
        f"batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, {FLAGS.max_predictions} predictions, "
        f"{FLAGS.mixed_precision}, {machine.threads_line(threads)}; {FLAGS.rounds} rounds of "
        f"{FLAGS.steps} steps per runner after {FLAGS.warmup_steps} warm-up steps; keras-hub "
        f"steps_per_execution={FLAGS.steps}\n",
        flush=True,
    )
    work_dir = tempfile.mkdtemp(prefix="bench_pretraining_")
    features = corpora.random_features(
        8 * FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
    )
    records = os.path.join(work_dir, "random.tfrecord")
    corpora.write_records(records, features)
    rows = []
    for shape in FLAGS.models:
        runners, rows_of_shape = {}, []
        for runner in FLAGS.runners:
            settings = (
                [False] if runner == "transformers" else [x == "yes" for x in FLAGS.jit_compile]
            )
            for jit_compile in settings:
                keras.utils.set_random_seed(0)
                if runner == "bert_tf":  # in a process of its own: its rounds from its log
                    speeds = bert_tf_rounds(shape, jit_compile, records, work_dir)
                    rows_of_shape.append(_row(shape, runner, jit_compile, speeds, None))
                elif runner == "keras_hub":
                    runners[runner, jit_compile] = keras_hub_runner(shape, jit_compile, features)
                else:
                    runners[runner, jit_compile] = transformers_runner(shape, features)
        times = {key: [] for key in runners}
        for _ in range(FLAGS.rounds):
            for key, run in runners.items():
                times[key].append(timing.timed(run)[:2])
        examples = FLAGS.steps * FLAGS.batch_size
        for (runner, jit_compile), rounds in times.items():
            speeds = [examples / wall for wall, _ in rounds]
            cpu = 1e3 * min(cpu for _, cpu in rounds) / examples
            rows_of_shape.append(_row(shape, runner, jit_compile, speeds, cpu))
        for row in rows_of_shape:
            print(json.dumps(row), flush=True)
        rows += rows_of_shape

    print(
        "\n| model | implementation | XLA | examples/s (median of rounds) | best round | CPU ms per example (best) |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        xla = "yes" if row["jit_compile"] else "no"
        print(
            f"| BERT-{row['model']} | {NAMES[row['runner']]} | {xla} | {row['examples_per_sec']} | "
            f"{row['best_examples_per_sec']} | {row['cpu_ms_per_example'] or 'n/a'} |"
        )
    for shape in FLAGS.models:
        ours = [r for r in rows if r["model"] == shape and r["runner"] == "bert_tf"]
        if not ours:
            continue
        best = max(ours, key=lambda r: r["examples_per_sec"])
        for peer_name in dict.fromkeys(r["runner"] for r in rows if r["runner"] != "bert_tf"):
            peers = [r for r in rows if r["model"] == shape and r["runner"] == peer_name]
            peer = max(peers, key=lambda r: r["examples_per_sec"])
            print(
                f"BERT-{shape}: bert_tf (XLA {'yes' if best['jit_compile'] else 'no'}) / "
                f"{NAMES[peer_name]} (XLA {'yes' if peer['jit_compile'] else 'no'}), the fastest "
                f"setting of each: {best['examples_per_sec'] / peer['examples_per_sec']:.2f}x "
                "examples/s"
            )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
