"""Real-length fine-tuning and prediction: run_classifier (cut batches, float32 and bf16) vs keras-hub and transformers.

Two tasks of real sentence lengths made from Jane Austen's novels (../shared/data/austen_novels):
  * sst2_like: one sentence -> which of two novels it comes from (Emma or Pride and Prejudice);
  * mrpc_like: a sentence pair -> whether the second sentence follows the first in the novel (the
    other half pairs it with a random sentence of the same novel).
Every runner starts from the same pretrained weights (all-MiniLM-L6-v2, converted by
convert_checkpoint.py, or its Hugging Face folder itself for transformers), trains on the same
examples with the same batch, epochs and learning-rate schedule (10% warmup, then linear decay),
max_seq_length 128, then predicts the dev set:

  * cut: bert_tf run_classifier as a user gets it (`bert_tf.tasks.classification.task.ClassifierRun`, the
    code behind run_classifier.py --do_train --do_eval): the original's random batches, each cut to
    its longest input rounded up to a multiple of 8 (--cut_batches_to_longest, the default), float32;
  * cut_bf16: the same with --mixed_precision=mixed_bfloat16 (skipped, with the reason, on a machine
    without native bfloat16: there it would time the emulation);
  * bucketed: run_classifier --length_bucketing=True, training on batches of similar length;
  * fixed: run_classifier --cut_batches_to_longest=false, training batches padded to 128 as the
    original's (prediction cuts padding in every bert_tf runner);
  * keras_hub: keras-hub BertClassifier + BertTextClassifierPreprocessor (sequence_length 128: pads
    to 128), fed the raw strings, `fit` and `predict` (keras AdamW with the same schedule, clipping
    and decay exclusions);
  * transformers: Hugging Face BertForSequenceClassification on torch (CPU, eager, its default
    attention), loaded from MiniLM's Hugging Face folder, the texts tokenized by its tokenizer
    (truncation to 128) and batched by a DataLoader with DataCollatorWithPadding, as a transformers
    user gets by default: each batch padded to its own longest input (no rounding). Its batches are
    cut's: the same examples in the same batches in the same order (read off run_classifier's
    training input before the runners start). torch AdamW (eps 1e-6, weight decay 0.01 except on
    biases and LayerNorm), the original's warmup + linear decay as a LambdaLR, clipping to global norm
    1.0, its own loop; prediction over the dev set in file order, padded the same way.

    .venv/bin/python -m bench.bench_finetune             # both tasks: cut, cut_bf16, keras_hub, transformers
    .venv/bin/python -m bench.bench_finetune --runners=cut,fixed,bucketed,keras_hub,transformers
    .venv/bin/python -m bench.bench_finetune --num_train=64 --num_dev=32 --epochs=1 --rounds=2 \
        --predict_passes=2                                             # smoke test

The runners take turns, so that load from other work on the machine falls on all of them alike:
every runner of a task is set up first (ours: features written, model built, --init_checkpoint
loaded; keras-hub: model built, weights copied, compiled; transformers: model loaded, texts
tokenized, optimizer made). Then each runner trains as a user would, in one call (ours:
ClassifierRun.train, i.e. one Trainer.train; keras-hub: one `fit`; transformers: one loop over its
DataLoader), each call in its own thread, and the calls take turns: every `--rounds`-th of the
steps a runner stops (ours at a checkpoint boundary, keras-hub in a callback, transformers in its
loop), hands the turn to the next runner and waits for its own again. Nothing is restarted between
rounds: one input iterator, one learning-rate schedule, one checkpoint at the end. Then each runner
predicts the whole dev set, runner by runner, `--predict_passes` times. The first round and the
first pass include tracing (and ours writes the dev features in its first pass): the speeds are the
median over the other rounds and passes, and "train s in all" is what a user waits for: set-up plus
every round. Ours runs a round as one `iterations_per_loop` call; keras-hub is compiled with
`steps_per_execution` equal to a round's steps, so neither pays a host round trip per step that the
other does not (transformers runs eagerly, step by step, as its users do).

GELU: MiniLM was trained with the exact (erf) GELU. Ours runs it ("gelu_exact", set by the
converter) and so does transformers ("gelu"); keras-hub's BertBackbone has only the tanh GELU
(keras-hub's own Hugging Face converter makes the same substitution). torch's AdamW corrects the
moments' bias, as keras' AdamW does; ours, as the original, does not.
"""

import gc
import os
import random
import re
import sys
import tempfile
import threading
import time

import keras
import numpy as np
from absl import app, flags, logging

from bench import machine, minilm, stats, timing

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


SHARED_DIR = os.environ.get("BERT_TF_SHARED_DIR", os.path.join(REPO_DIR, "..", "shared"))
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
    "rounds", 4, "Equal training rounds per runner, taking turns; must divide the training steps."
)
flags.DEFINE_integer("predict_passes", 3, "Passes over the dev set per runner, taking turns.")
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


def classifier_config(data_dir, output_dir, model_dir, is_pair, runner, steps_per_round):
    """The ClassifierSettings of one of our runners (OURS), as run_classifier.py's flags would make it."""
    from bert_tf.tasks.classification.task import ClassifierSettings

    length_bucketing, cut_batches_to_longest, mixed_precision = OURS[runner]
    return ClassifierSettings(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
        output_dir=output_dir, data_dir=data_dir, task_name="tsv", label_column="0",
        text_a_column="1", text_b_column="2" if is_pair else None, do_train=True, do_eval=True,
        max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.epochs, length_bucketing=length_bucketing,
        cut_batches_to_longest=cut_batches_to_longest, mixed_precision=mixed_precision,
        log_steps=10**6, save_checkpoints_steps=steps_per_round, seed=FLAGS.seed,
    )  # fmt: skip


class BertTfRunner:
    """run_classifier's ClassifierRun (what run_classifier.py --do_train --do_eval runs).

    A round ends at a checkpoint boundary (--save_checkpoints_steps = the round's steps), where the
    Trainer calls `state.save`: the bench hands the turn on there instead, and saves only at the end, as
    one run_classifier.py run with the default --save_checkpoints_steps saves once on this data.
    """

    def __init__(self, config):
        from bert_tf.tasks.classification.task import ClassifierRun

        self.run = ClassifierRun(config)
        path, info = self.run.features("train")
        self.trainer = self.run.trainer(path, info["num_real_examples"])

    def train(self, round_end):
        """Trains every step in one ClassifierRun.train() call, calling round_end() after each round."""
        trainer, save = self.trainer, self.trainer.state.save

        def save_at_the_end(step, iterator=None):
            if step == trainer.settings.num_train_steps:
                save(step, iterator)
            round_end()

        trainer.state.save = save_at_the_end
        self.run.train()

    def steps_trained(self):
        return int(self.trainer.global_step)

    def predict(self):
        """Dev-set accuracy (ClassifierRun.evaluate: the first call writes the dev features)."""
        return float(self.run.evaluate()["eval_accuracy"])


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


class KerasHubRunner:
    """keras-hub's BertClassifier + BertTextClassifierPreprocessor with MiniLM's weights.

    Compiled with steps_per_execution = a round's steps, so a Keras callback runs after each round.
    """

    def __init__(self, train, dev, model_dir, is_pair, steps_per_round):
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
        self.dev = dev
        self.total_steps = steps

    def _features(self, rows):
        import tensorflow as tf

        texts = (tf.constant([row[1] for row in rows]),)
        return (*texts, tf.constant([row[2] for row in rows])) if self.is_pair else texts

    def train(self, round_end):
        """Trains every step in one `fit` call, calling round_end() after each round."""

        class RoundEnd(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):  # once per execution = per round
                round_end()

        self.classifier.fit(
            self.dataset, steps_per_epoch=self.total_steps, epochs=1, verbose=0,
            callbacks=[RoundEnd()],
        )  # fmt: skip

    def steps_trained(self):
        return int(self.classifier.optimizer.iterations.numpy())

    def predict(self):
        """Dev-set accuracy."""
        logits = self.classifier.predict(
            self._features(self.dev), batch_size=FLAGS.batch_size, verbose=0
        )
        dev_ids = np.array([self.labels.index(row[0]) for row in self.dev])
        return float(np.mean(logits.argmax(-1) == dev_ids))


def training_batches(config, total_steps):
    """The train.tsv rows of run_classifier's first `total_steps` training batches, and ours' pieces.

    Reads them off ClassifierRun.dataset, the input the Trainer iterates, under the global seed the
    Trainer builds it with (make_trainer sets --seed first): each example of a batch is found again
    in the features file (written in train.tsv's order) by its wordpieces, segments and label.

    Returns:
      (batches, pieces): total_steps lists of batch_size row numbers; each row's wordpiece ids as
      ours made them (unpadded, int32 [length]).
    """
    import tensorflow as tf

    from bert_tf.data.records import decode_record
    from bert_tf.tasks.classification.task import ClassifierRun

    run = ClassifierRun(config)
    path, _ = run.features("train")
    spec = run.feature_spec(True)

    def keys(batch):
        lengths = batch["input_mask"].sum(axis=-1)
        return [
            (ids[:n].tobytes(), segments[:n].tobytes(), int(label))
            for ids, segments, label, n in zip(
                batch["input_ids"], batch["segment_ids"], batch["label_ids"].reshape(-1), lengths,
                strict=True,
            )
        ]  # fmt: skip

    records = tf.data.TFRecordDataset(path).map(lambda record: decode_record(record, spec))
    rows = {}  # key -> first row: a repeated example has identical inputs and label
    in_order = [key for batch in records.batch(1024).as_numpy_iterator() for key in keys(batch)]
    for row, key in enumerate(in_order):
        rows.setdefault(key, row)
    pieces = [np.frombuffer(key[0], np.int32) for key in in_order]
    keras.utils.set_random_seed(config.seed)
    training = run.dataset(path, config.train_batch_size, is_training=True).take(total_steps)
    batches = [[rows[key] for key in keys(batch)] for batch in training.as_numpy_iterator()]
    return batches, pieces


class TransformersRunner:
    """transformers' BertForSequenceClassification on torch with MiniLM's Hugging Face weights.

    Trains on `batches` (row numbers of `train`) in that order, one step per batch, calling
    round_end() after every `steps_per_round` steps.
    """

    def __init__(self, train, dev, is_pair, batches, steps_per_round):
        import torch
        import transformers

        from bert_tf.optimization import NO_DECAY_PATTERNS

        transformers.logging.set_verbosity_error()  # "newly initialized: classifier" is expected
        transformers.logging.disable_progress_bar()
        torch.manual_seed(FLAGS.seed)
        self.labels = sorted({row[0] for row in train})
        folder = minilm.hf_model_dir()
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        self.model = transformers.BertForSequenceClassification.from_pretrained(
            folder, num_labels=len(self.labels)
        )
        self.is_pair, self.batches, self.steps_per_round = is_pair, batches, steps_per_round
        self.train_examples, self.dev_examples = self._tokenized(train), self._tokenized(dev)
        named = list(self.model.named_parameters())
        decays = [not any(p in name for p in NO_DECAY_PATTERNS) for name, _ in named]
        self.optimizer = torch.optim.AdamW(
            [
                {"params": [p for (_, p), d in zip(named, decays, strict=True) if d]},
                {"params": [p for (_, p), d in zip(named, decays, strict=True) if not d],
                 "weight_decay": 0.0},
            ],
            lr=FLAGS.learning_rate, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
        )  # fmt: skip
        total, warmup = len(batches), int(0.1 * len(batches))
        # The original's schedule (as ours): step / warmup, then 1 - step / total.
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: step / warmup if step < warmup else 1.0 - step / total
        )
        self.step = 0
        self.num_decayed = sum(decays)

    def _tokenized(self, rows):
        """[{input_ids, token_type_ids, attention_mask, labels}] of the rows, unpadded."""
        texts = [row[1:] for row in rows]
        encodings = self.tokenizer(
            [t[0] for t in texts],
            [t[1] for t in texts] if self.is_pair else None,
            truncation=True,
            max_length=FLAGS.max_seq_length,
        )
        return [
            {
                **{name: encodings[name][i] for name in encodings},
                "labels": self.labels.index(row[0]),
            }
            for i, row in enumerate(rows)
        ]

    def pieces_differing_from(self, pieces):
        """How many training examples transformers' tokenizer splits otherwise than ours."""
        return sum(
            list(example["input_ids"]) != [int(i) for i in ours]
            for example, ours in zip(self.train_examples, pieces, strict=True)
        )

    def _loader(self, examples, batch_sampler=None):
        import torch
        import transformers

        collator = transformers.DataCollatorWithPadding(self.tokenizer)  # pads to the longest
        if batch_sampler is None:
            return torch.utils.data.DataLoader(
                examples, batch_size=FLAGS.batch_size, collate_fn=collator
            )
        return torch.utils.data.DataLoader(
            examples, batch_sampler=batch_sampler, collate_fn=collator
        )

    def train(self, round_end):
        """Trains on every batch in one loop over a DataLoader, calling round_end() after each round."""
        import torch

        self.model.train()
        for batch in self._loader(self.train_examples, self.batches):
            loss = self.model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.schedule.step()
            self.optimizer.zero_grad()
            self.step += 1
            if self.step % self.steps_per_round == 0:
                round_end()

    def steps_trained(self):
        return self.step

    def predict(self):
        """Dev-set accuracy."""
        import torch

        self.model.eval()
        correct = 0
        with torch.inference_mode():
            for batch in self._loader(self.dev_examples):
                labels = batch.pop("labels")
                correct += int((self.model(**batch).logits.argmax(-1) == labels).sum())
        return correct / len(self.dev_examples)


class Turns:
    """Runs each runner's training call in its own thread, one thread at a time, taking turns.

    A runner's call invokes `round_end` after each of its rounds; the thread then hands the turn to
    the next unfinished runner (A, B, C, A, ...) and waits for its own. Only the thread holding the
    turn computes, so each round is timed alone: from taking the turn to handing it on.
    """

    def __init__(self, names, rounds):
        self.names, self.rounds = list(names), rounds
        self.seconds = {name: [] for name in self.names}
        self._condition = threading.Condition()
        self._turn, self._finished, self._started = 0, set(), None

    def _wait_for_turn(self, name):  # holding the condition
        self._condition.wait_for(lambda: self.names[self._turn] == name)
        self._started = time.perf_counter()

    def _hand_on(self):  # holding the condition
        for offset in range(1, len(self.names) + 1):
            candidate = (self._turn + offset) % len(self.names)
            if self.names[candidate] not in self._finished:
                self._turn = candidate
                break
        self._condition.notify_all()

    def _round_end(self, name):
        with self._condition:
            self.seconds[name].append(time.perf_counter() - self._started)
            if len(self.seconds[name]) < self.rounds:  # after the last, the call returns
                self._hand_on()
                self._wait_for_turn(name)

    def run(self, trains):
        """trains: {name: (round_end) -> None}. Returns {name: [seconds per round]}."""
        errors = {}

        def target(name, train):
            with self._condition:
                self._wait_for_turn(name)
            try:
                train(lambda: self._round_end(name))
            except BaseException as error:  # re-raised below, once every thread has ended
                errors[name] = error
            finally:
                with self._condition:
                    self._finished.add(name)
                    self._hand_on()

        threads = [
            threading.Thread(target=target, args=(name, trains[name]), daemon=True)
            for name in self.names
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name, error in errors.items():
            raise RuntimeError(f"runner {name} failed") from error
        for name, seconds in self.seconds.items():
            if len(seconds) != self.rounds:
                raise ValueError(f"runner {name} trained {len(seconds)} rounds, not {self.rounds}")
        return self.seconds


def run_task(task, names, data_dir, model_dir, train, dev, work_dir):
    """{runner: measurements}: the runners `names` set up, then rounds of training and dev passes in turn."""
    is_pair = task == "mrpc_like"
    total_steps = int(len(train) / FLAGS.batch_size * FLAGS.epochs)
    if total_steps % FLAGS.rounds:
        raise ValueError(
            f"{total_steps} training steps ({len(train)} examples / batch {FLAGS.batch_size} x "
            f"{FLAGS.epochs:g} epochs) do not split into --rounds={FLAGS.rounds} equal rounds"
        )
    steps_per_round = total_steps // FLAGS.rounds
    runners, results = {}, {}
    for name in names:
        keras.utils.set_random_seed(FLAGS.seed)
        if name == "keras_hub":
            arguments = (train, dev, model_dir, is_pair, steps_per_round)
            seconds, _, runner = timing.timed(KerasHubRunner, *arguments)
        elif name == "transformers":
            # Not timed: which examples run_classifier batches together, for transformers to take.
            output_dir = tempfile.mkdtemp(prefix=f"{task}_batches_", dir=work_dir)
            config = classifier_config(data_dir, output_dir, model_dir, is_pair, "cut", 1)
            batches, pieces = training_batches(config, total_steps)
            arguments = (train, dev, is_pair, batches, steps_per_round)
            seconds, _, runner = timing.timed(TransformersRunner, *arguments)
            print(
                f"{task}: transformers trains on run_classifier's {len(batches)} batches; its "
                f"tokenizer splits {runner.pieces_differing_from(pieces)} of {len(train)} training "
                f"examples otherwise than ours; {runner.num_decayed} of "
                f"{len(list(runner.model.parameters()))} tensors weight-decayed",
                flush=True,
            )
        else:
            output_dir = tempfile.mkdtemp(prefix=f"{task}_{name}_", dir=work_dir)
            config = classifier_config(
                data_dir, output_dir, model_dir, is_pair, name, steps_per_round
            )
            seconds, _, runner = timing.timed(BertTfRunner, config)
        runners[name] = runner
        results[name] = {"setup_seconds": seconds, "passes": []}
    rounds = Turns(runners, FLAGS.rounds).run(
        {name: runner.train for name, runner in runners.items()}
    )
    for name, seconds in rounds.items():
        results[name]["rounds"] = seconds
        if runners[name].steps_trained() != total_steps:
            raise ValueError(
                f"{name} trained {runners[name].steps_trained()} steps, not {total_steps}"
            )
    for _ in range(FLAGS.predict_passes):
        for name, runner in runners.items():
            seconds, _, accuracy = timing.timed(runner.predict)
            results[name]["passes"].append(seconds)
            results[name]["accuracy"] = accuracy
    examples_per_round = steps_per_round * FLAGS.batch_size
    for result in results.values():
        timed_rounds = result["rounds"][1:] or result["rounds"]
        timed_passes = result["passes"][1:] or result["passes"]
        result.update(
            train_examples_per_sec=examples_per_round / float(np.median(timed_rounds)),
            best_round_examples_per_sec=examples_per_round / min(timed_rounds),
            first_round_seconds=result["rounds"][0],
            train_seconds=result["setup_seconds"] + sum(result["rounds"]),
            predict_examples_per_sec=len(dev) / float(np.median(timed_passes)),
            first_pass_seconds=result["passes"][0],
        )
    return results


# ---------------------------------------------------------------------------------- main


def _print_table(rows):
    print(
        "\n| task | implementation | set-up s | first round s (tracing) | train examples/s "
        "(median of later rounds) | best round | train s in all | predict examples/s (median of "
        "later passes) | first pass s | dev accuracy (standard error) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['task']} (median {row['median_length']:.0f} wordpieces) | {NAMES[row['runner']]} | "
            f"{row['setup_seconds']:.1f} | {row['first_round_seconds']:.1f} | "
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
        f"max_seq_length {FLAGS.max_seq_length}, lr {FLAGS.learning_rate:g}; runners taking turns\n",
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
        # The task's runners are garbage now. Freeing their models and traced functions is Python's
        # cyclic collector's job (24 s for our two runners, measured): left to itself it ran inside
        # the next task's first timed round (one first round of ours on mrpc_like took 42 to 65 s
        # instead of ~15).
        collect_start = time.perf_counter()
        gc.collect()
        print(f"{task}: its runners freed in {time.perf_counter() - collect_start:.1f} s (untimed)")
    _print_table(rows)
    _print_ratios(rows)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
