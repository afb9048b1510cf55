"""TaskSpec: what the rest of the project needs to know of a task, registered in bert_tf.tasks.TASKS."""

import dataclasses
from collections.abc import Callable

from bert_tf.tasks.run_files import TASK_SETTINGS


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task: how to rebuild its model, find its head in a Google checkpoint, and export it.

    Attributes:
      name: the model_type of the run's task.json ("classifier", "squad", ...).
      build_model: (BertConfig, TaskInfo) -> the task's keras.Model (a BertModel for the encoder).
      export_model: (model, TaskInfo, vocab_file, export_dir, version=None, **options) -> the path
        of the export it writes (DESIGN.md's serving contract).
      google_head: the name of its head's output_weights in a Google-format checkpoint (e.g.
        "cls/squad/output_weights"), or None for the encoder.
      info_from_google_head: (shape of that output_weights) -> a TaskInfo's head settings (dict),
        for a Google checkpoint that has no task.json beside it.
      settings_class: the dataclass of the task's own settings in task.json (its part of a TaskInfo,
        run_files.TASK_SETTINGS), or None.
      run_class: the task's FineTuningRun subclass (tasks/finetuning.py), whose `spec` becomes this
        spec; None for the encoder.
    """

    name: str
    build_model: Callable
    export_model: Callable
    google_head: str | None = None
    info_from_google_head: Callable | None = None
    run_class: type | None = None
    settings_class: type | None = None

    def __post_init__(self):
        if self.settings_class is not None:
            TASK_SETTINGS[self.name] = self.settings_class
        if self.run_class is not None:
            self.run_class.spec = self

    def run(self, config):
        """Runs the task's script as `config` says; returns {"train", "eval", "predict", "export"}
        (a sweep's outcome when a sweep flag lists several values: bert_tf/tasks/sweep.py)."""
        from bert_tf.tasks import sweep

        return sweep.run(config, self.run_class)
