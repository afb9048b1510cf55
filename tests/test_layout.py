"""The shape of the package (docs/architecture.md): no import circles, imports only down the layers, modules
of a few screens, one registry, one name for each class, the path flags several scripts share declared once."""

import ast
import re
from importlib import import_module

import pytest

from conftest import REPO_DIR

PACKAGE = REPO_DIR / "bert_tf"
# docs/architecture.md: a module fits on a few screens, a function on one.
MAX_MODULE_LINES = 450
MAX_FUNCTION_CODE_LINES = 60
# docs/architecture.md's layers, top to bottom: a module imports only from its own layer or those
# below. Each is (name in the docs' table, the modules it holds: a package takes its submodules; a
# module's longest prefix decides, so bert_tf.models.networks is not bert_tf.models).
LAYERS = (
    ("tasks", ("bert_tf.tasks",)),
    ("Keras models of raw strings", ("bert_tf.models",)),
    ("formats", ("bert_tf.formats",)),
    ("networks", ("bert_tf.models.networks",)),
    ("training", ("bert_tf.training",)),
    (
        "export and checkpoints",
        ("bert_tf.export", "bert_tf.checkpoints", "bert_tf.checkpoint_reading", "bert_tf.checkpoint_adapters",
         "bert_tf.litert"),
    ),
    ("Beam", ("bert_tf.beam",)),
    ("data", ("bert_tf.data", "bert_tf.vocabulary")),
    ("model", ("bert_tf.modeling", "bert_tf.layers", "bert_tf.adapters", "bert_tf.precision")),
    ("tokenization", ("bert_tf.tokenization", "bert_tf.preprocessing")),
    (
        "shared helpers",
        (
            "bert_tf.file_io", "bert_tf.atomic_folder", "bert_tf.errors", "bert_tf.settings",
            "bert_tf.shared_settings", "bert_tf.cli", "bert_tf.distribute", "bert_tf.optimization",
            "bert_tf.objectives", "bert_tf.metrics", "bert_tf.squad_evaluation",
            "bert_tf.progress_log", "bert_tf.log_filter", "bert_tf.sigterm",
        ),
    ),
)  # fmt: skip


def _module_name(path):
    parts = list(path.relative_to(REPO_DIR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(path, modules):
    """The bert_tf modules a module imports by name (`from bert_tf.x import y`: y if a module)."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module in modules:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                imported.add(submodule if submodule in modules else node.module)
    return imported


def test_no_module_of_the_package_imports_itself_in_a_circle():
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    state = {}  # name -> "open" while on the path, "done" after

    def visit(name, path):
        state[name] = "open"
        for child in sorted(graph[name]):
            if state.get(child) == "open":
                pytest.fail(f"import circle: {' -> '.join([*path, name, child])}")
            if child not in state:
                visit(child, [*path, name])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def _layer_of(module):
    """The index in LAYERS of a module's layer (its longest prefix), or None."""
    found = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(found)[1] if found else None


def test_every_module_has_a_layer():
    unplaced = [name for name in _modules() if name != "bert_tf" and _layer_of(name) is None]
    assert unplaced == [], "give each a layer in LAYERS and docs/architecture.md's table"


def test_no_import_runs_back_up_the_layers():
    modules = _modules()
    upward = []
    for name, path in modules.items():
        if name == "bert_tf":  # the package's root imports the public names of every layer
            continue
        for imported in sorted(_imports(path, modules) - {"bert_tf"}):
            if _layer_of(imported) < _layer_of(name):
                upward.append(f"{name} ({LAYERS[_layer_of(name)][0]}) imports {imported}")
    assert upward == []


def test_the_layers_are_the_order_of_docs_architecture_table():
    text = (REPO_DIR / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("## The layers", 1)[1].split("\n\n| layer |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
    assert rows == ["scripts", *(name for name, _ in LAYERS)]


def test_no_two_classes_of_the_package_share_a_name():
    defined = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        # Every `class X` line, a docstring's example included: a reader meets those names too.
        for name in re.findall(r"^\s*class (\w+)", text, flags=re.M):
            defined.setdefault(name, []).append(str(path.relative_to(REPO_DIR)))
    assert {name: paths for name, paths in defined.items() if len(paths) > 1} == {}


def test_no_comment_of_the_package_narrates_an_issue():
    # Comments explain the code as it is; an issue number is history, for the tracker.
    found = [
        f"{path.relative_to(REPO_DIR)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bissues? #?\d+", line, flags=re.I)
    ]
    assert found == []


def test_only_bert_tf_beam_imports_apache_beam():
    # apache-beam is the [beam] extra: the core package must import without it.
    importers = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "apache_beam" or n.startswith("apache_beam.") for n in names):
                importers.append(name)
    assert importers and all(name.startswith("bert_tf.beam") for name in importers), importers


def test_every_module_fits_on_a_few_screens():
    long = {
        name: count
        for name, path in _modules().items()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def _code_lines(function, source_lines):
    """A function's lines of code: not blank, not a comment, not its docstring (nested functions
    count toward the function that holds them)."""
    body = function.body
    docstring = (
        range(body[0].lineno, body[0].end_lineno + 1)
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
        else range(0)
    )  # fmt: skip
    return sum(
        1
        for number in range(function.lineno, function.end_lineno + 1)
        if number not in docstring
        and (line := source_lines[number - 1].strip())
        and not line.startswith("#")
    )


def test_every_function_fits_on_a_screen():
    long = {}
    for name, path in _modules().items():
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (count := _code_lines(node, source.splitlines())) > MAX_FUNCTION_CODE_LINES:
                    long[f"{name}.{node.name}:{node.lineno}"] = count
    assert not long, f"functions over {MAX_FUNCTION_CODE_LINES} lines of code: {long}"


def test_every_registered_task_builds_a_model_whose_head_has_its_google_names():
    from bert_tf.checkpoints import google_variable_names
    from bert_tf.modeling import BertConfig
    from bert_tf.models.networks.network_registry import NETWORKS
    from bert_tf.models.networks.task_info import TaskInfo
    from bert_tf.tasks import TASKS

    config = BertConfig.from_preset("bert_tiny", vocab_size=50)
    # Every task module's SPEC is in the registry: a new task cannot be left out of TASKS; and
    # every network is a task's.
    declared = {
        _module_name(path)
        for path in (PACKAGE / "tasks").rglob("*.py")
        if "\nSPEC = TaskSpec" in path.read_text(encoding="utf-8")
    }
    registered = {name for name in declared if import_module(name).SPEC in TASKS.values()}
    assert len(declared) == len(TASKS) and registered == declared, declared - registered
    assert set(NETWORKS) <= set(TASKS)
    for name, spec in TASKS.items():
        info = TaskInfo(model_type=name, labels=["a", "b", "c"])
        model = spec.build_model(config, info)
        names = google_variable_names(model)
        if spec.google_head is None:
            assert all(n.startswith("bert/") for n in names), name
            continue
        assert model.task_name == name
        assert spec.google_head in names, (name, spec.google_head)
        bias = spec.google_head.replace("output_weights", "output_bias")
        head = set(names) - {n for n in names if n.startswith("bert/")}
        # A head of more layers than the output one (feature_tagger's BiLSTM) keeps them in its scope.
        scope = spec.google_head.removesuffix("output_weights")
        assert head == {spec.google_head, bias} or (
            scope and {spec.google_head, bias} <= head and all(n.startswith(scope) for n in head)
        ), (name, sorted(head))


# bert_tf/shared_settings.py: the path and window flags several scripts take, declared there once.
SHARED_FLAGS = ("bert_config_file", "init_checkpoint", "vocab_file", "data_dir", "tfds_data_dir")
SHARED_FLAGS += ("doc_stride",)
# build_vocab.py's --vocab_file is the file it writes: another flag of the same name.
OWN_DECLARATIONS = {("bert_tf.vocabulary", "vocab_file")}


def test_a_shared_path_flag_is_declared_once():
    declared = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            call = node.value
            if (
                node.target.id in SHARED_FLAGS
                and isinstance(call, ast.Call)
                and getattr(call.func, "id", None) == "setting"
                and (name, node.target.id) not in OWN_DECLARATIONS
            ):
                declared.append((name, node.target.id))
    assert sorted(declared) == [("bert_tf.shared_settings", flag) for flag in sorted(SHARED_FLAGS)]
