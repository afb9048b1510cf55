"""The multiple-choice network (run_swag.py's model of ids): a score per choice, softmax over the choices.

Each choice is packed as `[CLS] context [SEP] start_ending ending [SEP]` and scored by logit =
pooled_output @ output_weights^T + output_bias (a BertHead), with output_weights [1, H] and
output_bias [1] under the Google-format names `cls/multiple_choice/output_weights` and
`cls/multiple_choice/output_bias`; the choices' logits go through a softmax. The head does not depend
on the number of choices, so files (and serving requests) may have any number of them.

B = batch, C = choices, S = sequence length, H = hidden size.
"""

import keras
import tensorflow as tf

from bert_tf.export import ID_FEATURES, serving_module, write_saved_model
from bert_tf.models.networks.network_spec import NetworkSpec
from bert_tf.models.networks.task_head import BertTaskModel

MODEL_TYPE = "multiple_choice"


GOOGLE_SCOPE = "cls/multiple_choice/"


@keras.saving.register_keras_serializable(package="bert_tf")
class MultipleChoiceNetwork(BertTaskModel):
    """BertModel + a BertHead of one score per choice from the pooled output, softmax over the choices.

    Inputs: "input_ids", "input_mask", "segment_ids", int32 [B, C, S]; other keys are ignored.
    Outputs: {"logits": float32 [B, C], "probabilities": float32 [B, C]}.

    Example:
    ```python
    model = MultipleChoiceNetwork(BertConfig.from_preset("bert_tiny"))
    model({"input_ids": tf.constant([[[101, 7592, 102], [101, 2088, 102]]])})["probabilities"]  # [1, 2]
    ```
    """

    task_name = MODEL_TYPE

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(config, 1, "pooled_output", google_scope=GOOGLE_SCOPE, **kwargs)

    def call(self, inputs, training=None):
        shape = tf.shape(inputs["input_ids"])  # [B, C, S]
        # Every choice is one BERT input: [B, C, S] -> [B * C, S].
        flat = {
            name: tf.reshape(inputs[name], [-1, shape[2]]) for name in ID_FEATURES if name in inputs
        }
        logits = tf.reshape(self.logits(flat, training=training), shape[:2])  # [B, C]
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    def dummy_inputs(self):
        return {name: value[:, None] for name, value in self.bert.dummy_inputs().items()}


def build_model(bert_config, info):
    """The multiple-choice model (its head does not depend on the number of choices)."""
    del info
    return MultipleChoiceNetwork(bert_config)


def pack_choices(preprocessor, context, choices):
    """[CLS] context [SEP] choice [SEP] for every choice, as run_swag.py's features pack them (bert_tf/tasks/multiple_choice/swag.py).

    Args:
      preprocessor: a GraphPreprocessor.
      context: tf.string [B].
      choices: tf.string [B, C]; for SWAG, sent2 + " " + ending.

    Returns:
      {"input_ids", "input_mask", "segment_ids"}: int32 [B, C, S'], S' the longest packed choice.
    """
    shape = tf.shape(choices)
    context_ids = preprocessor.tokenize(context)  # [B, (P)]
    context_ids = tf.gather(context_ids, tf.repeat(tf.range(shape[0]), shape[1]))  # [B * C, (P)]
    choice_ids = preprocessor.tokenize(tf.reshape(choices, [-1]))  # [B * C, (P)]
    # A choice without pieces packs as a single text, as the data module (and the original) packs it.
    pair = preprocessor.pack([context_ids, choice_ids])  # [B * C, S']
    length = tf.shape(pair["input_ids"])[1]
    return {name: tf.reshape(pair[name], [shape[0], shape[1], length]) for name in ID_FEATURES}


def export_model(model, info, vocab_file, export_dir, version=None, freeze_weights=False):
    """Writes the multiple-choice model as a SavedModel serving raw text (docs/serving.md's contract).

    serving_default: context [B] and choices [B, C] -> "probabilities" float32 [B, C] and "choice"
    int32 [B] (the most probable). preprocess: the same inputs -> "input_ids", "input_mask",
    "segment_ids" int32 [B, C, S]; serve_ids: those three -> the same outputs.
    """
    module = serving_module(model, info, vocab_file)

    def serve_ids(input_ids, input_mask, segment_ids):
        features = dict(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids)
        probabilities = model(features, training=False)["probabilities"]
        return {
            "probabilities": probabilities,
            "choice": tf.argmax(probabilities, axis=-1, output_type=tf.int32),
        }

    def preprocess(context, choices):
        return pack_choices(module.preprocessor, context, choices)

    def serve(context, choices):
        return serve_ids(**preprocess(context, choices))

    text_specs = [
        tf.TensorSpec([None], tf.string, name="context"),
        tf.TensorSpec([None, None], tf.string, name="choices"),
    ]
    ids_specs = [tf.TensorSpec([None, None, None], tf.int32, name=name) for name in ID_FEATURES]
    signatures = {
        "serving_default": tf.function(serve, input_signature=text_specs),
        "preprocess": tf.function(preprocess, input_signature=text_specs),
        "serve_ids": tf.function(serve_ids, input_signature=ids_specs),
    }
    return write_saved_model(export_dir, module, signatures, version=version, freeze=freeze_weights)


NETWORK = NetworkSpec(
    name=MODEL_TYPE,
    build_model=build_model,
    export_model=export_model,
    google_head=f"{GOOGLE_SCOPE}output_weights",
    info_from_google_head=lambda shape: {},
)
