"""Fine-tune BERT for multiple choice: SWAG's CSV files, or JSON lines of context, choices and label.

The original run_classifier.py's flags, plus --distribution_strategy, --mixed_precision, --jit_compile,
--seed, --export_dir (a SavedModel that scores raw-text choices) and --data_dir. Reads train.csv,
val.csv and test.csv (or train.jsonl, dev.jsonl, test.jsonl) from --data_dir; writes
train/eval/predict.tf_record (reused while their settings match), checkpoints (model.ckpt-<step>),
task.json, eval_results.txt (eval_accuracy, eval_loss) and test_results.tsv (one line of choice
probabilities per test example) to --output_dir; when the test file has labels, test_results.txt too
(eval_results.txt's metrics, on the test set). Restarting with the same --output_dir resumes
training.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf import tasks  # noqa: E402 (after TensorFlow's quiet start)

TASK = tasks.TASKS["multiple_choice"]
# The flags: MultipleChoiceSettings (bert_tf/tasks/task_settings.py) and the shared ones it derives from
# (bert_tf/shared_settings.py).
SETTINGS = tasks.script_settings(TASK)


def make_run(settings):
    """The run the flags ask for: a multiple-choice model's, or a sweep of such runs when a
    sweep flag lists several values."""
    return tasks.make_run(TASK, settings)


def cli_main():
    """Console entry point `bert-run-swag`."""
    cli.run_main(SETTINGS, make_run, __name__)


if __name__ == "__main__":
    cli_main()
