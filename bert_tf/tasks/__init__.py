"""The tasks: every one has the same shape, and this registry is where the rest of the project finds them.

Each task module holds its model (BertModel + a `heads.BertHead`), its settings dataclass (the
flags, each declared once, the recorded ones also its part of task.json), its run (a
`finetuning.FineTuningRun`: its data, loss, metrics and outputs), its in-graph serving, and its
`spec.TaskSpec`, listed here. A script calls `script(model_type)`: its flags are those of the task
and of its variants (multi-label in run_classifier.py, feature-based in run_ner.py), and the
variant whose flag is set runs. export_saved_model.py and --init_checkpoint find a checkpoint's
task through TASKS. bench/ and the demo import tasks, never scripts. docs/adding_a_task.md is the
checklist.
"""

import dataclasses

from bert_tf.errors import InputError
from bert_tf.tasks import (
    classification,
    embedding,
    encoder,
    feature_based,
    multi_label,
    multiple_choice,
    run_files,
    squad,
    tagging,
)

TASKS = {
    spec.name: spec
    for spec in (
        encoder.SPEC,
        classification.SPEC,
        multi_label.SPEC,
        squad.SPEC,
        tagging.SPEC,
        feature_based.SPEC,
        multiple_choice.SPEC,
        embedding.SPEC,
    )
}

# task.json's reader learns each task's part here, and only here.
run_files.TASK_SETTINGS.update(
    {name: spec.settings_class for name, spec in TASKS.items() if spec.settings_class is not None}
)


def get_task(name):
    """The TaskSpec of a model_type (task.json) or --model_type; a pretraining run exports its encoder."""
    if name == "pretraining":
        name = encoder.SPEC.name
    if name not in TASKS:
        raise InputError(f"--model_type must be one of {sorted(TASKS)}, got {name!r}")
    return TASKS[name]


def variants(task):
    """The registered variants of `task` (a TaskSpec): the specs whose variant_of it is."""
    return [spec for spec in TASKS.values() if spec.variant_of is task]


def script_config(task):
    """The settings dataclass of `task`'s script: its flags and those of every variant of it."""
    classes = [task.config_class, *(variant.config_class for variant in variants(task))]
    leaves = [c for c in classes if not any(o is not c and issubclass(o, c) for o in classes)]
    if len(leaves) == 1:
        return leaves[0]
    merged = type(f"{task.config_class.__name__}WithVariants", tuple(leaves), {})
    return dataclasses.dataclass(kw_only=True)(merged)


def choose(task, config):
    """The spec that runs `config` in `task`'s script: the variant whose flag is set, else
    `task`."""
    return next((spec for spec in variants(task) if spec.is_chosen(config)), task)


def script(model_type):
    """(settings dataclass, run function) of the fine-tuning script of the task `model_type`, for
    bert_tf.cli.main: the run function runs the variant `choose` picks (a sweep when a sweep flag
    lists several values)."""
    task = TASKS[model_type]

    def run(config):
        return choose(task, config).run(config)

    return script_config(task), run
