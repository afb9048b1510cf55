"""The tasks' runs: every one has the same shape, and this registry is where the scripts find them.

Each task is a folder, `tasks/<task>/`: its `task.py` holds its task (a `task_parts.Task` subclass
filling the parts a `finetuning.FineTuningRun` calls: its data, loss, metrics and outputs), its
`spec.TaskSpec` (its network, from bert_tf/models/networks/, and its settings) and its run (the
FineTuningRun of that task, for Python callers); beside it, its data reading and its variant. Its settings dataclass (the flags, each declared once, the recorded ones
also its part of task.json) is in `task_settings.py`. The plain encoder (`extract_features_run.py`,
extract_features.py's run) is a task without a fine-tuning run. The specs and runs are listed here,
by hand: `TASKS` (the specs), `TASK_CLASSES` (the Task classes) and `RUNS` (the run classes). A fine-tuning script's flags are
`script_settings(task)` (the task's and its variants': multi-label in run_classifier.py,
feature-based in run_ner.py) and its run is `make_run(task, settings)`: the variant whose flag is set,
or a sweep of runs. export_saved_model.py and --init_checkpoint find a checkpoint's task through
TASKS. docs/adding_a_task.md is the checklist.
"""

from bert_tf.errors import InputError
from bert_tf.tasks import extract_features_run, sweep
from bert_tf.tasks.classification import multi_label
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.embedding import task as embedding
from bert_tf.tasks.multiple_choice import task as multiple_choice
from bert_tf.tasks.squad import task as squad
from bert_tf.tasks.tagging import feature_based
from bert_tf.tasks.tagging import task as tagging

TASKS = {
    spec.name: spec
    for spec in (
        extract_features_run.SPEC,
        classification.SPEC,
        multi_label.SPEC,
        squad.SPEC,
        tagging.SPEC,
        feature_based.SPEC,
        multiple_choice.SPEC,
        embedding.SPEC,
    )
}

# The Task of each task with a script (its parts a FineTuningRun calls), by its spec's name.
TASK_CLASSES = {
    task.spec.name: task
    for task in (
        classification.ClassifierTask,
        multi_label.MultiLabelTask,
        squad.SquadTask,
        tagging.TaggerTask,
        feature_based.FeatureTaggerTask,
        multiple_choice.MultipleChoiceTask,
        embedding.EmbeddingTask,
    )
}

# The run of each task with a script: the FineTuningRun of its Task (`run_class(settings)`).
RUNS = {
    classification.SPEC.name: classification.ClassifierRun,
    multi_label.SPEC.name: multi_label.MultiLabelRun,
    squad.SPEC.name: squad.SquadRun,
    tagging.SPEC.name: tagging.TaggerRun,
    feature_based.SPEC.name: feature_based.FeatureTaggerRun,
    multiple_choice.SPEC.name: multiple_choice.MultipleChoiceRun,
    embedding.SPEC.name: embedding.EmbeddingRun,
}


def get_task(name):
    """The TaskSpec of a model_type (task.json) or --model_type; a pretraining run exports its encoder."""
    if name == "pretraining":
        name = extract_features_run.SPEC.name
    if name not in TASKS:
        raise InputError(f"--model_type must be one of {sorted(TASKS)}, got {name!r}")
    return TASKS[name]


def variants(task):
    """The registered variants of `task` (a TaskSpec): the specs whose variant_of it is."""
    return [spec for spec in TASKS.values() if spec.variant_of is task]


def script_settings(task):
    """The settings dataclass of `task`'s script: the settings class of the task, or of its variant
    (whose settings class derives from the task's, so it has the task's flags too).

    Raises:
      TypeError: a task with several variants needs one settings class deriving from all of theirs,
        declared in a module and listed as a variant's settings_class.
    """
    classes = [task.settings_class, *(variant.settings_class for variant in variants(task))]
    leaves = [c for c in classes if not any(o is not c and issubclass(o, c) for o in classes)]
    if len(leaves) != 1:
        names = ", ".join(c.__name__ for c in leaves)
        raise TypeError(f"task {task.name!r}: no settings class of its script derives from {names}")
    return leaves[0]


def choose(task, settings):
    """The spec that runs `settings` in `task`'s script: the variant whose flag is set, else
    `task`."""
    return next((spec for spec in variants(task) if spec.is_chosen(settings)), task)


def make_run(task, settings):
    """The run of `task`'s script for `settings`, made and checked, not yet started: the run of the
    variant `choose` picks, or a sweep of such runs when a sweep flag lists several values
    (bert_tf/tasks/sweep.py). Its `run()` does the script's steps."""
    run_class = RUNS[choose(task, settings).name]
    if sweep.is_sweep(settings):
        return sweep.Sweep(settings, run_class)
    return run_class(settings)


def run_script(task, settings):
    """What `task`'s script does with `settings`, for Python callers (tests, bench/, the demo):
    `make_run(task, settings).run()`; returns the run's outcome ({"train", "eval", "predict",
    "export"}, or a sweep's)."""
    return make_run(task, settings).run()
