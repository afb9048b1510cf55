"""run_squad.py end to end: a tiny model overfits handmade SQuAD 1.1 and 2.0 questions and answers them.

The model (2 layers, hidden 64, Google's uncased vocab, no dropout) learns five questions by heart, one of
them about a context of four windows (max_seq_length 64, doc_stride 16). The runs write the original's
output files, the official evaluation of them, and an export that must give the same answers in a fresh
process that imports only tensorflow and tensorflow_text.
"""

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import squad_evaluation
from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.models.networks import squad_network
from bert_tf.tasks import run_script
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint
from bert_tf.tasks.squad import task as squad

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV, assert_float32_close

LONG = (
    "The river Aldwin rises in the northern hills above the village of Carrow. "
    "For most of its course it runs through farmland, where millers once built eleven wooden "
    "wheels. The town of Bellmouth grew where the river meets the sea, and its harbour was opened "
    "in 1742. Merchants shipped wool, salt and slate from the harbour to ports across the channel. "
    "The old lighthouse at the harbour entrance was designed by Agnes\nMarlow, an engineer who also "
    "built the stone bridge at Carrow."
)
SHORT = "Marie Skłodowska Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911."
QUESTIONS = {
    "long-1": ("Where does the river Aldwin rise?", LONG, "northern hills"),
    "long-2": ("Who designed the old lighthouse?", LONG, "Agnes\nMarlow"),
    "short-1": ("What did Marie Curie win in 1903?", SHORT, "the Nobel Prize in Physics"),
}
UNANSWERABLE = {
    "long-x": ("Who painted the lighthouse?", LONG),
    "short-x": ("Where was Marie Curie born?", SHORT),
}
# The answers as predicted: whole words joined by one space.
EXPECTED = {
    "long-1": "northern hills",
    "long-2": "Agnes Marlow",
    "short-1": "the Nobel Prize in Physics",
}


def squad_file(path, version_2):
    """Writes the handmade questions as a SQuAD json file (v2.0 adds the unanswerable ones)."""
    paragraphs = {LONG: [], SHORT: []}
    for qas_id, (question, context, answer) in QUESTIONS.items():
        qa = {
            "id": qas_id,
            "question": question,
            "answers": [{"text": answer, "answer_start": context.index(answer)}],
        }
        paragraphs[context].append({**qa, "is_impossible": False} if version_2 else qa)
    if version_2:
        for qas_id, (question, context) in UNANSWERABLE.items():
            paragraphs[context].append(
                {"id": qas_id, "question": question, "answers": [], "is_impossible": True}
            )
    articles = [
        {"title": title, "paragraphs": [{"context": context, "qas": paragraphs[context]}]}
        for title, context in (("River", LONG), ("Curie", SHORT))
    ]
    version = "v2.0" if version_2 else "v1.1"
    path.write_text(json.dumps({"version": version, "data": articles}), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def bert_config_file(tmp_path_factory):
    config = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    path = tmp_path_factory.mktemp("config") / "bert_config.json"
    path.write_text(json.dumps(config))
    return str(path)


def make_config(bert_config_file, output_dir, **overrides):
    settings = dict(
        bert_config_file=bert_config_file,
        vocab_file=str(SAMPLE_DIR / "vocab.txt"),
        output_dir=str(output_dir),
        max_seq_length=64,
        doc_stride=16,
        max_query_length=16,
        train_batch_size=8,
        predict_batch_size=4,
        learning_rate=1e-3,
        save_checkpoints_steps=1000,
        iterations_per_loop=1000,
        log_steps=50,
    )
    settings.update(overrides)
    return squad.SquadSettings(**settings)


def overfit(tmp_path_factory, bert_config_file, version_2):
    """Trains on the handmade file, predicts it, evaluates and exports: the run's paths and outcome.

    SQuAD 1.1 exports with --export_dir; SQuAD 2.0 as export_saved_model.py does, from the run's
    checkpoint and task.json.
    """
    folder = tmp_path_factory.mktemp("v2" if version_2 else "v1")
    data_file = squad_file(folder / "data.json", version_2)
    config = make_config(
        bert_config_file,
        folder / "model",
        train_file=data_file,
        predict_file=data_file,
        do_train=True,
        do_predict=True,
        do_eval=True,
        num_train_epochs=240.0,  # 90 steps (3 questions) or 150 (5 questions) of 8 windows
        version_2_with_negative=version_2,
        export_dir=None if version_2 else str(folder / "export"),
    )
    outcome = run_script(squad.SPEC, config)
    if version_2:
        outcome["export"] = export_checkpoint(
            ExportSettings(
                init_checkpoint=config.output_dir,
                export_dir=str(folder / "export"),
                vocab_file=config.vocab_file,
            )
        )
    return {"config": config, "data_file": data_file, "output_dir": config.output_dir, **outcome}


@pytest.fixture(scope="module")
def v1_run(tmp_path_factory, bert_config_file):
    return overfit(tmp_path_factory, bert_config_file, version_2=False)


@pytest.fixture(scope="module")
def v2_run(tmp_path_factory, bert_config_file):
    return overfit(tmp_path_factory, bert_config_file, version_2=True)


def read_json(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return json.load(f)


# ----------------------------------------------------------------------------------------------
# Training and prediction


def test_v1_overfit_predicts_the_handmade_answers_in_the_originals_files(v1_run):
    folder = v1_run["output_dir"]
    assert v1_run["train"]["global_step"] == 90
    assert v1_run["predict"]["predictions"] == EXPECTED
    assert read_json(folder, "predictions.json") == EXPECTED
    nbest = read_json(folder, "nbest_predictions.json")
    assert list(nbest) == list(EXPECTED)
    for qas_id, entries in nbest.items():
        assert entries[0]["text"] == EXPECTED[qas_id]
        assert all(
            list(entry) == ["text", "probability", "start_logit", "end_logit"] for entry in entries
        )
        assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0)
        assert entries[0]["probability"] > 0.9  # learned by heart, not by luck
    assert not os.path.exists(os.path.join(folder, "null_odds.json"))
    # The long context took several windows: more features than questions.
    settings = read_json(folder, "eval.tf_record.settings.json")
    assert settings["info"]["num_records"] >= 2 * 3 + 1


def test_v2_overfit_answers_unanswerable_questions_with_empty_text(v2_run):
    folder = v2_run["output_dir"]
    expected = {**EXPECTED, "long-x": "", "short-x": ""}
    assert read_json(folder, "predictions.json") == expected
    null_odds = read_json(folder, "null_odds.json")
    assert sorted(null_odds) == sorted(expected)
    # null score - best span score: above the threshold 0 exactly where the answer is "".
    assert {qas_id: odds > 0.0 for qas_id, odds in null_odds.items()} == {
        qas_id: answer == "" for qas_id, answer in expected.items()
    }
    nbest = read_json(folder, "nbest_predictions.json")
    assert all(any(entry["text"] == "" for entry in nbest[qas_id]) for qas_id in expected)


def test_do_eval_writes_the_official_evaluation_of_the_prediction_files(v1_run, v2_run):
    for run, na_file in ((v1_run, None), (v2_run, "null_odds.json")):
        folder = run["output_dir"]
        expected = squad_evaluation.evaluate(
            squad_evaluation.load_json(run["data_file"]),
            read_json(folder, "predictions.json"),
            na_probs=read_json(folder, na_file) if na_file else None,
        )
        assert read_json(folder, "eval_results.json") == expected == run["eval"]
    assert v1_run["eval"]["exact_match"] == v1_run["eval"]["f1"] == 100.0
    assert v2_run["eval"]["exact"] == v2_run["eval"]["NoAns_exact"] == 100.0


# ----------------------------------------------------------------------------------------------
# The export, in a fresh process

# Loads exports with tensorflow and tensorflow_text only, and answers a TF Serving REST request
# ({"signature_name", "inputs": {name: list}}, the columnar PredictRequest) read from stdin.
_SERVE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)
answers = {}
for path, request in json.load(sys.stdin):
    signature = tf.saved_model.load(path).signatures[request["signature_name"]]
    outputs = signature(**{name: tf.constant(values) for name, values in request["inputs"].items()})
    answers[path] = {
        name: [v.decode("utf-8") if isinstance(v, bytes) else float(v) for v in value.numpy()]
        for name, value in outputs.items()
    }
assert "bert_tf" not in sys.modules
print(json.dumps(answers))
"""


def test_export_gives_the_same_answers_in_a_fresh_process(v1_run, v2_run):
    ids = list(QUESTIONS) + list(UNANSWERABLE)
    questions = [(QUESTIONS.get(i) or UNANSWERABLE[i])[0] for i in ids] + ["", "Who?"]
    contexts = [(QUESTIONS.get(i) or UNANSWERABLE[i])[1] for i in ids] + [SHORT, ""]
    request = {
        "signature_name": "serving_default",
        "inputs": {"question": questions, "context": contexts},
    }
    paths = [v1_run["export"], v2_run["export"]]
    result = subprocess.run(
        [sys.executable, "-c", _SERVE],
        input=json.dumps([[path, request] for path in paths]),
        capture_output=True,
        text=True,
        timeout=300,
        env=SUBPROCESS_ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.splitlines()[-1])
    for run, path in zip((v1_run, v2_run), paths, strict=True):
        folder = run["output_dir"]
        predictions = read_json(folder, "predictions.json")
        nbest = read_json(folder, "nbest_predictions.json")
        out = served[path]
        known = [i for i in ids if i in predictions]
        answers = dict(zip(ids, out["answer"], strict=False))
        assert {i: answers[i] for i in known} == predictions
        assert out["answer"][-1] == ""  # an empty context
        # The best span's start + end logit. The export pads windows to another length than
        # prediction's batches: float32 rounding of the logits (256 eps of the largest), no more.
        best = [next(e for e in nbest[i] if e["text"]) for i in known]
        scores = [out["score"][ids.index(i)] for i in known]
        assert_float32_close(scores, [e["start_logit"] + e["end_logit"] for e in best])
        if run["config"].version_2_with_negative:
            null_odds = read_json(folder, "null_odds.json")
            diffs = [out["null_score_diff"][ids.index(i)] for i in known]
            assert_float32_close(diffs, [null_odds[i] for i in known])
        else:
            assert "null_score_diff" not in out


def test_export_signatures_windows_and_logits(v1_run):
    loaded = tf.saved_model.load(v1_run["export"])
    assert sorted(loaded.signatures) == ["preprocess", "serve_ids", "serving_default"]
    question = tf.constant([QUESTIONS["long-1"][0], "", "Who?"])
    context = tf.constant([LONG, SHORT, ""])
    features = loaded.signatures["preprocess"](question=question, context=context)
    assert features["example_index"].numpy().tolist().count(1) == 1  # SHORT: one window
    assert 2 not in features["example_index"].numpy()  # an empty context: none
    assert features["input_ids"].dtype == tf.int32
    ids = {name: features[name] for name in ("input_ids", "input_mask", "segment_ids")}
    logits = loaded.signatures["serve_ids"](**ids)
    # The run's checkpoint in a Keras model: the same weights and inputs, float32 rounding only.
    model = squad_network.BertSquad(BertConfig.from_json_file(v1_run["config"].bert_config_file))
    restore_init_checkpoint(model, v1_run["output_dir"])
    expected = model(ids)
    assert_float32_close(logits["start_logits"], expected["start_logits"])
    assert_float32_close(logits["end_logits"], expected["end_logits"])
    empty = loaded.signatures["serving_default"](
        question=tf.constant([], tf.string), context=tf.constant([], tf.string)
    )
    assert empty["answer"].shape == [0] and empty["score"].shape == [0]


# saved_model_cli, with tensorflow_text's ops registered first (the TF Serving binary links them in).
_SAVED_MODEL_CLI = (
    "import sys, tensorflow_text\n"
    "from tensorflow.python.tools import saved_model_cli\n"
    "sys.argv = ['saved_model_cli', *sys.argv[1:]]\n"
    "saved_model_cli.main()\n"
)


def test_saved_model_cli_answers_as_predictions_json(v2_run):
    # `run` loads the export as TF Serving's C++ loader does (a TF1 session restoring the variables).
    question, context, _ = QUESTIONS["long-2"]
    inputs = f"question={json.dumps([question])};context={json.dumps([context])}"
    result = subprocess.run(
        [sys.executable, "-c", _SAVED_MODEL_CLI, "run", "--dir", v2_run["export"]]
        + ["--tag_set", "serve", "--signature_def", "serving_default", "--input_exprs", inputs],
        capture_output=True,
        text=True,
        timeout=300,
        env=SUBPROCESS_ENV,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    printed = result.stdout.split("Result for output key answer:")[1].split("Result")[0]
    assert printed.strip() == "[b'Agnes Marlow']"
    assert "Result for output key null_score_diff" in result.stdout


# ----------------------------------------------------------------------------------------------
# Re-runs: cached features, resumed training, prediction from a fine-tuned checkpoint


def test_rerun_reuses_features_and_resumes_training(v1_run, tmp_path, monkeypatch):
    folder = tmp_path / "model"
    shutil.copytree(v1_run["output_dir"], folder)
    records_mtime = os.path.getmtime(folder / "train.tf_record")

    def no_features(*args, **kwargs):
        raise AssertionError("the cached features should have been reused")

    monkeypatch.setattr(squad.data, "convert_examples_to_features", no_features)
    config = make_config(
        v1_run["config"].bert_config_file,
        folder,
        train_file=v1_run["data_file"],
        do_train=True,
        num_train_epochs=256.0,  # 96 steps: 6 more than the first run's 90
        log_steps=2,
    )
    outcome = run_script(squad.SPEC, config)
    assert outcome["train"]["global_step"] == 96
    assert os.path.getmtime(folder / "train.tf_record") == records_mtime
    assert tf.train.latest_checkpoint(str(folder)).endswith("ckpt-96")


def test_run_squad_script_predicts_from_a_fine_tuned_checkpoint(v1_run, tmp_path):
    # A fresh output_dir: the encoder AND the SQuAD head come from --init_checkpoint.
    config = v1_run["config"]
    flags = {
        "bert_config_file": config.bert_config_file,
        "vocab_file": config.vocab_file,
        "init_checkpoint": tf.train.latest_checkpoint(config.output_dir),
        "output_dir": str(tmp_path / "predict"),
        "predict_file": v1_run["data_file"],
        "max_seq_length": 64,
        "doc_stride": 16,
        "max_query_length": 16,
        "do_predict": True,
    }
    result = subprocess.run(
        [sys.executable, str(REPO_DIR / "run_squad.py")]
        + [f"--{name}={value}" for name, value in flags.items()],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=SUBPROCESS_ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "restored the encoder and the squad head" in result.stderr
    assert read_json(tmp_path / "predict", "predictions.json") == EXPECTED
    # The same n-best lists as the training run's own predictions, to float32 rounding.
    nbest = read_json(tmp_path / "predict", "nbest_predictions.json")
    expected = read_json(config.output_dir, "nbest_predictions.json")
    assert list(nbest) == list(expected)
    for qas_id, answers in expected.items():
        assert [a["text"] for a in nbest[qas_id]] == [a["text"] for a in answers]
        np.testing.assert_allclose(
            [a["probability"] for a in nbest[qas_id]],
            [a["probability"] for a in answers],
            atol=1e-5,
        )
    assert read_json(tmp_path / "predict", "task.json")["max_seq_length"] == 64
    # The predict file has answers: test_results.txt holds the official metrics of predictions.json.
    expected = squad_evaluation.evaluate(squad_evaluation.load_json(v1_run["data_file"]), EXPECTED)
    lines = (tmp_path / "predict" / "test_results.txt").read_text().splitlines()
    assert dict(line.split(" = ") for line in lines) == {k: str(v) for k, v in expected.items()}
    assert expected["exact_match"] == 100.0


def test_a_predict_file_without_answers_writes_no_test_results_and_says_so(
    v1_run, tmp_path, caplog
):
    dataset = squad_evaluation.load_json(v1_run["data_file"])
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = []
    predict_file = tmp_path / "questions.json"
    predict_file.write_text(json.dumps(dataset))
    config = dataclasses.replace(
        v1_run["config"], output_dir=str(tmp_path / "predict"), predict_file=str(predict_file),
        init_checkpoint=v1_run["output_dir"], do_train=False, do_eval=False, export_dir=None,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="absl"):
        run_script(squad.SPEC, config)
    assert read_json(tmp_path / "predict", "predictions.json") == EXPECTED
    assert not (tmp_path / "predict" / "test_results.txt").exists()
    said = [r.getMessage() for r in caplog.records if "holds no answers" in r.getMessage()]
    assert len(said) == 1 and "questions.json" in said[0], said


# ----------------------------------------------------------------------------------------------
# TFDS and bad input


def _tfds_as_dataset(records):
    def as_dataset(self, split, **kwargs):
        del split, kwargs
        return tf.data.Dataset.from_generator(
            lambda: iter(records), output_signature=self.info.features.get_tensor_spec()
        )

    return as_dataset


def test_tfds_squad_predicts_and_evaluates(v1_run, tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    records = [
        {
            "id": qas_id,
            "title": "t",
            "context": context,
            "question": question,
            "answers": {"text": [answer], "answer_start": [context.index(answer)]},
        }
        for qas_id, (question, context, answer) in QUESTIONS.items()
    ]
    config = make_config(
        v1_run["config"].bert_config_file,
        tmp_path / "model",
        init_checkpoint=v1_run["output_dir"],
        tfds_name="squad/v1.1",
        tfds_data_dir=str(tmp_path / "tfds"),
        do_eval=True,
        length_bucketing=False,
    )
    with tfds.testing.mock_data(as_dataset_fn=_tfds_as_dataset(records)):
        outcome = run_script(squad.SPEC, config)
        train_examples, _ = squad.SquadRun(config).data("train")
    assert outcome["predict"]["predictions"] == EXPECTED
    # The evaluation reads the gold answers from the dataset (there is no file).
    assert read_json(tmp_path / "model", "eval_results.json") == outcome["eval"]
    assert outcome["eval"]["exact_match"] == 100.0 and outcome["eval"]["total"] == 3
    # Training reads the "train" split into word positions ("northern" is LONG's 7th word).
    positions = [(e.start_position, e.end_position) for e in train_examples]
    assert positions == [(6, 7), (71, 72), (4, 8)]


def _one_question(context="Some text.", **qa):
    paragraph = {"context": context, "qas": [qa]}
    return json.dumps({"data": [{"title": "E", "paragraphs": [paragraph]}]})


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"data": [}', r"data\.json:1: not valid JSON \(column 11"),
        (_one_question(id="q7", answers=[]), r"question id 'q7': missing key \"question\""),
        (
            _one_question(id="q8", question="?", answers=[{"text": "far", "answer_start": 90}]),
            r"question id 'q8': answer 'far' at answer_start 90 runs outside its context",
        ),
        (_one_question(context=" \n", id="q9"), r"article 0 \(title 'E'\), paragraph 0: empty"),
    ],
)
def test_bad_training_data_raises_input_error_naming_the_place(
    tmp_path, bert_config_file, text, expected
):
    data_file = tmp_path / "data.json"
    data_file.write_text(text)
    config = make_config(
        bert_config_file, tmp_path / "model", train_file=str(data_file), do_train=True
    )
    with pytest.raises(InputError, match=expected):
        run_script(squad.SPEC, config)


def test_unanswerable_training_questions_need_version_2(tmp_path, bert_config_file):
    data_file = squad_file(tmp_path / "data.json", version_2=True)
    config = make_config(bert_config_file, tmp_path / "model", train_file=data_file, do_train=True)
    with pytest.raises(InputError, match="question id 'long-x': .* exactly 1 answer, got 0"):
        run_script(squad.SPEC, config)
