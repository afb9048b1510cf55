"""TaskSpec: what the rest of the project needs to know of a task, listed in bert_tf.tasks.TASKS."""

import dataclasses
from collections.abc import Callable

from bert_tf.models.networks.network_spec import NetworkSpec


@dataclasses.dataclass(frozen=True)
class TaskSpec(NetworkSpec):
    """One task: its network (NetworkSpec: rebuild, Google head, export) and its script's settings.

    The spec knows nothing of the task's run: the task's class names its spec (`Task.spec`), and
    the registry (bert_tf.tasks.TASK_CLASSES, RUNS) finds a spec's task and run by its name.

    Attributes (beside NetworkSpec's):
      info_from_encoder: (checkpoint prefix, the encoder's TaskInfo) -> this task's TaskInfo, for a
        task whose model is an encoder's with no weights of its own (embeddings): it then exports
        from any encoder checkpoint (export_saved_model.py --model_type); else None.
      settings_class: the settings dataclass of its script (tasks/task_settings.py's, deriving from
        tasks/run_settings.py's TaskSettings: the shared flags and the task's own); its recorded fields are the task's part of task.json
        (networks.task_info.RECORDED_SETTINGS). None for the encoder.
      variant_of, chosen_by: a variant (multi-label, feature-based) runs in the script of the task
        `variant_of` when its flag `chosen_by` is set (bert_tf.tasks.make_run); else None.
    """

    info_from_encoder: Callable | None = None
    settings_class: type | None = None
    variant_of: "TaskSpec | None" = None
    chosen_by: str | None = None

    @classmethod
    def of(cls, network, **task_parts):
        """The spec of a task on `network` (a NetworkSpec), with the task's own parts."""
        parts = {
            field.name: getattr(network, field.name) for field in dataclasses.fields(NetworkSpec)
        }
        return cls(**parts, **task_parts)

    def __post_init__(self):
        if (self.variant_of is None) != (self.chosen_by is None):
            raise TypeError(f"task {self.name!r}: a variant needs both variant_of and chosen_by")

    def is_chosen(self, settings):
        """Whether `settings` (a script's settings) asks for this variant: it is one of the variant's
        settings and its flag is set (always False for a task)."""
        return (
            self.chosen_by is not None
            and isinstance(settings, self.settings_class)
            and bool(getattr(settings, self.chosen_by))
        )
