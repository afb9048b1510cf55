"""run_swag.py end to end: learning, eval_results.txt, test_results.tsv, the raw-text export, resume,
bad input.

The task is written here in SWAG's CSV layout: a heroine of Jane Austen's is worn out after a walk, and
the right ending is the restful one among four (chance is 25%). Its fields hold commas, quotes and a
newline, as SWAG's do.
"""

import csv
import json
import os
import random
import shutil
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import load_google_checkpoint, save_google_checkpoint
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.models.networks import multiple_choice_network
from bert_tf.preprocessing import GraphPreprocessor
from bert_tf.tasks import TASKS, exporting, run_script
from bert_tf.tasks.multiple_choice import swag
from bert_tf.tasks.multiple_choice import task as multiple_choice
from bert_tf.tokenization import FullTokenizer

from conftest import (
    PROBABILITY_ATOL,
    REPO_DIR,
    SAMPLE_DIR,
    assert_like_the_tf2_load,
    finish,
    rebuilt_for_export,
    saved_model_cli_outputs,
    start_python,
    start_saved_model_cli_run,
)

TINY_CONFIG = str(SAMPLE_DIR / "bert_config_tiny.json")
VOCAB = str(SAMPLE_DIR / "vocab.txt")
MAX_SEQ_LENGTH = 32
HEADER = [
    "", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
    "ending0", "ending1", "ending2", "ending3", "label",
]  # fmt: skip
NAMES = "Emma Harriet Fanny Elinor Marianne Catherine Isabella Jane".split()
PLACES = "Highbury Hartfield Mansfield London Bath Randalls Donwell Norland".split()
CONTEXTS = [
    "{name} was very tired after the long walk to {place}.",
    '{name}, "quite worn out", came back from {place}.',
    "{name} could hardly stand, after the ball at {place}, and was pale.",
]
RESTFUL = [
    "sat down to rest by the fire.",
    "fell asleep at once, in her chair.",
    "lay down on the sofa.",
    'went to bed early, "gratefully".',
    "asked for a cup of tea\nand a chair.",
]
ACTIVE = [
    "ran all the way home.",
    "danced until midnight, twice.",
    "climbed the hill again.",
    "walked ten more miles.",
    "rode out, in the rain, to see the farm.",
]


def _rows(rng, count, labelled=True):
    rows, labels = [], []
    for index in range(count):
        context = rng.choice(CONTEXTS).format(name=rng.choice(NAMES), place=rng.choice(PLACES))
        label = rng.randrange(4)
        endings = rng.sample(ACTIVE, 3)
        endings.insert(label, rng.choice(RESTFUL))
        row = [str(index), f"lsmdc_{index}", str(index), f"{context} She", context, "She", "gold"]
        rows.append(row + endings + ([str(label)] if labelled else []))
        labels.append(label)
    return rows, labels


def write_swag(data_dir, seed=0, sizes=(("train", 256), ("val", 64), ("test", 16))):
    """train.csv, val.csv and test.csv (no label column); returns the test rows and their labels."""
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    for split, count in sizes:
        labelled = split != "test"
        rows, labels = _rows(rng, count, labelled)
        with open(os.path.join(data_dir, f"{split}.csv"), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(HEADER if labelled else HEADER[:-1])
            writer.writerows(rows)
    return rows, labels


def swag_config(data_dir, output_dir, **overrides):
    values = dict(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, output_dir=str(output_dir),
        data_dir=str(data_dir), max_seq_length=MAX_SEQ_LENGTH, train_batch_size=16,
        eval_batch_size=32, predict_batch_size=32, learning_rate=1e-3, num_train_epochs=3.0,
        iterations_per_loop=1000, log_steps=1000, save_checkpoints_steps=1000, seed=7,
    )  # fmt: skip
    values.update(overrides)
    return multiple_choice.MultipleChoiceSettings(**values)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One train + eval + predict + export run, shared by the tests that read its outputs."""
    root = tmp_path_factory.mktemp("swag")
    test_rows, test_labels = write_swag(root / "data")
    config = swag_config(
        root / "data", root / "out", do_train=True, do_eval=True, do_predict=True,
        export_dir=str(root / "export"),
    )  # fmt: skip
    outcome = run_script(multiple_choice.SPEC, config)
    return {"root": root, "outcome": outcome, "test_rows": test_rows, "test_labels": test_labels}


def _read_results(path):
    return {key: float(value) for key, value in (line.split(" = ") for line in open(path))}


def _test_results(trained):
    rows = (trained["root"] / "out" / "test_results.tsv").read_text().splitlines()
    return np.array([[float(p) for p in row.split("\t")] for row in rows])


# ---------------------------------------------------------------------------------------- learning


def test_fine_tuning_picks_the_restful_ending_far_above_chance(trained):
    results = _read_results(trained["root"] / "out" / "eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_loss", "global_step", "loss"}
    assert (
        results["eval_accuracy"] >= 0.9
    )  # chance is 0.25 on 64 dev rows; seeds fixed, runs give 1.0
    assert results["eval_loss"] < 0.5  # ln 4 = 1.39 for uniform probabilities
    assert results["global_step"] == 48  # int(256 / 16 * 3.0), as the original counts steps
    task = json.loads((trained["root"] / "out" / "task.json").read_text())
    assert (task["model_type"], task["max_seq_length"]) == ("multiple_choice", MAX_SEQ_LENGTH)


def test_test_results_hold_one_line_of_choice_probabilities_per_test_row(trained):
    probabilities = _test_results(trained)
    assert probabilities.shape == (16, 4)  # no padding row
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)  # 6 decimals each
    right = probabilities.argmax(axis=1) == np.array(trained["test_labels"])
    assert right.mean() >= 0.9


# ---------------------------------------------------------------------------------------- export

_LOAD_EXPORT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    request = json.loads(sys.argv[2])
    context, choices = tf.constant(request["context"]), tf.constant(request["choices"])
    out = model.signatures["serving_default"](context=context, choices=choices)
    by_ids = model.signatures["serve_ids"](
        **model.signatures["preprocess"](context=context, choices=choices)
    )
    two = model.signatures["serving_default"](context=context[:2], choices=choices[:2, :2])
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "probabilities": out["probabilities"].numpy().tolist(),
        "choice": out["choice"].numpy().tolist(),
        "by_ids": by_ids["probabilities"].numpy().tolist(),
        "two_choices": two["probabilities"].numpy().tolist(),
    }))
    """
)


def test_predicting_from_the_fine_tuned_checkpoint_in_a_new_output_dir_gives_the_run_s_results(
    trained, tmp_path
):
    checkpoint = tf.train.latest_checkpoint(str(trained["root"] / "out"))
    run_script(
        multiple_choice.SPEC,
        swag_config(
            trained["root"] / "data", tmp_path, do_predict=True, init_checkpoint=checkpoint
        ),
    )
    rows = (tmp_path / "test_results.tsv").read_text().splitlines()
    predicted = np.array([[float(p) for p in row.split("\t")] for row in rows])
    # Probabilities printed to 6 decimals; an untrained head is off by 0.01 or more.
    np.testing.assert_allclose(predicted, _test_results(trained), rtol=0, atol=1e-5)


def test_a_labelled_test_file_is_scored_in_test_results_txt_and_an_unlabelled_one_is_not(
    trained, tmp_path
):
    assert not (trained["root"] / "out" / "test_results.txt").exists()  # test.csv: no labels
    data = tmp_path / "data"
    data.mkdir()
    rows, labels = _rows(random.Random(5), 24)
    with open(data / "test.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([HEADER, *rows])
    checkpoint = str(trained["root"] / "out")
    run_script(
        multiple_choice.SPEC,
        swag_config(data, tmp_path / "out", do_predict=True, init_checkpoint=checkpoint),
    )
    results = _read_results(tmp_path / "out" / "test_results.txt")
    assert set(results) == set(_read_results(trained["root"] / "out" / "eval_results.txt"))
    lines = (tmp_path / "out" / "test_results.tsv").read_text().splitlines()
    probabilities = np.array([[float(p) for p in line.split("\t")] for line in lines])
    accuracy = np.mean(probabilities.argmax(axis=1) == np.array(labels))
    assert results["eval_accuracy"] == pytest.approx(accuracy, abs=1e-9)


@pytest.fixture(scope="module")
def started(trained, tmp_path_factory):
    """The two checks that run in a new process, started together: their imports of TensorFlow
    (most of their time) overlap on a second core while the tests in between run."""
    # SWAG's choice text is sent2 + " " + ending, the context sent1.
    request = {
        "context": [row[4] for row in trained["test_rows"]],
        "choices": [[f"{row[5]} {ending}" for ending in row[7:11]] for row in trained["test_rows"]],
    }
    script_out = tmp_path_factory.mktemp("script") / "out"
    shutil.copytree(trained["root"] / "out", script_out)
    (script_out / "eval_results.txt").unlink()
    processes = {
        "export": start_python(
            ["-c", _LOAD_EXPORT, trained["outcome"]["export"], json.dumps(request)]
        ),
        "script": start_python(
            [
                os.path.join(REPO_DIR, "run_swag.py"),
                f"--data_dir={trained['root'] / 'data'}", f"--bert_config_file={TINY_CONFIG}",
                f"--vocab_file={VOCAB}", f"--output_dir={script_out}",
                f"--max_seq_length={MAX_SEQ_LENGTH}", "--train_batch_size=16",
                "--num_train_epochs=3", "--do_train", "--do_eval", "--eval_batch_size=8",
                "--alsologtostderr",
            ]
        ),
    }  # fmt: skip
    yield {"processes": processes, "script_out": script_out}
    for process in processes.values():
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_the_export_scores_raw_choices_like_test_results_in_a_tensorflow_only_process(
    trained, started
):
    assert trained["outcome"]["export"] == str(trained["root"] / "export" / "1")
    stdout, _ = finish(started["processes"]["export"])
    served = json.loads(stdout.strip().splitlines()[-1])
    assert served["signatures"] == ["preprocess", "serve_ids", "serving_default"]
    expected = _test_results(trained)
    # test_results.tsv rounds to 6 decimals (5e-7) of float32 probabilities in [0, 1] (batches
    # padded differently: PROBABILITY_ATOL); a wrong token, segment or mask moves them by 1e-3 or more.
    np.testing.assert_allclose(served["probabilities"], expected, rtol=0, atol=PROBABILITY_ATOL)
    assert served["choice"] == expected.argmax(axis=1).tolist()
    np.testing.assert_array_equal(served["by_ids"], served["probabilities"])
    # Any number of choices: the softmax runs over the ones given.
    two = np.array(served["two_choices"])
    assert two.shape == (2, 2)
    np.testing.assert_allclose(two.sum(axis=1), 1.0, atol=1e-6)


def test_saved_model_cli_runs_the_export_as_tf_serving_loads_it(trained, tmp_path):
    # `choices` is a rank-2 string tensor [B, C]: it goes in as a .npy file.
    export_path = trained["outcome"]["export"]
    rows = trained["test_rows"][:4]
    inputs = {
        "context": [row[4] for row in rows],
        "choices": [[f"{row[5]} {ending}" for ending in row[7:11]] for row in rows],
    }
    process = start_saved_model_cli_run(export_path, inputs, tmp_path)
    loaded = tf.saved_model.load(export_path)
    expected = loaded.signatures["serving_default"](
        **{name: tf.constant(value) for name, value in inputs.items()}
    )
    assert_like_the_tf2_load(saved_model_cli_outputs(process, tmp_path), expected)


def test_in_graph_packing_is_the_packing_of_run_swags_features():
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    preprocessor = GraphPreprocessor(VOCAB, True, 16)
    long_text = "Emma Woodhouse, handsome, clever, and rich, with a comfortable home"
    examples = [
        swag.MultipleChoiceExample("0", long_text, "She", ["sat down.", long_text, ""], 0, 1),
        swag.MultipleChoiceExample("1", "She walked.", "", ["", "Then she rested.", "x"], 1, 2),
        swag.MultipleChoiceExample("2", "", "Then", ["she ran.", "", long_text], 2, 3),
    ]
    # The serving input: the choice text is start_ending + " " + ending (" " alone when both are "").
    features = multiple_choice_network.pack_choices(
        preprocessor,
        tf.constant([e.context for e in examples]),
        tf.constant([[f"{e.start_ending} {ending}" for ending in e.endings] for e in examples]),
    )
    for row, example in enumerate(examples):
        expected = swag.convert_example_to_multiple_choice_feature(example, 16, tokenizer)
        for name in ("input_ids", "input_mask", "segment_ids"):
            got = features[name][row].numpy()
            padded = np.zeros([3, 16], np.int64)
            padded[:, : got.shape[1]] = got
            np.testing.assert_array_equal(padded, expected[name], err_msg=f"row {row} {name}")


def test_export_saved_model_rebuilds_the_run_s_model_from_task_json(trained, tmp_path, monkeypatch):
    model, _ = rebuilt_for_export(
        monkeypatch, multiple_choice.SPEC, str(trained["root"] / "out"), str(tmp_path), VOCAB
    )
    # The rebuilt model holds the run's weights: it scores the test rows as test_results.tsv does.
    rows = trained["test_rows"][:4]
    features = multiple_choice_network.pack_choices(
        GraphPreprocessor(VOCAB, True, MAX_SEQ_LENGTH),
        tf.constant([row[4] for row in rows]),
        tf.constant([[f"{row[5]} {ending}" for ending in row[7:11]] for row in rows]),
    )
    probabilities = model(features, training=False)["probabilities"]
    np.testing.assert_allclose(
        probabilities, _test_results(trained)[:4], rtol=0, atol=PROBABILITY_ATOL
    )


# ---------------------------------------------------------------------------------------- the script


def test_run_swag_py_resumes_from_the_checkpoint_and_evaluates_the_same(trained, started):
    out = started["script_out"]
    _, stderr = finish(started["processes"]["script"])
    checkpoint = os.path.basename(tf.train.latest_checkpoint(str(trained["root"] / "out")))
    # The run found its last checkpoint, had no step left to train, and evaluated those weights.
    assert f"Resumed from {out / checkpoint}" in stderr
    assert os.path.basename(tf.train.latest_checkpoint(str(out))) == checkpoint
    again = _read_results(out / "eval_results.txt")
    first = _read_results(trained["root"] / "out" / "eval_results.txt")
    assert (again["eval_accuracy"], again["global_step"]) == (
        first["eval_accuracy"],
        first["global_step"],
    )
    # Batches of 8 instead of 32 pad and sum differently: float32 rounding of a mean log-loss.
    assert again["eval_loss"] == pytest.approx(first["eval_loss"], rel=1e-4, abs=1e-6)


# ---------------------------------------------------------------------------------------- data and bad input


def test_json_lines_files_of_any_choice_count_make_features(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    lines = [
        {"context": "Emma was tired.", "question": "She", "choices": ["rested.", "ran.", "x"], "label": 0},
        {"context": "Fanny was tired.", "choices": ["She slept.", "She danced.", "y"], "label": 0},
    ]  # fmt: skip
    (data / "train.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = multiple_choice.MultipleChoiceRun(swag_config(data, tmp_path / "out", do_train=True))
    path, info = run.features("train")
    assert (info["num_real_examples"], info["num_choices"]) == (2, 3)
    batch = next(iter(run.dataset(path, 2, is_training=False, num_records=info["num_records"])))
    assert batch["input_ids"].shape[:2] == (2, 3)
    assert batch["label_ids"].numpy().tolist() == [0, 0]


@pytest.mark.parametrize(
    "case, message",
    [
        ("field_count", r"train\.csv:{line}: 13 fields, but the header has 12"),
        ("label_range", r"val\.csv:3: label '4' is not a choice index in \[0, 4\)"),
        ("choice_count", r"val\.jsonl:2: 3 choices, but the first example \(line 1\) has 2"),
        ("unlabelled_dev", r"val\.csv: the dev file has no labels"),
        ("no_test_file", r"no test file \(expected one of test\.csv, test\.jsonl\)"),
    ],
)
def test_bad_input_names_the_file_and_line(tmp_path, case, message):
    data = tmp_path / "data"
    write_swag(data, sizes=(("train", 4), ("val", 2), ("test", 2)))
    train, val = data / "train.csv", data / "val.csv"
    steps = {"do_eval": True}
    if case == "field_count":
        rows = list(csv.reader(open(train, newline="")))
        rows[1][9] = "a\nb"
        rows[3].append("extra")
        with open(train, "w", newline="") as f:
            csv.writer(f).writerows(rows)
        # Quoted fields hold newlines (one set here, others in the endings): count the lines.
        line = 1 + sum(1 + sum(field.count("\n") for field in row) for row in rows[:3])
        message = message.format(line=line)
        steps = {"do_train": True}
    elif case == "label_range":
        rows = list(csv.reader(open(val, newline="")))
        rows[2][-1] = "4"
        with open(val, "w", newline="") as f:
            csv.writer(f).writerows(rows)
    elif case == "choice_count":
        val.unlink()
        lines = [{"context": "a", "choices": ["b", "c"], "label": 0}]
        lines.append({"context": "d", "choices": ["e", "f", "g"], "label": 1})
        (data / "val.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    elif case == "unlabelled_dev":
        shutil.copy(data / "test.csv", val)
    else:
        (data / "test.csv").unlink()
        steps = {"do_predict": True}
    with pytest.raises(InputError, match=message):
        run_script(multiple_choice.SPEC, swag_config(data, tmp_path / "out", **steps))


# ---------------------------------------------------------------------------------------- checkpoints


def test_the_google_format_head_is_cls_multiple_choice_and_export_finds_it(tmp_path):
    config = BertConfig.from_json_file(TINY_CONFIG)
    model = multiple_choice_network.MultipleChoiceNetwork(config)
    prefix = save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    shapes = dict(tf.train.list_variables(prefix))
    assert shapes["cls/multiple_choice/output_weights"] == [1, config.hidden_size]
    assert shapes["cls/multiple_choice/output_bias"] == [1]
    assert TASKS["multiple_choice"].google_head == "cls/multiple_choice/output_weights"
    info = exporting.infer_from_google(prefix)
    assert info.model_type == "multiple_choice"
    loaded = TASKS["multiple_choice"].build_model(config, info)
    load_google_checkpoint(loaded, prefix)
    inputs = {"input_ids": tf.constant([[[101, 5616, 102], [101, 3536, 102]]])}
    np.testing.assert_array_equal(
        loaded(inputs, training=False)["logits"], model(inputs, training=False)["logits"]
    )
