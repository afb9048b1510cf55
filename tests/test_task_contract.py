"""The contract a fine-tuning task fills (docs/adding_a_task.md), checked on the modules that state it:
tasks/task_parts.py and finetuning.py (a Task's parts, the run they are given to), settings.py and spec.py
(each setting declared once), run.py, task_head.py and the registry (bert_tf/tasks/__init__.py)."""

import ast
import dataclasses
import inspect
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.models.networks import squad_serving
from bert_tf.models.networks.task_head import BertHead
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.settings import derived, flag_fields, recorded_settings, setting
from bert_tf.shared_settings import FineTuningSettings
from bert_tf.tasks import RUNS, TASK_CLASSES, TASKS, choose, script_settings, variants
from bert_tf.tasks.classification.task import LABEL_SCHEME
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.run import load_bert_config
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_parts import Task, dummy_batch, padding_of
from bert_tf.tasks.task_settings import SETTINGS_CLASSES

from conftest import SAMPLE_DIR

REQUIRED_PARTS = {
    "read_split",
    "feature_settings",
    "make_records",
    "feature_spec",
    "loss",
    "evaluate",
    "predict_test",
}


def _task_class(skipped=(), spec=TASKS["classifier"]):
    """A Task subclass that fills every required part but `skipped`."""
    namespace = {name: lambda self, *args, **kwargs: None for name in REQUIRED_PARTS - set(skipped)}
    return type("PartialTask", (Task,), {**namespace, "spec": spec})


def test_a_task_that_misses_a_required_part_fails_when_made_naming_them():
    # Python's own check, as for any abstract class: its message names the missing methods.
    with pytest.raises(TypeError, match=r"abstract class PartialTask .*\bloss\b.*\bpredict_test\b"):
        _task_class(skipped=("loss", "predict_test"))(None)
    with pytest.raises(TypeError, match=r"abstract class PartialTask .*\bevaluate\b"):
        FineTuningRun(None, _task_class(skipped=("evaluate",)))


def test_the_required_parts_are_the_abstract_ones():
    assert Task.__abstractmethods__ == REQUIRED_PARTS


def test_a_run_of_a_task_without_its_spec_fails_when_made():
    with pytest.raises(TypeError, match=r"PartialTask.spec is not set"):
        FineTuningRun(None, _task_class(spec=None))


def test_every_registered_task_fills_every_part_and_its_run_is_the_fine_tuning_run_of_it(
    monkeypatch,
):
    with_flags = sorted(name for name, spec in TASKS.items() if spec.settings_class is not None)
    assert sorted(TASK_CLASSES) == sorted(RUNS) == with_flags and len(RUNS) >= 6
    made = []
    monkeypatch.setattr(
        FineTuningRun, "__init__", lambda run, settings, task_class: made.append(task_class)
    )
    for name, task_class in TASK_CLASSES.items():
        assert issubclass(task_class, Task), name
        assert not task_class.__abstractmethods__, (name, task_class.__abstractmethods__)
        assert task_class.spec is TASKS[name], name
        # A task's run is a name for FineTuningRun(settings, its Task), and nothing else.
        run_class = RUNS[name]
        assert run_class.__bases__ == (FineTuningRun,), name
        assert not _own_methods(run_class), (name, _own_methods(run_class))
        run_class(None)
        assert made[-1] is task_class, name


def test_the_padding_is_zeros_of_the_spec_with_the_values_asked():
    spec = {
        "input_ids": tf.io.FixedLenFeature([3], tf.int64),
        "choices": tf.io.FixedLenFeature([2, 3], tf.int64),
        "label_ids": tf.io.FixedLenFeature([2], tf.float32),
        "word_ids": tf.io.FixedLenFeature([3], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64, default_value=1),
    }
    padding = padding_of(spec, word_ids=-1)
    assert padding == {
        "input_ids": [0, 0, 0],
        "choices": [[0, 0, 0], [0, 0, 0]],
        "label_ids": [0.0, 0.0],
        "word_ids": [-1, -1, -1],
        "is_real_example": 0,
    }
    assert isinstance(padding["label_ids"][0], float) and isinstance(padding["input_ids"][0], int)
    batch = dummy_batch(spec, padding)
    assert batch["choices"].shape == (1, 2, 3) and batch["choices"].dtype == tf.int32
    assert batch["label_ids"].dtype == tf.float32 and batch["is_real_example"].shape == (1,)


def test_a_padding_value_outside_the_spec_is_an_error():
    with pytest.raises(
        ValueError, match=r"padding values \['colour'\] are not in the feature spec"
    ):
        padding_of({"input_ids": tf.io.FixedLenFeature([2], tf.int64)}, colour=1)


@dataclasses.dataclass(kw_only=True)
class _Config:
    stride: int | None = setting(None, "A stride.", recorded=True)
    combination: str | None = setting(
        None, "A rule.", choices=("mean", "max"), recorded=True, recorded_default="mean"
    )
    batch: int = setting(8, "Not recorded.")
    is_pair: bool = derived(False, "From the data.")


def test_recorded_settings_are_the_recorded_fields_with_their_task_json_defaults():
    assert vars(recorded_settings(_Config)) == {
        "stride": None,
        "combination": "mean",
        "is_pair": False,
    }
    assert recorded_settings(_Config, combination=None).combination == "mean"  # a task.json's null
    assert recorded_settings(_Config, stride=3, is_pair=True).stride == 3
    with pytest.raises(ValueError, match="combination 'sum' is none of mean, max"):
        recorded_settings(_Config, combination="sum")
    with pytest.raises(ValueError, match=r"unknown settings \['batch'\]"):
        recorded_settings(_Config, batch=4)  # a flag, not recorded
    # A derived value is recorded, but no flag.
    assert [field.name for field in flag_fields(_Config)] == ["stride", "combination", "batch"]


def test_a_task_json_without_a_task_s_settings_reads_their_declared_defaults():
    for name, spec in TASKS.items():
        if spec.settings_class is None:
            continue
        info = TaskInfo.from_json({"model_type": name}, "task.json")
        recorded = [
            f for f in dataclasses.fields(spec.settings_class) if f.metadata.get("recorded")
        ]
        expected = {f.name: f.metadata.get("recorded_default", f.default) for f in recorded}
        assert (vars(info.settings) if info.settings else {}) == expected, name


def test_the_squad_export_takes_the_settings_run_squad_records():
    recorded = vars(recorded_settings(TASKS["squad"].settings_class))
    exported = {f.name: f.default for f in dataclasses.fields(squad_serving.QaSettings)}
    assert exported == {**recorded, "max_seq_length": 384}
    flags = {f.name: f.default for f in flag_fields(TASKS["squad"].settings_class)}
    assert {name: flags[name] for name in exported} == exported


def test_a_variant_runs_when_its_flag_is_set_else_its_task():
    classifier, tagger = TASKS["classifier"], TASKS["tagger"]
    assert variants(classifier) == [TASKS["multi_label"]]
    settings_class = script_settings(classifier)
    assert choose(classifier, settings_class(multi_label=True)) is TASKS["multi_label"]
    assert choose(classifier, settings_class()) is classifier
    assert choose(classifier, TASKS["classifier"].settings_class()) is classifier  # no variant's
    settings_class = script_settings(tagger)
    assert choose(tagger, settings_class(feature_layers="last_hidden")) is TASKS["feature_tagger"]
    assert choose(tagger, settings_class()) is tagger


def test_a_script_takes_the_flags_of_its_task_and_of_every_variant():
    for spec in TASKS.values():
        if spec.settings_class is None or spec.variant_of is not None:
            continue
        script_flags = {field.name for field in flag_fields(script_settings(spec))}
        for member in (spec, *variants(spec)):
            own = {field.name for field in flag_fields(member.settings_class)}
            assert own <= script_flags, (spec.name, member.name, own - script_flags)


def test_a_variant_names_its_task_and_its_flag():
    with pytest.raises(TypeError, match="a variant needs both variant_of and chosen_by"):
        TaskSpec(name="x", build_model=None, export_model=None, variant_of=TASKS["classifier"])


def test_a_fine_tuning_config_asks_for_its_steps_and_names_a_missing_flag():
    config = FineTuningSettings(do_train=True, do_predict=True)
    assert config.asked_steps() == ("train", "predict")
    assert config.batch_sizes() == {"train": 32, "predict": 8}
    with pytest.raises(InputError, match="--vocab_file is required"):
        config.check()


def test_the_bert_config_file_is_checked_against_the_flags(tmp_path):
    path = str(SAMPLE_DIR / "bert_config_tiny.json")
    positions = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())
    limit = positions["max_position_embeddings"]
    assert load_bert_config(path, limit).max_position_embeddings == limit
    with pytest.raises(InputError, match=f"--max_seq_length={limit + 1} exceeds"):
        load_bert_config(path, limit + 1)
    with pytest.raises(InputError, match="--bert_config_file=.*missing.json does not exist"):
        load_bert_config(str(tmp_path / "missing.json"), 8)


def test_a_head_is_a_dense_layer_under_its_google_names():
    head = BertHead(units=3, hidden_size=8, google_scope="cls/x/")
    inputs = tf.random.stateless_normal([2, 5, 8], seed=[1, 2])
    logits = head(inputs)  # [B, S, U]
    assert logits.shape == (2, 5, 3) and logits.dtype == tf.float32
    weights, bias = head.output_weights.numpy(), head.output_bias.numpy()
    expected = inputs.numpy() @ weights.T + bias
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert sorted(head.google_variables()) == ["cls/x/output_bias", "cls/x/output_weights"]
    assert BertHead.from_config(head.get_config()).get_config() == head.get_config()


def test_two_variants_of_a_task_give_its_script_the_flags_of_both(monkeypatch):
    task = TASKS["multiple_choice"]

    @dataclasses.dataclass(kw_only=True)
    class FirstConfig(task.settings_class):
        first: bool = setting(False, "The first variant.")

    @dataclasses.dataclass(kw_only=True)
    class SecondConfig(task.settings_class):
        second: bool = setting(False, "The second variant.")

    for name, settings_class in (("first", FirstConfig), ("second", SecondConfig)):
        spec = TaskSpec(
            name=name,
            build_model=None,
            export_model=None,
            settings_class=settings_class,
            variant_of=task,
            chosen_by=name,
        )
        monkeypatch.setitem(TASKS, name, spec)
    with pytest.raises(TypeError, match="no settings class of its script derives from FirstConfig"):
        script_settings(task)

    @dataclasses.dataclass(kw_only=True)
    class BothConfig(FirstConfig, SecondConfig):
        """The script's settings: declared, deriving from both variants'."""

    spec = dataclasses.replace(TASKS["second"], name="both", settings_class=BothConfig)
    monkeypatch.setitem(TASKS, "both", spec)
    settings_class = script_settings(task)
    assert settings_class is BothConfig
    flags = {field.name for field in flag_fields(settings_class)}
    assert {"first", "second", "data_dir"} <= flags
    assert choose(task, settings_class(second=True)) is TASKS["second"]
    assert choose(task, settings_class()) is task


def test_task_json_s_reader_knows_the_settings_of_every_registered_task():
    with_settings = {
        name: spec.settings_class for name, spec in TASKS.items() if spec.settings_class
    }
    assert SETTINGS_CLASSES == with_settings


def _own_methods(run_class):
    """The methods (and properties) a run class defines beside its __init__."""
    return sorted(
        name
        for name, value in vars(run_class).items()
        if not name.startswith("__") and (callable(value) or isinstance(value, property))
    )


def _overrides_of_undeclared_parts(task_class):
    """ "Class.name overrides Base.name" for each method (or property) a task's class redefines
    that a base implements and no contract declares (the Task's parts, the classifier's
    LABEL_SCHEME)."""
    declared = set(vars(Task)) | set(LABEL_SCHEME)
    found = []
    for klass in task_class.__mro__:
        if klass in Task.__mro__:
            continue  # the contract, not a task's
        for name, value in vars(klass).items():
            if name.startswith("__") or name in declared:
                continue
            if not (inspect.isfunction(value) or isinstance(value, property)):
                continue
            base = next((b for b in klass.__mro__[1:] if name in vars(b)), None)
            if base is not None and not getattr(vars(base)[name], "__isabstractmethod__", False):
                found.append(f"{klass.__name__}.{name} overrides {base.__name__}.{name}")
    return found


def test_no_task_overrides_a_method_that_is_not_a_declared_part():
    for name, task_class in TASK_CLASSES.items():
        assert not _overrides_of_undeclared_parts(task_class), name
    # What the check finds: a task that redefines another task's own method instead of a part.
    planted = type("Planted", (TASK_CLASSES["tagger"],), {"predict_words": lambda self: None})
    assert _overrides_of_undeclared_parts(planted) == [
        "Planted.predict_words overrides TaggerTask.predict_words"
    ]
    # And a run that redefines a shared step instead of its task filling a part.
    planted_run = type("PlantedRun", (FineTuningRun,), {"validate": lambda self: None})
    assert _own_methods(planted_run) == ["validate"]


def _settings_assignments(path):
    """(function, line) of each `<name>.settings = ...` in the module at `path`."""
    tree = ast.parse(path.read_text())
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Attribute) and t.attr == "settings" for t in targets):
                found.append((function.name, node.lineno))
    return found


def test_a_run_s_settings_are_set_once_and_settled_once_by_its_task():
    folder = pathlib.Path(inspect.getfile(Task)).parent  # bert_tf/tasks
    found = {
        str(path.relative_to(folder)): _settings_assignments(path)
        for path in sorted(folder.rglob("*.py"))
    }
    found = {path: where for path, where in found.items() if where}
    # Run.__init__ keeps the settings it checks; FineTuningRun.__init__ holds what its task's setup
    # settled; nothing else in bert_tf/tasks/ replaces them.
    assert {path: [name for name, _ in where] for path, where in found.items()} == {
        "finetuning.py": ["__init__"],
        "run.py": ["__init__"],
    }
