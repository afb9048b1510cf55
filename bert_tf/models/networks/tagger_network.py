"""The tagger's network: run_ner.py's model of ids, one label per word from the word's first wordpiece.

The model is BertModel, dropout on the sequence output, then logits = sequence_output @ output_weights^T +
output_bias at every position (a BertHead), with output_weights [L, H] and output_bias [L] under the
Google-format names `cls/tagging/output_weights` and `cls/tagging/output_bias`. Its export is
tagging_serving.py's.

B = batch, S = sequence length, H = hidden size, L = number of labels.
"""

import keras

from bert_tf.models.networks import tagging_serving
from bert_tf.models.networks.network_spec import NetworkSpec
from bert_tf.models.networks.task_head import BertTaskModel

MODEL_TYPE = "tagger"


GOOGLE_SCOPE = "cls/tagging/"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTagger(BertTaskModel):
    """BertModel + a BertHead over the sequence output: one label distribution per piece.

    Inputs: BertModel's ("input_ids", "input_mask", "segment_ids", int32 [B, S]); other keys are ignored.
    Outputs: {"logits": float32 [B, S, L]}.

    Example:
    ```python
    model = BertTagger(BertConfig.from_preset("bert_tiny"), num_labels=9)
    model({"input_ids": tf.constant([[101, 5616, 102]])})["logits"]  # [1, 3, 9]
    ```
    """

    task_name = MODEL_TYPE

    def __init__(self, config, num_labels, **kwargs):
        kwargs.setdefault("name", "bert_tagger")
        self.num_labels = num_labels
        super().__init__(config, num_labels, "sequence_output", google_scope=GOOGLE_SCOPE, **kwargs)

    def call(self, inputs, training=None):
        return {"logits": self.logits(inputs, training=training)}  # [B, S, L]

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels}


def build_model(bert_config, info):
    """The tagger of a run's TaskInfo (its labels)."""
    return BertTagger(bert_config, len(info.labels))


NETWORK = NetworkSpec(
    name=MODEL_TYPE,
    build_model=build_model,
    export_model=tagging_serving.export_model,
    google_head=f"{GOOGLE_SCOPE}output_weights",
    # Label names are not in a Google checkpoint: "0", "1", ... (or a labels.txt beside it).
    info_from_google_head=lambda shape: {"labels": [str(i) for i in range(shape[0])]},
)
