"""Sentence embeddings: a text's vector pooled from the encoder, as sentence-transformers computes it
(the poolings and the network are bert_tf/models/networks/embedder_network.py's).

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

import numpy as np
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import resolve_checkpoint
from bert_tf.data.feature_cache import file_identity
from bert_tf.formats.sentence_transformers_folder import (
    EMBEDDING_FILE,
    read_embedding_file,
)
from bert_tf.models.networks import embedder_network
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.tasks.embedding import pairs as embedding_pairs
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_parts import Task
from bert_tf.tasks.task_settings import EmbeddingSettings

# ---------------------------------------------------------------------------------- the export


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
        model_type=embedder_network.MODEL_TYPE,
        bert_config=info.bert_config,
        do_lower_case=info.do_lower_case if do_lower_case is None else do_lower_case,
        max_seq_length=recorded.get("max_seq_length", info.max_seq_length),
        pooling=recorded.get("pooling", "mean"),
        normalize=recorded.get("normalize", True),
    )


# ---------------------------------------------------------------------------------- the task


SPEC = TaskSpec.of(
    embedder_network.NETWORK, info_from_encoder=encoder_info, settings_class=EmbeddingSettings
)


class EmbeddingTask(Task):
    """run_embedding.py's task: a bi-encoder's in-batch negatives loss, retrieval metrics, vectors."""

    spec = SPEC

    metric_name = "eval_mrr@10"

    def setup(self, settings):
        """The settings with the pooling and normalize settled: the flags', else the checkpoint's,
        else mean and normalized (what task.json records and the model is built with)."""
        recorded, source = self._recorded_settings()
        pooling = settings.pooling or recorded.get("pooling", "mean")
        normalize = (
            recorded.get("normalize", True) if settings.normalize is None else settings.normalize
        )
        logging.info("Embeddings: %s pooling, normalize=%s (%s)", pooling, normalize, source)
        for name in ("max_seq_length", "do_lower_case"):  # the tokenizer's: flags, not defaults
            if name in recorded and recorded[name] != getattr(settings, name):
                logging.warning(
                    "--%s=%s, but %s has %s=%s: the vectors differ from the model's own",
                    name, getattr(settings, name), source, name, recorded[name],
                )  # fmt: skip
        return dataclasses.replace(settings, pooling=pooling, normalize=normalize)

    def _recorded_settings(self):
        """({"pooling", "normalize"} of the checkpoint the run starts from, or {}, where from)."""
        info = self.run.checkpoint_task_info()
        if info is not None and info.model_type == embedder_network.MODEL_TYPE:
            return dataclasses.asdict(info.settings), "the task.json of the checkpoint's run"
        if self.settings.init_checkpoint:
            folder = os.path.dirname(resolve_checkpoint(self.settings.init_checkpoint))
            recorded = read_embedding_file(folder)
            if recorded is not None:
                return recorded, os.path.join(folder, EMBEDDING_FILE)
        return {}, "the flags and defaults"

    # ------------------------------------------------------------------ data

    def read_split(self, split):
        """(path, rows) of a split's file: pairs for "train" and "dev", texts for "test"."""
        path = file_io.require_split_file(
            self.settings.data_dir, embedding_pairs.PAIR_FILE_NAMES, split
        )
        if split == "test":
            return path, embedding_pairs.read_texts_file(path)
        return path, embedding_pairs.read_pairs_file(path)

    def feature_settings(self, step):
        return {
            "format": "bert_tf embedding features 1",
            "input": file_identity(self.run.step_data(step)[0]),
        }

    def make_records(self, step):
        rows, max_seq_length = self.run.step_data(step)[1], self.settings.max_seq_length
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
        num_texts = self.run.feature_info(path)["num_texts"] if path else 2
        return embedding_pairs.feature_spec(num_texts, self.settings.max_seq_length)

    # ------------------------------------------------------------------ model and loop

    def loss(self, outputs, features, normalizers):
        loss = embedder_network.in_batch_negatives_loss(
            outputs["embeddings"], self.settings.similarity_scale
        )
        return {"loss": loss / normalizers["examples"]}

    # ------------------------------------------------------------------ the steps

    def embed(self, step, batch_size):
        """The step's features through the model: float32 [N, T, H], in file order."""
        path, info = self.features(step)
        return self.run.predict_features(path, info, batch_size, ["embeddings"])["embeddings"]

    def evaluate(self):
        embeddings = self.embed("eval", self.settings.eval_batch_size)  # [N, T, H]
        anchors = embeddings[:, 0]
        # [N, T - 1, H] -> [(T - 1) * N, H]: the positives, then the hard negatives.
        candidates = np.concatenate(list(np.swapaxes(embeddings[:, 1:], 0, 1)), axis=0)
        results = embedder_network.retrieval_metrics(
            anchors, candidates, self.settings.similarity_scale
        )
        top = (anchors @ candidates.T).argmax(axis=1).tolist()
        return self.run.evaluation_done(results, top, "top candidate")

    def predict_test(self):
        embeddings = self.embed("predict", self.settings.predict_batch_size)[:, 0]  # [N, H]
        rows = ("\t".join(f"{value:.8g}" for value in row) + "\n" for row in embeddings)
        self.run.write_output("test_results.tsv", "".join(rows))
        return embeddings


class EmbeddingRun(FineTuningRun):
    """One run_embedding.py invocation: a FineTuningRun of an EmbeddingTask."""

    def __init__(self, settings):
        super().__init__(settings, EmbeddingTask)
