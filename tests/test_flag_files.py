"""A script's flags are read in two files at most: its settings class's and bert_tf/shared_settings.py.

Each absl script names its settings class (`SETTINGS`). Its flags are defined here in a fresh absl
FlagValues, and each is traced to the class that declares it: the class whose own annotations hold
the field (`setting`, or `restated` where a script takes a shared flag its own way). No class hook
or metaclass rewrites a field.
"""

import ast
import dataclasses
import importlib
import inspect
import pathlib
import typing

import pytest
from absl import flags

from bert_tf.settings import define_flags, flag_fields, restated, setting
from bert_tf.shared_settings import DocStrideSetting
from bert_tf.tasks.pretraining import PretrainingSettings
from bert_tf.tasks.task_settings import DataSource

from conftest import REPO_DIR

MAX_FILES = 2
# evaluate_squad.py keeps the official script's argparse command line (test below).
ABSL_SCRIPTS = sorted(
    path.stem for path in REPO_DIR.glob("*.py") if path.stem not in ("setup", "evaluate_squad")
)


def _declaring_class(settings_class, name):
    """The class of `settings_class`'s MRO whose own annotations declare the field `name`."""
    return next(c for c in settings_class.__mro__ if name in c.__dict__.get("__annotations__", {}))


def _declaring_files(settings_class):
    """{flag: the file (relative to the repository) whose class declares it}, for every flag
    define_flags makes of `settings_class`."""
    flag_values = flags.FlagValues()
    define_flags(settings_class, "a_script", flag_values=flag_values)
    names = [flag.name for flag in flag_values.get_key_flags_for_module("a_script")]
    assert sorted(names) == sorted(field.name for field in flag_fields(settings_class))
    return {
        name: str(
            pathlib.Path(inspect.getsourcefile(_declaring_class(settings_class, name)))
            .resolve()
            .relative_to(REPO_DIR)
        )
        for name in names
    }


def test_every_script_is_counted():
    assert len(ABSL_SCRIPTS) + 1 == 14, ABSL_SCRIPTS  # and evaluate_squad.py


@pytest.mark.parametrize("script", ABSL_SCRIPTS)
def test_a_script_declares_its_flags_in_two_files_at_most(script):
    files = _declaring_files(importlib.import_module(script).SETTINGS)
    by_file = {}
    for name, path in files.items():
        by_file.setdefault(path, []).append(name)
    assert len(files) >= 5
    assert len(by_file) <= MAX_FILES, f"{script}.py's flags come from {by_file}"


def test_the_count_sees_flags_spread_over_three_files():
    @dataclasses.dataclass(kw_only=True)
    class Spread(PretrainingSettings, DataSource):
        pass

    files = set(_declaring_files(Spread).values())
    assert files == {
        "bert_tf/shared_settings.py",
        "bert_tf/tasks/pretraining.py",
        "bert_tf/tasks/task_settings.py",
    }


def test_evaluate_squad_declares_its_options_in_its_own_file():
    import evaluate_squad

    source = (REPO_DIR / "evaluate_squad.py").read_text(encoding="utf-8")
    options = [o for a in evaluate_squad._parser()._actions for o in a.option_strings or [a.dest]]
    assert len(options) >= 10
    assert [o for o in options if o not in ("-h", "--help") and f'"{o}"' not in source] == []


@pytest.mark.parametrize("script", ABSL_SCRIPTS)
def test_a_restated_flag_has_its_base_type(script):
    settings_class = importlib.import_module(script).SETTINGS
    for field in flag_fields(settings_class):
        declaring = [
            c for c in settings_class.__mro__ if field.name in c.__dict__.get("__annotations__", {})
        ]
        types = {str(typing.get_type_hints(c)[field.name]) for c in declaring}
        assert len(types) == 1, f"{script}.py --{field.name}: {types} in {declaring}"


def test_restated_changes_only_the_default_help_and_sweep():
    @dataclasses.dataclass(kw_only=True)
    class Base:
        mode: str = setting("a", "The mode.", choices=["a", "b"], recorded=True)

    @dataclasses.dataclass(kw_only=True)
    class Own(Base):
        mode: str = restated(Base, "mode", "b", help="Our mode.", sweep=True)

    (base,), (own,) = dataclasses.fields(Base), dataclasses.fields(Own)
    assert (own.default, own.metadata["help"], own.metadata["sweep"]) == ("b", "Our mode.", True)
    # The rest of the flag is the base's: its choices, whether it is recorded.
    assert {**own.metadata, "help": "The mode.", "sweep": False} == dict(base.metadata)
    assert Base().mode == "a" and Own().mode == "b"


def test_restated_names_a_flag_its_base_lacks():
    with pytest.raises(TypeError, match="DocStrideSetting has no flag 'stride'"):
        restated(DocStrideSetting, "stride", 64)


def _classes_of_the_code():
    for path in [*sorted((REPO_DIR / "bert_tf").rglob("*.py")), *sorted(REPO_DIR.glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                yield path.relative_to(REPO_DIR), node


def test_no_class_rewrites_its_subclasses():
    hooks = [
        f"{path}: {node.name}"
        for path, node in _classes_of_the_code()
        if any(k.arg == "metaclass" for k in node.keywords)
        or any(
            isinstance(item, ast.FunctionDef) and item.name == "__init_subclass__"
            for item in node.body
        )
    ]
    assert hooks == []
    assert len(list(_classes_of_the_code())) > 50


def test_the_shared_flags_choices_are_the_models():
    # shared_settings.py sits below the model and writes these as plain values.
    from bert_tf import adapters, precision, shared_settings
    from bert_tf.models import task

    assert shared_settings.MIXED_PRECISION_POLICIES == precision.MIXED_PRECISION_POLICIES
    assert shared_settings.LORA_TARGETS == adapters.LORA_TARGETS
    assert shared_settings.DEFAULT_LORA_TARGETS == adapters.DEFAULT_LORA_TARGETS
    assert shared_settings.LORA_LEARNING_RATE == task.LORA_LEARNING_RATE
