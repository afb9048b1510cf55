"""BertConfig, BertModel and BertPretrainingModel with its loss, in Keras 3 (heads: bert_tf.layers.pretraining_heads).

The math is the original google-research/bert modeling.py: post-LayerNorm blocks with epsilon 1e-12, an
additive -10000 attention mask, tanh-approximate "gelu", a tanh pooler over [CLS], a masked-LM output layer
tied to the word embeddings. Google checkpoints map onto these weights with bert_tf.checkpoints.

B = batch, S = sequence length, H = hidden size, V = vocabulary size, P = max_predictions_per_seq.
"""

import collections.abc
import copy
import dataclasses
import json

import keras
import tensorflow as tf
from absl import logging

from bert_tf.adapters import LoraBackbone
from bert_tf.layers import ACTIVATIONS, BertEmbeddings, TransformerBlock
from bert_tf.layers.initializer import truncated_normal
from bert_tf.layers.pretraining_heads import MaskedLMHead, NextSentenceHead
from bert_tf.objectives import CAUSAL_OBJECTIVES, DEFAULT_OBJECTIVE, OBJECTIVES

# Keys some Google releases (multilingual, Chinese) put in bert_config.json for a pooler this code, like the
# original, does not use: accepted and ignored.
_IGNORED_RELEASE_KEYS = frozenset(
    {
        "directionality",
        "pooler_fc_size",
        "pooler_num_attention_heads",
        "pooler_num_fc_layers",
        "pooler_size_per_head",
        "pooler_type",
    }
)


# The positive integer fields: they fix the shapes of the weights.
SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)


@dataclasses.dataclass
class BertConfig:
    """The hyperparameters of a BERT encoder, with the keys and defaults of the original bert_config.json.

    Example:
    ```python
    config = BertConfig.from_json_file("uncased_L-12_H-768_A-12/bert_config.json")
    config = BertConfig.from_preset("bert_mini")          # L-4_H-256_A-4, vocab 30522
    config = BertConfig.from_preset("L-2_H-128_A-2", vocab_size=8000)
    ```
    """

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    # Not a key of Google's configs: the pretraining objective (bert_tf.objectives), written to
    # bert_config.json only when it is not the original's "mlm_nsp". "ltr" makes attention causal.
    objective: str = DEFAULT_OBJECTIVE

    def __post_init__(self):
        for name in SIZE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) is not a multiple of "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"BertConfig.hidden_act {self.hidden_act!r} is unknown; "
                f"expected one of {sorted(ACTIVATIONS)}"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {value!r}")
        value = self.initializer_range
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(
                f"BertConfig.initializer_range must be positive, got {self.initializer_range!r}"
            )
        if self.objective not in OBJECTIVES:
            raise ValueError(
                f"BertConfig.objective {self.objective!r} is unknown; expected one of {OBJECTIVES}"
            )

    @property
    def causal_attention(self):
        """Whether each position attends only to itself and the positions before it (objective ltr)."""
        return self.objective in CAUSAL_OBJECTIVES

    @classmethod
    def from_dict(cls, json_object):
        """Builds a config from a dict of bert_config.json keys; unknown keys are an error naming them."""
        if not isinstance(json_object, collections.abc.Mapping):
            raise ValueError(
                f"BertConfig.from_dict needs a dict of bert_config.json keys, got {json_object!r}"
            )
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(json_object) - known - _IGNORED_RELEASE_KEYS)
        if unknown:
            raise ValueError(f"Unknown BertConfig keys {unknown}; known keys are {sorted(known)}")
        if "vocab_size" not in json_object:
            raise ValueError("BertConfig needs vocab_size")
        ignored = sorted(set(json_object) & _IGNORED_RELEASE_KEYS)
        if ignored:
            logging.info("BertConfig ignores the unused release keys %s", ignored)
        return cls(**{key: value for key, value in json_object.items() if key in known})

    @classmethod
    def from_json_file(cls, json_file):
        """Reads a bert_config.json (local path or any tf.io.gfile URL)."""
        if not tf.io.gfile.exists(json_file):
            raise FileNotFoundError(f"BERT config file {json_file} does not exist")
        with tf.io.gfile.GFile(json_file, "r") as reader:
            text = reader.read()
        try:
            json_object = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{json_file} is not valid JSON: {e}") from e
        if not isinstance(json_object, dict):
            raise ValueError(f"{json_file} must hold a JSON object of BertConfig keys")
        try:
            return cls.from_dict(json_object)
        except ValueError as e:
            raise ValueError(f"{json_file}: {e}") from e

    @classmethod
    def from_preset(cls, name, **overrides):
        """A named configuration of PRESETS (e.g. "bert_base", "L-4_H-256_A-4"), with keys overridden."""
        if name not in PRESETS:
            raise ValueError(
                f"Unknown BertConfig preset {name!r}; known presets: {sorted(PRESETS)}"
            )
        return cls.from_dict({**PRESETS[name], **overrides})

    def to_dict(self):
        values = copy.deepcopy(dataclasses.asdict(self))
        if values["objective"] == DEFAULT_OBJECTIVE:
            del values["objective"]  # Google's keys, unchanged, for the original's objective
        return values

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


def _preset(layers, hidden, heads=None, intermediate=None):
    return {
        "vocab_size": 30522,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads or hidden // 64,
        "intermediate_size": intermediate or 4 * hidden,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
    }


# The paper's BASE and LARGE, and the 24 miniatures of the March 2020 release ("Well-Read Students Learn
# Better"), by their release names; the four that release named are aliased too.
PRESETS = {
    "bert_base": _preset(12, 768),
    "bert_large": _preset(24, 1024),
    **{
        f"L-{layers}_H-{hidden}_A-{hidden // 64}": _preset(layers, hidden)
        for layers in (2, 4, 6, 8, 10, 12)
        for hidden in (128, 256, 512, 768)
    },
}
PRESETS.update(
    bert_tiny=PRESETS["L-2_H-128_A-2"],
    bert_mini=PRESETS["L-4_H-256_A-4"],
    bert_small=PRESETS["L-4_H-512_A-8"],
    bert_medium=PRESETS["L-8_H-512_A-8"],
)


def _as_bert_config(config):
    """A BertConfig, from a BertConfig or a dict of bert_config.json keys."""
    return BertConfig.from_dict(config) if isinstance(config, dict) else config


class _SavesBertConfig:
    """Keras get_config/from_config for a model built from `config`, a BertConfig."""

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(BertConfig.from_dict(config.pop("config")), **config)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertModel(_SavesBertConfig, LoraBackbone, keras.Model):
    """The BERT encoder: embeddings, num_hidden_layers transformer blocks and the [CLS] pooler.

    Inputs: a dict of int32 [B, S] tensors "input_ids", "input_mask" (1 = real token; default all ones) and
    "segment_ids" (default all zeros), with S <= max_position_embeddings.
    Outputs: a dict with "sequence_output" [B, S, H], "pooled_output" [B, H] and "encoder_outputs", a list
    of num_hidden_layers [B, S, H] tensors; dropout applies only with training=True.
    `enable_lora(rank)` freezes it and adds LoRA adapters (bert_tf.adapters).
    With config.objective "ltr" attention is causal (position i sees positions <= i) and the pooler reads
    the last real token instead of [CLS].

    Example:
    ```python
    model = BertModel(BertConfig.from_preset("bert_tiny"))
    out = model({"input_ids": tf.constant([[101, 7592, 102]])})
    out["pooled_output"].shape  # (1, 128)
    ```
    """

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert")
        super().__init__(**kwargs)
        self.config = config = _as_bert_config(config)
        policy = self.dtype_policy
        self.embeddings = BertEmbeddings(
            config.vocab_size,
            config.hidden_size,
            config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            dropout_rate=config.hidden_dropout_prob,
            initializer_range=config.initializer_range,
            name="embeddings",
            dtype=policy,
        )
        self.encoder_layers = [
            TransformerBlock(
                config.hidden_size,
                config.num_attention_heads,
                config.intermediate_size,
                hidden_act=config.hidden_act,
                hidden_dropout_prob=config.hidden_dropout_prob,
                attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range,
                name=f"layer_{i}",
                dtype=policy,
            )
            for i in range(config.num_hidden_layers)
        ]
        # tf.train.Checkpoint does not see into Keras' tracked lists: name each block as an attribute too,
        # or training checkpoints would silently lack the encoder.
        for i, block in enumerate(self.encoder_layers):
            setattr(self, f"encoder_layer_{i}", block)
        self.pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=truncated_normal(config.initializer_range),
            name="pooler",
            dtype=policy,
        )

    def build(self, input_shape=None):
        hidden_shape = (None, None, self.config.hidden_size)
        self.embeddings.build(None)
        for block in self.encoder_layers:
            block.build(hidden_shape)
        self.pooler.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        input_ids = tf.cast(inputs["input_ids"], tf.int32)
        input_mask = inputs.get("input_mask")
        input_mask = (
            tf.ones_like(input_ids) if input_mask is None else tf.cast(input_mask, tf.int32)
        )
        segment_ids = inputs.get("segment_ids")
        segment_ids = (
            tf.zeros_like(input_ids) if segment_ids is None else tf.cast(segment_ids, tf.int32)
        )

        hidden_states = self.embeddings(input_ids, segment_ids, training=training)  # [B, S, H]
        attention_mask = input_mask  # [B, S]
        if self.config.causal_attention:
            seq_length = tf.shape(input_ids)[1]
            lower = tf.linalg.band_part(tf.ones([seq_length, seq_length], tf.int32), -1, 0)
            attention_mask = input_mask[:, tf.newaxis, :] * lower  # [B, S, S]: j <= i, j real
        encoder_outputs = []
        for block in self.encoder_layers:
            hidden_states = block(hidden_states, attention_mask, training=training)
            encoder_outputs.append(hidden_states)
        pooled_output = self.pooler(self._pooled_token(hidden_states, input_mask))  # [B, H]
        return {
            "sequence_output": hidden_states,
            "pooled_output": pooled_output,
            "encoder_outputs": encoder_outputs,
        }

    def _pooled_token(self, hidden_states, input_mask):
        """[B, H]: the hidden state of [CLS], or under causal attention that of the last real token
        (the final [SEP]): there [CLS] sees only itself, and the last token sees the whole input, as
        OpenAI GPT's classifier reads it."""
        if not self.config.causal_attention:
            return hidden_states[:, 0]
        last = tf.maximum(tf.reduce_sum(input_mask, axis=1) - 1, 0)  # [B]
        return tf.gather(hidden_states, last, batch_dims=1)

    def embedding_output(self, inputs):
        """The [B, S, H] embeddings (after LayerNorm) of `inputs`, without dropout."""
        input_ids = tf.cast(inputs["input_ids"], tf.int32)
        segment_ids = inputs.get("segment_ids")
        segment_ids = (
            tf.zeros_like(input_ids) if segment_ids is None else tf.cast(segment_ids, tf.int32)
        )
        return self.embeddings(input_ids, segment_ids, training=False)

    def dummy_inputs(self):
        """A batch of one two-token sequence, enough to create every weight."""
        ids = tf.zeros([1, 2], tf.int32)
        return {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": ids}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainingModel(_SavesBertConfig, keras.Model):
    """BertModel plus the masked-LM and next-sentence heads of the original run_pretraining.py.

    Inputs: BertModel's plus "masked_lm_positions" [B, P] int32.
    Outputs: BertModel's plus "masked_lm_log_probs" [B, P, V] and "next_sentence_log_probs" [B, 2], both
    float32 under any dtype policy, and the "masked_lm_logits" [B, P, V] behind the former.
    `pretraining_loss` turns them into the original's loss.
    The paper's ablations (config.objective): "mlm" has no next-sentence head (and no such output);
    "ltr" has none either, and its output is "next_token_logits" [B, S - 1, V], the cls/predictions
    head at every position but the last, predicting the token after it (no masked-LM outputs).

    Example:
    ```python
    model = BertPretrainingModel(BertConfig.from_preset("bert_tiny"))
    out = model({"input_ids": ids, "input_mask": mask, "segment_ids": seg, "masked_lm_positions": pos})
    losses = pretraining_loss(out, features)  # features also hold masked_lm_ids/weights, labels
    ```
    """

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_pretraining")
        super().__init__(**kwargs)
        self.config = config = _as_bert_config(config)
        self.bert = BertModel(config, dtype=self.dtype_policy)
        self.bert.build()
        self.masked_lm = MaskedLMHead(
            config,
            self.bert.embeddings.word_embeddings,
            name="predictions",
            dtype=self.dtype_policy,
        )
        self.next_sentence = None  # objectives mlm and ltr have no next-sentence task
        if config.objective == "mlm_nsp":
            self.next_sentence = NextSentenceHead(
                config, name="seq_relationship", dtype=self.dtype_policy
            )

    def build(self, input_shape=None):
        self.masked_lm.build()
        if self.next_sentence is not None:
            self.next_sentence.build()
        self.built = True

    def call(self, inputs, training=None):
        outputs = dict(self.bert(inputs, training=training))
        sequence_output = outputs["sequence_output"]
        if self.config.objective == "ltr":
            batch_size, seq_length = tf.shape(sequence_output)[0], tf.shape(sequence_output)[1]
            positions = tf.tile(tf.range(seq_length - 1)[tf.newaxis], [batch_size, 1])  # [B, S-1]
            outputs["next_token_logits"] = self.masked_lm(sequence_output, positions)
            return outputs
        positions = tf.cast(inputs["masked_lm_positions"], tf.int32)
        logits = self.masked_lm(sequence_output, positions)
        outputs["masked_lm_logits"] = logits
        outputs["masked_lm_log_probs"] = tf.nn.log_softmax(logits, axis=-1)
        if self.next_sentence is not None:
            outputs["next_sentence_log_probs"] = self.next_sentence(outputs["pooled_output"])
        return outputs

    def dummy_inputs(self):
        inputs = self.bert.dummy_inputs()
        inputs["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
        return inputs


def pretraining_loss(outputs, features, mlm_denominator=None, nsp_denominator=None):
    """The original's pretraining loss: weighted mean masked-LM NLL plus mean next-sentence NLL.

    Args:
      outputs: BertPretrainingModel outputs ("masked_lm_logits" or else "masked_lm_log_probs" [B, P, V],
        "next_sentence_log_probs" [B, 2]).
      features: "masked_lm_ids" [B, P] int, "masked_lm_weights" [B, P] float (0 for padding predictions),
        "next_sentence_labels" [B] or [B, 1] int (1 = random next).
      mlm_denominator: divides the weighted masked-LM NLL sum; default sum(masked_lm_weights) + 1e-5, as in
        the original. Distributed training passes the global sum here.
      nsp_denominator: divides the next-sentence NLL sum; default B.

    Returns:
      A dict of float32 scalars "loss", "masked_lm_loss" and "next_sentence_loss"; without
      "next_sentence_log_probs" in `outputs` (objective mlm), "loss" is the masked-LM loss alone and
      there is no "next_sentence_loss".
    """
    masked_lm_ids = tf.cast(features["masked_lm_ids"], tf.int32)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    if "masked_lm_logits" in outputs:
        # The fused op: the same NLL, and a backward pass that touches the [B, P, V] logits once.
        masked_lm_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
            masked_lm_ids, tf.cast(outputs["masked_lm_logits"], tf.float32)
        )  # [B, P]
    else:
        log_probs = tf.cast(outputs["masked_lm_log_probs"], tf.float32)
        masked_lm_nll = -tf.gather(log_probs, masked_lm_ids, batch_dims=2)  # [B, P]
    if mlm_denominator is None:
        mlm_denominator = tf.reduce_sum(weights) + 1e-5
    masked_lm_loss = tf.reduce_sum(weights * masked_lm_nll) / mlm_denominator
    if "next_sentence_log_probs" not in outputs:
        return {"loss": masked_lm_loss, "masked_lm_loss": masked_lm_loss}

    labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])  # [B]
    nsp_log_probs = tf.cast(outputs["next_sentence_log_probs"], tf.float32)
    nsp_nll = -tf.gather(nsp_log_probs, labels, batch_dims=1)  # [B]
    if nsp_denominator is None:
        nsp_denominator = tf.cast(tf.shape(labels)[0], tf.float32)
    next_sentence_loss = tf.reduce_sum(nsp_nll) / nsp_denominator
    return {
        "loss": masked_lm_loss + next_sentence_loss,
        "masked_lm_loss": masked_lm_loss,
        "next_sentence_loss": next_sentence_loss,
    }
