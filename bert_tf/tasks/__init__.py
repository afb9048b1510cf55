"""The tasks: every one has the same shape, and this registry is where the rest of the project finds them.

Each task module holds its model (BertModel + a `heads.BertHead`), its settings dataclass (the flags),
its run (a `finetuning.FineTuningRun`: its data, loss, metrics and outputs), its part of task.json and
its in-graph serving, and registers a `spec.TaskSpec` here. Scripts parse flags and call
`SPEC.run(config)`; export_saved_model.py and --init_checkpoint find a checkpoint's task through
TASKS. bench/ and the demo import tasks, never scripts. A new task is one module here (and one in
bert_tf/data/), added to TASKS.
"""

from bert_tf.errors import InputError
from bert_tf.tasks import (
    classification,
    embedding,
    encoder,
    feature_based,
    multi_label,
    multiple_choice,
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


def get_task(name):
    """The TaskSpec of a model_type (task.json) or --model_type; a pretraining run exports its encoder."""
    if name == "pretraining":
        name = encoder.SPEC.name
    if name not in TASKS:
        raise InputError(f"--model_type must be one of {sorted(TASKS)}, got {name!r}")
    return TASKS[name]
