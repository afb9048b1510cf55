"""The BERT paper's ablations at a size two CPU cores can run (issue 31): Tables 5 and 7.

    .venv/bin/python -m bench.paper_ablations --work_dir=/tmp/ablations        # 1-2 h on 2 cores
    .venv/bin/python -m bench.paper_ablations --quick                          # smoke run, not results
    .venv/bin/python -m bench.paper_ablations --parts=feature_based            # Table 7's rows only

**Pretraining objectives (paper §5.1, Table 5).** Three tiny encoders are pretrained from the same
text, seed, vocabulary, shape and step count, one per `--objective` (mlm_nsp: masked LM + next
sentence, the original; mlm: masked LM alone; ltr: left-to-right LM with a causal mask), through
`bert_tf.data.pretraining.writer` and `bert_tf.tasks.pretraining.PretrainingRun` (what
create_pretraining_data.py and run_pretraining.py run). Each is then fine-tuned on a sentence-pair task
and a tagging task (`ClassifierRun`, `TaggerRun`: run_classifier.py and run_ner.py), with
--seeds fine-tuning seeds; a fourth row fine-tunes the same shape from random weights, which tells
whether pretraining helped at all at this size. The pretraining seed is one (12345) for every row:
the standard errors cover fine-tuning seeds, not pretraining runs.

**The feature-based approach (paper §5.3, Table 7).** all-MiniLM-L6-v2 (real pretrained weights, 6
layers, hidden 384; bench/minilm.py converts it) is frozen, and each `run_ner.py --feature_layers`
value feeds the chosen layers, computed once and cached, to a two-layer BiLSTM on the `names` task
(`FeatureTaggerRun`); the last row fine-tunes the whole model on the same data (`TaggerRun`). The
BiLSTM has --lstm_size units a direction (default 128: the paper's 768 for BERT-base would make each
row cost tens of minutes here) and trains with --feature_learning_rate; these were fixed before the
first run, not tuned.

The text is Jane Austen's four novels (tests/fixtures/austen_sentences.txt.xz, one sentence per line,
a blank line between chapters; no PyPI package was found that ships an English NER corpus in its
files, so both tasks are made from it). Chapters are dealt to splits as scripts/make_sample_tasks.py
deals them (index % 5 == 3 dev, == 4 test, else train): pretraining reads the train chapters only, so
no dev sentence was seen in pretraining. The WordPiece vocabulary (uncased) is learned from the
pretraining text with tensorflow-text's learner, since the 30,522-entry release vocabulary would make
most of a tiny model's weights and time the output softmax.
- pair task, `order`: two consecutive sentences of a chapter, in the book's order (`in_order`) or
  swapped (`swapped`); sentence A and B as the original's pair input. This is a coherence task (as
  ALBERT's sentence-order prediction), not the next-sentence task: both orders hold the same two
  sentences of one chapter, so topic does not tell them apart.
- tagging task, `names`: every word gets B-NAME / I-NAME / O, where names are the words Austen
  capitalised mid-sentence (Emma, Mr, Knightley, Hartfield, London ...; not "I"); a sentence's first
  word is a name when the corpus capitalises that word mid-sentence more often than not. The models
  are uncased, so the label is not in the input: they must tell names from context and word identity.
  Entity F1 as conlleval counts it.

Results go to --work_dir/results.jsonl as they come, one line a run; a rerun with the same --work_dir
skips the runs found there (the machine is shared: a killed bench resumes).
"""

import collections
import json
import math
import os
import random
import tempfile
import time

from absl import app, flags, logging

from bench import machine, minilm
from bert_tf import file_io
from bert_tf.tasks import run_script
from scripts import make_sample_tasks  # its reading of the corpus and its split of chapters

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

AUSTEN = os.path.join(REPO_DIR, "tests", "fixtures", "austen_sentences.txt.xz")
OBJECTIVES = ("mlm_nsp", "mlm", "ltr")
ROW_NAMES = {
    "mlm_nsp": "MLM + NSP (BERT)",
    "mlm": "MLM only (No NSP)",
    "ltr": "LTR, no NSP",
    "none": "no pretraining (random init)",
}
# run_ner.py --feature_layers values, one row of the paper's Table 7 each, with its BERT-base dev F1.
PAPER_TABLE7 = {
    "embeddings": 91.0,
    "second_to_last_hidden": 95.6,
    "last_hidden": 94.9,
    "weighted_sum_last_four": 95.9,
    "concat_last_four": 96.1,
    "weighted_sum_all": 95.5,
    "fine-tuning": 96.4,
}
FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", None, "Data, checkpoints and results.jsonl (default: a temp dir).")
flags.DEFINE_bool(
    "quick", False, "Tiny sizes and few steps: checks that the bench runs, not results."
)
flags.DEFINE_list("seeds", ["1", "2", "3"], "Fine-tuning seeds of every row.")
flags.DEFINE_integer("vocab_size", 8000, "WordPiece vocabulary learned from the pretraining text.")
flags.DEFINE_integer("num_layers", 2, "Encoder layers of the pretrained models.")
flags.DEFINE_integer("hidden_size", 128, "Hidden size (heads of 64; feed-forward 4x).")
flags.DEFINE_integer("max_seq_length", 64, "Wordpieces per pretraining and fine-tuning example.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions per pretraining example.")
flags.DEFINE_integer("dupe_factor", 5, "Passes over the pretraining text, each with other masks.")
flags.DEFINE_integer("pretrain_steps", 2000, "Pretraining steps of every objective.")
flags.DEFINE_integer("pretrain_batch_size", 32, "Pretraining batch.")
flags.DEFINE_float("pretrain_learning_rate", 5e-4, "Pretraining peak learning rate (10% warmup).")
flags.DEFINE_integer("num_train", 2000, "Training examples of each task.")
flags.DEFINE_integer("num_dev", 600, "Dev examples of each task.")
flags.DEFINE_float("num_train_epochs", 3.0, "Fine-tuning epochs.")
flags.DEFINE_float("learning_rate", 1e-4, "Fine-tuning peak learning rate (10% warmup).")
flags.DEFINE_integer("train_batch_size", 32, "Fine-tuning batch.")
flags.DEFINE_list(
    "parts",
    ["pretraining", "feature_based"],
    "What to run: pretraining (Table 5's objectives), feature_based (Table 7's rows on MiniLM).",
)
flags.DEFINE_list(
    "variants",
    ["mlm_nsp", "mlm", "ltr", "none"],
    "Pretraining table rows to run (none = random init); several processes can share a --work_dir.",
)
flags.DEFINE_list(
    "feature_rows",
    list(PAPER_TABLE7),
    "Feature-based table rows to run: --feature_layers values, and fine-tuning.",
)
flags.DEFINE_integer(
    "lstm_size", 128, "Feature-based rows: units of each BiLSTM direction (the paper's: 768)."
)
flags.DEFINE_float(
    "feature_learning_rate", 1e-3, "Feature-based rows: the BiLSTM head's peak learning rate."
)
flags.DEFINE_float(
    "minilm_learning_rate", 1e-4, "Feature-based table: fine-tuning MiniLM's peak learning rate."
)
flags.DEFINE_integer("threads", 0, "Compute threads (0 = one per core).")


# ---------------------------------------------------------------------------------- the text


def read_chapters(path=AUSTEN):
    """The corpus's chapters, each a list of sentences, read as scripts/make_sample_tasks.py reads them."""
    return make_sample_tasks.read_chapters(path)


def chapters_by_split(chapters):
    split = collections.defaultdict(list)
    for index, chapter in enumerate(chapters):
        split[make_sample_tasks.split_of(index)].append(chapter)
    return split


def write_pretraining_text(chapters, path):
    """One sentence a line, a blank line between chapters (create_pretraining_data's documents)."""
    with file_io.atomic_write(path) as writer:
        writer.write("\n\n".join("\n".join(chapter) for chapter in chapters) + "\n")


def learn_vocab(chapters, vocab_size, path):
    """An uncased WordPiece vocab learned from the chapters (bert_tf.vocabulary), written to path."""
    from bert_tf import vocabulary
    from bert_tf.tokenization import BasicTokenizer

    sentences = (sentence for chapter in chapters for sentence in chapter)
    counts = vocabulary.count_words(sentences, BasicTokenizer(do_lower_case=True))
    vocab = vocabulary.learn_vocab(
        counts, vocab_size, vocabulary.reserved_tokens(), {"lower_thresh": 1}
    )
    vocabulary.write_vocab(path, vocab)
    return len(vocab)


# ---------------------------------------------------------------------------------- the tasks


def write_order_task(splits, data_dir, num_train, num_dev, seed=12345):
    """train.tsv and dev.tsv of `order`: sentence_a <TAB> sentence_b <TAB> in_order | swapped."""
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    for split, size in (("train", num_train), ("dev", num_dev)):
        pairs = [
            (first, second)
            for chapter in splits[split]
            for first, second in zip(chapter, chapter[1:], strict=False)
            if 4 <= len(first.split()) <= 25 and 4 <= len(second.split()) <= 25
        ]
        rng.shuffle(pairs)
        rows = []
        for index, (first, second) in enumerate(pairs[:size]):
            # Alternate the labels: balanced classes, and each pair seen in one order only.
            rows.append((first, second, "in_order") if index % 2 else (second, first, "swapped"))
        with file_io.atomic_write(os.path.join(data_dir, f"{split}.tsv")) as writer:
            writer.writelines(f"{a}\t{b}\t{label}\n" for a, b, label in rows)


def _sentence_starts(words):
    """Indexes of the words that begin a sentence or a quotation (where English capitalises anyway)."""
    starts, expecting = set(), True
    for index, word in enumerate(words):
        if word in {'"', ".", "!", "?", ":", "--"}:
            expecting = True
        elif any(character.isalpha() for character in word):
            if expecting:
                starts.add(index)
            expecting = False
    return starts


def name_words(chapters):
    """Lower-cased words the corpus capitalises mid-sentence more often than it writes them lower-cased."""
    from bert_tf.tokenization import BasicTokenizer

    basic = BasicTokenizer(do_lower_case=False)
    capitalised, lower = collections.Counter(), collections.Counter()
    for chapter in chapters:
        for sentence in chapter:
            words = basic.tokenize(sentence)
            starts = _sentence_starts(words)
            for index, word in enumerate(words):
                if not word.isalpha():
                    continue
                if word.islower():
                    lower[word] += 1
                elif word[0].isupper() and index not in starts:
                    capitalised[word.lower()] += 1
    return {word for word, count in capitalised.items() if count > lower[word] and word != "i"}


def name_labels(words, names):
    """B-NAME / I-NAME / O of each word: capitalised mid-sentence, or a name word at a start."""
    starts = _sentence_starts(words)
    labels, inside = [], False
    for index, word in enumerate(words):
        is_name = (
            word.isalpha()
            and word[0].isupper()
            and word != "I"
            and (index not in starts or word.lower() in names)
        )
        labels.append(("I-NAME" if inside else "B-NAME") if is_name else "O")
        inside = is_name
    return labels


def write_names_task(chapters, splits, data_dir, num_train, num_dev, seed=12345):
    """train.txt, dev.txt and test.txt of `names` in CoNLL format (word <TAB> label)."""
    from bert_tf.tokenization import BasicTokenizer

    basic = BasicTokenizer(do_lower_case=False)
    names = name_words(chapters)
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    for split, size in (("train", num_train), ("dev", num_dev), ("test", num_dev)):
        sentences = [
            sentence
            for chapter in splits[split]
            for sentence in chapter
            if 4 <= len(sentence.split()) <= 30
        ]
        rng.shuffle(sentences)
        blocks = []
        for sentence in sentences[:size]:
            words = basic.tokenize(sentence)
            labels = name_labels(words, names)
            blocks.append("".join(f"{w}\t{t}\n" for w, t in zip(words, labels, strict=True)))
        with file_io.atomic_write(os.path.join(data_dir, f"{split}.txt")) as writer:
            writer.write("\n".join(blocks))


# ---------------------------------------------------------------------------------- the runs


def bert_config(vocab_size, path):
    config = dict(
        vocab_size=vocab_size, hidden_size=FLAGS.hidden_size, num_hidden_layers=FLAGS.num_layers,
        num_attention_heads=max(1, FLAGS.hidden_size // 64), intermediate_size=4 * FLAGS.hidden_size,
        hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        max_position_embeddings=FLAGS.max_seq_length, type_vocab_size=2, initializer_range=0.02,
    )  # fmt: skip
    with file_io.atomic_write(path) as writer:
        json.dump(config, writer, indent=2)
    return path


def write_records(text, vocab, path, objective, dupe_factor):
    from bert_tf.data.pretraining import writer

    writer.run(
        writer.CreateSettings(
            input_file=text, output_file=path, vocab_file=vocab, objective=objective,
            max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            dupe_factor=dupe_factor, random_seed=12345, num_workers=1,
        )
    )  # fmt: skip
    return path


def count_records(path):
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(path))


def read_eval_results(path):
    with open(path, encoding="utf-8") as reader:
        return {k: float(v) for k, v in (line.split(" = ") for line in reader.read().splitlines())}


def pretrain(objective, config_file, vocab, texts, work_dir):
    """Pretrains one objective; returns (its output dir, held-out eval results on the dev chapters)."""
    from bert_tf.tasks.pretraining import PretrainingRun, PretrainingSettings

    records = {
        split: write_records(
            texts[split], vocab, os.path.join(work_dir, f"{objective}_{split}.tfrecord"),
            objective, FLAGS.dupe_factor if split == "train" else 1,
        )
        for split in ("train", "dev")
    }  # fmt: skip
    output_dir = os.path.join(work_dir, f"pretrained_{objective}")
    common = dict(
        bert_config_file=config_file, objective=objective, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, seed=12345,
        train_batch_size=FLAGS.pretrain_batch_size, eval_batch_size=FLAGS.pretrain_batch_size,
        log_steps=max(1, FLAGS.pretrain_steps // 10),
    )  # fmt: skip
    PretrainingRun(
        PretrainingSettings(
            **common, input_file=records["train"], output_dir=output_dir, do_train=True,
            num_train_steps=FLAGS.pretrain_steps, num_warmup_steps=FLAGS.pretrain_steps // 10,
            learning_rate=FLAGS.pretrain_learning_rate, save_checkpoints_steps=FLAGS.pretrain_steps,
            iterations_per_loop=min(100, FLAGS.pretrain_steps),
        )
    ).run()  # fmt: skip
    # Held-out: the dev chapters' records (one pass, fixed masks), with the trained weights.
    eval_dir = os.path.join(work_dir, f"heldout_{objective}")
    PretrainingRun(
        PretrainingSettings(
            **common, input_file=records["dev"], output_dir=eval_dir, do_eval=True,
            init_checkpoint=os.path.join(output_dir, "bert_model.ckpt"),
            max_eval_steps=max(1, count_records(records["dev"]) // FLAGS.pretrain_batch_size),
        )
    ).run()  # fmt: skip
    return output_dir, read_eval_results(os.path.join(eval_dir, "eval_results.txt"))


def fine_tune(task, model, data_dir, vocab, seed, output_dir):
    """Fine-tunes one model (a pretrained dir, or {"config": ...} for random weights); dev metric."""
    from bert_tf.tasks.classification import task as classification
    from bert_tf.tasks.tagging import task as tagging

    if "output_dir" in model:
        weights = dict(
            bert_config_file=os.path.join(model["output_dir"], "bert_config.json"),
            init_checkpoint=os.path.join(model["output_dir"], "bert_model.ckpt"),
        )
    else:
        weights = dict(bert_config_file=model["config"])
    common = dict(
        **weights, vocab_file=vocab, output_dir=output_dir, data_dir=data_dir, do_train=True,
        do_eval=True, max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=64, learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.num_train_epochs,
        seed=seed, log_steps=10**6, save_checkpoints_steps=10**6,
    )  # fmt: skip
    if task == "order":
        config = classification.ClassifierSettings(
            **common, task_name="tsv", text_a_column="0", text_b_column="1", label_column="2"
        )
        return run_script(classification.SPEC, config)["eval"]["eval_accuracy"]
    return run_script(tagging.SPEC, tagging.TaggerSettings(**common))["eval"]["eval_f1"]


def feature_based_runs(data_dir, work_dir, seeds, record, done):
    """Table 7's rows on all-MiniLM-L6-v2 and `names`: the frozen encoder's layers into a BiLSTM
    (run_ner.py --feature_layers, FeatureTaggerRun), and fine-tuning the same model (TaggerRun).

    The encoder's layers are cached once per choice of layers in work_dir/encoder_features and
    shared by the seeds (the paper's point: the expensive representation is computed once).
    """
    from bert_tf.tasks.tagging import feature_based
    from bert_tf.tasks.tagging import task as tagging

    model_dir = minilm.converted(work_dir)
    common = dict(
        bert_config_file=os.path.join(model_dir, "bert_config.json"),
        vocab_file=os.path.join(model_dir, "vocab.txt"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"), data_dir=data_dir,
        do_train=True, do_eval=True, max_seq_length=FLAGS.max_seq_length,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=64, predict_batch_size=64,
        num_train_epochs=FLAGS.num_train_epochs, log_steps=10**6, save_checkpoints_steps=10**6,
    )  # fmt: skip
    for layers in (row for row in PAPER_TABLE7 if row in FLAGS.feature_rows):
        for seed in seeds:
            if done(part="feature_based", layers=layers, seed=seed):
                continue
            start = time.perf_counter()
            output_dir = os.path.join(work_dir, "runs", f"minilm_{layers}_{seed}")
            if layers == "fine-tuning":
                config = tagging.TaggerSettings(
                    **common, output_dir=output_dir, seed=seed,
                    learning_rate=FLAGS.minilm_learning_rate,
                )  # fmt: skip
                outcome = run_script(tagging.SPEC, config)
            else:
                config = feature_based.FeatureTaggerSettings(
                    **common, output_dir=output_dir, seed=seed, feature_layers=layers,
                    lstm_size=FLAGS.lstm_size, learning_rate=FLAGS.feature_learning_rate,
                    encoder_features_dir=os.path.join(work_dir, "encoder_features"),
                )  # fmt: skip
                outcome = run_script(tagging.SPEC, config)
            record(
                dict(part="feature_based", layers=layers, seed=seed,
                     metric=outcome["eval"]["eval_f1"], seconds=round(time.perf_counter() - start, 1))
            )  # fmt: skip


# ---------------------------------------------------------------------------------- the tables


def first_of_each_run(results):
    """The results with one row a run (the first): processes sharing a --work_dir may repeat one."""
    seen, rows = set(), []
    for row in results:
        key = tuple(row.get(k) for k in ("part", "objective", "variant", "layers", "task", "seed"))
        if key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


def mean_and_error(values):
    """(mean, standard error of the mean); the error is 0 for one value."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def cell(values, scale=100.0):
    if not values:
        return "-"
    mean, error = mean_and_error([scale * v for v in values])
    return f"{mean:.1f} ± {error:.1f} (n={len(values)})"


def pretraining_table(results):
    rows = [
        "| pretraining | held-out masked-LM perplexity | held-out next-token perplexity | "
        "`order` dev accuracy % | `names` dev entity F1 % |",
        "|---|---|---|---|---|",
    ]
    for variant in (*OBJECTIVES, "none"):
        heldout = next(
            (r for r in results if r["part"] == "pretrain" and r["objective"] == variant), {}
        )
        scores = {
            task: [
                r["metric"]
                for r in results
                if r["part"] == "finetune" and r["variant"] == variant and r["task"] == task
            ]
            for task in ("order", "names")
        }
        mlm = heldout.get("masked_lm_perplexity")
        ltr = heldout.get("next_token_perplexity")
        rows.append(
            f"| {ROW_NAMES[variant]} | {f'{mlm:.1f}' if mlm else '-'} | {f'{ltr:.1f}' if ltr else '-'} "
            f"| {cell(scores['order'])} | {cell(scores['names'])} |"
        )
    return "\n".join(rows)


def feature_based_table(results):
    rows = [
        "| features of all-MiniLM-L6-v2 (`--feature_layers`) | `names` dev entity F1 % | "
        "paper, BERT-base, CoNLL-2003 dev F1 |",
        "|---|---|---|",
    ]
    for layers, paper in PAPER_TABLE7.items():
        scores = [
            r["metric"] for r in results if r["part"] == "feature_based" and r["layers"] == layers
        ]
        name = "fine-tuning (for comparison)" if layers == "fine-tuning" else f"`{layers}` + BiLSTM"
        rows.append(f"| {name} | {cell(scores)} | {paper} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------- main


def pretraining_ablations(splits, data_dirs, seeds, work_dir, record, done):
    """Table 5's rows: pretrains each objective (and takes random weights), fine-tunes on both tasks."""
    texts = {split: os.path.join(work_dir, f"austen_{split}.txt") for split in ("train", "dev")}
    for split, path in texts.items():
        write_pretraining_text(splits[split], path)
    vocab = os.path.join(work_dir, "vocab.txt")
    if not os.path.exists(vocab):
        learn_vocab(splits["train"], FLAGS.vocab_size, vocab)
    with open(vocab, encoding="utf-8") as reader:
        vocab_size = sum(1 for _ in reader)
    config_file = bert_config(vocab_size, os.path.join(work_dir, "bert_config.json"))
    print(f"vocab: {vocab_size} wordpieces learned from the train chapters\n", flush=True)
    models = {"none": {"config": config_file}}
    for objective in (o for o in OBJECTIVES if o in FLAGS.variants):
        output_dir = os.path.join(work_dir, f"pretrained_{objective}")
        if not done(part="pretrain", objective=objective):
            start = time.perf_counter()
            output_dir, heldout = pretrain(objective, config_file, vocab, texts, work_dir)
            record(
                dict(part="pretrain", objective=objective, **heldout,
                     seconds=round(time.perf_counter() - start, 1))
            )  # fmt: skip
        models[objective] = {"output_dir": output_dir}
    for variant in (v for v in (*OBJECTIVES, "none") if v in FLAGS.variants):
        for task in ("order", "names"):
            for seed in seeds:
                if done(part="finetune", variant=variant, task=task, seed=seed):
                    continue
                start = time.perf_counter()
                output_dir = os.path.join(work_dir, "runs", f"{variant}_{task}_{seed}")
                metric = fine_tune(task, models[variant], data_dirs[task], vocab, seed, output_dir)
                record(
                    dict(part="finetune", variant=variant, task=task, seed=seed, metric=metric,
                         seconds=round(time.perf_counter() - start, 1))
                )  # fmt: skip


def apply_quick():
    """--quick's sizes, where a flag was left at its default."""
    quick = dict(
        pretrain_steps=40, dupe_factor=1, num_train=96, num_dev=48, num_train_epochs=1.0,
        seeds=["1", "2"], vocab_size=2000,
    )  # fmt: skip
    for name, value in quick.items():
        if not FLAGS[name].present:
            FLAGS[name].value = value


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    if FLAGS.quick:
        apply_quick()
    unknown = set(FLAGS.parts) - {"pretraining", "feature_based"}
    if unknown:
        raise app.UsageError(
            f"--parts: unknown {sorted(unknown)}; known: pretraining, feature_based"
        )
    threads = machine.set_threads(FLAGS.threads)
    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="paper_ablations_")
    os.makedirs(work_dir, exist_ok=True)
    results_path = os.path.join(work_dir, "results.jsonl")
    seeds = [int(seed) for seed in FLAGS.seeds]
    print(machine.header())
    print(
        f"{'--quick: NOT RESULTS; ' if FLAGS.quick else ''}{machine.threads_line(threads)}; "
        f"work_dir {work_dir}\n"
        f"pretraining: {FLAGS.num_layers} layers, hidden {FLAGS.hidden_size}, seq "
        f"{FLAGS.max_seq_length}, {FLAGS.max_predictions_per_seq} predictions, {FLAGS.pretrain_steps} "
        f"steps of batch {FLAGS.pretrain_batch_size}, lr {FLAGS.pretrain_learning_rate:g}, dupe_factor "
        f"{FLAGS.dupe_factor}, seed 12345; fine-tuning: {FLAGS.num_train} train / {FLAGS.num_dev} dev "
        f"examples a task, {FLAGS.num_train_epochs:g} epochs, batch {FLAGS.train_batch_size}, lr "
        f"{FLAGS.learning_rate:g}, seeds {seeds}; feature-based: BiLSTM {FLAGS.lstm_size} units a "
        f"direction, lr {FLAGS.feature_learning_rate:g}, MiniLM fine-tuning lr "
        f"{FLAGS.minilm_learning_rate:g}\n",
        flush=True,
    )

    def record(row):
        with open(results_path, "a", encoding="utf-8") as writer:
            writer.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    def done(**keys):
        """Whether results.jsonl (of this process or another one sharing --work_dir) has the run."""
        rows = machine.read_json_lines(results_path)
        return any(all(r.get(k) == v for k, v in keys.items()) for r in rows)

    chapters = read_chapters()
    splits = chapters_by_split(chapters)
    data_dirs = {task: os.path.join(work_dir, task) for task in ("order", "names")}
    write_order_task(splits, data_dirs["order"], FLAGS.num_train, FLAGS.num_dev)
    write_names_task(chapters, splits, data_dirs["names"], FLAGS.num_train, FLAGS.num_dev)
    print(
        f"Austen: {len(chapters)} chapters ({len(splits['train'])} train, {len(splits['dev'])} dev)"
    )
    if "pretraining" in FLAGS.parts:
        pretraining_ablations(splits, data_dirs, seeds, work_dir, record, done)
        results = first_of_each_run(machine.read_json_lines(results_path))
        print("\n" + pretraining_table(results) + "\n", flush=True)
    if "feature_based" in FLAGS.parts:
        feature_based_runs(data_dirs["names"], work_dir, seeds, record, done)
        results = first_of_each_run(machine.read_json_lines(results_path))
        print("\n" + feature_based_table(results) + "\n", flush=True)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
