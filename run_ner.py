"""Fine-tune BERT for token tagging (named entities): CoNLL-2003 or any file of one word per line.

The original run_classifier.py's flags, plus --distribution_strategy, --mixed_precision, --jit_compile,
--seed, --export_dir (a SavedModel that labels the words of raw text) and the data flags. Reads
train.txt, dev.txt (or valid.txt) and test.txt from --data_dir; writes train/eval/predict.tf_record
(reused while their settings match), checkpoints, labels.txt, eval_results.txt (entity precision,
recall and F1 as conlleval counts them) and test_predictions.txt (the test file with a predicted label
column) to --output_dir. Restarting with the same --output_dir resumes training.
"""

from absl import app, flags

from bert_tf.cli import run as run_script
from bert_tf.tasks import finetuning, tagging

FLAGS = flags.FLAGS


def define_flags():
    """Defines the script's flags (called by cli(): absl refuses a flag defined twice per process)."""
    finetuning.define_finetuning_flags()
    flags.DEFINE_string(
        "data_dir",
        None,
        "Folder with train.txt, dev.txt (or valid.txt) and test.txt in CoNLL format (also the "
        "original release's eng.train, eng.testa, eng.testb).",
    )
    flags.DEFINE_integer(
        "label_column",
        -1,
        "Column holding the label (0-based; negative counts from the end, -1 = last). The word is "
        "column 0.",
    )
    flags.DEFINE_integer(
        "doc_stride",
        None,
        "A sentence longer than max_seq_length - 2 wordpieces is split into overlapping windows "
        "starting this many pieces apart (default: (max_seq_length - 2) // 2).",
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    tagging.run(tagging.TaggerConfig.from_flags(FLAGS))


def cli():
    """Console entry point `bert-run-ner`."""
    define_flags()
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
