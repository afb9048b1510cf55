"""Keras layers of the BERT encoder: embeddings, self-attention, transformer block, activations
(and the pretraining heads, in bert_tf.layers.pretraining_heads)."""

from bert_tf.layers.activations import ACTIVATIONS, get_activation
from bert_tf.layers.attention import SelfAttention
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.transformer import TransformerBlock

__all__ = ["ACTIVATIONS", "BertEmbeddings", "SelfAttention", "TransformerBlock", "get_activation"]
