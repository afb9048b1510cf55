"""Hugging Face's names of BERT's weights and activations: the one table both directions read.

bert_tf/formats/convert.py reads a Hugging Face folder through it (Hugging Face -> Google's names) and
bert_tf/formats/huggingface_out.py writes one (Google's names -> Hugging Face); docs/formats.md is printed from
it (bert_tf/formats/formats_doc.py).
"""

import re

# Hugging Face hidden_act -> ours. HF's "gelu" is the exact erf form ("gelu_exact" here); the original
# BERT's "gelu", ours too, is the tanh approximation, which HF calls "gelu_new" or "gelu_pytorch_tanh".
HIDDEN_ACTS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "silu": "swish",
    "swish": "swish",
    "tanh": "tanh",
}
# The Google names that follow no pattern: the pretraining heads and the task heads
# (bert_tf/models/networks/task_head.py), each with the Hugging Face names that hold it, the first the one
# transformers writes. Their weights are [units, H] in both formats (Google's output_weights is
# multiplied transposed, like a torch Linear weight), so they are copied as they are.
HEAD_NAMES = {
    "cls/predictions/output_bias": ["cls.predictions.bias", "cls.predictions.decoder.bias"],
    "cls/seq_relationship/output_weights": ["cls.seq_relationship.weight"],
    "cls/seq_relationship/output_bias": ["cls.seq_relationship.bias"],
    "output_weights": ["classifier.weight"],  # run_classifier.py (one text, pairs, multi-label)
    "output_bias": ["classifier.bias"],
    "cls/squad/output_weights": ["qa_outputs.weight"],  # run_squad.py: start and end
    "cls/squad/output_bias": ["qa_outputs.bias"],
    "cls/tagging/output_weights": ["classifier.weight"],  # run_ner.py
    "cls/tagging/output_bias": ["classifier.bias"],
    "cls/multiple_choice/output_weights": ["classifier.weight"],  # run_swag.py: one score
    "cls/multiple_choice/output_bias": ["classifier.bias"],
}


def hf_names(google_name, prefix):
    """The Hugging Face names that may hold a Google variable, and whether it is a torch Linear weight.

    The first name is the one transformers writes (bert_tf/formats/huggingface_out.py writes it too).

    bert/encoder/layer_3/attention/self/query/kernel -> {prefix}encoder.layer.3.attention.self.query.weight;
    LayerNorm gamma/beta are weight/bias (gamma/beta in older files); embedding tables end in ".weight".
    """
    if google_name in HEAD_NAMES:
        return HEAD_NAMES[google_name], False
    scope, leaf = google_name.rsplit("/", 1)
    module = re.sub(r"layer_(\d+)", r"layer.\1", scope).replace("/", ".")
    if module.startswith("bert."):
        module = prefix + module[len("bert.") :]
    if leaf == "kernel":
        return [f"{module}.weight"], True
    leaf_names = {"bias": ["bias"], "gamma": ["weight", "gamma"], "beta": ["bias", "beta"]}
    if leaf in leaf_names:
        return [f"{module}.{name}" for name in leaf_names[leaf]], False
    if leaf.endswith("_embeddings"):
        return [f"{module}.{leaf}.weight"], False
    raise ValueError(f"No Hugging Face name is known for the Google variable {google_name!r}")
