"""Fine-tune BERT for multiple choice: SWAG's CSV files, or JSON lines of context, choices and label.

The original run_classifier.py's flags, plus --distribution_strategy, --mixed_precision, --jit_compile,
--seed, --export_dir (a SavedModel that scores raw-text choices) and --data_dir. Reads train.csv,
val.csv and test.csv (or train.jsonl, dev.jsonl, test.jsonl) from --data_dir; writes
train/eval/predict.tf_record (reused while their settings match), checkpoints, eval_results.txt
(eval_accuracy, eval_loss) and test_results.tsv (one line of choice probabilities per test example) to
--output_dir. Restarting with the same --output_dir resumes training.
"""

from absl import app, flags

from bert_tf.cli import run as run_script
from bert_tf.tasks import finetuning, multiple_choice

FLAGS = flags.FLAGS


def define_flags():
    """Defines the script's flags (called by cli(): absl refuses a flag defined twice per process)."""
    finetuning.define_finetuning_flags()
    flags.DEFINE_string(
        "data_dir",
        None,
        "Folder with SWAG's train.csv, val.csv and test.csv, or train.jsonl, dev.jsonl and "
        'test.jsonl of {"context", "choices", "label", "question" (optional)}.',
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    multiple_choice.run(multiple_choice.MultipleChoiceConfig.from_flags(FLAGS))


def cli():
    """Console entry point `bert-run-swag`."""
    define_flags()
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
