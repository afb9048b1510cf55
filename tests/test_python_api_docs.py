"""docs/python_api.md lists every argument of each public Keras class's constructor and from_preset
(and bert_tf.distil) with its default, as inspect.signature gives them.

The keyword arguments a signature takes as **settings (BertQuestionAnswerer's run_squad.py settings,
BertMaskedLM's masking) are listed from where they are defined.
"""

import inspect
import re

import pytest

import bert_tf
from bert_tf.models import distillation, masked_lm, question_answerer
from bert_tf.models.networks import squad_serving

from conftest import REPO_DIR

CLASSES = ["BertTextClassifier", "BertTokenClassifier", "BertQuestionAnswerer",
           "BertMultipleChoice", "BertTextEmbedder", "BertMaskedLM", "BertPreprocessor"]  # fmt: skip


def _section(name):
    """The text of docs/python_api.md's "### <name>" section."""
    text = (REPO_DIR / "docs" / "python_api.md").read_text(encoding="utf-8")
    match = re.search(rf"^### {name}\n(.*?)(?=^##)", text, re.S | re.M)
    assert match, f"docs/python_api.md has no '### {name}' section"
    return " ".join(match.group(1).split())  # the lines of a signature joined


def _shown(default):
    """A default as the docs write it: strings in double quotes, the rest as Python's repr."""
    return f'"{default}"' if isinstance(default, str) else repr(default)


def _keyword_defaults(cls, method):
    """The named keyword arguments a **settings parameter of cls.method stands for."""
    if cls is bert_tf.BertQuestionAnswerer:
        defaults = squad_serving.QaSettings()
        return {name: getattr(defaults, name) for name in question_answerer._SETTINGS}
    if cls is bert_tf.BertMaskedLM and method == "from_preset":
        parameters = inspect.signature(cls.__init__).parameters
        return {name: parameters[name].default for name in masked_lm.MASKING_ARGUMENTS}
    return {}


def _arguments(cls, method):
    """{name: default (inspect.Parameter.empty when required)} of cls.method's arguments."""
    signature = inspect.signature(getattr(cls, method))
    arguments = {}
    for name, parameter in signature.parameters.items():
        if name in ("self", "cls"):
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(_keyword_defaults(cls, method))
        elif parameter.kind is not inspect.Parameter.VAR_POSITIONAL:
            arguments[name] = parameter.default
    return arguments


METHODS = [(name, method) for name in CLASSES for method in ("__init__", "from_preset")]


@pytest.mark.parametrize("name, method", METHODS)
def test_every_argument_is_in_the_docs_with_its_default(name, method):
    cls = getattr(bert_tf, name)
    section = _section(name)
    written = f"{name}(" if method == "__init__" else f"{name}.{method}("
    signature_line = re.search(re.escape(written) + r"[^`]*\)", section)
    assert signature_line, f"the {name} section shows no `{written}...)`"
    line = signature_line.group(0)
    arguments = _arguments(cls, method)
    assert arguments, f"{name}.{method} has no arguments to check"
    for argument, default in arguments.items():
        if default is inspect.Parameter.empty:
            assert re.search(rf"[(,] ?{argument}[,)]", line), f"{written}: {argument}"
        else:
            assert f"{argument}={_shown(default)}" in line, f"{written}: {argument}={default!r}"


def test_distil_s_arguments_are_in_the_docs_with_their_defaults():
    line = re.search(r"bert_tf\.distil\([^`]*\)", _section("BertTextClassifier"))
    assert line, "the BertTextClassifier section shows no `bert_tf.distil(...)`"
    for argument, parameter in inspect.signature(distillation.distil).parameters.items():
        if parameter.default is inspect.Parameter.empty:
            assert re.search(rf"[(,] ?{argument}[,)]", line.group(0)), argument
        else:
            assert f"{argument}={_shown(parameter.default)}" in line.group(0), argument


def test_the_docs_show_no_argument_a_signature_does_not_have():
    for name in CLASSES:
        section = _section(name)
        known = set()
        for method in ("__init__", "from_preset"):
            known |= set(_arguments(getattr(bert_tf, name), method))
        if name == "BertTextClassifier":  # bert_tf.distil's student is one, listed in its section
            known |= set(inspect.signature(distillation.distil).parameters)
        shown = set(re.findall(r"[(,*] ?(\w+)=", section))
        assert shown <= known, f"{name}: the docs show {sorted(shown - known)}"
