"""Fine-tune BERT for token tagging (named entities): CoNLL-2003 or any file of one word per line.

The original run_classifier.py's flags, plus --distribution_strategy, --mixed_precision, --jit_compile,
--seed, --export_dir (a SavedModel that labels the words of raw text) and the data flags. Reads
train.txt, dev.txt (or valid.txt) and test.txt from --data_dir; writes train/eval/predict.tf_record
(reused while their settings match), checkpoints (model.ckpt-<step>), labels.txt, task.json,
eval_results.txt (entity precision, recall and F1 as conlleval counts them) and test_predictions.txt
(the test file with a predicted label column) to --output_dir; when test.txt has labels, test_results.txt
too (eval_results.txt's scores, on the test set). Restarting with the same --output_dir resumes
training.

--feature_layers switches to the BERT paper's feature-based approach (section 5.3): the encoder is
frozen, the chosen layers are computed once and cached (--encoder_features_dir), and a two-layer
BiLSTM (--lstm_size) learns the labels from them (bert_tf/tasks/tagging/feature_based.py).
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf import tasks  # noqa: E402 (after TensorFlow's quiet start)

TASK = tasks.TASKS["tagger"]
# The flags: FeatureTaggerSettings (bert_tf/tasks/task_settings.py) and the shared ones it derives from
# (bert_tf/shared_settings.py).
SETTINGS = tasks.script_settings(TASK)


def make_run(settings):
    """The run the flags ask for: a tagger's, the feature-based tagger's with --feature_layers,
    or a sweep of such runs when a sweep flag lists several values."""
    return tasks.make_run(TASK, settings)


def cli_main():
    """Console entry point `bert-run-ner`."""
    cli.run_main(SETTINGS, make_run, __name__)


if __name__ == "__main__":
    cli_main()
