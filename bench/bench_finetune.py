"""Real-length fine-tuning and prediction: run_classifier with and without length bucketing vs keras-hub.

Two tasks of real sentence lengths made from Jane Austen's novels (../shared/data/austen_novels):
  * sst2_like: one sentence -> which of two novels it comes from (Emma or Pride and Prejudice);
  * mrpc_like: a sentence pair -> whether the second sentence follows the first in the novel (the
    other half pairs it with a random sentence of the same novel).
Every runner starts from the same pretrained weights (all-MiniLM-L6-v2, converted by
convert_checkpoint.py), trains on the same examples with the same batch, epochs and learning-rate
schedule, max_seq_length 128, then predicts the dev set:

  * bert_tf run_classifier (length bucketing): `bert_tf.tasks.classification.ClassifierRun`, the code
    behind run_classifier.py --do_train --do_eval, with its default --length_bucketing=True;
  * bert_tf run_classifier (--length_bucketing=False): every batch padded to 128, as the original;
  * keras-hub BertClassifier + BertTextClassifierPreprocessor (sequence_length 128), fed the raw
    strings, `fit` and `predict` (keras AdamW with the same schedule, clipping and decay exclusions).

    .venv/bin/python bench/bench_finetune.py                          # both tasks, every runner
    .venv/bin/python bench/bench_finetune.py --num_train=64 --num_dev=32 --epochs=1   # smoke test

Times are wall clock of the whole step as a user meets it: training includes writing the features
(ours: FullTokenizer to TFRecords; keras-hub tokenizes in its tf.data pipeline) and tracing; prediction
includes the dev features. keras-hub's BertBackbone uses the tanh GELU while MiniLM was trained with
the erf one (keras-hub's own Hugging Face converter makes the same substitution).
"""

import os
import random
import re
import sys
import tempfile
import time

import numpy as np
from absl import app, flags, logging

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_DIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402
import minilm  # noqa: E402

SHARED_DIR = os.environ.get("BERT_TF_SHARED_DIR", os.path.join(REPO_DIR, "..", "shared"))
NOVELS_DIR = os.path.join(SHARED_DIR, "data", "austen_novels")

FLAGS = flags.FLAGS
flags.DEFINE_list("tasks", ["sst2_like", "mrpc_like"], "Tasks to run: sst2_like, mrpc_like.")
flags.DEFINE_list("runners", ["bucketed", "fixed", "keras_hub"], "bucketed, fixed, keras_hub.")
flags.DEFINE_integer("num_train", 2048, "Training examples per task (half of each label).")
flags.DEFINE_integer("num_dev", 512, "Dev examples per task.")
flags.DEFINE_float("epochs", 2.0, "Training epochs.")
flags.DEFINE_integer("batch_size", 32, "Training and prediction batch.")
flags.DEFINE_integer("max_seq_length", 128, "Longest input in wordpieces; longer ones are cut.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate (10% warmup, then linear decay).")
flags.DEFINE_integer("threads", 0, "Compute threads (0 = one per core).")
flags.DEFINE_string(
    "work_dir", None, "Where data, features and checkpoints go (default: a temp dir)."
)

NAMES = {
    "bucketed": "bert_tf run_classifier, length bucketing (default)",
    "fixed": "bert_tf run_classifier, --length_bucketing=False (pads to 128)",
    "keras_hub": "keras-hub BertClassifier + its preprocessor (pads to 128)",
}

# ---------------------------------------------------------------------------------- the data


def _paragraphs(path):
    """The novel's paragraphs as single-line strings, headings (all capitals) left out."""
    with open(path, encoding="utf-8") as reader:
        blocks = reader.read().replace("_", "").split("\n\n")
    paragraphs = [" ".join(block.split()) for block in blocks]
    return [p for p in paragraphs if p and not p.isupper()]


_SENTENCE_END = re.compile(r'(?<=[.!?])["\']?\s+(?=["\']?[A-Z])')


def _sentences(paragraph, min_words=5, max_words=60):
    sentences = [s.strip() for s in _SENTENCE_END.split(paragraph)]
    return [s for s in sentences if min_words <= len(s.split()) <= max_words]


def make_sst2_like(num_examples, seed):
    """[(label, sentence)]: which novel, half "emma", half "pride"."""
    rng = random.Random(seed)
    examples = []
    for label, name in (("emma", "emma.txt"), ("pride", "prideprejudice.txt")):
        sentences = [s for p in _paragraphs(os.path.join(NOVELS_DIR, name)) for s in _sentences(p)]
        examples += [(label, s) for s in rng.sample(sentences, num_examples // 2)]
    rng.shuffle(examples)
    return examples


def make_mrpc_like(num_examples, seed):
    """[(label, a, b)]: "1" when b follows a in the same paragraph, "0" for a random b of that novel."""
    rng = random.Random(seed)
    pairs, novels = [], sorted(os.listdir(NOVELS_DIR))
    for name in novels:
        sentences_by_paragraph = [
            _sentences(p, max_words=40) for p in _paragraphs(os.path.join(NOVELS_DIR, name))
        ]
        every = [s for sentences in sentences_by_paragraph for s in sentences]
        for sentences in sentences_by_paragraph:
            for a, b in zip(sentences, sentences[1:], strict=False):
                if rng.random() < 0.5:
                    pairs.append(("1", a, b))
                else:
                    other = rng.choice(every)
                    if other not in (a, b):
                        pairs.append(("0", a, other))
    positives = [p for p in pairs if p[0] == "1"]
    negatives = [p for p in pairs if p[0] == "0"]
    examples = rng.sample(positives, num_examples // 2) + rng.sample(
        negatives, num_examples - num_examples // 2
    )
    rng.shuffle(examples)
    return examples


MAKERS = {"sst2_like": make_sst2_like, "mrpc_like": make_mrpc_like}


def write_task(task, data_dir):
    """Writes data_dir/train.tsv and dev.tsv (label, text_a[, text_b]); returns (train, dev) rows."""
    examples = MAKERS[task](FLAGS.num_train + FLAGS.num_dev, seed=12345)
    train, dev = examples[: FLAGS.num_train], examples[FLAGS.num_train :]
    os.makedirs(data_dir, exist_ok=True)
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        # Texts hold no tabs or newlines (_paragraphs joins on spaces); quotes are text in tsv.
        with open(os.path.join(data_dir, name), "w", encoding="utf-8") as writer:
            writer.writelines("\t".join(row) + "\n" for row in rows)
    return train, dev


def packed_lengths(rows, vocab_file):
    """Wordpieces per example, [CLS] and [SEP]s included, before cutting to max_seq_length."""
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    return np.array(
        [sum(len(tokenizer.tokenize(text)) + 1 for text in row[1:]) + 1 for row in rows]
    )


# ---------------------------------------------------------------------------------- the runners


def run_bert_tf(data_dir, output_dir, model_dir, is_pair, length_bucketing):
    from bert_tf.tasks.classification import ClassifierConfig, ClassifierRun

    config = ClassifierConfig(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
        output_dir=output_dir, data_dir=data_dir, task_name="tsv", label_column="0",
        text_a_column="1", text_b_column="2" if is_pair else None, do_train=True, do_eval=True,
        max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.epochs, length_bucketing=length_bucketing, log_steps=10**6,
        save_checkpoints_steps=10**6,
    )  # fmt: skip
    classifier_run = ClassifierRun(config)
    start = time.perf_counter()
    classifier_run.train()
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    results = classifier_run.evaluate()
    return train_seconds, time.perf_counter() - start, results["eval_accuracy"]


def _copy_encoder_to_keras_hub(bert, backbone):
    """Copies a bert_tf BertModel's weights into a keras-hub BertBackbone of the same shape.

    keras-hub keeps attention projections as EinsumDense kernels [H, N, D] (output: [N, D, H]) where
    ours are [H, H] dense kernels: the same numbers, reshaped.
    """
    config = bert.config
    heads, head_size = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    embeddings = bert.embeddings

    def assign(target, source, shape=None):
        value = np.asarray(source.numpy() if hasattr(source, "numpy") else source)
        target.assign(value.reshape(shape or target.shape))

    assign(backbone.get_layer("token_embedding").embeddings, embeddings.word_embeddings)
    position = embeddings.position_embeddings.numpy()
    assign(backbone.get_layer("position_embedding").position_embeddings, position)
    assign(backbone.get_layer("segment_embedding").embeddings, embeddings.token_type_embeddings)
    norm = backbone.get_layer("embeddings_layer_norm")
    assign(norm.gamma, embeddings.layer_norm.gamma)
    assign(norm.beta, embeddings.layer_norm.beta)
    for block, hub_block in zip(bert.encoder_layers, backbone.transformer_layers, strict=True):
        attention = hub_block._self_attention_layer
        for ours, theirs in (
            (block.attention.query, attention.query_dense),
            (block.attention.key, attention.key_dense),
            (block.attention.value, attention.value_dense),
        ):
            assign(theirs.kernel, ours.kernel, [config.hidden_size, heads, head_size])
            assign(theirs.bias, ours.bias, [heads, head_size])
        assign(attention.output_dense.kernel, block.attention_output.kernel)
        assign(attention.output_dense.bias, block.attention_output.bias)
        pairs = (
            (block.attention_layer_norm, hub_block._self_attention_layer_norm),
            (block.output_layer_norm, hub_block._feedforward_layer_norm),
        )
        for ours, theirs in pairs:
            assign(theirs.gamma, ours.gamma)
            assign(theirs.beta, ours.beta)
        for ours, theirs in (
            (block.intermediate, hub_block._feedforward_intermediate_dense),
            (block.output_dense, hub_block._feedforward_output_dense),
        ):
            assign(theirs.kernel, ours.kernel)
            assign(theirs.bias, ours.bias)
    pooler = backbone.get_layer("pooled_dense")
    assign(pooler.kernel, bert.pooler.kernel)
    assign(pooler.bias, bert.pooler.bias)


def run_keras_hub(train, dev, model_dir, is_pair):
    import keras
    import keras_hub
    import tensorflow as tf

    from bert_tf.checkpoints import load_google_checkpoint
    from bert_tf.modeling import BertConfig, BertModel
    from bert_tf.optimization import WarmupLinearDecay

    config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
    bert = BertModel(config)
    bert.build()
    load_google_checkpoint(bert, os.path.join(model_dir, "bert_model.ckpt"))
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, max_sequence_length=config.max_position_embeddings,
    )  # fmt: skip
    _copy_encoder_to_keras_hub(bert, backbone)
    labels = sorted({row[0] for row in train})
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=os.path.join(model_dir, "vocab.txt"), lowercase=True
    )
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=FLAGS.max_seq_length
    )
    classifier = keras_hub.models.BertClassifier(
        backbone, num_classes=len(labels), preprocessor=preprocessor
    )
    steps = int(len(train) / FLAGS.batch_size * FLAGS.epochs)
    optimizer = keras.optimizers.AdamW(
        WarmupLinearDecay(FLAGS.learning_rate, steps, int(0.1 * steps)),
        weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0,
    )  # fmt: skip
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    classifier.compile(
        optimizer=optimizer
    )  # keras-hub's loss and metric; jit "auto" = no XLA on CPU

    def features(rows):
        texts = [row[1] for row in rows]
        if is_pair:
            return (tf.constant(texts), tf.constant([row[2] for row in rows]))
        return (tf.constant(texts),)

    label_ids = np.array([labels.index(row[0]) for row in train], np.int32)
    dataset = (
        tf.data.Dataset.from_tensor_slices((features(train), label_ids))
        .shuffle(len(train), seed=12345)
        .batch(FLAGS.batch_size, drop_remainder=True)
    )
    steps_per_epoch = len(train) // FLAGS.batch_size
    start = time.perf_counter()
    classifier.fit(
        dataset.repeat(), steps_per_epoch=steps_per_epoch, epochs=steps // steps_per_epoch or 1,
        verbose=0,
    )  # fmt: skip
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    logits = classifier.predict(features(dev), batch_size=FLAGS.batch_size, verbose=0)
    predict_seconds = time.perf_counter() - start
    dev_ids = np.array([labels.index(row[0]) for row in dev])
    return train_seconds, predict_seconds, float(np.mean(logits.argmax(-1) == dev_ids))


# ---------------------------------------------------------------------------------- main


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    import keras

    threads = machine.set_threads(FLAGS.threads)
    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_finetune_")
    model_dir = minilm.converted(work_dir)
    print(machine.header())
    print(
        f"all-MiniLM-L6-v2 (6 layers, hidden 384), float32, {threads} compute threads; "
        f"{FLAGS.num_train} train / {FLAGS.num_dev} dev examples, {FLAGS.epochs:g} epochs, batch "
        f"{FLAGS.batch_size}, max_seq_length {FLAGS.max_seq_length}, lr {FLAGS.learning_rate:g}\n",
        flush=True,
    )
    rows = []
    for task in FLAGS.tasks:
        data_dir = os.path.join(work_dir, task)
        train, dev = write_task(task, data_dir)
        lengths = packed_lengths(train, os.path.join(model_dir, "vocab.txt"))
        print(
            f"{task}: wordpieces per example median {np.median(lengths):.0f}, p90 "
            f"{np.percentile(lengths, 90):.0f}, over {FLAGS.max_seq_length}: "
            f"{np.mean(lengths > FLAGS.max_seq_length):.1%}",
            flush=True,
        )
        is_pair = task == "mrpc_like"
        for runner in FLAGS.runners:
            keras.utils.set_random_seed(12345)
            if runner == "keras_hub":
                result = run_keras_hub(train, dev, model_dir, is_pair)
            else:
                output_dir = tempfile.mkdtemp(prefix=f"{task}_{runner}_", dir=work_dir)
                result = run_bert_tf(data_dir, output_dir, model_dir, is_pair, runner == "bucketed")
            train_seconds, predict_seconds, accuracy = result
            row = dict(
                task=task,
                runner=runner,
                median_length=float(np.median(lengths)),
                train_examples_per_sec=len(train) * FLAGS.epochs / train_seconds,
                train_seconds=train_seconds,
                predict_examples_per_sec=len(dev) / predict_seconds,
                predict_seconds=predict_seconds,
                accuracy=accuracy,
            )
            print(row, flush=True)
            rows.append(row)

    print(
        "\n| task | implementation | train examples/s | train s | predict examples/s | predict s | dev accuracy |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['task']} (median {row['median_length']:.0f} wordpieces) | {NAMES[row['runner']]} | "
            f"{row['train_examples_per_sec']:.1f} | {row['train_seconds']:.1f} | "
            f"{row['predict_examples_per_sec']:.1f} | {row['predict_seconds']:.1f} | {row['accuracy']:.3f} |"
        )
    for task in FLAGS.tasks:
        by_runner = {row["runner"]: row for row in rows if row["task"] == task}
        ours = by_runner.get("bucketed")
        for peer in ("fixed", "keras_hub"):
            if ours and peer in by_runner:
                theirs = by_runner[peer]
                print(
                    f"{task}: bucketed vs {peer}: training "
                    f"{ours['train_examples_per_sec'] / theirs['train_examples_per_sec']:.2f}x, "
                    f"prediction {ours['predict_examples_per_sec'] / theirs['predict_examples_per_sec']:.2f}x, "
                    f"accuracy {ours['accuracy'] - theirs['accuracy']:+.3f}"
                )
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
