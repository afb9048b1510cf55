"""Contextual embeddings of chosen BERT layers for every token of every input line, as the original's script.

Each line of --input_file is a text, or a pair written `text_a ||| text_b`. --output_file gets one JSON
object per line (the original's format: `linex_index`, `features` [{`token`, `layers` [{`index`,
`values`}]}], values rounded to 6 decimals), or with --output_format=npz one NumPy archive (see
bert_tf/tasks/extract_features_run.py). The input is streamed: memory does not grow with its size.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf.tasks import extract_features_run  # noqa: E402 (after TensorFlow's quiet start)

# The flags: bert_tf/tasks/extract_features_run.py and the shared ones (bert_tf/shared_settings.py).
SETTINGS = extract_features_run.ExtractSettings


def cli_main():
    """Console entry point `bert-extract-features`."""
    cli.main(SETTINGS, extract_features_run.run_extract_features, __name__)


if __name__ == "__main__":
    cli_main()
