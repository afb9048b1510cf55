"""The pretraining objectives of the paper's ablations (§5.1, Table 5); the --objective flag is shared_settings'.

- "mlm_nsp": masked LM + next-sentence prediction on [CLS] A [SEP] B [SEP] pairs (the original);
- "mlm": masked LM alone, on one continuous segment ("No NSP");
- "ltr": a left-to-right LM with a causal attention mask, predicting every next token, no masking and no
  NSP ("LTR & No NSP", like OpenAI GPT). The causal mask stays in fine-tuning and in exports.

A model's objective is recorded in its bert_config.json (the key "objective", written only when it is not
the original's, so Google's configs load and are written unchanged). No TensorFlow and no flags here: bert_tf.modeling
imports this module.
"""

OBJECTIVES = ("mlm_nsp", "mlm", "ltr")
DEFAULT_OBJECTIVE = "mlm_nsp"
# The objectives whose encoder attends only to the left (a causal attention mask).
CAUSAL_OBJECTIVES = frozenset({"ltr"})


def describe(objective):
    """A few words for messages: what the objective's encoder attends to."""
    attention = "causal (left-to-right)" if objective in CAUSAL_OBJECTIVES else "bidirectional"
    return f"objective {objective}, {attention} attention"
