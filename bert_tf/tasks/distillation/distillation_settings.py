"""run_distillation.py's settings: run_classifier.py's, plus the teacher, the student and the loss.

The student's encoder settings, vocabulary, casing and first weights come from the teacher's run
(--teacher_dir), so --bert_config_file, --init_checkpoint are not this script's to take: the run
fills them (tasks/distillation/run.py). A multi-label or regression teacher makes a student of its
kind; --multi_label follows the teacher.
"""

import dataclasses

from bert_tf.errors import InputError
from bert_tf.settings import changed, setting
from bert_tf.tasks.task_settings import MultiLabelSettings


@dataclasses.dataclass(kw_only=True)
class DistillationSettings(MultiLabelSettings):
    """run_distillation.py's settings."""

    vocab_file = changed(help="vocab.txt of the student; default the teacher's (its vocab.txt).")
    teacher_dir: str | None = setting(
        None, "The teacher: a run_classifier.py --output_dir (task.json, checkpoints, vocab.txt)."
    )
    student_layers: int | None = setting(
        None,
        "Encoder layers of the student, taken from the teacher's, spread evenly: the top layer of "
        "each of that many equal groups (2 of 12: layers 5 and 11).",
    )
    student_layer_map: str | None = setting(
        None, "Which teacher layers (0-based, comma-separated) the student starts from, e.g. 0,3."
    )
    student_config: str | None = setting(
        None,
        "bert_config.json of another BERT to start the student from (e.g. a small BERT of Turc "
        "et al., 2019) instead of the teacher's layers; its weights: --student_init_checkpoint.",
    )
    student_init_checkpoint: str | None = setting(
        None, "With --student_config: the student's first weights (its encoder; a new head)."
    )
    temperature: float = setting(
        2.0, "Softmax temperature of the teacher's and the student's probabilities (Hinton, 2015)."
    )
    hard_label_weight: float = setting(
        0.0,
        "Weight of the ordinary loss on the true labels beside the teacher's soft loss (weight "
        "1); transfer texts have no label and count 0.",
    )
    transfer_file: str | None = setting(
        None,
        "Unlabelled in-domain texts, one per line (text_a<TAB>text_b for a pair task), added to "
        "the training data with the teacher's probabilities as their only targets.",
    )

    positive = (*MultiLabelSettings.positive, "temperature")

    def check_distillation(self):
        """The distillation flags on their own, before the teacher is read.

        Raises:
          InputError: naming the flag.
        """
        if not self.teacher_dir:
            raise InputError("--teacher_dir is required (a run_classifier.py --output_dir)")
        for name in ("bert_config_file", "init_checkpoint"):
            if getattr(self, name):
                raise InputError(
                    f"--{name}: the student's encoder comes from --teacher_dir, or from "
                    "--student_config and --student_init_checkpoint"
                )
        if self.temperature <= 0:
            raise InputError(f"--temperature must be positive, got {self.temperature}")
        if self.hard_label_weight < 0:
            raise InputError(f"--hard_label_weight must be >= 0, got {self.hard_label_weight}")
        if self.student_init_checkpoint and not self.student_config:
            raise InputError("--student_init_checkpoint needs --student_config (its bert_config)")
        chosen = [
            f"--{name}"
            for name in ("student_layers", "student_layer_map", "student_config")
            if getattr(self, name) is not None
        ]
        if not chosen:
            raise InputError(
                "give the student: --student_layers, --student_layer_map or --student_config"
            )
        if self.student_config and len(chosen) > 1:
            raise InputError(f"{' and '.join(chosen)}: --student_config takes no teacher layers")
        if self.doc_stride is not None:
            raise InputError(
                "--doc_stride: distillation reads each text whole (cut to --max_seq_length)"
            )
        if self.class_weights not in (None, "", "none"):
            raise InputError("--class_weights: the distillation loss weighs no labels")
