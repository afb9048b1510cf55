"""Convert BERT checkpoints between Google's format, Hugging Face and keras-hub (docs/formats.md).

In (the default, --output_format=google): a Hugging Face BERT or sentence-transformers folder, or a
keras-hub BERT preset, into a Google-format release folder:

    python convert_checkpoint.py --hf_model_dir=all-MiniLM-L6-v2 --output_dir=minilm_google

reads config.json, vocab.txt and model.safetensors (with numpy: no torch or transformers needed) and
writes bert_config.json, vocab.txt and bert_model.ckpt.{index,data-00000-of-00001}, which load with
--init_checkpoint, bert_tf.checkpoints and the original TF1 code (bert_tf/formats/convert.py does the work).

Out: a release or a fine-tuning run (its output_dir: task.json gives the task and labels) into a
transformers / sentence-transformers folder or a keras-hub preset (bert_tf/formats/convert_out.py):

    python convert_checkpoint.py --init_checkpoint=$RUN_DIR --vocab_file=vocab.txt \\
      --output_format=huggingface --output_dir=model_hf
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf.formats.convert import ConvertSettings, bert_config_from_hf, convert, run  # noqa: E402, F401

# The flags: bert_tf/formats/convert.py and the shared ones (bert_tf/shared_settings.py).
SETTINGS = ConvertSettings


def cli_main():
    """Console entry point `bert-convert-checkpoint`."""
    cli.main(SETTINGS, run, __name__)


if __name__ == "__main__":
    cli_main()
