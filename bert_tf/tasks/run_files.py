"""The names of bert_tf.models.networks.task_info, for the two importers not yet moved to it
(bert_tf/formats/model_out.py, bert_tf/tasks/distillation/teacher.py); removed once they import there."""

from bert_tf.models.networks.task_info import (  # noqa: F401
    TASK_FILE,
    VOCAB_FILE,
    TaskInfo,
    read_task_info,
)
