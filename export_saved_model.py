"""Export any BERT checkpoint as a SavedModel for TF Serving: raw text in, tokenized in the graph.

Writes --export_dir/<version>/ (the next free number unless --version), atomically, with vocab.txt in
its assets. The model type (encoder, classifier, squad, tagger, multiple_choice) and its settings come
from the task.json that run_*.py leaves beside its checkpoints, or from a Google-format checkpoint's
variable names; --model_type=encoder exports the encoder of any checkpoint. Signatures follow the
serving contract (README: "Serving"): serving_default, preprocess, preprocess_pair, serve_ids, and for
the encoder serving_pair.
"""

from absl import app, flags

from bert_tf.cli import run as run_script
from bert_tf.tasks.exporting import MODEL_TYPES, export_checkpoint

FLAGS = flags.FLAGS


def define_flags():
    """Defines the script's flags (called by cli(): absl refuses a flag defined twice per process)."""
    flags.DEFINE_string(
        "init_checkpoint",
        None,
        "Checkpoint prefix, or a folder holding bert_model.ckpt.* or a run's checkpoints.",
    )
    flags.DEFINE_string("export_dir", None, "Folder TF Serving watches; gets <version>/.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt of the model (copied into the export).")
    flags.DEFINE_string(
        "bert_config_file", None, "Default: the run's task.json, or bert_config.json beside it."
    )
    flags.DEFINE_bool("do_lower_case", None, "Default: the run's setting (task.json), else True.")
    flags.DEFINE_integer(
        "max_seq_length", None, "Longest input; longer text is cut. Default: the run's, else 128."
    )
    flags.DEFINE_enum(
        "model_type", None, sorted(MODEL_TYPES), "Default: inferred from the checkpoint."
    )
    flags.DEFINE_integer("version", None, "Version folder number; default the next free one.")
    flags.DEFINE_bool(
        "encoder_layers",
        False,
        "Encoder exports: also output encoder_layer_<i> [batch, seq, hidden] for every layer.",
    )
    flags.mark_flags_as_required(["init_checkpoint", "export_dir", "vocab_file"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    options = {"encoder_layers": True} if FLAGS.encoder_layers else {}
    path = export_checkpoint(
        FLAGS.init_checkpoint,
        FLAGS.export_dir,
        FLAGS.vocab_file,
        bert_config_file=FLAGS.bert_config_file,
        do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length,
        model_type=FLAGS.model_type,
        version=FLAGS.version,
        **options,
    )
    print(path)


def cli():
    """Console entry point `bert-export-saved-model`."""
    define_flags()
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
