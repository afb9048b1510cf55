"""Fine-tune BERT for sentence (pair) classification or regression: GLUE, XNLI, your own TSV/CSV, or TFDS.

The original run_classifier.py's flags, plus --distribution_strategy, --mixed_precision, --jit_compile,
--seed, --export_dir (a SavedModel that serves raw text) and the data-source flags. Writes
train/eval/predict.tf_record (reused while their settings match), checkpoints, eval_results.txt,
test_results.tsv and labels.txt to --output_dir. Restarting with the same --output_dir resumes training.
"""

from absl import app, flags

from bert_tf.cli import run as run_script
from bert_tf.tasks import classification, finetuning

FLAGS = flags.FLAGS


def define_flags():
    """Defines the script's flags (called by cli(): absl refuses a flag defined twice per process)."""
    finetuning.define_finetuning_flags()
    flags.DEFINE_string("data_dir", None, "Folder with the task's files (GLUE layout or yours).")
    flags.DEFINE_string(
        "task_name",
        None,
        "cola, sst-2, mrpc, qqp, sts-b, mnli, mnli-mm, qnli, rte, wnli, ax, xnli; tsv / csv for your "
        "own files (train/dev/test.tsv or .csv in --data_dir); tfds for another --tfds_name.",
    )
    flags.DEFINE_string(
        "text_a_column", None, "tsv/csv: column of the first text (0-based index or header name)."
    )
    flags.DEFINE_string(
        "text_b_column", None, "tsv/csv: column of the second text, for pair tasks (optional)."
    )
    flags.DEFINE_string("label_column", None, "tsv/csv: column of the label.")
    flags.DEFINE_bool("has_header", False, "tsv/csv: the first line of each file is a header.")
    flags.DEFINE_string(
        "labels", None, "tsv/csv: the label set, comma-separated (default: found in train)."
    )
    flags.DEFINE_string(
        "tfds_name", None, "Read a TensorFlow Datasets GLUE config instead, e.g. glue/mrpc."
    )
    flags.DEFINE_string("tfds_data_dir", None, "TensorFlow Datasets data_dir for --tfds_name.")
    flags.DEFINE_string("xnli_language", "zh", "xnli: the language to train and evaluate on.")
    flags.DEFINE_bool(
        "skip_malformed_lines",
        False,
        "Skip (and count in the log) data lines with too few columns instead of stopping there.",
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    classification.run(classification.ClassifierConfig.from_flags(FLAGS))


def cli():
    """Console entry point `bert-run-classifier`."""
    define_flags()
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
