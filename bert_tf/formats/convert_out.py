"""convert_checkpoint.py --output_format=huggingface | keras_hub: a checkpoint into another library's folder.

bert_tf/formats/model_out.py reads the checkpoint (any Google or run checkpoint, its task and labels);
bert_tf/formats/huggingface_out.py and bert_tf/formats/keras_hub_preset.py write it. docs/formats.md lists what goes
in and out.
"""

import importlib.util

from absl import logging

from bert_tf.errors import InputError
from bert_tf.formats import model_out
from bert_tf.formats.huggingface_out import write_huggingface
from bert_tf.formats.keras_hub_preset import write_preset

# --output_format -> (OutgoingModel, output_dir, overwrite) -> None.
WRITERS = {"huggingface": write_huggingface, "keras_hub": write_preset}


def convert_out(config):
    """convert_checkpoint.py --output_format=huggingface | keras_hub (a convert.ConvertSettings)."""
    if config.hf_model_dir:
        raise InputError(
            f"--hf_model_dir converts into Google's format (--output_format=google), not "
            f"--output_format={config.output_format}: convert it first, then pass that folder as "
            "--init_checkpoint"
        )
    if config.output_format == "keras_hub" and importlib.util.find_spec("keras_hub") is None:
        raise InputError(
            "--output_format=keras_hub writes with keras-hub, which is not installed: pip install "
            "keras-hub (the compare extra)"
        )
    try:
        model_out.check_output_dir(config.output_dir, config.overwrite)
    except FileExistsError as error:
        raise InputError(str(error)) from None
    model = model_out.read_checkpoint(
        config.init_checkpoint, config.vocab_file, config.bert_config_file, config.do_lower_case
    )
    write = WRITERS[config.output_format]
    write(model, config.output_dir, overwrite=config.overwrite)
    logging.info("Wrote %s (%s) into %s", model.source, config.output_format, config.output_dir)
    return model
