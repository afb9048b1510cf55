"""In-graph BERT tokenization and packing, id for id the same as `tokenization.FullTokenizer`.

`GraphPreprocessor` turns a batch of raw strings into wordpiece ids (with byte offsets) and packs
them into `input_ids` / `input_mask` / `segment_ids`, using only TensorFlow and TensorFlow Text
ops, so a SavedModel that holds it serves raw text with `import tensorflow, tensorflow_text`.

Why not `tensorflow_text.BertTokenizer` / `FastBertTokenizer` as they come: their normalisation
differs from the original Python code (which control and format characters are dropped, which
characters are whitespace, NFKC case folding instead of `str.lower`, the original's punctuation
set including ASCII "^", "$" and "`", Python's final-sigma rule, the 200-character word limit
counted in characters). Here every rule comes from the predicates of `bert_tf/tokenization.py`
and Python's `str.lower` / `unicodedata`, run on every code point when the preprocessor is
built, so the graph agrees with `FullTokenizer` on this Python's Unicode version.

Modules:
  preprocessor: `GraphPreprocessor`, and the routing of each string to one of three paths
    (ASCII; normalized, with tensorflow-text's kernels fed BERT's own mapping; code point).
  normalized_path: the tables and row patterns of the normalized path.
  normalizer_model: a `FastBertNormalizer` model (darts-clone trie in a flatbuffer) built
    from a Python mapping.
  code_points: the code point path, for the strings no kernel can take exactly.
  graph_packing: [CLS] a [SEP] b [SEP] with the original's truncation, on ragged id tensors
    (bert_tf/data/packing.py packs Python lists of tokens, outside the graph).

Invalid UTF-8 is handled as `FullTokenizer` handles `bytes`: invalid bytes are skipped.
"""

from bert_tf.preprocessing.graph_preprocessor import GraphPreprocessor

__all__ = ["GraphPreprocessor"]
