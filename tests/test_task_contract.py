"""The contract a fine-tuning task fills (docs/adding_a_task.md), checked on the modules that state it:
tasks/hooks.py and finetuning.py (the hooks), settings.py and spec.py (each setting declared once),
config.py, run.py, heads.py and the registry (bert_tf/tasks/__init__.py)."""

import dataclasses
import inspect
import json

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.models.networks import squad_serving
from bert_tf.models.networks.task_head import BertHead
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.settings import derived, flag_fields, recorded_settings, setting
from bert_tf.tasks import RUNS, TASKS, choose, script_settings, variants
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.hooks import ClassifierHooks, TaskHooks, dummy_batch, padding_of
from bert_tf.tasks.run import load_bert_config
from bert_tf.tasks.run_settings import FineTuningSettings
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_settings import SETTINGS_CLASSES

from conftest import SAMPLE_DIR

REQUIRED_HOOKS = {
    "read_split",
    "feature_settings",
    "make_records",
    "feature_spec",
    "loss",
    "evaluate",
    "predict_test",
}


def _run_class(skipped=(), spec=TASKS["classifier"]):
    """A FineTuningRun subclass that fills every required hook but `skipped`."""
    namespace = {name: lambda self, *args, **kwargs: None for name in REQUIRED_HOOKS - set(skipped)}
    return type("PartialRun", (FineTuningRun,), {**namespace, "spec": spec})


def test_a_run_that_misses_a_required_hook_fails_when_instantiated_naming_them():
    with pytest.raises(TypeError, match="PartialRun does not fill the FineTuningRun hooks loss, "):
        _run_class(skipped=("loss", "predict_test"))(None)
    with pytest.raises(TypeError, match="hooks evaluate \\(docs/adding_a_task.md\\)"):
        _run_class(skipped=("evaluate",))(None)


def test_the_required_hooks_are_the_abstract_ones():
    assert FineTuningRun.__abstractmethods__ == REQUIRED_HOOKS


def test_a_run_without_its_task_spec_fails_when_instantiated():
    with pytest.raises(TypeError, match=r"PartialRun.spec is not set"):
        _run_class(spec=None)(None)


def test_every_registered_run_fills_every_hook_and_knows_its_spec():
    with_flags = sorted(name for name, spec in TASKS.items() if spec.settings_class is not None)
    assert sorted(RUNS) == with_flags and len(RUNS) >= 6
    for name, run_class in RUNS.items():
        assert issubclass(run_class, FineTuningRun), name
        assert not run_class.__abstractmethods__, (name, run_class.__abstractmethods__)
        assert run_class.spec is TASKS[name], name


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
    with pytest.raises(TypeError, match="no config class of its script derives from FirstConfig"):
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


def _overrides_of_undeclared_methods(run_class):
    """ "Class.name overrides Base.name" for each method (or property) a task's class redefines
    that a base implements and neither tasks/hooks.py class declares."""
    hooks = {name for cls in (TaskHooks, ClassifierHooks) for name in vars(cls)}
    found = []
    for klass in run_class.__mro__:
        if klass in FineTuningRun.__mro__ or klass is ClassifierHooks:
            continue  # the framework and the contracts, not a task's
        for name, value in vars(klass).items():
            if name.startswith("__") or name in hooks:
                continue
            if not (inspect.isfunction(value) or isinstance(value, property)):
                continue
            base = next((b for b in klass.__mro__[1:] if name in vars(b)), None)
            if base is not None and not getattr(vars(base)[name], "__isabstractmethod__", False):
                found.append(f"{klass.__name__}.{name} overrides {base.__name__}.{name}")
    return found


def test_no_task_run_overrides_a_method_that_is_not_a_declared_hook():
    for name, run_class in RUNS.items():
        assert not _overrides_of_undeclared_methods(run_class), name
    # What the check finds: a run that redefines a shared step instead of filling a hook.
    planted = type("Planted", (RUNS["tagger"],), {"validate": lambda self: None})
    assert _overrides_of_undeclared_methods(planted) == [
        "Planted.validate overrides FineTuningRun.validate"
    ]
