"""SQuAD's network: the original run_squad.py's model of ids, and its export that answers raw questions.

The model is the original's: BertModel, then start and end logits = sequence_output @
output_weights^T + output_bias (a BertHead), with output_weights [2, H] and output_bias [2] named
`cls/squad/output_weights` and `cls/squad/output_bias` in Google's format (so the original's
fine-tuned checkpoints load, for prediction too). The export answers raw questions in the graph
(squad_serving.py).

B = batch, S = sequence length, H = hidden size.
"""

import keras

from bert_tf.export import serving_module, write_saved_model
from bert_tf.models.networks import squad_serving
from bert_tf.models.networks.network_spec import NetworkSpec
from bert_tf.models.networks.task_head import BertTaskModel

MODEL_TYPE = "squad"


GOOGLE_SCOPE = "cls/squad/"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSquad(BertTaskModel):
    """BertModel + a BertHead of 2 over every token: start and end logits.

    Inputs: BertModel's ("input_ids", "input_mask", "segment_ids", int32 [B, S]); other keys are ignored.
    Outputs: {"start_logits", "end_logits"}: float32 [B, S] (padding positions included, as the
    original).

    Example:
    ```python
    model = BertSquad(BertConfig.from_preset("bert_tiny"))
    model({"input_ids": tf.constant([[101, 2040, 102, 2017, 102]])})["start_logits"]  # [1, 5]
    ```
    """

    task_name = MODEL_TYPE

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_squad")
        super().__init__(
            config, 2, "sequence_output", google_scope=GOOGLE_SCOPE, dropout=False, **kwargs
        )

    def call(self, inputs, training=None):
        logits = self.logits(inputs, training=training)  # [B, S, 2]
        return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}


def build_model(bert_config, info):
    """The SQuAD model (its head has no settings)."""
    del info
    return BertSquad(bert_config)


def export_model(model, info, vocab_file, export_dir, version=None, freeze_weights=False):
    """Writes the SQuAD model as a SavedModel that answers raw questions (docs/serving.md's contract).

    serving_default: question, context (string [B]) -> answer (string [B], cut from the context),
    score (float32 [B], the answer's start + end logit) and, for SQuAD 2.0 models,
    null_score_diff (float32 [B], null_odds.json's value); `preprocess` and `serve_ids` as
    `squad_serving.qa_signatures` says. Tokenization, windowing and span selection run in the
    graph, with the windowing and n-best settings of `info` (task.json).
    """
    settings = squad_serving.QaSettings.of(info.settings, info.max_seq_length)
    module = serving_module(model, info, vocab_file)

    def logits_fn(features):
        outputs = model(features, training=False)
        return outputs["start_logits"], outputs["end_logits"]

    signatures = squad_serving.qa_signatures(module.preprocessor, logits_fn, settings)
    return write_saved_model(export_dir, module, signatures, version=version, freeze=freeze_weights)


NETWORK = NetworkSpec(
    name=MODEL_TYPE,
    build_model=build_model,
    export_model=export_model,
    google_head=f"{GOOGLE_SCOPE}output_weights",
    # A Google checkpoint does not say whether it learned SQuAD 2.0: without a task.json beside it,
    # it is exported with the original's defaults as a SQuAD 1.1 model.
    info_from_google_head=lambda shape: {"max_seq_length": squad_serving.SQUAD_MAX_SEQ_LENGTH},
)
