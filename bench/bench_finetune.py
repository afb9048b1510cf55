"""Real-length fine-tuning and prediction: run_classifier (cut batches, float32 and bf16) vs keras-hub and transformers.

Two tasks of real sentence lengths made from Jane Austen's novels (../shared/data/austen_novels):
sst2_like (a sentence -> which of Emma and Pride and Prejudice it comes from) and mrpc_like (a
sentence pair -> whether the second follows the first; else a random sentence of the same novel).
Every runner starts from all-MiniLM-L6-v2 (converted by convert_checkpoint.py; its Hugging Face
folder for transformers), trains on the same examples with the same batch, epochs and schedule (10%
warmup, then linear decay), max_seq_length 128, then predicts the dev set (NAMES says how each pads):
  * cut, cut_bf16, bucketed, fixed: run_classifier.py --do_train as a user runs it, in its own
    process, with the flags of OURS (cut_bf16 is skipped, saying why, where bfloat16 is emulated);
    the dev passes are Keras predict of BertTextClassifier.from_preset(--output_dir);
  * keras_hub: BertClassifier (MiniLM read by keras-hub's own converter) + its preprocessor, `fit` and
    `predict` (keras AdamW with the same schedule, clipping and decay exclusions);
  * transformers: BertForSequenceClassification on torch (CPU, eager), its tokenizer, random batches
    (seed --seed) of a DataLoader with DataCollatorWithPadding, minilm.transformers_optimizer,
    clipping to global norm 1.0, its own loop.

    .venv/bin/python -m bench.bench_finetune             # both tasks: cut, cut_bf16, keras_hub, transformers
    .venv/bin/python -m bench.bench_finetune --runners=cut,fixed,bucketed,keras_hub,transformers
    .venv/bin/python -m bench.bench_finetune --num_train=64 --num_dev=32 --epochs=1 --rounds=2 \
        --predict_passes=2                                             # smoke test

The runners run one after another, each training in one call in `--rounds` rounds timed apart (ours
by its progress lines, --log_steps; keras-hub by a callback, `steps_per_execution` = a round's
steps). The speed is the median of the rounds after the first (tracing); "train s in all" is what a
user waits for. Then `--predict_passes` dev passes, the first tracing (ours: loading the model).

GELU: ours and transformers run MiniLM's exact (erf) GELU; keras-hub's BertBackbone has only the
tanh GELU. torch's and keras' AdamW correct the moments' bias; ours, as the original, does not.
"""

import gc
import os
import random
import re
import sys
import tempfile
import time

import keras
import numpy as np
from absl import app, flags, logging

from bench import SHARED_DIR, machine, minilm, scripts, stats, timing

NOVELS_DIR = os.path.join(SHARED_DIR, "data", "austen_novels")

FLAGS = flags.FLAGS
flags.DEFINE_list("tasks", ["sst2_like", "mrpc_like"], "Tasks to run: sst2_like, mrpc_like.")
flags.DEFINE_list(
    "runners",
    ["cut", "cut_bf16", "keras_hub", "transformers"],
    "cut, cut_bf16, bucketed, fixed, keras_hub, transformers (see the module docstring).",
)
flags.DEFINE_integer("num_train", 2048, "Training examples per task (half of each label).")
flags.DEFINE_integer("num_dev", 512, "Dev examples per task.")
flags.DEFINE_float("epochs", 2.0, "Training epochs.")
flags.DEFINE_integer("batch_size", 32, "Training and prediction batch.")
flags.DEFINE_integer("max_seq_length", 128, "Longest input in wordpieces; longer ones are cut.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate (10% warmup, then linear decay).")
flags.DEFINE_integer(
    "rounds", 4, "Equal training rounds per runner, timed apart; must divide the training steps."
)
flags.DEFINE_integer("predict_passes", 3, "Passes over the dev set per runner.")
flags.DEFINE_integer(
    "seed", 12345, "Every runner's head init, dropout and training order (the data stay the same)."
)
flags.DEFINE_integer("threads", 0, "Intra-op and inter-op threads (0 = one per core).")
flags.DEFINE_string(
    "work_dir", None, "Where data, features and checkpoints go (default: a temp dir)."
)

# Each name says how the runner pads its training batches.
NAMES = {
    "cut": "bert_tf run_classifier, default (the original's batches, each cut to its longest, "
    "rounded up to 8), float32",
    "cut_bf16": "bert_tf run_classifier, default batches (cut to the longest), "
    "--mixed_precision=mixed_bfloat16",
    "bucketed": "bert_tf run_classifier, --length_bucketing=True (batches of similar length, cut)",
    "fixed": "bert_tf run_classifier, --cut_batches_to_longest=false (pads to 128)",
    "keras_hub": "keras-hub BertClassifier + its preprocessor (pads to 128)",
    "transformers": "transformers BertForSequenceClassification, torch CPU (the same batches, "
    "DataCollatorWithPadding: pads to the batch's longest)",
}
# The run_classifier settings of our runners: (--length_bucketing, --cut_batches_to_longest,
# --mixed_precision).
OURS = {
    "cut": (False, True, "float32"),
    "cut_bf16": (False, True, "mixed_bfloat16"),
    "bucketed": (True, False, "float32"),
    "fixed": (False, False, "float32"),
}
SEED = 12345  # of the data (the runners' own seed: --seed)

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
    examples = MAKERS[task](FLAGS.num_train + FLAGS.num_dev, seed=SEED)
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


class OursRunner:
    """run_classifier.py as a user runs it: --do_train in its own process (one progress line a round:
    --log_steps = a round's steps), then the run's model read back by
    BertTextClassifier.from_preset(output_dir) for the dev passes (Keras predict on the raw texts)."""

    def __init__(self, runner, data_dir, model_dir, output_dir, is_pair, steps_per_round):
        length_bucketing, cut_batches_to_longest, mixed_precision = OURS[runner]
        self.output_dir, self.is_pair, self.classifier = output_dir, is_pair, None
        self.flags = dict(
            **scripts.model_flags(model_dir), output_dir=output_dir, data_dir=data_dir,
            task_name="tsv", label_column="0", text_a_column="1",
            text_b_column="2" if is_pair else None, do_train=True,
            max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.batch_size,
            learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.epochs,
            length_bucketing=length_bucketing, cut_batches_to_longest=cut_batches_to_longest,
            mixed_precision=mixed_precision, log_steps=steps_per_round, seed=FLAGS.seed,
        )  # fmt: skip

    def train(self, rounds):
        """Trains in one run_classifier.py process; each round's seconds from its progress lines."""
        _, result = scripts.timed("run_classifier", **self.flags)
        rounds.seconds += scripts.round_seconds(
            result.stderr, self.flags["log_steps"], FLAGS.batch_size
        )

    def steps_trained(self):
        import tensorflow as tf

        return int(tf.train.latest_checkpoint(self.output_dir).rsplit("-", 1)[1])

    def predict(self, dev):
        """Dev-set accuracy of Keras predict on the raw texts (the first pass loads the model)."""
        from bert_tf import BertTextClassifier

        if self.classifier is None:
            self.classifier = BertTextClassifier.from_preset(self.output_dir)
        with open(os.path.join(self.output_dir, "labels.txt"), encoding="utf-8") as reader:
            labels = reader.read().splitlines()
        texts = ([r[1] for r in dev], [r[2] for r in dev]) if self.is_pair else [r[1] for r in dev]
        logits = self.classifier.predict(texts, batch_size=FLAGS.batch_size, verbose=0)
        return float(
            np.mean([labels[i] == r[0] for i, r in zip(logits.argmax(-1), dev, strict=True)])
        )


class KerasHubRunner:
    """keras-hub's BertClassifier + BertTextClassifierPreprocessor with MiniLM's weights.

    Compiled with steps_per_execution = a round's steps, so a Keras callback runs after each round.
    """

    def __init__(self, train, dev, model_dir, is_pair, steps_per_round):
        import keras
        import keras_hub
        import tensorflow as tf

        from bert_tf.optimization import WarmupLinearDecay

        # MiniLM's Hugging Face folder, read by keras-hub's own converter, as its users load it.
        backbone = keras_hub.models.BertBackbone.from_preset(str(minilm.hf_model_dir()))
        self.labels = sorted({row[0] for row in train})
        tokenizer = keras_hub.models.BertTokenizer(
            vocabulary=os.path.join(model_dir, "vocab.txt"), lowercase=True
        )
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
            tokenizer, sequence_length=FLAGS.max_seq_length
        )
        self.classifier = keras_hub.models.BertClassifier(
            backbone, num_classes=len(self.labels), preprocessor=preprocessor
        )
        steps = int(len(train) / FLAGS.batch_size * FLAGS.epochs)
        optimizer = keras.optimizers.AdamW(
            WarmupLinearDecay(FLAGS.learning_rate, steps, int(0.1 * steps)),
            weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0,
        )  # fmt: skip
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        # keras-hub's loss and metric; jit "auto" = no XLA on CPU. A round's steps in one call, as
        # ours runs them in one iterations_per_loop call.
        self.classifier.compile(optimizer=optimizer, steps_per_execution=steps_per_round)
        self.is_pair = is_pair
        label_ids = np.array([self.labels.index(row[0]) for row in train], np.int32)
        self.dataset = (
            tf.data.Dataset.from_tensor_slices((self._features(train), label_ids))
            .shuffle(len(train), seed=FLAGS.seed)
            .batch(FLAGS.batch_size, drop_remainder=True)
            .repeat()
        )
        self.total_steps = steps

    def _features(self, rows):
        import tensorflow as tf

        texts = (tf.constant([row[1] for row in rows]),)
        return (*texts, tf.constant([row[2] for row in rows])) if self.is_pair else texts

    def train(self, rounds):
        """Trains every step in one `fit` call, ending a round of `rounds` after each execution."""

        class RoundEnd(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):  # once per execution = per round
                rounds.round_end()

        self.classifier.fit(
            self.dataset, steps_per_epoch=self.total_steps, epochs=1, verbose=0,
            callbacks=[RoundEnd()],
        )  # fmt: skip

    def steps_trained(self):
        return int(self.classifier.optimizer.iterations.numpy())

    def predict(self, dev):
        """Dev-set accuracy."""
        logits = self.classifier.predict(
            self._features(dev), batch_size=FLAGS.batch_size, verbose=0
        )
        dev_ids = np.array([self.labels.index(row[0]) for row in dev])
        return float(np.mean(logits.argmax(-1) == dev_ids))


class TransformersRunner:
    """minilm.TransformersClassifier (BertForSequenceClassification on torch) on random batches of
    `train` (seed --seed), ending a round after every `steps_per_round` steps."""

    def __init__(self, train, dev, total_steps, steps_per_round):
        self.classifier = minilm.TransformersClassifier(
            sorted({row[0] for row in train}), FLAGS.seed, FLAGS.max_seq_length, FLAGS.batch_size
        )
        self.train_examples = self.classifier.examples(train)
        self.dev_examples = self.classifier.examples(dev)
        self.batches = minilm.random_batches(len(train), FLAGS.batch_size, total_steps, FLAGS.seed)
        self.steps_per_round = steps_per_round

    def train(self, rounds):
        """Trains on every batch in one loop, ending a round of `rounds` every round's steps."""
        self.classifier.train(
            self.train_examples, self.batches, FLAGS.learning_rate, self.steps_per_round,
            rounds.round_end,
        )  # fmt: skip

    def steps_trained(self):
        return self.classifier.steps

    def predict(self, dev):
        """Dev-set accuracy (of the dev examples tokenized at set-up: `dev` is theirs)."""
        predicted = self.classifier.predict(self.dev_examples)
        return float(np.mean([label == row[0] for label, row in zip(predicted, dev, strict=True)]))


class Rounds:
    """The seconds of each training round of one runner: round_end() closes the round since the
    last call (or since start())."""

    def __init__(self):
        self.seconds, self._started = [], None

    def start(self):
        self._started = time.perf_counter()

    def round_end(self):
        now = time.perf_counter()
        self.seconds.append(now - self._started)
        self._started = now


def run_task(task, names, data_dir, model_dir, train, dev, work_dir):
    """{runner: measurements}: each runner of `names` in turn sets up, trains (in --rounds rounds)
    and passes over the dev set --predict_passes times."""
    is_pair = task == "mrpc_like"
    total_steps = int(len(train) / FLAGS.batch_size * FLAGS.epochs)
    if total_steps % FLAGS.rounds:
        raise ValueError(
            f"{total_steps} training steps ({len(train)} examples / batch {FLAGS.batch_size} x "
            f"{FLAGS.epochs:g} epochs) do not split into --rounds={FLAGS.rounds} equal rounds"
        )
    steps_per_round = total_steps // FLAGS.rounds
    results = {}
    for name in names:
        keras.utils.set_random_seed(FLAGS.seed)
        start = time.perf_counter()
        if name == "keras_hub":
            runner = KerasHubRunner(train, dev, model_dir, is_pair, steps_per_round)
        elif name == "transformers":
            runner = TransformersRunner(train, dev, total_steps, steps_per_round)
        else:
            output_dir = tempfile.mkdtemp(prefix=f"{task}_{name}_", dir=work_dir)
            runner = OursRunner(name, data_dir, model_dir, output_dir, is_pair, steps_per_round)
        rounds = Rounds()
        rounds.start()
        runner.train(rounds)
        train_seconds = time.perf_counter() - start
        if runner.steps_trained() != total_steps or len(rounds.seconds) != FLAGS.rounds:
            raise ValueError(
                f"{name} trained {runner.steps_trained()} steps in {len(rounds.seconds)} rounds, "
                f"not {total_steps} in {FLAGS.rounds}"
            )
        passes = []
        for _ in range(FLAGS.predict_passes):
            seconds, _, accuracy = timing.timed(runner.predict, dev)
            passes.append(seconds)
        timed_rounds = rounds.seconds[1:] or rounds.seconds
        timed_passes = passes[1:] or passes
        examples_per_round = steps_per_round * FLAGS.batch_size
        results[name] = dict(
            accuracy=accuracy, train_seconds=train_seconds, first_round_seconds=rounds.seconds[0],
            train_examples_per_sec=examples_per_round / float(np.median(timed_rounds)),
            best_round_examples_per_sec=examples_per_round / min(timed_rounds),
            predict_examples_per_sec=len(dev) / float(np.median(timed_passes)),
            first_pass_seconds=passes[0],
        )  # fmt: skip
        # Freeing a runner's models and traced functions is the cyclic collector's job (24 s for
        # two runners, measured): left to itself it ran inside the next runner's timed rounds.
        del runner
        gc.collect()
    return results


# ---------------------------------------------------------------------------------- main


def _print_table(rows):
    print(
        "\n| task | implementation | first round s (tracing) | train examples/s "
        "(median of later rounds) | best round | train s in all | predict examples/s (median of "
        "later passes) | first pass s | dev accuracy (standard error) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['task']} (median {row['median_length']:.0f} wordpieces) | {NAMES[row['runner']]} | "
            f"{row['first_round_seconds']:.1f} | "
            f"{row['train_examples_per_sec']:.1f} | {row['best_round_examples_per_sec']:.1f} | "
            f"{row['train_seconds']:.1f} | {row['predict_examples_per_sec']:.1f} | "
            f"{row['first_pass_seconds']:.1f} | {row['accuracy']:.3f} "
            f"({stats.sampling_error(row['accuracy'], row['num_dev']):.3f}) |"
        )


def _print_ratios(rows):
    """Every pair of runners of a task: speed ratios (above 1 = the first faster), accuracy difference."""
    for task in FLAGS.tasks:
        by_runner = {row["runner"]: row for row in rows if row["task"] == task}
        for first, second in (
            ("cut", "keras_hub"),
            ("cut", "transformers"),
            ("cut_bf16", "cut"),
            ("cut", "fixed"),
            ("bucketed", "cut"),
            ("bucketed", "fixed"),
            ("bucketed", "keras_hub"),
            ("fixed", "keras_hub"),
        ):
            if first not in by_runner or second not in by_runner:
                continue
            a, b = by_runner[first], by_runner[second]
            difference_error = np.hypot(
                stats.sampling_error(a["accuracy"], a["num_dev"]),
                stats.sampling_error(b["accuracy"], b["num_dev"]),
            )
            print(
                f"{task}: {first} vs {second}: training "
                f"{a['train_examples_per_sec'] / b['train_examples_per_sec']:.2f}x (median rounds), "
                f"{b['train_seconds'] / a['train_seconds']:.2f}x (train s in all); prediction "
                f"{a['predict_examples_per_sec'] / b['predict_examples_per_sec']:.2f}x; accuracy "
                f"{a['accuracy'] - b['accuracy']:+.3f} (standard error of the difference "
                f"{difference_error:.3f})" + _target(task, first, second, a, b)
            )


# Issue 32's aim: ours, with the original's batches in float32, this many times keras-hub's
# training examples/s (median rounds).
TARGETS = {"sst2_like": 1.8, "mrpc_like": 1.3}


def _target(task, first, second, a, b):
    """ "; target >= Nx: met" (or "not met") on the cut vs keras_hub line of a task with a target."""
    if (first, second) != ("cut", "keras_hub") or task not in TARGETS:
        return ""
    ratio = a["train_examples_per_sec"] / b["train_examples_per_sec"]
    met = "met" if ratio >= TARGETS[task] else "not met"
    return f"; issue 32's target training >= {TARGETS[task]:g}x: {met}"


def _runnable(names):
    """The runners of `names` that can run here; prints why any other is skipped.

    Raises:
      app.UsageError: for a name that is no runner.
    """
    unknown = [name for name in names if name not in NAMES]
    if unknown:
        raise app.UsageError(f"--runners: unknown {', '.join(unknown)}; known: {', '.join(NAMES)}")
    runnable = []
    for name in names:
        if name == "cut_bf16" and machine.skips_precision(OURS[name][2]):
            continue
        if name == "transformers":
            try:
                import torch  # noqa: F401
                import transformers  # noqa: F401
            except ImportError as error:
                print(f"transformers: skipped, {error} (pip install -e .[compare])")
                continue
        runnable.append(name)
    return runnable


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    if not os.path.isdir(NOVELS_DIR):
        print(
            f"bench_finetune: the Austen novels are absent: no folder {NOVELS_DIR} (../shared/data/"
            "austen_novels beside the repo, or set BERT_TF_SHARED_DIR to the folder holding data/)",
            file=sys.stderr,
        )
        return 2

    threads = machine.set_threads(FLAGS.threads)
    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_finetune_")
    model_dir = minilm.converted(work_dir)
    print(machine.header())
    names = _runnable(FLAGS.runners)
    print(
        f"all-MiniLM-L6-v2 (6 layers, hidden 384), float32 unless a runner says otherwise, "
        f"{machine.threads_line(threads)}; "
        f"{FLAGS.num_train} train / {FLAGS.num_dev} dev examples, {FLAGS.epochs:g} epochs in "
        f"{FLAGS.rounds} rounds, {FLAGS.predict_passes} dev passes, batch {FLAGS.batch_size}, "
        f"max_seq_length {FLAGS.max_seq_length}, lr {FLAGS.learning_rate:g}; runners one after another\n",
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
        for runner, result in run_task(
            task, names, data_dir, model_dir, train, dev, work_dir
        ).items():
            row = dict(
                task=task, runner=runner, median_length=float(np.median(lengths)),
                num_dev=len(dev), **result,
            )  # fmt: skip
            print({key: value for key, value in row.items()}, flush=True)
            rows.append(row)
    _print_table(rows)
    _print_ratios(rows)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
