"""The main job end to end on sample_data/: pretrain, fine-tune, export, serve (what `make demo` runs).

Each step is one of the repo's scripts, run as a subprocess with the exact command printed first, its
output shown as it comes and kept in <output_dir>/logs/<step>.log:

  1. pretraining_data   create_pretraining_data.py on sample_data/sample_text.txt (six chapters of Emma)
  2. pretraining        run_pretraining.py of sample_data/bert_config_tiny.json, with --do_eval
  3. finetune_pretrained  run_classifier.py on sample_data/word_order/, from step 2's checkpoint,
                        one run per fine-tuning seed (a sweep over --seed; best/ is the best on dev)
  4. finetune_random    the same command without --init_checkpoint: random weights
  5. export             export_saved_model.py of step 3's best/: a SavedModel serving raw text
  6. serve              scripts/classify_with_export.py, a process importing only tensorflow and
                        tensorflow_text, classifies raw sentences with the export

then a summary: each step, its wall time, its key figure and where its outputs are, and the comparison:
both steps' mean dev accuracy over the seeds, their difference and its standard error over seeds, and
"pretraining helped" only when the difference is more than twice that standard error.

A finished step leaves <output_dir>/.demo/<step>.json (its command and time); a re-run reuses the step
while that command is unchanged and its outputs exist, and redoes the steps after one it redid.
`--force=STEP[,STEP]` (or FORCE=STEP, FORCE=1 for all) redoes steps: their outputs are removed first.
An interrupted pretraining or fine-tuning run continues from its last checkpoint when run again.
The scripts run with TF_CPP_MIN_LOG_LEVEL=2 (unless set), which hides TensorFlow's C++ start-up notices.

    python scripts/demo.py                          # the demo's size, into demo_output/
    python scripts/demo.py --size=ci --output_dir=/tmp/demo   # the CI test's size (~1 minute)
    python scripts/demo.py --rest_reply             # the README's TF Serving reply, from the export
"""

import argparse
import dataclasses
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_DIR = os.path.join(REPO_DIR, "sample_data")
TASK_DIR = os.path.join(SAMPLE_DIR, "word_order")

# Sentences from Pride and Prejudice and Persuasion, novels in none of the shipped data: as Austen wrote
# them and with their words shuffled by scripts/make_sample_tasks.py's shuffle_words.
SERVE_EXAMPLES = (
    (
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
        "must be in want of a wife.",
        "original",
    ),
    (
        "They were gradually acquainted, and when acquainted, rapidly and deeply in love.",
        "original",
    ),
    ("He had always been lucky; he knew he should be so still.", "original"),
    (
        "acknowledged in a fortune a good, wife of that want a must single It man possession, truth "
        "be a is of universally in.",
        "shuffled",
    ),
    (
        "and gradually love when, rapidly were and, acquainted They deeply in acquainted.",
        "shuffled",
    ),
    ("he knew been be he; so He still lucky had should always.", "shuffled"),
)

# The README's TF Serving request: a sentence of Pride and Prejudice as written and shuffled.
REST_REQUEST = {"instances": [{"text_a": SERVE_EXAMPLES[i][0]} for i in (1, 4)]}

# Answers a REST request body with an export's serving_default in a process that imports only
# TensorFlow, and prints TF Serving's reply in row format (one object per instance, the outputs by
# name), probabilities rounded to 6 digits.
_REST_REPLY = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the ops of the in-graph tokenizer)
rows = json.loads(sys.argv[2])["instances"]
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
outputs = serve(**{name: tf.constant([row[name] for row in rows]) for name in rows[0]})
predictions = [
    json.dumps({"label": label.decode(), "probabilities": [round(float(p), 6) for p in row]})
    for label, row in zip(outputs["label"].numpy(), outputs["probabilities"].numpy())
]
print('{"predictions": [' + (",\\n" + " " * 17).join(predictions) + "]}")
"""


@dataclasses.dataclass(frozen=True)
class Size:
    """How big each step is; `demo` is what `make demo` runs, `ci` what tests/test_demo.py runs."""

    dupe_factor: int
    pretraining_steps: int
    pretraining_batch: int
    # None: all of sample_data/word_order/; else the first N lines of each of its files.
    classifier_examples: int | None
    classifier_epochs: float
    classifier_learning_rate: float
    classifier_batch: int


SIZES = {
    "demo": Size(
        dupe_factor=10,
        pretraining_steps=1000,
        pretraining_batch=32,
        classifier_examples=None,
        # The loss sits at ln 2 until the model becomes sensitive to word order (both classes hold
        # the same words): after 400 to 800 steps for seeds 1-3, so 8 epochs (750 steps) ended
        # before most seeds got there, and 20 (1875) let all three (README's demo section).
        classifier_epochs=20,
        classifier_learning_rate=3e-4,
        classifier_batch=32,
    ),
    "ci": Size(
        dupe_factor=1,
        pretraining_steps=20,
        pretraining_batch=16,
        classifier_examples=64,
        # Enough for the random-weights runs to fit their 64 training rows, which
        # tests/test_demo.py classifies with an export of them (their real labels).
        classifier_epochs=40,
        classifier_learning_rate=3e-4,
        classifier_batch=32,
    ),
}
# Fine-tuning's seeds (weights of the new head, dropout, order): each fine-tuning step trains one
# run per seed (a run_classifier.py sweep over --seed), and the summary compares their means.
FINETUNING_SEEDS = (1, 2, 3)
MAX_SEQ_LENGTH = 64  # pretraining and fine-tuning: the task's sentences are at most 25 words


@dataclasses.dataclass
class Step:
    """One step: its command, the files that show it finished, and how to read its key figure."""

    name: str
    title: str
    command: list
    outputs: list  # paths (relative to the output dir) that exist once the step has finished
    owned: list  # paths (relative to the output dir) the step writes: removed before it runs again
    after: tuple = ()  # steps whose outputs this one reads
    resumable: bool = False  # an interrupted run continues from its checkpoints when run again
    figure: object = None  # callable(demo) -> str, the summary's key figure


class Demo:
    """The steps of one size in one output folder, and running them."""

    def __init__(
        self, output_dir, size, seed=12345, finetuning_seeds=FINETUNING_SEEDS, python=sys.executable
    ):
        if len(set(finetuning_seeds)) < 2:
            raise ValueError(
                f"fine-tuning seeds {list(finetuning_seeds)}: the comparison needs at least two "
                "different seeds (its standard error is over seeds)"
            )
        self.output_dir = os.path.abspath(output_dir)
        self.size = size
        self.seed = seed
        self.finetuning_seeds = tuple(finetuning_seeds)
        self.python = python
        self.steps = self._steps()

    # ------------------------------------------------------------------ paths and commands

    def path(self, *parts):
        return os.path.join(self.output_dir, *parts)

    def shown(self, path):
        """`path` as the printed commands give it: relative to the repo when inside it."""
        relative = os.path.relpath(path, REPO_DIR)
        return path if relative.startswith("..") else relative

    def _python_command(self, script, **flags):
        args = [self.shown(self.python), script]
        for name, value in flags.items():
            args.append(f"--{name}" if value is True else f"--{name}={value}")
        return args

    def data_dir(self):
        """sample_data/word_order/, or for a size with fewer examples a cut copy in the output dir."""
        if self.size.classifier_examples is None:
            return TASK_DIR
        return self.path("word_order")

    def _classifier_command(self, output_dir, init_checkpoint=None):
        flags = dict(
            task_name="tsv", data_dir=self.shown(self.data_dir()), has_header=True,
            text_a_column="sentence", label_column="label",
            bert_config_file="sample_data/bert_config_tiny.json",
            vocab_file="sample_data/vocab.txt", output_dir=self.shown(output_dir),
        )  # fmt: skip
        if init_checkpoint:
            flags["init_checkpoint"] = self.shown(init_checkpoint)
        # Several seeds make a sweep: one sub-folder per seed, and best/ (the best on dev).
        flags.update(
            do_train=True, do_eval=True, do_predict=True, max_seq_length=MAX_SEQ_LENGTH,
            train_batch_size=self.size.classifier_batch, eval_batch_size=64, predict_batch_size=64,
            learning_rate=self.size.classifier_learning_rate,
            num_train_epochs=self.size.classifier_epochs,
            seed=",".join(str(seed) for seed in self.finetuning_seeds), log_steps=50,
            iterations_per_loop=50, save_checkpoints_steps=1000,
        )  # fmt: skip
        return self._python_command("run_classifier.py", **flags)

    def _steps(self):
        size = self.size
        records = self.path("sample.tfrecord")
        pretraining = self.path("pretraining")
        finetuned = self.path("classifier_pretrained")
        random_init = self.path("classifier_random")
        export_dir = self.path("export")
        steps = [
            Step(
                "pretraining_data",
                "create_pretraining_data.py: sample_text.txt -> masked-LM + next-sentence TFRecords",
                self._python_command(
                    "create_pretraining_data.py",
                    input_file="sample_data/sample_text.txt",
                    output_file=self.shown(records),
                    vocab_file="sample_data/vocab.txt",
                    do_lower_case=True,
                    max_seq_length=MAX_SEQ_LENGTH,
                    max_predictions_per_seq=10,
                    dupe_factor=size.dupe_factor,
                    random_seed=self.seed,
                ),
                outputs=["sample.tfrecord"],
                owned=["sample.tfrecord"],
                figure=lambda demo: f"{demo.instances()} instances",
            ),
            Step(
                "pretraining",
                "run_pretraining.py: a 2-layer BERT pretrained from scratch, then evaluated",
                self._python_command(
                    "run_pretraining.py",
                    bert_config_file="sample_data/bert_config_tiny.json",
                    input_file=self.shown(records),
                    output_dir=self.shown(pretraining),
                    do_train=True,
                    do_eval=True,
                    max_seq_length=MAX_SEQ_LENGTH,
                    max_predictions_per_seq=10,
                    train_batch_size=size.pretraining_batch,
                    eval_batch_size=64,
                    learning_rate=1e-3,
                    num_train_steps=size.pretraining_steps,
                    num_warmup_steps=max(1, size.pretraining_steps // 10),
                    save_checkpoints_steps=max(1, size.pretraining_steps // 2),
                    iterations_per_loop=50,
                    log_steps=50,
                    max_eval_steps=20,
                    seed=self.seed,
                ),
                outputs=[
                    "pretraining/bert_model.ckpt.index",
                    "pretraining/bert_config.json",
                    "pretraining/eval_results.txt",
                ],
                owned=["pretraining"],
                after=("pretraining_data",),
                resumable=True,
                figure=lambda demo: demo.pretraining_figure(),
            ),
            Step(
                "finetune_pretrained",
                "run_classifier.py on word_order/, initialised from the pretrained checkpoint",
                self._classifier_command(finetuned, os.path.join(pretraining, "bert_model.ckpt")),
                outputs=[
                    "classifier_pretrained/sweep_results.tsv",
                    "classifier_pretrained/best/eval_results.txt",
                    "classifier_pretrained/best/task.json",
                ],
                owned=["classifier_pretrained"],
                after=("pretraining",),
                resumable=True,
                figure=lambda demo: demo.finetuning_figure("classifier_pretrained"),
            ),
            Step(
                "finetune_random",
                "run_classifier.py, the same command from random weights (no --init_checkpoint)",
                self._classifier_command(random_init),
                outputs=[
                    "classifier_random/sweep_results.tsv",
                    "classifier_random/best/eval_results.txt",
                ],
                owned=["classifier_random"],
                resumable=True,
                figure=lambda demo: demo.finetuning_figure("classifier_random"),
            ),
            Step(
                "export",
                "export_saved_model.py: the best seed's classifier as a SavedModel serving raw text",
                self._python_command(
                    "export_saved_model.py",
                    init_checkpoint=self.shown(os.path.join(finetuned, "best")),
                    export_dir=self.shown(export_dir),
                    vocab_file="sample_data/vocab.txt",
                ),
                outputs=["export"],
                owned=["export"],
                after=("finetune_pretrained",),
                figure=lambda demo: f"version {os.path.basename(demo.export_version())}",
            ),
            Step(
                "serve",
                "a process importing only tensorflow + tensorflow_text classifies raw sentences",
                [
                    self.shown(self.python),
                    "scripts/classify_with_export.py",
                    f"--export_dir={self.shown(os.path.join(export_dir, '1'))}",
                    f"--output_file={self.shown(self.path('serve', 'predictions.json'))}",
                    *(text for text, _ in SERVE_EXAMPLES),
                ],
                outputs=["serve/predictions.json"],
                owned=["serve"],
                after=("export",),
                figure=lambda demo: demo.serve_figure(),
            ),
        ]
        return steps

    # ------------------------------------------------------------------ key figures

    def _read_results(self, *parts):
        with open(self.path(*parts), encoding="utf-8") as f:
            return dict(line.strip().split(" = ", 1) for line in f if " = " in line)

    def instances(self):
        """Instances create_pretraining_data.py wrote, from its log's summary line."""
        with open(self.path("logs", "pretraining_data.log"), encoding="utf-8") as f:
            for line in f:
                if "Wrote " in line and " instances from " in line:
                    return int(line.split("Wrote ", 1)[1].split()[0])
        return "?"

    def pretraining_figure(self):
        results = self._read_results("pretraining", "eval_results.txt")
        return (
            f"masked-LM accuracy {float(results['masked_lm_accuracy']):.3f}, "
            f"next-sentence accuracy {float(results['next_sentence_accuracy']):.3f}"
        )

    def seed_accuracies(self, run):
        """[dev accuracy of each fine-tuning seed], in seed order, from the run's own sub-folder
        (the sweep names it after its settings; its sweep_run.json gives the seed)."""
        folders = {}
        for name in sorted(os.listdir(self.path(run))):
            sweep_run = self.path(run, name, "sweep_run.json")
            if os.path.exists(sweep_run):
                with open(sweep_run, encoding="utf-8") as f:
                    folders[json.load(f)["settings"]["seed"]] = name
        missing = [seed for seed in self.finetuning_seeds if seed not in folders]
        if missing:
            raise ValueError(f"{self.shown(self.path(run))}: no finished run of seed(s) {missing}")
        return [
            float(self._read_results(run, folders[seed], "eval_results.txt")["eval_accuracy"])
            for seed in self.finetuning_seeds
        ]

    def finetuning_figure(self, run):
        accuracies = ", ".join(f"{accuracy:.3f}" for accuracy in self.seed_accuracies(run))
        return f"dev accuracy {accuracies} (seeds {self.seed_list()})"

    def export_version(self):
        versions = [name for name in os.listdir(self.path("export")) if name.isdigit()]
        return self.path("export", max(versions, key=int))

    def serve_figure(self):
        with open(self.path("serve", "predictions.json"), encoding="utf-8") as f:
            predictions = json.load(f)["predictions"]
        expected = dict(SERVE_EXAMPLES)
        right = sum(p["label"] == expected.get(p["text_a"]) for p in predictions)
        return f"{len(predictions)} raw sentences, {right} labelled as expected"

    def rest_reply(self):
        """TF Serving's reply to REST_REQUEST from the latest export, as the README shows it."""
        if not os.path.isdir(self.path("export")):
            raise ValueError(f"no export in {self.shown(self.output_dir)}: run the demo first")
        result = subprocess.run(
            [self.python, "-c", _REST_REPLY, self.export_version(), json.dumps(REST_REQUEST)],
            cwd="/", env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True,
            text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise StepFailed(f"answering the REST request failed:\n{result.stderr[-3000:]}")
        return result.stdout.strip()

    def comparison(self):
        """The fine-tuning result in words: the mean dev accuracies over seeds, their difference,
        its standard error over seeds and what they show."""
        pretrained = self.seed_accuracies("classifier_pretrained")
        random_init = self.seed_accuracies("classifier_random")
        with open(os.path.join(self.data_dir(), "dev.tsv"), encoding="utf-8") as f:
            num_dev = sum(1 for _ in f) - 1
        difference = statistics.fmean(pretrained) - statistics.fmean(random_init)
        # Two independent groups of runs: the variance of each mean is its seeds' over their count.
        stderr = math.sqrt(
            statistics.variance(pretrained) / len(pretrained)
            + statistics.variance(random_init) / len(random_init)
        )
        return (
            f"dev accuracy on {num_dev} examples, mean over seeds {self.seed_list()}: "
            f"{statistics.fmean(pretrained):.3f} from pretrained weights, "
            f"{statistics.fmean(random_init):.3f} from random weights, difference "
            f"{difference:+.3f} (standard error over seeds {stderr:.3f}): "
            f"{verdict(difference, stderr)}"
        )

    def seed_list(self):
        return ", ".join(str(seed) for seed in self.finetuning_seeds)

    # ------------------------------------------------------------------ running

    def _stamp_path(self, step):
        return self.path(".demo", f"{step.name}.json")

    def _stamp(self, step):
        """The step's stamp, {"command", "finished", ...}, if one was written for its current command."""
        try:
            with open(self._stamp_path(step), encoding="utf-8") as f:
                stamp = json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return stamp if stamp.get("command") == step.command else None

    def finished(self, step):
        """The stamp of a finished step whose command is unchanged and whose outputs exist, or None."""
        stamp = self._stamp(step)
        if not stamp or not stamp.get("finished"):
            return None
        if not all(os.path.exists(self.path(output)) for output in step.outputs):
            return None
        return stamp

    def prepare(self):
        """A cut copy of the task for sizes with fewer examples (first N lines of each split)."""
        if self.size.classifier_examples is None:
            return
        os.makedirs(self.data_dir(), exist_ok=True)
        for name in ("train.tsv", "dev.tsv", "test.tsv"):
            with open(os.path.join(TASK_DIR, name), encoding="utf-8", newline="") as f:
                lines = [
                    line
                    for _, line in zip(range(self.size.classifier_examples + 1), f, strict=False)
                ]
            text = "".join(lines)
            target = os.path.join(self.data_dir(), name)
            if os.path.exists(target):
                with open(target, encoding="utf-8", newline="") as f:
                    if f.read() == text:
                        continue
            with open(target, "w", encoding="utf-8", newline="") as f:
                f.write(text)

    def _write_stamp(self, step, **values):
        os.makedirs(self.path(".demo"), exist_ok=True)
        with open(self._stamp_path(step), "w", encoding="utf-8") as f:
            json.dump({"command": step.command, **values}, f, indent=1)

    def interrupted(self, step):
        """Whether an earlier run of this very command started and did not finish."""
        stamp = self._stamp(step)
        return stamp is not None and stamp.get("finished") is False

    def run_step(self, step, number, resume=False):
        """Runs one step's command, streaming its output to the console and its log; returns seconds.

        The step's outputs are removed first, unless `resume`: then the script continues the
        interrupted run from the checkpoints it left (run_pretraining.py and run_classifier.py do).
        """
        if resume:
            print(f"   resuming the interrupted run in {self.shown(self.path(step.owned[0]))}")
        else:
            for owned in step.owned:
                target = self.path(owned)
                if os.path.isdir(target):
                    shutil.rmtree(target)
                elif os.path.exists(target):
                    os.remove(target)
        self._write_stamp(step, finished=False)
        os.makedirs(self.path("logs"), exist_ok=True)
        log_path = self.path("logs", f"{step.name}.log")
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up notices
        env["PYTHONUNBUFFERED"] = "1"
        start = time.monotonic()
        with open(log_path, "a" if resume else "w", encoding="utf-8") as log:
            process = subprocess.Popen(
                [self.python, *step.command[1:]],
                cwd=REPO_DIR,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
            for line in process.stdout:
                sys.stdout.write(f"  | {line}")
                sys.stdout.flush()
                log.write(line)
            returncode = process.wait()
        seconds = time.monotonic() - start
        if returncode != 0:
            raise StepFailed(
                f"step {number} ({step.name}) failed with exit status {returncode} after "
                f"{seconds:.0f} s; its output is in {self.shown(log_path)}"
            )
        self._write_stamp(step, finished=True, seconds=round(seconds, 1))
        return seconds

    def run(self, force=()):
        """Runs (or reuses) every step, then prints and writes the summary; returns its rows."""
        unknown = set(force) - {step.name for step in self.steps} - {"all"}
        if unknown:
            raise ValueError(f"--force: no step {sorted(unknown)}; steps: {self.step_names()}")
        os.makedirs(self.output_dir, exist_ok=True)
        self.prepare()
        redone, rows = set(), []
        total_start = time.monotonic()
        for number, step in enumerate(self.steps, 1):
            header = f"[{number}/{len(self.steps)}] {step.name}: {step.title}"
            stamp = self.finished(step)
            stale = redone.intersection(step.after)
            if stamp and not stale and "all" not in force and step.name not in force:
                print(f"\n== {header}\n   reused (finished earlier in {stamp['seconds']:.0f} s; "
                      f"FORCE={step.name} redoes it)\n   $ {shlex.join(step.command)}", flush=True)  # fmt: skip
                seconds, how = stamp["seconds"], "reused"
            else:
                print(f"\n== {header}\n   $ {shlex.join(step.command)}", flush=True)
                forced = "all" in force or step.name in force
                resume = step.resumable and not forced and not stale and self.interrupted(step)
                seconds, how = self.run_step(step, number, resume), "ran"
                redone.add(step.name)
            figure = step.figure(self) if step.figure else ""
            print(f"   -> {figure} ({how}, {seconds:.0f} s)", flush=True)
            rows.append((step.name, how, seconds, figure, self.shown(self.path(step.owned[0]))))
        self.summarize(rows, time.monotonic() - total_start)
        return rows

    def step_names(self):
        return [step.name for step in self.steps]

    def summarize(self, rows, wall_seconds):
        """Prints the summary table and writes it to <output_dir>/summary.md."""
        header = ("step", "wall time", "key figure", "outputs")
        table = [header] + [
            (name, f"{seconds:.0f} s" + (" (reused)" if how == "reused" else ""), figure, outputs)
            for name, how, seconds, figure, outputs in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            for row in table
        ]
        lines.insert(1, "  ".join("-" * width for width in widths))
        comparison = self.comparison()
        total = f"this run: {wall_seconds:.0f} s; the steps' own times add up to "
        total += f"{sum(row[2] for row in rows):.0f} s"
        # One line to paste as a record (bench/results/readme_figures.md): the result, the time, where and when.
        run = "make demo" if self.size is SIZES["demo"] else "scripts/demo.py (not the demo's size)"
        paste = f"{run}: {comparison.split(': ')[1]}; {wall_seconds:.0f} s; {machine_stamp()}"
        print(
            "\n== summary\n" + "\n".join(lines) + f"\n\n{comparison}\n{total}\n{paste}",
            flush=True,
        )
        markdown = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        markdown += ["| " + " | ".join(row) + " |" for row in table[1:]]
        with open(self.path("summary.md"), "w", encoding="utf-8") as f:
            f.write("\n".join(markdown) + f"\n\n{comparison}\n\n{total}\n\n{paste}\n")


def machine_stamp():
    """Where and when a run ran, for a pasted record: date, commit, CPU, cores, load, Python."""
    commit = subprocess.run(
        ["git", "-C", REPO_DIR, "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    cpu, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
        cpu = re.search(r"model name\s*:\s*(.*)", info).group(1).strip()
        flags = " ".join(f for f in ("avx512_bf16", "amx_bf16") if f" {f}" in info)
    except (OSError, AttributeError):
        pass  # not Linux: platform's name stands
    try:
        load = f"load {os.getloadavg()[0]:.1f}"
    except OSError:
        load = "load unknown"
    return (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit or 'unknown'}, "
        f"{cpu}{f' ({flags})' if flags else ''}, {os.cpu_count()} cores, {load}, "
        f"Python {platform.python_version()}"
    )


def verdict(difference, stderr):
    """What a difference of mean accuracies (pretrained - random) shows, given its standard error."""
    if difference > 2 * stderr:
        return "pretraining helped (the difference is more than twice its standard error)"
    if difference < -2 * stderr:
        return "random weights did better (by more than twice the standard error)"
    return (
        "this does not show that pretraining helped "
        "(the difference is within twice its standard error)"
    )


class StepFailed(RuntimeError):
    """A step's command exited with an error."""


def parse_force(values):
    """--force and FORCE values ("1", "all", "a,b") -> a set of step names ("all" for every step)."""
    names = set()
    for value in values:
        for name in (value or "").split(","):
            name = name.strip()
            if name in ("1", "all", "true", "yes"):
                names.add("all")
            elif name and name not in ("0", "false", "no"):
                names.add(name)
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output_dir", default=os.path.join(REPO_DIR, "demo_output"))
    parser.add_argument("--size", choices=sorted(SIZES), default="demo")
    parser.add_argument(
        "--seed",
        type=int,
        default=12345,
        help="seed of the pretraining data and of pretraining (initialization, masks, order)",
    )
    parser.add_argument(
        "--finetuning_seeds",
        default=",".join(str(seed) for seed in FINETUNING_SEEDS),
        help="comma-separated seeds of fine-tuning, at least two: both fine-tuning steps train "
        "one run per seed, and the summary's standard error is over them",
    )
    parser.add_argument(
        "--force",
        action="append",
        default=[],
        help="redo these steps (comma-separated, or 'all'); the FORCE variable does the same",
    )
    parser.add_argument(
        "--rest_reply",
        action="store_true",
        help="run nothing: print TF Serving's reply to the README's REST request from the export "
        "in --output_dir (a process importing only TensorFlow answers it)",
    )
    args = parser.parse_args(argv)
    try:
        seeds = [int(seed) for seed in args.finetuning_seeds.split(",") if seed.strip()]
    except ValueError:
        parser.error(f"--finetuning_seeds={args.finetuning_seeds}: expected integers, e.g. 1,2,3")
    try:
        demo = Demo(args.output_dir, SIZES[args.size], seed=args.seed, finetuning_seeds=seeds)
        if args.rest_reply:
            print(demo.rest_reply())
            return 0
        demo.run(parse_force([*args.force, os.environ.get("FORCE", "")]))
    except (StepFailed, ValueError) as error:
        print(f"\nerror: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
