"""Fine-tune BERT on SQuAD 1.1 / 2.0, predict answers, and score them with the official evaluation.

The original run_squad.py's flags, plus --distribution_strategy, --num_gpus, --mixed_precision,
--jit_compile, --seed, --do_eval (the official metrics of the predictions, into eval_results.json),
--export_dir (a SavedModel answering raw question and context strings) and --tfds_name. Writes
train.tf_record / eval.tf_record (reused while their settings match), checkpoints (model.ckpt-<step>),
task.json, predictions.json, nbest_predictions.json and, for SQuAD 2.0, null_odds.json to
--output_dir; when --predict_file has answers, --do_predict writes their official metrics to
test_results.txt too. Restarting with the same --output_dir resumes training.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf import tasks  # noqa: E402 (after TensorFlow's quiet start)

TASK = tasks.TASKS["squad"]
# The flags: SquadSettings (bert_tf/tasks/task_settings.py) and the shared ones it derives from
# (bert_tf/shared_settings.py).
SETTINGS = tasks.script_settings(TASK)


def make_run(settings):
    """The run the flags ask for: SQuAD's, or a sweep of such runs when a sweep flag lists
    several values."""
    return tasks.make_run(TASK, settings)


def cli_main():
    """Console entry point `bert-run-squad`."""
    cli.run_main(SETTINGS, make_run, __name__)


if __name__ == "__main__":
    cli_main()
