"""scripts/demo.py (what `make demo` runs) at its CI size, and the task data it fine-tunes on.

One run of the whole pipeline (pretraining data -> pretraining -> two fine-tunings -> export -> serve)
with a few steps and examples, then a re-run that reuses it and one that redoes a step.
"""

import csv
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import (
    PROBABILITY_ATOL,
    REPO_DIR,
    SAMPLE_DIR,
    saved_model_cli_outputs,
    start_saved_model_cli_run,
)

DEMO = REPO_DIR / "scripts" / "demo.py"
TASK_DIR = SAMPLE_DIR / "word_order"
STEPS = [
    "pretraining_data",
    "pretraining",
    "finetune_pretrained",
    "finetune_random",
    "export",
    "serve",
]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
ENV.pop("FORCE", None)


def _demo(output_dir, *args, env=ENV):
    """Runs the driver at the CI size; returns its stdout (fails the test with its output if it fails)."""
    result = subprocess.run(
        [sys.executable, str(DEMO), "--size=ci", f"--output_dir={output_dir}", *args],
        cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout


def _summary_rows(stdout):
    """{step: (wall time, key figure)} from the summary table the driver prints last."""
    lines = stdout.split("== summary\n", 1)[1].splitlines()
    rows = {}
    for line in lines[2:]:
        if not line.strip():
            break
        cells = [cell for cell in line.split("  ") if cell.strip()]
        rows[cells[0].strip()] = tuple(cell.strip() for cell in cells[1:])
    return rows


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The first run, in a fresh folder: {"dir", "stdout"}."""
    output_dir = tmp_path_factory.mktemp("demo")
    return {"dir": output_dir, "stdout": _demo(output_dir)}


def _read_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


SEEDS = (1, 2, 3)  # the demo's default fine-tuning seeds


def _seed_folder(out, run, seed):
    """The sub-folder run_classifier.py's sweep gave one seed's run: its name ends in _seed<N>."""
    (folder,) = (out / run).glob(f"*_seed{seed}")
    return folder


def _seed_accuracies(out, run):
    return [
        float(_read_results(_seed_folder(out, run, seed) / "eval_results.txt")["eval_accuracy"])
        for seed in SEEDS
    ]


def test_every_step_leaves_its_outputs(demo):
    out = demo["dir"]
    assert (out / "sample.tfrecord").stat().st_size > 0
    pretraining = _read_results(out / "pretraining" / "eval_results.txt")
    assert {"masked_lm_accuracy", "next_sentence_accuracy"} <= set(pretraining)
    for name in ("bert_model.ckpt.index", "bert_config.json"):
        assert (out / "pretraining" / name).exists()
    dev_rows = len(_dev_rows(out))
    for run in ("classifier_pretrained", "classifier_random"):
        for accuracy in _seed_accuracies(out, run):
            # A count of right answers over the dev rows it read (checked against the export below).
            assert accuracy * dev_rows == pytest.approx(round(accuracy * dev_rows), abs=1e-6)
        assert (out / run / "best" / "labels.txt").read_text() == "original\nshuffled\n"
        assert len((out / run / "best" / "test_results.tsv").read_text().splitlines()) == 64
        assert len((out / run / "sweep_results.tsv").read_text().splitlines()) == 2  # one setting
    assert (out / "export" / "1" / "saved_model.pb").exists()
    assert (out / "export" / "1" / "assets" / "labels.txt").read_text() == "original\nshuffled\n"
    for step in STEPS:
        assert (out / "logs" / f"{step}.log").stat().st_size > 0
        assert (out / ".demo" / f"{step}.json").exists()


def test_pretraining_predicts_masked_words_far_better_than_random_weights(demo):
    # At this size fine-tuning does not yet tell the word orders apart, from pretrained weights or
    # not (dev accuracy 0.5 and below); what pretraining learned shows in its own eval. Random weights score ~ln(V) = 10.3 nats and accuracy ~1/V = 3e-5; 20 steps learn the
    # commonest words (measured 7.14 nats, accuracy 0.061 over at least 1280 masked words, so a
    # standard error under 0.007).
    results = _read_results(demo["dir"] / "pretraining" / "eval_results.txt")
    vocab_size = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())["vocab_size"]
    assert float(results["masked_lm_loss"]) < math.log(vocab_size) - 2
    assert float(results["masked_lm_accuracy"]) > 0.03


def test_the_pretrained_run_starts_from_the_pretraining_checkpoint_and_the_other_does_not(demo):
    log = (demo["dir"] / "logs" / "finetune_pretrained.log").read_text()
    prefix = demo["dir"] / "pretraining" / "bert_model.ckpt"
    assert (
        f"Initialized from {prefix}: restored the encoder; starts new: the classifier head" in log
    )
    commands = {
        step: json.loads((demo["dir"] / ".demo" / f"{step}.json").read_text())["command"]
        for step in ("finetune_pretrained", "finetune_random")
    }
    pretrained = [arg for arg in commands["finetune_pretrained"] if "--init_checkpoint" not in arg]
    assert [arg.replace("classifier_pretrained", "classifier_random") for arg in pretrained] == (
        commands["finetune_random"]
    )


def test_each_step_prints_its_command_and_its_progress(demo):
    stdout = demo["stdout"]
    for number, step in enumerate(STEPS, 1):
        assert f"== [{number}/{len(STEPS)}] {step}: " in stdout
    scripts = [
        "create_pretraining_data.py",
        "run_pretraining.py",
        "run_classifier.py",
        "export_saved_model.py",
        "scripts/classify_with_export.py",
    ]
    commands = [line for line in stdout.splitlines() if line.startswith("   $ ")]
    assert len(commands) == len(STEPS)
    for script in scripts:
        assert any(f" {script} " in command for command in commands), script
    assert "step 20/20" in stdout  # run_pretraining.py's progress line, streamed as it ran


def test_the_summary_gives_each_step_its_time_figure_and_outputs(demo):
    rows = _summary_rows(demo["stdout"])
    assert list(rows) == STEPS
    for step, (wall_time, figure, outputs) in rows.items():
        assert wall_time.endswith(" s"), (step, wall_time)
        assert figure and outputs.startswith(str(demo["dir"])), (step, figure, outputs)
    assert "masked-LM accuracy" in rows["pretraining"][1]
    assert rows["finetune_pretrained"][1].startswith("dev accuracy ")
    assert "from pretrained weights" in demo["stdout"] and "from random weights" in demo["stdout"]
    table = [
        line for line in (demo["dir"] / "summary.md").read_text().splitlines() if line[:2] == "| "
    ]
    assert len(table) == 1 + len(STEPS)  # the header and one row per step


_COMPARISON = re.compile(
    r"dev accuracy on (?P<num_dev>\d+) examples, mean over seeds (?P<seeds>[\d, ]+): "
    r"(?P<pretrained>\d\.\d{3}) from pretrained weights, (?P<random>\d\.\d{3}) from random "
    r"weights, difference (?P<difference>[+-]\d\.\d{3}) \(standard error over seeds "
    r"(?P<stderr>\d\.\d{3})\): (?P<verdict>.+)"
)
_VERDICTS = {
    "helped": "pretraining helped (",
    "worse": "random weights did better (",
    "unclear": "this does not show that pretraining helped (",
}


def _expected_verdict(difference, stderr):
    if difference > 2 * stderr:
        return "helped"
    return "worse" if difference < -2 * stderr else "unclear"


def test_the_printed_verdict_follows_from_the_printed_means_which_are_the_runs_own(demo):
    (line,) = [line for line in demo["stdout"].splitlines() if line.startswith("dev accuracy on ")]
    printed = _COMPARISON.fullmatch(line).groupdict()
    assert (demo["dir"] / "summary.md").read_text().count(line) == 1
    assert int(printed["num_dev"]) == len(_dev_rows(demo["dir"]))
    assert printed["seeds"] == ", ".join(str(seed) for seed in SEEDS)
    # The runs' own results: each seed's eval_results.txt, as run_classifier.py wrote it.
    pretrained = np.array(_seed_accuracies(demo["dir"], "classifier_pretrained"))
    random_init = np.array(_seed_accuracies(demo["dir"], "classifier_random"))
    difference = pretrained.mean() - random_init.mean()
    stderr = math.sqrt(pretrained.var(ddof=1) / len(SEEDS) + random_init.var(ddof=1) / len(SEEDS))
    for name, value in (
        ("pretrained", pretrained.mean()), ("random", random_init.mean()),
        ("difference", difference), ("stderr", stderr),
    ):  # fmt: skip
        assert float(printed[name]) == pytest.approx(value, abs=0.0005 + 1e-9), name
    (verdict,) = [key for key, text in _VERDICTS.items() if printed["verdict"].startswith(text)]
    assert verdict == _expected_verdict(difference, stderr)
    # And from the printed figures themselves, unless their 3 digits cannot tell which side of
    # twice the standard error the difference is on.
    shown_difference, shown_stderr = float(printed["difference"]), float(printed["stderr"])
    if abs(abs(shown_difference) - 2 * shown_stderr) > 0.0015:
        assert verdict == _expected_verdict(shown_difference, shown_stderr)
    # Each seed's figure in the summary table is its own eval_results.txt's.
    rows = _summary_rows(demo["stdout"])
    for step, accuracies in (("finetune_pretrained", pretrained), ("finetune_random", random_init)):
        figures = ", ".join(f"{accuracy:.3f}" for accuracy in accuracies)
        assert rows[step][1] == f"dev accuracy {figures} (seeds 1, 2, 3)"


_SERVE = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    model = tf.saved_model.load(sys.argv[1])
    out = model.signatures["serving_default"](text_a=tf.constant(json.loads(sys.argv[2])))
    print(json.dumps({
        "modules": sorted(m for m in sys.modules if m.startswith("bert_tf")),
        "labels": [label.decode() for label in out["label"].numpy()],
        "probabilities": out["probabilities"].numpy().tolist(),
    }))
    """
)


def _dev_rows(out):
    """(sentence, label) of the dev.tsv the demo's classifiers evaluated (the CI size's cut copy)."""
    with open(out / "word_order" / "dev.tsv", encoding="utf-8", newline="") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)  # quotes are text here
        return [(row["sentence"], row["label"]) for row in rows]


def _predict(demo, texts, output_dir):
    """Probabilities [N, 2] of classifier_pretrained's best seed for `texts`: run_classifier.py
    --do_predict from its folder, as the README's tour does."""
    from bert_tf.tasks import run_script
    from bert_tf.tasks.classification.task import SPEC, ClassifierSettings

    data = output_dir / "data"
    data.mkdir(parents=True)
    (data / "test.tsv").write_text(
        "index\tsentence\n" + "".join(f"{i}\t{text}\n" for i, text in enumerate(texts))
    )
    run_script(SPEC,
        ClassifierSettings(
            task_name="tsv", data_dir=str(data), has_header=True, text_a_column="sentence",
            label_column="label", vocab_file=str(SAMPLE_DIR / "vocab.txt"),
            bert_config_file=str(SAMPLE_DIR / "bert_config_tiny.json"),
            max_seq_length=_load_script("demo").MAX_SEQ_LENGTH, do_predict=True,
            init_checkpoint=str(demo["dir"] / "classifier_pretrained" / "best"),
            output_dir=str(output_dir / "predicted"),
        )
    )  # fmt: skip
    rows = (output_dir / "predicted" / "test_results.tsv").read_text().splitlines()
    return np.array([[float(p) for p in row.split("\t")] for row in rows])


def test_the_fine_tuned_run_s_dev_accuracy_is_that_of_its_predictions(demo, tmp_path):
    # Its dev sentences predicted from its folder: their answers give the eval_accuracy it reported
    # (at this size the model is near a coin's toss, so this is about the bookkeeping, not the
    # quality: see the pretraining test above). Rows within float32 rounding of a tie may go
    # either way.
    rows = _dev_rows(demo["dir"])
    probabilities = _predict(demo, [sentence for sentence, _ in rows], tmp_path)
    golds = np.array([["original", "shuffled"].index(gold) for _, gold in rows])
    right = int((probabilities.argmax(axis=1) == golds).sum())
    ties = int((np.abs(probabilities[:, 0] - probabilities[:, 1]) <= 2 * PROBABILITY_ATOL).sum())
    reported = _read_results(demo["dir"] / "classifier_pretrained" / "best" / "eval_results.txt")
    assert abs(float(reported["eval_accuracy"]) * len(rows) - right) <= ties
    assert ties <= len(rows) // 10


def _train_rows(out):
    """(sentence, label) of the train.tsv the demo's classifiers trained on (the CI size's cut)."""
    with open(out / "word_order" / "train.tsv", encoding="utf-8", newline="") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [(row["sentence"], row["label"]) for row in rows]


def _serve(export_dir, texts):
    """{"modules", "labels", "probabilities"} of an export's answers to `texts`, from a process that
    imports only TensorFlow and tensorflow_text."""
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(export_dir), json.dumps(texts)],
        cwd="/", env=ENV, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_export_classifies_raw_sentences_in_a_tensorflow_only_process(demo, tmp_path):
    # At this size fine-tuning cannot learn word order (dev accuracy about 0.5), and the pretrained
    # runs learn only their 64 training rows' label counts (33 shuffled: they answer "shuffled" to
    # every sentence, measured p 0.5233). From random weights, though, the runs fit those rows:
    # each sentence is there in one order only (its twin is further down train.tsv), so its words
    # tell its label. So the random-weights run's best seed, exported as the demo exports its
    # pretrained one, is checked against the rows' real labels: answers it gives because of what
    # it learned.
    export = subprocess.run(
        [
            sys.executable, "export_saved_model.py",
            f"--init_checkpoint={demo['dir'] / 'classifier_random' / 'best'}",
            f"--export_dir={tmp_path / 'export'}", f"--vocab_file={SAMPLE_DIR / 'vocab.txt'}",
        ],
        cwd=REPO_DIR, env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert export.returncode == 0, export.stderr[-3000:]
    train = _train_rows(demo["dir"])
    served = _serve(tmp_path / "export" / "1", [text for text, _ in train])
    assert served["modules"] == []
    right = sum(label == gold for label, (_, gold) in zip(served["labels"], train, strict=True))
    # Measured: 64 of 64, each by a margin |p(original) - p(shuffled)| of at least 0.93 (chance
    # would be 32 +- 4).
    assert right >= 60, f"{right} of {len(train)} training sentences get their real label"


def test_the_demo_s_export_answers_as_its_run_and_its_serve_step(demo, tmp_path):
    labels = ["original", "shuffled"]
    texts = [text for text, _ in _load_script("demo").SERVE_EXAMPLES]
    served = _serve(demo["dir"] / "export" / "1", texts)
    assert served["modules"] == []
    # The fine-tuned run's own answers, predicted from its folder (not the export); none is near a
    # tie, where the two float32 computations could part (measured |p(original) - p(shuffled)|
    # 0.0464 to 0.0466 on these six).
    expected = _predict(demo, texts, tmp_path)
    assert (np.abs(expected[:, 0] - expected[:, 1]) > 2 * PROBABILITY_ATOL).all()
    assert served["labels"] == [labels[i] for i in expected.argmax(axis=1)]
    probabilities = np.array(served["probabilities"])
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=PROBABILITY_ATOL)
    # The serve step's file, from scripts/classify_with_export.py: the same answers, to 4 digits.
    written = json.loads((demo["dir"] / "serve" / "predictions.json").read_text())
    assert written["labels"] == labels
    assert [row["text_a"] for row in written["predictions"]] == texts
    assert [row["label"] for row in written["predictions"]] == served["labels"]
    np.testing.assert_allclose(
        [[row["probabilities"][label] for label in labels] for row in written["predictions"]],
        probabilities, rtol=0, atol=5e-5 + PROBABILITY_ATOL,
    )  # fmt: skip


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO_DIR / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_demo_rest():
    """The request body of the README's demo section (its curl -d) and the reply block after it
    (its text, as README shows it)."""
    readme = (REPO_DIR / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- SECTION:demo")[1].split("<!-- /SECTION:demo -->")[0]
    request = json.loads(re.search(r"-d '(.*?)'", section, re.DOTALL).group(1))
    replies = section.split("```json\n")[1:]
    assert replies, "the README's demo section shows no reply (`scripts/demo.py --rest_reply`)"
    return request, replies[0].split("```")[0].strip()


# What `python scripts/demo.py --rest_reply` printed after the full-size run README's demo section
# reports (`python scripts/demo.py`, 2026-11-28, commit 88ea195, its record in bench/results/readme_figures.md): the
# README's reply must be this text. The CI size cannot reproduce these figures (another model).
FULL_SIZE_REST_REPLY = """\
{"predictions": [{"label": "original", "probabilities": [0.829949, 0.170051]},
                 {"label": "shuffled", "probabilities": [0.050816, 0.949184]}]}"""


def _without_figures(text):
    """A reply's text with each number and label replaced by a mark: its layout alone."""
    return re.sub(r'"(original|shuffled)"', '"LABEL"', re.sub(r"\d+\.\d+(e-?\d+)?", "0.0", text))


def _json_value(value):
    """An output's values (nested lists) as TF Serving's JSON gives them: strings as UTF-8 text."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    return value


def _tf_serving_reply(outputs):
    """TF Serving's row-format reply to a request, from its signature's outputs {name: [B, ...]}:
    one object per example holding each output by name (a signature with one output: its values)."""
    columns = {name: _json_value(value.tolist()) for name, value in outputs.items()}
    if len(columns) == 1:
        return {"predictions": next(iter(columns.values()))}
    rows = zip(*columns.values(), strict=True)  # every output has the batch's B rows
    return {"predictions": [dict(zip(columns, row, strict=True)) for row in rows]}


def _json_shape(value):
    """A JSON value without its figures: objects' keys, lists' lengths, and each leaf's type."""
    if isinstance(value, dict):
        return {key: _json_shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_shape(item) for item in value]
    return "number" if isinstance(value, int | float) else type(value).__name__


@pytest.fixture(scope="module")
def rest_reply(demo):
    """What `scripts/demo.py --rest_reply` prints from the CI-size demo's export."""
    return _demo(demo["dir"], "--rest_reply").strip()


def test_the_readme_rest_example_is_the_request_rest_reply_answers_in_tf_serving_s_format(
    demo, rest_reply, tmp_path
):
    request, reply_text = _readme_demo_rest()
    assert request == _load_script("demo").REST_REQUEST
    assert reply_text == FULL_SIZE_REST_REPLY
    reply = json.loads(reply_text)
    # The request through the demo's export as TF Serving runs it: "instances" become one list per
    # input, fed to the signature by the path TF Serving's C++ loader takes (saved_model_cli run).
    rows = request["instances"]
    inputs = {name: [row[name] for row in rows] for name in rows[0]}
    export = demo["dir"] / "export" / "1"
    process = start_saved_model_cli_run(
        export, inputs, tmp_path, request.get("signature_name", "serving_default")
    )
    served = _tf_serving_reply(saved_model_cli_outputs(process, tmp_path))
    # The README's figures come from the demo's size (scripts/demo.py --rest_reply after `make
    # demo`), these from the CI size's: the reply must have the served one's fields, rows and types.
    assert _json_shape(reply) == _json_shape(served)
    labels = (export / "assets" / "labels.txt").read_text().split()
    for row in reply["predictions"]:
        probabilities = row["probabilities"]
        assert abs(sum(probabilities) - 1.0) <= 2e-6  # each rounded to 6 digits
        assert row["label"] == labels[probabilities.index(max(probabilities))]
    # And laid out as `scripts/demo.py --rest_reply` prints it (here from the CI size's export).
    assert _without_figures(reply_text) == _without_figures(rest_reply)


def test_rest_reply_prints_the_export_s_outputs_in_tf_serving_s_reply_format(
    demo, rest_reply, tmp_path
):
    demo_script = _load_script("demo")
    texts = [row["text_a"] for row in demo_script.REST_REQUEST["instances"]]
    printed = rest_reply
    reply = json.loads(printed)
    assert printed.splitlines()[1].startswith(" " * 17 + '{"label": ')  # the README's layout
    # The reference: the fine-tuned run's own prediction of the same texts (from its folder), not
    # the export.
    expected = _predict(demo, texts, tmp_path)
    assert [row["label"] for row in reply["predictions"]] == [
        ["original", "shuffled"][i] for i in expected.argmax(axis=1)
    ]
    for row, probabilities in zip(reply["predictions"], expected, strict=True):
        assert list(row) == ["label", "probabilities"]  # the signature's outputs, by name
        # Both printed to 6 digits, from two float32 computations (export and Python model).
        np.testing.assert_allclose(
            row["probabilities"], probabilities, rtol=0, atol=PROBABILITY_ATOL
        )


def test_a_rerun_reuses_every_finished_step(demo):
    stamps = {p.name: p.stat().st_mtime_ns for p in (demo["dir"] / ".demo").iterdir()}
    stdout = _demo(demo["dir"])
    assert stdout.count("   reused (finished earlier") == len(STEPS)
    assert all(row[0].endswith("(reused)") for row in _summary_rows(stdout).values())
    assert {p.name: p.stat().st_mtime_ns for p in (demo["dir"] / ".demo").iterdir()} == stamps


def test_force_redoes_the_step_it_names_and_reuses_the_others(demo):
    before = (demo["dir"] / ".demo" / "serve.json").stat().st_mtime_ns
    stdout = _demo(demo["dir"], env={**ENV, "FORCE": "serve"})
    rows = _summary_rows(stdout)
    assert not rows["serve"][0].endswith("(reused)")
    assert all(rows[step][0].endswith("(reused)") for step in STEPS[:-1])
    assert (demo["dir"] / ".demo" / "serve.json").stat().st_mtime_ns > before


def test_an_unknown_forced_step_is_an_error_naming_the_steps(tmp_path):
    result = subprocess.run(
        [sys.executable, str(DEMO), f"--output_dir={tmp_path}", "--force=pretrain"],
        cwd=REPO_DIR, env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "no step ['pretrain']" in result.stderr and "pretraining_data" in result.stderr


# ---------------------------------------------------------------- the shipped task data


def test_the_script_makes_the_shipped_task_files_byte_for_byte(austen_sentences_path):
    source = austen_sentences_path
    files = _load_script("make_sample_tasks").build(str(source))
    assert sorted(files) == ["dev.tsv", "test.tsv", "train.tsv"]
    for name, text in files.items():
        assert (TASK_DIR / name).read_bytes() == text.encode("utf-8"), name


def _rows(name):
    with open(TASK_DIR / name, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _words(sentence):
    """The sentence's words, lower-cased, without the punctuation around them, sorted."""
    return sorted(re.match(r"^\W*(.*?)\W*$", token).group(1) for token in sentence.lower().split())


def test_the_task_files_have_glue_layout_and_each_sentence_in_both_orders():
    for name, num_sentences in (("train.tsv", 1500), ("dev.tsv", 400)):
        header, *rows = _rows(name)
        assert header == ["sentence", "label"] and all(len(row) == 2 for row in rows)
        by_label = {
            label: sorted(_words(s) for s, row_label in rows if row_label == label)
            for label in ("original", "shuffled")
        }
        assert len(by_label["original"]) == num_sentences
        assert by_label["original"] == by_label["shuffled"]  # the same words, in another order
    header, *rows = _rows("test.tsv")
    assert header == ["index", "sentence"]
    assert [row[0] for row in rows] == [str(i) for i in range(200)]


def test_no_task_sentence_is_in_the_pretraining_text_or_in_two_splits():
    sentence_column = {"train.tsv": 0, "dev.tsv": 0, "test.tsv": 1}
    splits = {
        name: {row[column] for row in _rows(name)[1:]} for name, column in sentence_column.items()
    }
    assert not splits["train.tsv"] & splits["dev.tsv"]
    assert not splits["train.tsv"] & splits["test.tsv"]
    pretraining = set((SAMPLE_DIR / "sample_text.txt").read_text(encoding="utf-8").splitlines())
    assert not [s for sentences in splits.values() for s in sentences if s in pretraining]
