"""Export any BERT checkpoint as a SavedModel for TF Serving: raw text in, tokenized in the graph.

Writes --export_dir/<version>/ (the next free number unless --version), atomically, with vocab.txt in
its assets. The model type (encoder, classifier, squad, tagger, multiple_choice) and its settings come
from the task.json that run_*.py leaves beside its checkpoints, or from a Google-format checkpoint's
variable names; --model_type=encoder exports the encoder of any checkpoint. Signatures follow the
serving contract (README: "Serving"): serving_default, preprocess, preprocess_pair, serve_ids, and for
the encoder serving_pair. --mixed_precision=mixed_bfloat16 (or mixed_float16) exports a model that
computes in that type, with the same signatures and float32 outputs. Prints the version folder's path.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf.tasks import exporting  # noqa: E402 (after TensorFlow's quiet start)

# The flags: bert_tf/tasks/exporting.py and the shared ones (bert_tf/shared_settings.py).
SETTINGS = exporting.ExportSettings


def run(settings):
    """Exports as `settings` (an ExportSettings) says and prints the version folder."""
    path = exporting.export_checkpoint(settings)
    print(path)
    return path


def cli_main():
    """Console entry point `bert-export-saved-model`."""
    cli.main(SETTINGS, run, __name__)


if __name__ == "__main__":
    cli_main()
