"""Multiple choice (SWAG): a score per choice from the pooled output, softmax over the choices.

Each choice is packed as `[CLS] context [SEP] start_ending ending [SEP]` (bert_tf/tasks/multiple_choice/swag.py) and
scored by logit = pooled_output @ output_weights^T + output_bias (a BertHead), with output_weights [1, H] and
output_bias [1] under the Google-format names `cls/multiple_choice/output_weights` and
`cls/multiple_choice/output_bias`; the choices' logits go through a softmax. The head does not depend
on the number of choices, so files (and serving requests) may have any number of them.

B = batch, C = choices, S = sequence length, H = hidden size.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf import file_io, metrics
from bert_tf.data.feature_cache import file_identity
from bert_tf.errors import InputError
from bert_tf.export import ID_FEATURES, serving_module, write_saved_model
from bert_tf.models.networks.task_head import BertTaskModel
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.multiple_choice import swag
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_configs import MultipleChoiceConfig

MODEL_TYPE = "multiple_choice"
GOOGLE_SCOPE = "cls/multiple_choice/"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(BertTaskModel):
    """BertModel + a BertHead of one score per choice from the pooled output, softmax over the choices.

    Inputs: "input_ids", "input_mask", "segment_ids", int32 [B, C, S]; other keys are ignored.
    Outputs: {"logits": float32 [B, C], "probabilities": float32 [B, C]}.

    Example:
    ```python
    model = BertMultipleChoice(BertConfig.from_preset("bert_tiny"))
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


def multiple_choice_loss(outputs, features, num_examples):
    """Cross-entropy of the right choice, summed / num_examples (the global count)."""
    logits = tf.cast(outputs["logits"], tf.float32)  # [B, C]
    labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)  # [B]
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)  # [B]
    return tf.reduce_sum(per_example) / num_examples


# ---------------------------------------------------------------------------------- the export


def build_model(bert_config, info):
    """The multiple-choice model (its head does not depend on the number of choices)."""
    del info
    return BertMultipleChoice(bert_config)


def pack_choices(preprocessor, context, choices):
    """[CLS] context [SEP] choice [SEP] for every choice, as bert_tf.tasks.multiple_choice.swag packs them.

    Args:
      preprocessor: a BertPreprocessor.
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


# ---------------------------------------------------------------------------------- the run


SPEC = TaskSpec(
    name=MODEL_TYPE,
    build_model=build_model,
    config_class=MultipleChoiceConfig,
    export_model=export_model,
    google_head=f"{GOOGLE_SCOPE}output_weights",
    info_from_google_head=lambda shape: {},
)


class MultipleChoiceRun(FineTuningRun):
    """One run_swag.py invocation: features, training, evaluation, prediction and export."""

    spec = SPEC

    # ------------------------------------------------------------------ data

    def read_split(self, split):
        """(path, examples) of a split's file ("train", "dev", "test")."""
        path = file_io.require_split_file(self.config.data_dir, swag.SWAG_FILE_NAMES, split)
        examples = swag.read_multiple_choice_file(path)
        if split != "test" and examples[0].label is None:
            raise InputError(f"{path}: the {split} file has no labels")
        return path, examples

    def feature_settings(self, step):
        return {
            "format": "bert_tf multiple choice features 1",
            "input": file_identity(self.step_data(step)[0]),
        }

    def make_records(self, step):
        examples, max_seq_length = self.step_data(step)[1], self.config.max_seq_length
        serialized = [
            swag.serialize_multiple_choice_feature(
                swag.convert_example_to_multiple_choice_feature(
                    example, max_seq_length, self.tokenizer
                )
            )
            for example in examples
        ]
        return serialized, {
            "num_real_examples": len(examples),
            "num_choices": len(examples[0].endings),
        }

    def feature_summary(self, info):
        return f"{info['num_real_examples']} examples of {info['num_choices']} choices"

    def feature_spec(self, is_training, path=None):
        # The weights do not depend on the number of choices: one choice builds them.
        num_choices = self.feature_info(path)["num_choices"] if path else 1
        return swag.multiple_choice_feature_spec(num_choices, self.config.max_seq_length)

    # ------------------------------------------------------------------ model and loop

    def loss(self, outputs, features, normalizers):
        return {"loss": multiple_choice_loss(outputs, features, normalizers["examples"])}

    # ------------------------------------------------------------------ the steps

    def evaluate(self):
        path, info = self.features("eval")
        result = self.predict_features(
            path, info, self.config.eval_batch_size, ["logits"], ["label_ids"]
        )
        results = evaluation_results(result["logits"], result["label_ids"])
        choices = result["logits"].argmax(axis=-1).tolist()
        return self.evaluation_done(results, choices, "choice")

    def predict_test(self):
        path, info = self.features("predict")
        logits = self.predict_features(path, info, self.config.predict_batch_size, ["logits"])[
            "logits"
        ]
        probabilities = metrics.softmax(logits)
        rows = ("\t".join(f"{p:.6f}" for p in row) + "\n" for row in probabilities)
        self.write_output("test_results.tsv", "".join(rows))
        return probabilities


def evaluation_results(logits, label_ids):
    """eval_results.txt's values: eval_accuracy and eval_loss (mean cross-entropy), loss as well."""
    labels = np.asarray(label_ids).reshape(-1).astype(np.int64)
    log_probs = metrics.log_softmax(logits)
    loss = float(-np.mean(log_probs[np.arange(len(labels)), labels]))
    accuracy = metrics.accuracy(np.asarray(logits).argmax(axis=-1), labels)
    return {"eval_accuracy": accuracy, "eval_loss": loss, "loss": loss}
