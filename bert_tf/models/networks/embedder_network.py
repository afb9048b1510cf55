"""The embedder's network (run_embedding.py's model): a text's vector pooled from the encoder, as
sentence-transformers computes it.

A text is embedded as one BERT input, `[CLS] text [SEP]`, and its token vectors are pooled:
- "mean": the mean of the sequence output over the real tokens (all-MiniLM-L6-v2 and most
  sentence-transformers models);
- "cls": the [CLS] token's vector (the raw hidden state, not the [CLS] pooler);
- "max": the element-wise maximum over the real tokens;
then, with `normalize`, divided by its L2 norm (a sentence-transformers `Normalize` module). The model
has no weights of its own: any BERT checkpoint's encoder is one. Here too: its loss (in-batch
negatives) and its retrieval metrics, which the run and BertTextEmbedder share.

B = batch, T = texts of a row (anchor, positive[, negative]), S = sequence length, H = hidden size,
N = dev rows, C = dev candidates.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.export import ID_FEATURES, serving_module, serving_signatures, write_saved_model
from bert_tf.modeling import BertModel
from bert_tf.models.networks.network_spec import NetworkSpec
from bert_tf.models.networks.task_info import POOLINGS

# run_embedding.py's --similarity_scale: the loss's multiplier of cosine similarities.
DEFAULT_SCALE = 20.0

MODEL_TYPE = "embedding"


# sentence-transformers' MultipleNegativesRankingLoss: cosine similarities times 20.
# sentence-transformers' clamps: the mean's token count (torch.clamp min=1e-9), the norm (F.normalize).
MIN_TOKENS = 1e-9


MIN_NORM = 1e-12


def pool(sequence_output, input_mask, pooling, normalize):
    """The text vectors of an encoder's outputs, as sentence-transformers' Pooling (+ Normalize).

    Args:
      sequence_output: [N, S, H], any float dtype (pooled in float32).
      input_mask: int [N, S], 1 on real tokens.
      pooling: one of POOLINGS.
      normalize: divide each vector by its L2 norm (at least 1e-12).

    Returns:
      float32 [N, H].
    """
    hidden = tf.cast(sequence_output, tf.float32)
    mask = tf.cast(input_mask, tf.float32)[:, :, None]  # [N, S, 1]
    if pooling == "mean":
        pooled = tf.reduce_sum(hidden * mask, axis=1) / tf.maximum(
            tf.reduce_sum(mask, axis=1), MIN_TOKENS
        )
    elif pooling == "cls":
        pooled = hidden[:, 0]
    elif pooling == "max":
        # Padding positions at -1e9, as sentence-transformers sets them, never win the maximum.
        pooled = tf.reduce_max(tf.where(mask > 0, hidden, -1e9), axis=1)
    else:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if normalize:
        # x / max(|x|, eps), through rsqrt: a finite gradient even for a zero vector.
        squared = tf.reduce_sum(tf.square(pooled), axis=-1, keepdims=True)
        pooled = pooled * tf.math.rsqrt(tf.maximum(squared, MIN_NORM * MIN_NORM))
    return pooled


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbedder(BertModel):
    """A BertModel whose output is each text's pooled vector; its weights are the encoder's alone.

    Inputs: "input_ids", "input_mask", "segment_ids", int32 [..., S] (one text per row: [B, S], or
    a row's texts stacked: [B, T, S]).
    Outputs: {"embeddings": float32 [..., H]}.

    Example:
    ```python
    model = BertEmbedder(BertConfig.from_preset("bert_tiny"), pooling="mean", normalize=True)
    model({"input_ids": tf.constant([[101, 7592, 102]])})["embeddings"]  # [1, 128], norm 1
    ```
    """

    task_name = MODEL_TYPE

    def __init__(self, config, pooling="mean", normalize=True, **kwargs):
        kwargs.setdefault(
            "name", "bert"
        )  # the encoder's object paths: any checkpoint's encoder loads
        super().__init__(config, **kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling, self.normalize = pooling, normalize
        # The [CLS] pooler has no part in the vectors: frozen, it keeps its loaded values.
        self.pooler.trainable = False

    def call(self, inputs, training=None):
        shape = tf.shape(inputs["input_ids"])  # [..., S]
        flat = {
            name: tf.reshape(inputs[name], [-1, shape[-1]])
            for name in ID_FEATURES
            if name in inputs
        }  # [N, S]
        outputs = super().call(flat, training=training)
        mask = flat.get("input_mask", tf.ones_like(flat["input_ids"]))
        vectors = pool(outputs["sequence_output"], mask, self.pooling, self.normalize)  # [N, H]
        hidden = [self.config.hidden_size]
        return {"embeddings": tf.reshape(vectors, tf.concat([shape[:-1], hidden], axis=0))}

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "normalize": self.normalize}


def in_batch_negatives_loss(embeddings, scale):
    """The summed cross-entropy of each anchor's positive among the batch's candidates.

    Args:
      embeddings: float [B, T, H]: anchor, positive and (T = 3) hard negative of each row.
      scale: the cosine similarities' multiplier (sentence-transformers' 20).

    Returns:
      float32 scalar: sum over the B anchors of -log softmax(scale * cos(anchor, candidates))[its
      positive], the candidates being the B positives, then the B hard negatives.
    """
    embeddings = tf.cast(embeddings, tf.float32)
    embeddings = tf.math.l2_normalize(embeddings, axis=-1, epsilon=MIN_NORM * MIN_NORM)
    anchors = embeddings[:, 0]  # [B, H]
    hidden = tf.shape(embeddings)[-1]
    # [B, T - 1, H] -> [T - 1, B, H] -> [(T - 1) * B, H]: every positive, then every negative.
    candidates = tf.reshape(tf.transpose(embeddings[:, 1:], [1, 0, 2]), [-1, hidden])
    scores = scale * tf.matmul(anchors, candidates, transpose_b=True)  # [B, (T - 1) * B]
    labels = tf.range(tf.shape(anchors)[0])
    return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, scores))


def retrieval_metrics(anchors, candidates, scale=DEFAULT_SCALE):
    """Ranks every anchor's candidates by cosine similarity; anchor i's right candidate is i.

    A candidate scoring the same as the right one ranks before it when its index is lower (the order
    a stable sort by descending score gives).

    Args:
      anchors: [N, H]; candidates: [C, H], C >= N (the positives, then any hard negatives).
      scale: the loss's multiplier, for eval_loss.

    Returns:
      {"eval_recall@1", "eval_recall@10", "eval_mrr@10", "eval_loss"} (eval_loss: the mean
      cross-entropy of the right candidate among all C), floats.
    """
    anchors = np.asarray(anchors, np.float64)
    candidates = np.asarray(candidates, np.float64)
    anchors = anchors / np.maximum(np.linalg.norm(anchors, axis=1, keepdims=True), MIN_NORM)
    norms = np.linalg.norm(candidates, axis=1, keepdims=True)
    scores = anchors @ (candidates / np.maximum(norms, MIN_NORM)).T  # [N, C]
    rows = np.arange(len(anchors))
    right = scores[rows, rows][:, None]  # [N, 1]
    earlier = np.arange(scores.shape[1])[None, :] < rows[:, None]
    ranks = 1 + np.sum((scores > right) | ((scores == right) & earlier), axis=1)  # [N]
    logits = scale * scores
    top = logits.max(axis=1, keepdims=True)
    log_sum = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return {
        "eval_recall@1": float(np.mean(ranks <= 1)),
        "eval_recall@10": float(np.mean(ranks <= 10)),
        "eval_mrr@10": float(np.mean(np.where(ranks <= 10, 1.0 / ranks, 0.0))),
        "eval_loss": float(np.mean(log_sum - logits[rows, rows])),
    }


def build_model(bert_config, info):
    """The embedder of `info`'s pooling and normalisation (task.json's, or the flags' defaults)."""
    return BertEmbedder(
        bert_config, pooling=info.settings.pooling, normalize=info.settings.normalize
    )


def export_model(model, info, vocab_file, export_dir, version=None, freeze_weights=False):
    """Writes the embedder as a SavedModel serving raw text (docs/serving.md's contract).

    serving_default: text_a [B] -> "embeddings" float32 [B, H]; a text longer than the export's
    max_seq_length is cut to its first max_seq_length - 2 word pieces, as sentence-transformers cuts
    it. preprocess (text_a) and preprocess_pair -> "input_ids", "input_mask", "segment_ids" int32
    [B, S]; serve_ids: those three -> "embeddings".
    """
    module = serving_module(model, info, vocab_file)

    def outputs_fn(features):
        return {"embeddings": tf.cast(model(features, training=False)["embeddings"], tf.float32)}

    signatures = serving_signatures(module.preprocessor, outputs_fn)
    return write_saved_model(export_dir, module, signatures, version=version, freeze=freeze_weights)


NETWORK = NetworkSpec(name=MODEL_TYPE, build_model=build_model, export_model=export_model)
