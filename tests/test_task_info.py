"""task.json's recorded settings (bert_tf/models/networks/task_info.py) are the scripts' recorded flags.

The Keras layer reads task.json without the scripts' settings classes; its plain table,
RECORDED_SETTINGS, must say what those classes record: the same names, defaults and choices.
"""

import dataclasses

import pytest

from bert_tf.models.networks.task_info import RECORDED_SETTINGS, TaskInfo, recorded_settings
from bert_tf.settings import recorded_fields
from bert_tf.tasks.task_settings import SETTINGS_CLASSES


def _declared(settings_class):
    """(name, what a missing value reads as, choices) of each recorded field of a settings class."""
    return [
        (
            field.name,
            field.metadata.get("recorded_default", field.default),
            tuple(field.metadata["choices"]) if field.metadata.get("choices") else None,
        )
        for field in recorded_fields(settings_class)
    ]


@pytest.mark.parametrize("model_type", sorted(SETTINGS_CLASSES))
def test_recorded_settings_are_the_scripts_recorded_flags(model_type):
    table = [
        (setting.name, setting.default, setting.choices)
        for setting in RECORDED_SETTINGS[model_type]
    ]
    assert table == _declared(SETTINGS_CLASSES[model_type])


def test_every_task_with_settings_is_in_the_table():
    assert set(RECORDED_SETTINGS) == set(SETTINGS_CLASSES)


def test_recorded_settings_fill_defaults_and_check_choices():
    settings = recorded_settings("classifier", doc_stride=64, window_combination=None)
    assert vars(settings) == {
        "doc_stride": 64,
        "window_combination": "mean",
        "is_pair": False,
        "is_regression": False,
    }
    with pytest.raises(ValueError, match="window_combination 'sum' is none of"):
        recorded_settings("classifier", window_combination="sum")
    with pytest.raises(ValueError, match=r"unknown squad settings \['labels_file'\]"):
        recorded_settings("squad", labels_file="x")
    assert recorded_settings("multiple_choice") is None


def test_task_info_reads_its_settings_from_the_table():
    info = TaskInfo(model_type="embedding", pooling="cls")
    assert dataclasses.asdict(info)["settings"] is not None
    assert (info.settings.pooling, info.settings.normalize) == ("cls", True)
