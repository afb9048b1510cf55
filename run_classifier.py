"""Fine-tune BERT for sentence (pair) classification or regression: GLUE, XNLI, your own TSV/CSV, or TFDS.

The original run_classifier.py's flags, plus --distribution_strategy, --mixed_precision, --jit_compile,
--seed, --export_dir (a SavedModel that serves raw text) and the data-source flags. Writes
train/eval/predict.tf_record (reused while their settings match), checkpoints (model.ckpt-<step>),
eval_results.txt, test_results.tsv, labels.txt and task.json to --output_dir; when the test file has
the label column, test_results.txt too (eval_results.txt's metrics, on the test set). Restarting with
the same --output_dir resumes training; --init_checkpoint of a fine-tuned classifier predicts with its
head.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf import tasks  # noqa: E402 (after TensorFlow's quiet start)

TASK = tasks.TASKS["classifier"]
# The flags: MultiLabelSettings (bert_tf/tasks/task_settings.py) and the shared ones it derives from
# (bert_tf/shared_settings.py).
SETTINGS = tasks.script_settings(TASK)


def make_run(settings):
    """The run the flags ask for: a classifier's, a multi-label classifier's with
    --multi_label=True, or a sweep of such runs when a sweep flag lists several values."""
    return tasks.make_run(TASK, settings)


def cli_main():
    """Console entry point `bert-run-classifier` (--multi_label=True: several labels per text)."""
    cli.run_main(SETTINGS, make_run, __name__)


if __name__ == "__main__":
    cli_main()
