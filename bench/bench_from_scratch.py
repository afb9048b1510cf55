"""Does pretraining from scratch on real text help downstream (issue 53)? Our vocabulary learner, our data
writer with static and dynamic masking, our pretraining, then fine-tuning on two real sets.

Pretraining text (bench/from_scratch_corpus.py): IMDB reviews without labels, the six Austen novels,
the tweets outside the fine-tuning split's dev and test sets; never a downstream dev or test text.
The pretraining runs (--maskings; from_scratch_pretrain.RUNS): static and dynamic masking on that
text; dynamic-rt, dynamic on that text and Rotten Tomatoes' texts outside its dev and test sets;
tapt-rt, the finished dynamic run continued on those Rotten Tomatoes texts alone (task-adaptive).
Stages, each skipped when its output is in --work_dir (a stopped run is continued by the same command;
a pretraining run cut off resumes from its last checkpoint):
  data      text/{pretrain,heldout}.txt; vocab.txt (build_vocab's learner, --vocab_size, uncased);
            records/<run>.tfrecord for each --maskings run (create_pretraining_data: static masks
            with --dupe_factor, or unmasked for --dynamic_masking) and records/heldout.tfrecord
            (the held-out text with fixed masks)
  pretrain  pretrain_<run>/: run_pretraining's library path, the same seed and batch for every run,
            --pretrain_steps (--tapt_steps for tapt-rt), a checkpoint every quarter of the steps
  curve     held-out masked-LM loss and accuracy of each quarter's checkpoint (and of the initial
            weights) of each run but tapt-rt -> curve.json and the PNG --plot_file
  finetune  (bench/from_scratch_finetune.py) each --models encoder (random, or <run>_<half|full>)
            fine-tuned on Rotten Tomatoes and the tweets (tapt-rt on Rotten Tomatoes only),
            --seeds seeds at each --finetune_learning_rates rate, then --more_seeds at
            the rate of the best mean dev accuracy; and TF-IDF + LinearSVC on each set
  report    the tables of whatever curve.json and the finished runs hold (runs nothing); each
            model's test accuracy is taken at its rate chosen on dev, never on test

    .venv/bin/python -m bench.bench_from_scratch --work_dir=/tmp/from_scratch --threads=1 \\
        --rotten_tomatoes_sizes=1000,500,1000 --tweets_sizes=1000,500,1000
    # the stages split over processes sharing --work_dir (2 cores): each pretraining run alone,
    # then one fine-tuning process a model; --stages=report prints the tables of what has run
    .venv/bin/python -m bench.bench_from_scratch ... --stages=data,pretrain --maskings=static
    .venv/bin/python -m bench.bench_from_scratch ... --stages=finetune --models=random
"""

import json
import os
import time

from absl import app, flags, logging

from bench import (
    bench_real_text,
    from_scratch_corpus,
    from_scratch_finetune,
    from_scratch_plot,
    from_scratch_pretrain,
    machine,
)
from bench.from_scratch_pretrain import RUNS, TASK_ADAPTIVE

STAGES = ("data", "pretrain", "curve", "finetune", "report")

FLAGS = flags.FLAGS
# bench_real_text's flags are shared: --work_dir, --rotten_tomatoes_sizes, --tweets_sizes,
# --short_max_seq_length (fine-tuning), --batch_size, --seeds, --split_seed, --threads.
flags.DEFINE_list("stages", list(STAGES), f"Any of {', '.join(STAGES)}, run in this order.")
flags.DEFINE_list(
    "maskings", ["static", "dynamic"],
    "The pretraining runs the data and pretrain stages prepare and run: static, dynamic (masking, "
    "on the same text), dynamic-rt (dynamic, on that text and Rotten Tomatoes' texts outside its "
    "fine-tuning dev and test sets) or tapt-rt (the finished dynamic run continued --tapt_steps on "
    "those Rotten Tomatoes texts alone, and fine-tuned on Rotten Tomatoes only).",
)  # fmt: skip
flags.DEFINE_integer(
    "tapt_steps", 600, "Steps of a task-adaptive run (tapt-rt; a multiple of 40), at --pretrain_*'s "
    "batch, peak rate and warmup share."
)  # fmt: skip
flags.DEFINE_integer("vocab_size", 8000, "Most tokens of the learned vocabulary.")
flags.DEFINE_integer(
    "max_imdb_reviews",
    0,
    "Pretrain on this many IMDB reviews drawn at random, seed 12345 (0: all 25,000; the vocabulary "
    "learner took 11 min on the 1.3M words of 300 here). Up to commit 31f659e it took the file's "
    "first this many, all negative.",
)
flags.DEFINE_integer("heldout_every", 50, "Every this-th document of each source is held out.")
flags.DEFINE_integer("dupe_factor", 1, "Static masks per instance (create_pretraining_data).")
flags.DEFINE_integer("pretrain_max_seq_length", 64, "Pretraining sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions per pretraining sequence.")
flags.DEFINE_list("encoder", ["4", "256", "4", "1024"], "layers,hidden,heads,intermediate.")
flags.DEFINE_integer("pretrain_steps", 480, "Pretraining steps (a multiple of 40).")
flags.DEFINE_integer("pretrain_batch_size", 32, "Pretraining batch.")
flags.DEFINE_float("pretrain_learning_rate", 5e-4, "Peak pretraining rate (10% warmup, decay).")
flags.DEFINE_string("plot_file", None, "The curve's PNG (default work_dir/from_scratch_mlm.png).")
flags.DEFINE_list(
    "models", ["random", "static_half", "static_full", "dynamic_full"],
    "The encoders the finetune stage fine-tunes: random (the initial weights, seed 12345) or "
    "<run>_<half|full> (that run's checkpoint at half or all of its steps), optionally with "
    "_freshpooler (the pooler at its initial weights, as random init has it).",
)  # fmt: skip
flags.DEFINE_list(
    "finetune_learning_rates", ["3e-4", "1e-4", "5e-5", "3e-5"],
    "Peak fine-tuning rates, every seed run at each; the report takes, for each model and set, the "
    "rate of the best mean dev accuracy (the default is the grid of Google's small BERTs).",
)  # fmt: skip
flags.DEFINE_float("finetune_epochs", 4, "Fine-tuning epochs, fixed (no sweep).")
flags.DEFINE_list(
    "more_seeds", [],
    "Fine-tuning seeds run after the --seeds grid, each only at the rate chosen on dev for its "
    "model and set (the rates are compared on --seeds).",
)  # fmt: skip


def path(*parts):
    return os.path.join(FLAGS.work_dir, *parts)


def run_steps(run):
    """A run's steps: --tapt_steps for a task-adaptive run, else --pretrain_steps."""
    return FLAGS.tapt_steps if run in TASK_ADAPTIVE else FLAGS.pretrain_steps


def pretrain_settings(run=None):
    return {
        "steps": run_steps(run), "batch_size": FLAGS.pretrain_batch_size,
        "learning_rate": FLAGS.pretrain_learning_rate,
        "max_seq_length": FLAGS.pretrain_max_seq_length,
        "max_predictions": FLAGS.max_predictions_per_seq,
    }  # fmt: skip


def check_flags():
    """One line for a flag that cannot work, before any work."""
    unknown = sorted(set(FLAGS.stages) - set(STAGES)) + sorted(set(FLAGS.maskings) - set(RUNS))
    if unknown:
        raise ValueError(f"--stages / --maskings: unknown {', '.join(unknown)}")
    for run in set(FLAGS.maskings) & set(TASK_ADAPTIVE) if "pretrain" in FLAGS.stages else ():
        base = TASK_ADAPTIVE[run][0]
        if base not in FLAGS.maskings and not os.path.exists(
            path(f"pretrain_{base}", "bert_model.ckpt.index")
        ):
            raise ValueError(f"--maskings={run} continues the {base} run: add {base} to --maskings")
    for name in ("pretrain_steps", "tapt_steps"):
        if getattr(FLAGS, name) <= 0 or getattr(FLAGS, name) % 40:
            raise ValueError(
                f"--{name} must be a positive multiple of 40, got {getattr(FLAGS, name)}"
            )
    for model in FLAGS.models if "finetune" in FLAGS.stages else ():
        if model != "random":
            parsed_model(model)
    if len(FLAGS.encoder) != 4:
        raise ValueError(f"--encoder takes layers,hidden,heads,intermediate, got {FLAGS.encoder}")
    for name, kind in (("finetune_learning_rates", float), ("more_seeds", int)):
        try:
            values = [kind(value) for value in getattr(FLAGS, name)]
        except ValueError:
            raise ValueError(f"--{name}: {kind.__name__}s, got {getattr(FLAGS, name)}") from None
        if kind is float and (not values or min(values) <= 0):
            raise ValueError(f"--{name}: positive rates, got {getattr(FLAGS, name)}")


def heldout_texts(name):
    """The texts of a set's fine-tuning dev and test sets (bench_real_text's split)."""
    _, splits, _ = bench_real_text.prepare(name, FLAGS.work_dir)
    return {text for split in splits[1:] for _, text in split}


def data_stage():
    """Text, vocabulary, bert_config.json and the records of --maskings' runs and of the held-out
    text; each output is skipped when it exists. data.json sums up what has been written."""
    summary_file = path("data.json")
    summary = {}
    if os.path.exists(summary_file):
        with open(summary_file, encoding="utf-8") as reader:
            summary = json.load(reader)
    runs = [run for run in RUNS if run in FLAGS.maskings]
    wanted = [f"{run}_records" for run in runs] + ["heldout_records"]
    if all(key in summary for key in wanted):
        return summary
    start = time.perf_counter()
    if not os.path.exists(path("text", "pretrain.txt")):
        summary["documents"] = from_scratch_corpus.write_corpus(
            path("text"), heldout_texts("tweets"), FLAGS.heldout_every, FLAGS.max_imdb_reviews
        )
    for run, text, write in (
        ("dynamic-rt", "pretrain_rt", from_scratch_corpus.rotten_tomatoes_text),
        ("tapt-rt", "rotten_tomatoes", from_scratch_corpus.rotten_tomatoes_only),
    ):
        if run in runs and not os.path.exists(path("text", f"{text}.txt")):
            summary[f"{text}_text"] = write(path("text"), heldout_texts("rotten_tomatoes"))
    if not os.path.exists(path("vocab.txt")):
        from_scratch_pretrain.learn_vocab(
            path("text", "pretrain.txt"), path("vocab.txt"), FLAGS.vocab_size
        )
    with open(path("vocab.txt"), encoding="utf-8") as reader:
        summary["vocab_size"] = len(reader.read().splitlines())
    layers, hidden, heads, intermediate = (int(value) for value in FLAGS.encoder)
    from_scratch_pretrain.write_bert_config(
        path("bert_config.json"), summary["vocab_size"],
        (layers, hidden, heads, intermediate, FLAGS.pretrain_max_seq_length),
    )  # fmt: skip
    os.makedirs(path("records"), exist_ok=True)
    shape = (FLAGS.pretrain_max_seq_length, FLAGS.max_predictions_per_seq)
    outputs = [(run, *RUNS[run]) for run in runs] + [("heldout", "heldout", False)]
    for name, text, dynamic in outputs:
        records = path("records", f"{name}.tfrecord")
        dupe = FLAGS.dupe_factor if name in RUNS and not dynamic else 1
        if not os.path.exists(records):
            from_scratch_pretrain.write_records(
                path("text", f"{text}.txt"), path("vocab.txt"), records, dynamic, shape, dupe
            )
        if f"{name}_records" not in summary:
            summary[f"{name}_records"] = from_scratch_pretrain.count_records(records)
    summary["data_seconds"] = summary.get("data_seconds", 0) + time.perf_counter() - start
    from bert_tf import file_io

    file_io.write_text(summary_file, json.dumps(summary, indent=2) + "\n")
    return summary


def pretrain_stage():
    """The --maskings runs in RUNS' order (a task-adaptive run after the run it continues), each
    skipped when its bert_model.ckpt (written at the end) exists."""
    for run in [run for run in RUNS if run in FLAGS.maskings]:
        output_dir = path(f"pretrain_{run}")
        if os.path.exists(os.path.join(output_dir, "bert_model.ckpt.index")):
            continue
        init_checkpoint = None
        if run in TASK_ADAPTIVE:
            init_checkpoint = path(f"pretrain_{TASK_ADAPTIVE[run][0]}", "bert_model.ckpt")
        start = time.perf_counter()
        from_scratch_pretrain.pretrain(
            path("records", f"{run}.tfrecord"), path("bert_config.json"), output_dir,
            RUNS[run][1], pretrain_settings(run), init_checkpoint,
        )  # fmt: skip
        print(f"pretrain_{run}: {time.perf_counter() - start:.0f} s wall", flush=True)


def parsed_model(model):
    """(run, budget, fresh pooler) of a pretrained --models name, <run>_<half|full>[_freshpooler]."""
    run, budget, *option = model.split("_")
    if run not in RUNS or budget not in ("half", "full") or option not in ([], ["freshpooler"]):
        raise ValueError(
            f"--models: {model} is not random or <run>_<half|full>[_freshpooler] of a run in "
            f"{', '.join(RUNS)}"
        )
    return run, budget, option == ["freshpooler"]


def model_dir(model):
    """models/<model>/, exported from its checkpoint when missing."""
    folder = path("models", model)
    if os.path.exists(folder):
        return folder
    checkpoint, fresh_pooler = None, False
    if model != "random":
        run, budget, fresh_pooler = parsed_model(model)
        step = run_steps(run) // (2 if budget == "half" else 1)
        checkpoint = path(f"pretrain_{run}", f"model.ckpt-{step}")
    os.makedirs(path("models"), exist_ok=True)
    return from_scratch_pretrain.export_model(
        path("bert_config.json"), path("vocab.txt"), checkpoint, folder, fresh_pooler=fresh_pooler
    )


def curve_stage():
    """Held-out masked-LM loss and accuracy at every quarter of the steps of each finished pretraining
    run -> curve.json (a run already there is not evaluated again), the PNG."""
    curve_file = path("curve.json")
    curve = {"heldout": {}, "training": {}}
    if os.path.exists(curve_file):
        with open(curve_file, encoding="utf-8") as reader:
            curve = json.load(reader)
    missing = [
        run for run in RUNS
        if run not in curve["heldout"] and run not in TASK_ADAPTIVE  # they start elsewhere
        and os.path.exists(path(f"pretrain_{run}", "bert_model.ckpt.index"))
    ]  # fmt: skip
    if missing:
        records = path("records", "heldout.tfrecord")
        count = from_scratch_pretrain.count_records(records)

        def evaluate(name, checkpoint):
            return from_scratch_pretrain.evaluate_heldout(
                records, count, path("bert_config.json"), checkpoint, path("eval", name),
                pretrain_settings(),
            )  # fmt: skip

        initial = evaluate("random", os.path.join(model_dir("random"), "bert_model.ckpt"))
        for run in missing:
            run_dir = path(f"pretrain_{run}")
            points = [(0, initial)]
            for step, prefix in sorted(from_scratch_pretrain.checkpoint_steps(run_dir).items()):
                points.append((step, evaluate(f"{run}_{step}", prefix)))
            curve["heldout"][run] = [
                (step, found["masked_lm_loss"], found["masked_lm_accuracy"])
                for step, found in points
            ]
            curve["training"][run] = from_scratch_pretrain.training_losses(run_dir)
        from bert_tf import file_io

        file_io.write_text(curve_file, json.dumps(curve) + "\n")
    plot_file = FLAGS.plot_file or path("from_scratch_mlm.png")
    from_scratch_plot.draw_curves(plot_file, curve["heldout"], curve["training"])
    return curve


def curve_table(curve):
    runs = [run for run in RUNS if run in curve["heldout"]]
    lines = [
        "| step | " + " | ".join(f"{r} held-out MLM loss | {r} MLM accuracy" for r in runs) + " |",
        "|---" * (1 + 2 * len(runs)) + "|",
    ]
    by_step = {}
    for run in runs:
        for step, loss, accuracy in curve["heldout"][run]:
            by_step.setdefault(step, {})[run] = f"{loss:.3f} | {100 * accuracy:.2f}%"
    for step, cells in sorted(by_step.items()):
        lines.append(f"| {step} | " + " | ".join(cells.get(r, "- | -") for r in runs) + " |")
    return "\n".join(lines)


RUN_LABELS = {
    "static": "static masking",
    "dynamic": "dynamic masking",
    "dynamic-rt": "dynamic masking, + Rotten Tomatoes texts",
}


def model_labels():
    labels = {"random": "random init (no pretraining)", "tfidf_svm": "TF-IDF + LinearSVC"}
    for run in RUNS:
        for budget, share in (("half", 2), ("full", 1)):
            steps = run_steps(run) // share
            if run in TASK_ADAPTIVE:
                base, _ = TASK_ADAPTIVE[run]
                label = (
                    f"pretrained, {RUN_LABELS[base]}, {FLAGS.pretrain_steps} steps, then {steps} "
                    "on Rotten Tomatoes texts alone"
                )
            else:
                label = f"pretrained, {RUN_LABELS[run]}, {steps} steps"
            labels[f"{run}_{budget}"] = label
            labels[f"{run}_{budget}_freshpooler"] = f"{label}, pooler re-initialized"
    return labels


def finetuned_pairs(models):
    """The (set, model) pairs the finetune stage runs: every set for every model, but a
    task-adaptive run's encoder only on its own set."""
    return {
        (name, model)
        for name in from_scratch_finetune.FINETUNE_SETS
        for model in models
        if TASK_ADAPTIVE.get(model.split("_")[0], (None, name))[1] == name
    }


def learning_rates():
    return [float(rate) for rate in FLAGS.finetune_learning_rates]


def finetune_dir(learning_rate):
    """work_dir/finetune_<sizes>_lr<rate>_ep<epochs>: the split, runs and results of these settings."""
    sizes = "_".join(
        "-".join(getattr(FLAGS, f"{name}_sizes")) for name in from_scratch_finetune.FINETUNE_SETS
    )
    return path(f"finetune_{sizes}_lr{learning_rate:g}_ep{FLAGS.finetune_epochs:g}")


def finetune_stage():
    """Fine-tunes --models on both sets (finetuned_pairs), every seed at every rate (rate by rate)."""
    seeds = [int(seed) for seed in FLAGS.seeds]
    model_dirs = {model: model_dir(model) for model in FLAGS.models}
    for rate in learning_rates():
        from_scratch_finetune.finetune_all(
            finetune_dir(rate), model_dirs, seeds, rate, FLAGS.finetune_epochs,
            finetuned_pairs(model_dirs),
        )  # fmt: skip
    if not FLAGS.more_seeds:
        return
    chosen = from_scratch_finetune.choose_on_dev(results_by_rate())
    for rate in learning_rates():
        pairs = {
            (name, model)
            for (name, model), (chosen_rate, _) in chosen.items()
            if chosen_rate == rate and model in model_dirs
        }
        if not pairs:
            continue
        from_scratch_finetune.finetune_all(
            finetune_dir(rate), model_dirs, [int(seed) for seed in FLAGS.more_seeds], rate,
            FLAGS.finetune_epochs, pairs,
        )  # fmt: skip


def results_by_rate():
    return {
        rate: from_scratch_finetune.read_results(finetune_dir(rate)) for rate in learning_rates()
    }


def report(curve):
    """The tables of whatever has run."""
    by_rate = results_by_rate()
    chosen = from_scratch_finetune.choose_on_dev(by_rate)
    results = {key: rows for key, (_, rows) in chosen.items()}
    labels = model_labels()
    models = [m for m in labels if any(key[1] == m for key in results)]
    pretrained = [m for m in models if m not in ("random", "tfidf_svm")]
    if curve:
        count = from_scratch_pretrain.count_records(path("records", "heldout.tfrecord"))
        print(f"\nHeld-out masked-LM loss and accuracy ({count} instances, fixed masks):\n")
        print(curve_table(curve))
    print("\nDev and test accuracy (percent), mean ± SE over fine-tuning seeds, by rate:\n")
    print(from_scratch_finetune.rate_table(by_rate, models, labels))
    print("\nTest accuracy seed by seed (percent):\n")
    print("\n".join(from_scratch_finetune.seed_lines(by_rate, models, labels)))
    print(
        "\nTest accuracy at each model's and set's rate of the best mean dev accuracy, mean ± SE "
        "over fine-tuning seeds (percent):\n"
    )
    print(from_scratch_finetune.accuracy_table(results, models, labels, chosen))
    for baseline, title in (
        ("random", "Target: pretrained beats random init by >= 2 SE of the difference"),
        ("tfidf_svm", "Against the bag of words (test accuracy)"),
    ):
        print(f"\n{title}:\n")
        lines = from_scratch_finetune.target_lines(
            results, pretrained, baseline, labels, finetuned_pairs(pretrained)
        )
        print("\n".join(lines))


def main(argv):
    del argv
    check_flags()
    logging.set_verbosity(logging.INFO)
    threads = machine.set_threads(FLAGS.threads)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    print(machine.header(), flush=True)
    print(machine.threads_line(threads), flush=True)
    summary = data_stage()
    print(json.dumps(summary), flush=True)
    if "pretrain" in FLAGS.stages:
        pretrain_stage()
    curve = curve_stage() if "curve" in FLAGS.stages else None
    if "finetune" in FLAGS.stages:
        finetune_stage()
    if "report" in FLAGS.stages:
        if curve is None and os.path.exists(path("curve.json")):
            with open(path("curve.json"), encoding="utf-8") as reader:
                curve = json.load(reader)
        report(curve)
    print(machine.load_line(), flush=True)


if __name__ == "__main__":
    app.run(main)
