"""task.json: the shared fields flat, each task's own settings under its model_type, and the all-flat
task.json of earlier versions still read."""

import json

import pytest

from bert_tf.errors import InputError
from bert_tf.models.networks.task_info import TaskInfo, read_task_info, write_task_info
from bert_tf.tasks import TASKS  # noqa: F401 (registers each task's settings)

# What the version before the per-task part wrote for a SQuAD 2.0 run (json.dumps(sort_keys=True)):
# every task's settings flat, the union of them all.
_FLAT_SQUAD = {
    "bert_config": None,
    "do_lower_case": False,
    "doc_stride": 96,
    "is_pair": False,
    "is_regression": False,
    "labels": None,
    "max_answer_length": 25,
    "max_query_length": 32,
    "max_seq_length": 256,
    "model_type": "squad",
    "n_best_size": 10,
    "null_score_diff_threshold": -1.5,
    "thresholds": None,
    "version_2_with_negative": True,
    "window_combination": "mean",
}


def test_a_flat_task_json_of_an_earlier_version_reads_as_the_task_s_settings(tmp_path):
    (tmp_path / "task.json").write_text(json.dumps(_FLAT_SQUAD, indent=2, sort_keys=True))
    info = read_task_info(str(tmp_path))
    assert (info.model_type, info.do_lower_case, info.max_seq_length) == ("squad", False, 256)
    assert (
        info.settings.version_2_with_negative,
        info.settings.doc_stride,
        info.settings.max_query_length,
    ) == (True, 96, 32)
    assert (info.settings.n_best_size, info.settings.max_answer_length) == (10, 25)
    assert info.settings.null_score_diff_threshold == -1.5
    # Written again, the SQuAD settings sit under "squad"; the classifier's keys are gone.
    write_task_info(str(tmp_path), info)
    written = json.loads((tmp_path / "task.json").read_text())
    assert set(written) == {
        "model_type",
        "bert_config",
        "do_lower_case",
        "max_seq_length",
        "labels",
        "squad",
    }
    assert written["squad"] == {
        "version_2_with_negative": True, "doc_stride": 96, "max_query_length": 32,
        "n_best_size": 10, "max_answer_length": 25, "null_score_diff_threshold": -1.5,
    }  # fmt: skip


def test_a_flat_task_json_of_a_classifier_and_of_pretraining_read(tmp_path):
    classifier = {**_FLAT_SQUAD, "model_type": "classifier", "labels": ["neg", "pos"]}
    classifier.update(is_pair=True, doc_stride=None, window_combination=None)
    info = TaskInfo.from_json(classifier, "task.json")
    assert (info.labels, info.settings.is_pair, info.settings.doc_stride, info.settings.window_combination) == (
        ["neg", "pos"], True, None, "mean",
    )  # fmt: skip
    pretraining = TaskInfo.from_json({**_FLAT_SQUAD, "model_type": "pretraining"}, "task.json")
    assert pretraining.settings is None and pretraining.max_seq_length == 256


def test_a_task_s_settings_round_trip_under_its_name():
    info = TaskInfo(model_type="multi_label", labels=["a", "b"], thresholds=[0.25, 0.75])
    values = json.loads(json.dumps(info.to_json()))
    assert values["multi_label"]["thresholds"] == [0.25, 0.75]
    assert TaskInfo.from_json(values, "task.json") == info


def test_an_unknown_key_names_the_file():
    with pytest.raises(InputError, match=r"out/task.json: unknown keys \['colour'\]"):
        TaskInfo.from_json({"model_type": "tagger", "colour": "red"}, "out/task.json")
    with pytest.raises(InputError, match="out/task.json: .*max_query_length"):
        TaskInfo.from_json(
            {"model_type": "tagger", "tagger": {"max_query_length": 3}}, "out/task.json"
        )
