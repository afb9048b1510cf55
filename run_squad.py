"""Fine-tune BERT on SQuAD 1.1 / 2.0, predict answers, and score them with the official evaluation.

The original run_squad.py's flags, plus --distribution_strategy, --num_gpus, --mixed_precision,
--jit_compile, --seed, --do_eval (the official metrics of the predictions, into eval_results.json),
--export_dir (a SavedModel answering raw question and context strings) and --tfds_name. Writes
train.tf_record / eval.tf_record (reused while their settings match), checkpoints, task.json,
predictions.json, nbest_predictions.json and, for SQuAD 2.0, null_odds.json to --output_dir.
Restarting with the same --output_dir resumes training.
"""

from absl import app, flags

from bert_tf.cli import run as run_script
from bert_tf.tasks import finetuning, squad

FLAGS = flags.FLAGS


def define_flags():
    """Defines the script's flags (called by cli(): absl refuses a flag defined twice per process)."""
    finetuning.define_finetuning_flags(max_seq_length=384)
    FLAGS["do_eval"].help = (
        "Score the predictions of --predict_file with the official SQuAD evaluation into "
        "eval_results.json (predicts first if --do_predict is not set)."
    )
    flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
    flags.DEFINE_string(
        "predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json or dev-v2.0.json."
    )
    flags.DEFINE_integer(
        "doc_stride", 128, "Wordpieces between the starts of a long context's windows."
    )
    flags.DEFINE_integer(
        "max_query_length", 64, "Question wordpieces kept; longer questions are cut to this."
    )
    flags.DEFINE_integer(
        "n_best_size",
        20,
        "Starts and ends considered per window, and answers in nbest_predictions.",
    )
    flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in wordpieces.")
    flags.DEFINE_bool(
        "verbose_logging", False, "Log why an answer could not be mapped back onto its words."
    )
    flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: some questions have no answer.")
    flags.DEFINE_float(
        "null_score_diff_threshold",
        0.0,
        'SQuAD 2.0: answer "" when null score - best answer score exceeds this.',
    )
    flags.DEFINE_string(
        "tfds_name", None, "Read TensorFlow Datasets squad/v1.1 or squad/v2.0 instead of files."
    )
    flags.DEFINE_string("tfds_data_dir", None, "TensorFlow Datasets data_dir for --tfds_name.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    squad.run(squad.SquadConfig.from_flags(FLAGS))


def cli():
    """Console entry point `bert-run-squad`."""
    define_flags()
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
