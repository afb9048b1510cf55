"""Contextual embeddings of chosen BERT layers for every token of every input line, as the original's script.

Each line of --input_file is a text, or a pair written `text_a ||| text_b`. --output_file gets one JSON
object per line (the original's format: `linex_index`, `features` [{`token`, `layers` [{`index`,
`values`}]}], values rounded to 6 decimals), or with --output_format=npz one NumPy archive (see
bert_tf/tasks/encoder.py). The input is streamed: memory does not grow with its size.
"""

from absl import app, flags

from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.cli import run as run_script
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig, BertModel
from bert_tf.tasks.encoder import OUTPUT_FORMATS, extract_features, parse_layers
from bert_tf.tokenization import FullTokenizer

FLAGS = flags.FLAGS


def define_flags():
    """Defines the script's flags (called by cli(): absl refuses a flag defined twice per process)."""
    # The original's flags, names and defaults.
    flags.DEFINE_string("input_file", None, "Text to encode: one text, or `a ||| b`, per line.")
    flags.DEFINE_string("output_file", None, "Where to write the features.")
    flags.DEFINE_string(
        "layers", "-1,-2,-3,-4", "Encoder layers to write (negative: from the top)."
    )
    flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model.")
    flags.DEFINE_integer("max_seq_length", 128, "Longest WordPiece sequence; longer lines are cut.")
    flags.DEFINE_string("init_checkpoint", None, "Weights: a Google release checkpoint or ours.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt the model was trained with.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
    flags.DEFINE_integer("batch_size", 32, "Lines per forward pass.")
    flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; runs on the local devices.")
    flags.DEFINE_string("master", None, "Accepted for compatibility; unused.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; unused.")
    flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility; unused.")
    # Ours.
    flags.DEFINE_enum(
        "output_format", "json", OUTPUT_FORMATS, "json (the original's JSON lines) or npz."
    )
    flags.mark_flags_as_required(
        ["input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file"]
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise InputError(
            f"--max_seq_length={FLAGS.max_seq_length} exceeds max_position_embeddings="
            f"{config.max_position_embeddings} of --bert_config_file={FLAGS.bert_config_file}"
        )
    if FLAGS.batch_size <= 0:
        raise InputError(f"--batch_size must be positive, got {FLAGS.batch_size}")
    layer_indexes = parse_layers(FLAGS.layers, config.num_hidden_layers)
    model = BertModel(config)
    restore_init_checkpoint(model, FLAGS.init_checkpoint)
    extract_features(
        model,
        FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case),
        FLAGS.input_file,
        FLAGS.output_file,
        layer_indexes,
        max_seq_length=FLAGS.max_seq_length,
        batch_size=FLAGS.batch_size,
        output_format=FLAGS.output_format,
    )


def cli():
    """Console entry point `bert-extract-features`."""
    define_flags()
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
