"""NetworkSpec: what rebuilds a task's id-level network, finds its head in a Google checkpoint, and
exports it; each network module declares its own (`NETWORK`), network_registry.py lists them."""

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
    """One task's network, known without its run or its flags.

    Attributes:
      name: the model_type of a run's task.json ("classifier", "squad", ...).
      build_model: (BertConfig, TaskInfo) -> the task's keras.Model.
      export_model: (model, TaskInfo, vocab_file, export_dir, version=None, **options) -> the path
        of the export it writes (docs/serving.md's contract).
      google_head: the name of its head's output_weights in a Google-format checkpoint (e.g.
        "cls/squad/output_weights"), or None for a network without a head of its own.
      info_from_google_head: (shape of that output_weights) -> a TaskInfo's head settings (dict),
        for a Google checkpoint that has no task.json beside it.
    """

    name: str
    build_model: Callable
    export_model: Callable
    google_head: str | None = None
    info_from_google_head: Callable | None = None
