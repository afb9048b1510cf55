"""BertHead, the one task head (a dense layer over the pooled or the sequence output), and BertTaskModel.

Every fine-tuning model of the original ends the same way: logits = output @ output_weights^T +
output_bias, with output_weights [units, H] (not [H, units]: the original keeps it so) and output_bias
[units], after dropout for some tasks. Only the variables' names differ between its scripts; a head
takes its names' scope (`google_scope`) so the original's fine-tuned checkpoints load:

    run_classifier.py   output_weights, output_bias           (pooled output, units = labels)
    run_squad.py        cls/squad/output_weights, ...          (sequence output, units = 2)
    run_ner.py          cls/tagging/output_weights, ...        (ours: the original has no NER script)
    run_swag.py         cls/multiple_choice/output_weights, ... (ours)

B = batch, S = sequence length, H = hidden size, U = units.
"""

import keras
import tensorflow as tf

from bert_tf.modeling import BertModel, _as_bert_config, _SavesBertConfig


@keras.saving.register_keras_serializable(package="bert_tf")
class BertHead(keras.layers.Layer):
    """Dropout, then a dense layer of `units` outputs over the last axis, in float32.

    Inputs: [..., H] (the pooled output [B, H] or the sequence output [B, S, H]), any dtype policy.
    Outputs: float32 logits [..., U].

    Example:
    ```python
    head = BertHead(units=3, hidden_size=128, dropout_rate=0.1)
    logits = head(pooled_output)  # [B, 3]
    head.google_variables()       # {"output_weights": ..., "output_bias": ...}
    ```
    """

    def __init__(
        self, units, hidden_size, google_scope="", dropout_rate=0.0, stddev=0.02, **kwargs
    ):
        """
        Args:
          units: U, the outputs (labels; 2 for SQuAD's start and end; 1 for a score).
          hidden_size: H, the encoder's hidden size.
          google_scope: prefix of the variable names in a Google checkpoint ("" or "cls/squad/").
          dropout_rate: dropout on the input while training (the original: hidden_dropout_prob for
            classification, none for SQuAD).
          stddev: of the truncated normal initial weights (the original's 0.02).
        """
        super().__init__(**kwargs)
        self.units = units
        self.hidden_size = hidden_size
        self.google_scope = google_scope
        self.dropout_rate = dropout_rate
        self.stddev = stddev
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            shape=(self.units, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.stddev),
            name="output_weights",
        )
        self.output_bias = self.add_weight(
            shape=(self.units,), initializer="zeros", name="output_bias"
        )
        self.built = True

    def call(self, inputs, training=None):
        inputs = self.dropout(inputs, training=training)
        # One [N, H] x [H, U] matmul: a batched one would broadcast the weights, and its gradient
        # would build one [H, U] per sequence before summing them.
        shape = tf.shape(inputs)
        flat = tf.reshape(inputs, [-1, self.hidden_size])  # [N, H]
        weights = tf.cast(self.output_weights, self.compute_dtype)
        logits = tf.matmul(flat, weights, transpose_b=True)  # [N, U]
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        return tf.reshape(logits, tf.concat([shape[:-1], [self.units]], axis=0))

    def google_variables(self):
        """{name in a Google-format checkpoint: variable}."""
        return {
            f"{self.google_scope}output_weights": self.output_weights,
            f"{self.google_scope}output_bias": self.output_bias,
        }

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "hidden_size": self.hidden_size,
            "google_scope": self.google_scope,
            "dropout_rate": self.dropout_rate,
            "stddev": self.stddev,
        }


class BertTaskModel(_SavesBertConfig, keras.Model):
    """BertModel + one BertHead over its pooled or its sequence output: the shape of every task model.

    A task's model subclasses it, fixing the head's units, the output it reads and its Google names,
    and turns `logits()` into its outputs in `call()`.
    """

    task_name = None  # its TaskSpec's name in bert_tf.tasks.TASKS

    def __init__(self, config, units, reads, google_scope="", dropout=True, **kwargs):
        """
        Args:
          config: a BertConfig (or a dict of bert_config.json keys).
          units: the head's outputs.
          reads: "pooled_output" ([CLS], [B, H]) or "sequence_output" (every token, [B, S, H]).
          google_scope: the head's names' scope in a Google checkpoint (see BertHead).
          dropout: hidden_dropout_prob on the head's input while training (the original: yes for
            classification, no for SQuAD).
        """
        super().__init__(**kwargs)
        self.config = config = _as_bert_config(config)
        self.reads = reads
        # The head before the encoder: the trainable weights keep the order of checkpoints written
        # before BertHead existed (head first), which a resumed optimizer's slots follow.
        self.head = BertHead(
            units,
            config.hidden_size,
            google_scope=google_scope,
            dropout_rate=config.hidden_dropout_prob if dropout else 0.0,
            name="head",
            dtype=self.dtype_policy,
        )
        self.bert = BertModel(config, dtype=self.dtype_policy)
        if reads == "sequence_output":
            # The pooler then gets no gradient, and the original leaves it as loaded. Frozen, it is
            # left alone without the optimizer warning about it every run.
            self.bert.pooler.trainable = False

    def build(self, input_shape=None):
        self.bert.build()
        self.head.build()
        self.built = True

    def logits(self, inputs, training=None):
        """The head over the encoder's `reads` output: float32 [B, U] or [B, S, U]."""
        return self.head(self.bert(inputs, training=training)[self.reads], training=training)

    def dummy_inputs(self):
        return self.bert.dummy_inputs()
