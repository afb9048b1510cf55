"""TaskSpec: what the rest of the project needs to know of a task, listed in bert_tf.tasks.TASKS."""

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task: how to rebuild its model, find its head in a Google checkpoint, and export it.

    The spec knows nothing of the task's run: the run class names its spec (`FineTuningRun.spec`),
    and the registry (bert_tf.tasks.RUNS) finds a spec's run by its name.

    Attributes:
      name: the model_type of the run's task.json ("classifier", "squad", ...).
      build_model: (BertConfig, TaskInfo) -> the task's keras.Model (a BertModel for the encoder).
      export_model: (model, TaskInfo, vocab_file, export_dir, version=None, **options) -> the path
        of the export it writes (docs/serving.md's contract).
      google_head: the name of its head's output_weights in a Google-format checkpoint (e.g.
        "cls/squad/output_weights"), or None for the encoder.
      info_from_google_head: (shape of that output_weights) -> a TaskInfo's head settings (dict),
        for a Google checkpoint that has no task.json beside it.
      info_from_encoder: (checkpoint prefix, the encoder's TaskInfo) -> this task's TaskInfo, for a
        task whose model is an encoder's with no weights of its own (embeddings): it then exports
        from any encoder checkpoint (export_saved_model.py --model_type); else None.
      config_class: the settings dataclass of its script (tasks/config.py's FineTuningConfig and
        the task's own flags); its recorded fields are the task's part of task.json
        (run_files.TaskInfo.settings). None for the encoder.
      variant_of, chosen_by: a variant (multi-label, feature-based) runs in the script of the task
        `variant_of` when its flag `chosen_by` is set (bert_tf.tasks.make_run); else None.
    """

    name: str
    build_model: Callable
    export_model: Callable
    google_head: str | None = None
    info_from_google_head: Callable | None = None
    info_from_encoder: Callable | None = None
    config_class: type | None = None
    variant_of: "TaskSpec | None" = None
    chosen_by: str | None = None

    def __post_init__(self):
        if (self.variant_of is None) != (self.chosen_by is None):
            raise TypeError(f"task {self.name!r}: a variant needs both variant_of and chosen_by")

    def is_chosen(self, config):
        """Whether `config` (a script's settings) asks for this variant: it is one of the variant's
        settings and its flag is set (always False for a task)."""
        return (
            self.chosen_by is not None
            and isinstance(config, self.config_class)
            and bool(getattr(config, self.chosen_by))
        )
