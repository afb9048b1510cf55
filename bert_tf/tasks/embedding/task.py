"""Sentence embeddings: a text's vector pooled from the encoder, as sentence-transformers computes it.

A text is embedded as one BERT input, `[CLS] text [SEP]`, and its token vectors are pooled:
- "mean": the mean of the sequence output over the real tokens (all-MiniLM-L6-v2 and most
  sentence-transformers models);
- "cls": the [CLS] token's vector (the raw hidden state, not the [CLS] pooler);
- "max": the element-wise maximum over the real tokens;
then, with `normalize`, divided by its L2 norm (a sentence-transformers `Normalize` module). The model
has no weights of its own: any BERT checkpoint's encoder is one.

Fine-tuning (run_embedding.py) trains a bi-encoder on (anchor, positive[, hard negative]) rows with
in-batch negatives: each anchor's positive against every other row's positive and every hard
negative of the batch, a softmax over their cosine similarities times `similarity_scale` (20, as
sentence-transformers' MultipleNegativesRankingLoss). Evaluation ranks every dev anchor's candidates
(all dev positives and hard negatives): recall@1, recall@10 and MRR@10.

A converted sentence-transformers folder (convert_checkpoint.py) records its pooling, normalisation,
max_seq_length and casing in embedding.json beside bert_config.json (bert_tf/formats/convert.py); a run of this
task records its own in task.json ("embedding": {"pooling", "normalize"}).

B = batch, T = texts of a row (anchor, positive[, negative]), S = sequence length, H = hidden size,
N = dev rows, C = dev candidates.
"""

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import resolve_checkpoint
from bert_tf.data.feature_cache import file_identity
from bert_tf.export import ID_FEATURES, serving_module, serving_signatures, write_saved_model
from bert_tf.formats.sentence_transformers_folder import (
    EMBEDDING_FILE,
    POOLINGS,
    read_embedding_file,
)
from bert_tf.modeling import BertModel
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.tasks.embedding import pairs as embedding_pairs
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_configs import DEFAULT_SCALE, EmbeddingConfig

MODEL_TYPE = "embedding"
# sentence-transformers' MultipleNegativesRankingLoss: cosine similarities times 20.
# sentence-transformers' clamps: the mean's token count (torch.clamp min=1e-9), the norm (F.normalize).
_MIN_TOKENS = 1e-9
_MIN_NORM = 1e-12


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
            tf.reduce_sum(mask, axis=1), _MIN_TOKENS
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
        pooled = pooled * tf.math.rsqrt(tf.maximum(squared, _MIN_NORM * _MIN_NORM))
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
    embeddings = tf.math.l2_normalize(embeddings, axis=-1, epsilon=_MIN_NORM * _MIN_NORM)
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
    anchors = anchors / np.maximum(np.linalg.norm(anchors, axis=1, keepdims=True), _MIN_NORM)
    norms = np.linalg.norm(candidates, axis=1, keepdims=True)
    scores = anchors @ (candidates / np.maximum(norms, _MIN_NORM)).T  # [N, C]
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


# ---------------------------------------------------------------------------------- the export


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


def encoder_info(prefix, info):
    """The TaskInfo of an encoder checkpoint exported as embeddings: the pooling, normalisation,
    max_seq_length and casing of the embedding.json beside it (a converted sentence-transformers
    folder), else mean pooling, normalized, and `info`'s tokenizer settings."""
    recorded = read_embedding_file(os.path.dirname(prefix))
    if recorded is None:
        logging.info("no %s beside %s: mean pooling, normalized", EMBEDDING_FILE, prefix)
        recorded = {}
    do_lower_case = recorded.get("do_lower_case")
    return TaskInfo(
        model_type=MODEL_TYPE,
        bert_config=info.bert_config,
        do_lower_case=info.do_lower_case if do_lower_case is None else do_lower_case,
        max_seq_length=recorded.get("max_seq_length", info.max_seq_length),
        pooling=recorded.get("pooling", "mean"),
        normalize=recorded.get("normalize", True),
    )


# ---------------------------------------------------------------------------------- the run


SPEC = TaskSpec(
    name=MODEL_TYPE,
    build_model=build_model,
    export_model=export_model,
    info_from_encoder=encoder_info,
    config_class=EmbeddingConfig,
)


class EmbeddingRun(FineTuningRun):
    """One run_embedding.py invocation: features, training, evaluation, prediction and export."""

    spec = SPEC

    metric_name = "eval_mrr@10"

    def __init__(self, config):
        super().__init__(config)
        self._settle_pooling()

    def _settle_pooling(self):
        """Sets the config's pooling and normalize: the flags', else the checkpoint's, else mean
        and normalized (what task.json records and the model is built with)."""
        recorded, source = self._recorded_settings()
        config = self.config
        pooling = config.pooling or recorded.get("pooling", "mean")
        normalize = (
            recorded.get("normalize", True) if config.normalize is None else config.normalize
        )
        self.config = dataclasses.replace(config, pooling=pooling, normalize=normalize)
        logging.info("Embeddings: %s pooling, normalize=%s (%s)", pooling, normalize, source)
        for name in ("max_seq_length", "do_lower_case"):  # the tokenizer's: flags, not defaults
            if name in recorded and recorded[name] != getattr(self.config, name):
                logging.warning(
                    "--%s=%s, but %s has %s=%s: the vectors differ from the model's own",
                    name, getattr(self.config, name), source, name, recorded[name],
                )  # fmt: skip

    def _recorded_settings(self):
        """({"pooling", "normalize"} of the checkpoint the run starts from, or {}, where from)."""
        info = self.checkpoint_task_info()
        if info is not None and info.model_type == MODEL_TYPE:
            return dataclasses.asdict(info.settings), "the task.json of the checkpoint's run"
        if self.config.init_checkpoint:
            folder = os.path.dirname(resolve_checkpoint(self.config.init_checkpoint))
            recorded = read_embedding_file(folder)
            if recorded is not None:
                return recorded, os.path.join(folder, EMBEDDING_FILE)
        return {}, "the flags and defaults"

    # ------------------------------------------------------------------ data

    def read_split(self, split):
        """(path, rows) of a split's file: pairs for "train" and "dev", texts for "test"."""
        path = file_io.require_split_file(
            self.config.data_dir, embedding_pairs.PAIR_FILE_NAMES, split
        )
        if split == "test":
            return path, embedding_pairs.read_texts_file(path)
        return path, embedding_pairs.read_pairs_file(path)

    def feature_settings(self, step):
        return {
            "format": "bert_tf embedding features 1",
            "input": file_identity(self.step_data(step)[0]),
        }

    def make_records(self, step):
        rows, max_seq_length = self.step_data(step)[1], self.config.max_seq_length
        serialized = [
            embedding_pairs.serialize_feature(
                embedding_pairs.convert_row_to_feature(row, max_seq_length, self.tokenizer)
            )
            for row in rows
        ]
        return serialized, {"num_real_examples": len(rows), "num_texts": len(rows[0].texts)}

    def feature_summary(self, info):
        return f"{info['num_real_examples']} rows of {info['num_texts']} texts"

    def feature_spec(self, is_training, path=None):
        # No weight depends on the number of texts: an anchor and a positive build the model.
        num_texts = self.feature_info(path)["num_texts"] if path else 2
        return embedding_pairs.feature_spec(num_texts, self.config.max_seq_length)

    # ------------------------------------------------------------------ model and loop

    def loss(self, outputs, features, normalizers):
        loss = in_batch_negatives_loss(outputs["embeddings"], self.config.similarity_scale)
        return {"loss": loss / normalizers["examples"]}

    # ------------------------------------------------------------------ the steps

    def embed(self, step, batch_size):
        """The step's features through the model: float32 [N, T, H], in file order."""
        path, info = self.features(step)
        return self.predict_features(path, info, batch_size, ["embeddings"])["embeddings"]

    def evaluate(self):
        embeddings = self.embed("eval", self.config.eval_batch_size)  # [N, T, H]
        anchors = embeddings[:, 0]
        # [N, T - 1, H] -> [(T - 1) * N, H]: the positives, then the hard negatives.
        candidates = np.concatenate(list(np.swapaxes(embeddings[:, 1:], 0, 1)), axis=0)
        results = retrieval_metrics(anchors, candidates, self.config.similarity_scale)
        top = (anchors @ candidates.T).argmax(axis=1).tolist()
        return self.evaluation_done(results, top, "top candidate")

    def predict_test(self):
        embeddings = self.embed("predict", self.config.predict_batch_size)[:, 0]  # [N, H]
        rows = ("\t".join(f"{value:.8g}" for value in row) + "\n" for row in embeddings)
        self.write_output("test_results.tsv", "".join(rows))
        return embeddings
