"""Distil a fine-tuned classifier (a run_classifier.py output_dir) into a shallower student.

The student takes the teacher's config with --student_layers of its layers (spread evenly, or
--student_layer_map) and starts from the teacher's weights; or --student_config and
--student_init_checkpoint start it from another BERT. It learns the teacher's probabilities at
--temperature (Hinton et al., 2015), optionally with the true labels (--hard_label_weight), on the
training data and --transfer_file's unlabelled texts. The teacher's logits are computed once per
text and kept in --output_dir/teacher_logits/. --output_dir is a classifier run's folder (task.json,
labels.txt, vocab.txt, checkpoints, eval_results.txt, test_results.tsv): export_saved_model.py,
convert_checkpoint.py and BertTextClassifier.from_preset take it as they take run_classifier.py's.
Restarting with the same --output_dir resumes training.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf.tasks.distillation import run  # noqa: E402 (after TensorFlow's quiet start)
from bert_tf.tasks.task_settings import DistillationSettings  # noqa: E402

# The flags: bert_tf/tasks/task_settings.py and the shared ones (bert_tf/shared_settings.py).
SETTINGS = DistillationSettings


def make_run(settings):
    """The distillation run of the flags (the teacher and the student checked first)."""
    return run.make_run(settings)


def cli_main():
    """Console entry point `bert-run-distillation`."""
    cli.run_main(SETTINGS, make_run, __name__)


if __name__ == "__main__":
    cli_main()
