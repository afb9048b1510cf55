"""Pretraining throughput: bert_tf's run_pretraining loop vs keras-hub's BertMaskedLM (TF backend, model.fit).

Same shapes, batch, sequence length, masked positions, float32, with and without XLA, in one run:

    .venv/bin/python bench/bench_pretraining.py --models=mini,small --batch_size=32 --steps=20

Ours trains MLM + NSP with the original optimizer through bert_tf.training.Trainer, reading TFRecords in the
original format; keras-hub trains its masked-LM head only (it has no NSP head) with keras AdamW. Prints a
Markdown table of training examples/s (after warm-up steps, which include tracing and compilation).

`--runners=bert_tf,keras_hub,transformers` adds transformers' BertForPreTraining on torch (CPU, eager;
`pip install -e .[compare]`), which scores the masked-LM head at every position, as that model does.
"""

import json
import os
import platform
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags, logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["mini", "small"], "Shapes to run: mini, small.")
flags.DEFINE_list(
    "runners",
    ["bert_tf", "keras_hub"],
    "Implementations to run: bert_tf, keras_hub, transformers (needs `pip install -e .[compare]`).",
)
flags.DEFINE_integer("batch_size", 32, "Global batch.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("steps", 20, "Timed steps.")
flags.DEFINE_integer("warmup_steps", 5, "Untimed steps first (tracing, XLA compilation).")

SHAPES = {  # the BERT release's small models (Turc et al., 2019)
    "mini": dict(
        num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024
    ),
    "small": dict(
        num_hidden_layers=4, hidden_size=512, num_attention_heads=8, intermediate_size=2048
    ),
}
VOCAB_SIZE = 30522


def _random_features(num_examples, seq_length, max_predictions, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(1000, VOCAB_SIZE, [num_examples, seq_length]),
        "input_mask": np.ones([num_examples, seq_length], np.int64),
        "segment_ids": np.repeat(
            [[0] * (seq_length // 2) + [1] * (seq_length - seq_length // 2)], num_examples, 0
        ),
        "masked_lm_positions": np.sort(
            rng.choice(np.arange(1, seq_length), [num_examples, max_predictions])
        ),
        "masked_lm_ids": rng.integers(1000, VOCAB_SIZE, [num_examples, max_predictions]),
        "masked_lm_weights": np.ones([num_examples, max_predictions], np.float32),
        "next_sentence_labels": rng.integers(0, 2, [num_examples]),
    }


def _write_records(path, features):
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(len(features["input_ids"])):
            feature = {}
            for name, values in features.items():
                row = np.atleast_1d(values[i])
                if values.dtype == np.float32:
                    feature[name] = tf.train.Feature(
                        float_list=tf.train.FloatList(value=row.tolist())
                    )
                else:
                    feature[name] = tf.train.Feature(
                        int64_list=tf.train.Int64List(value=row.tolist())
                    )
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


def bench_bert_tf(shape, jit_compile, records, work_dir):
    from bert_tf.modeling import BertConfig
    from bert_tf.optimization import create_optimizer
    from bert_tf.tasks.pretraining import pretraining_task
    from bert_tf.training import TrainConfig, Trainer

    config = BertConfig(
        vocab_size=VOCAB_SIZE, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02, **SHAPES[shape],
    )  # fmt: skip
    task = pretraining_task(config, records, FLAGS.seq_length, FLAGS.max_predictions, seed=1)
    total = FLAGS.warmup_steps + FLAGS.steps
    train_config = TrainConfig(
        model_dir=tempfile.mkdtemp(dir=work_dir), train_batch_size=FLAGS.batch_size,
        num_train_steps=FLAGS.warmup_steps, steps_per_loop=total, save_checkpoints_steps=10**9,
        log_steps=10**9, jit_compile=jit_compile,
    )  # fmt: skip
    trainer = Trainer(
        task, tf.distribute.get_strategy(), lambda: create_optimizer(1e-4, 10000, 100), train_config
    )
    trainer.train()  # traces (and compiles) the step, then runs the warm-up steps
    trainer.config.num_train_steps = total
    # The Trainer's own measurement of the interval: the training steps, not the checkpoint it
    # saves at the end.
    return trainer.train()["examples_per_second"]


def bench_keras_hub(shape, jit_compile, features):
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
    model.fit(dataset, steps_per_epoch=FLAGS.warmup_steps, epochs=1, verbose=0)
    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=FLAGS.steps, epochs=1, verbose=0)
    return FLAGS.steps * FLAGS.batch_size / (time.perf_counter() - start)


def bench_transformers(shape, features):
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

    def train(num_steps, first_step):
        for step in range(first_step, first_step + num_steps):
            start = (step * FLAGS.batch_size) % len(ids)
            batch = {k: v[start : start + FLAGS.batch_size] for k, v in tensors.items()}
            model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()

    train(FLAGS.warmup_steps, 0)
    start = time.perf_counter()
    train(FLAGS.steps, FLAGS.warmup_steps)
    return FLAGS.steps * FLAGS.batch_size / (time.perf_counter() - start)


NAMES = {
    "bert_tf": "bert_tf run_pretraining (MLM+NSP)",
    "keras_hub": "keras-hub BertMaskedLM (MLM)",
    "transformers": "transformers BertForPreTraining, torch (MLM+NSP)",
}


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    work_dir = tempfile.mkdtemp(prefix="bench_pretraining_")
    features = _random_features(8 * FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions)
    records = os.path.join(work_dir, "random.tfrecord")
    _write_records(records, features)
    rows = []
    for shape in FLAGS.models:
        for runner in FLAGS.runners:
            for jit_compile in (False,) if runner == "transformers" else (False, True):
                keras.utils.set_random_seed(0)
                if runner == "bert_tf":
                    speed = bench_bert_tf(shape, jit_compile, records, work_dir)
                elif runner == "keras_hub":
                    speed = bench_keras_hub(shape, jit_compile, features)
                else:
                    speed = bench_transformers(shape, features)
                row = dict(
                    model=shape,
                    runner=runner,
                    jit_compile=jit_compile,
                    examples_per_sec=round(speed, 1),
                )
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, TF {tf.__version__}, "
          f"batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, {FLAGS.max_predictions} predictions, float32\n")  # fmt: skip
    print("| model | implementation | XLA | training examples/s |")
    print("|---|---|---|---|")
    for row in rows:
        xla = "yes" if row["jit_compile"] else "no"
        name = NAMES[row["runner"]]
        print(f"| BERT-{row['model']} | {name} | {xla} | {row['examples_per_sec']} |")


if __name__ == "__main__":
    app.run(main)
