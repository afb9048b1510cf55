"""`BertTextEmbedder`: raw strings to sentence vectors, as sentence-transformers' `encode` computes them.

It composes `BertPreprocessor` with the embedder run_embedding.py trains
(bert_tf.models.networks.embedder_network.BertEmbedder: the encoder's token vectors pooled, mean, cls or max, and
optionally L2-normalized), and exports with that task's export_model. `fit` trains it as
run_embedding.py does, on (anchor, positive[, hard negative]) rows with in-batch negatives
(bert_tf.models.networks.embedder_network.in_batch_negatives_loss, sentence-transformers'
MultipleNegativesRankingLoss); `evaluate` ranks every anchor's candidates as run_embedding.py's
evaluation does.

N = texts (rows), T = texts of a row (2 or 3), S = sequence length, H = hidden size.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import arguments, presets
from bert_tf.models.networks import embedder_network
from bert_tf.models.networks.task_info import POOLINGS, TaskInfo
from bert_tf.models.preprocessor import BertPreprocessor, as_text_batch, preprocessor_argument
from bert_tf.models.task import BertTask


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTextEmbedder(BertTask):
    """Raw strings -> float32 [N, H] vectors.

    from_preset of a converted sentence-transformers folder (convert_checkpoint.py) takes its
    pooling, normalisation, max_seq_length and casing from its embedding.json, so `predict` gives
    what `SentenceTransformer(folder).encode` gives. `export` writes export_saved_model.py
    --model_type=embedding's export (serving_default: text_a -> "embeddings").

    Example:
    ```python
    embedder = BertTextEmbedder.from_preset("all-MiniLM-L6-v2-converted")
    embedder.predict(["A man is eating food.", "A man eats."])  # [2, 384], unit norm
    embedder.fit(x=(questions, answers), batch_size=32, epochs=1)  # in-batch negatives
    embedder.evaluate((questions, answers), return_dict=True)  # recall@1, mrr@10, ...
    ```
    """

    text_pairs = False

    def __init__(
        self,
        preprocessor,
        bert_config,
        pooling="mean",
        normalize=True,
        similarity_scale=embedder_network.DEFAULT_SCALE,
        **kwargs,
    ):
        """
        Args:
          preprocessor: a BertPreprocessor (or its config).
          bert_config: a BertConfig, or a dict of bert_config.json keys.
          pooling: "mean", "cls" or "max" over the real tokens (see bert_tf.models.networks.embedder_network.pool).
          normalize: divide each vector by its L2 norm.
          similarity_scale: the loss's multiplier of cosine similarities (run_embedding.py
            --similarity_scale; sentence-transformers' 20).
        """
        preprocessor = preprocessor_argument(preprocessor)
        bert_config = arguments.bert_config(bert_config)
        pooling = arguments.choice("pooling", pooling, POOLINGS)
        normalize = arguments.boolean("normalize", normalize)
        self.similarity_scale = _checked_scale(similarity_scale)
        task_model = embedder_network.BertEmbedder(
            bert_config, pooling=pooling, normalize=normalize
        )
        kwargs.setdefault("name", "bert_text_embedder")
        super().__init__(preprocessor, task_model, **kwargs)

    @classmethod
    def from_preset(
        cls,
        folder,
        *,
        pooling=None,
        normalize=None,
        similarity_scale=embedder_network.DEFAULT_SCALE,
        vocabulary=None,
        do_lower_case=None,
        max_seq_length=None,
    ):
        """The embedder of a preset folder: a converted sentence-transformers model (its
        embedding.json), a run_embedding.py run (its task.json), or any release's encoder (mean
        pooling, normalized, unless said here).

        Raises:
          ValueError: one line naming the folder or the argument, before any model is built.
        """
        arguments.choice("pooling", pooling, POOLINGS, optional=True)
        arguments.boolean("normalize", normalize, optional=True)
        _checked_scale(similarity_scale)
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        recorded = {"pooling": "mean", "normalize": True}
        if preset.kind == "run":
            info = preset.task_info
            if info.model_type != embedder_network.MODEL_TYPE:
                raise ValueError(
                    f"the run in {folder} trained a {info.model_type} model, not embeddings"
                )
            recorded = {"pooling": info.settings.pooling, "normalize": info.settings.normalize}
        elif preset.embedding is not None:
            recorded = {key: preset.embedding[key] for key in recorded}
        pooling = recorded["pooling"] if pooling is None else pooling
        normalize = recorded["normalize"] if normalize is None else normalize
        model = cls(
            BertPreprocessor.of_preset(preset),
            preset.bert_config,
            pooling,
            normalize,
            similarity_scale,
        )
        presets.restore(model.task_model, preset)
        return model

    def call(self, inputs, training=None):
        """{"input_ids", "input_mask", "segment_ids"}: int32 [N, S] -> float32 [N, H]."""
        return self.task_model(inputs, training=training)["embeddings"]

    def default_loss(self):
        return InBatchNegativesLoss(self.similarity_scale)

    def default_metrics(self):
        return None

    def check_training_texts(self, x, argument="x"):
        """(anchors, positives) or (anchors, positives, negatives): T numpy object arrays [N]."""
        if not isinstance(x, tuple | list) or len(x) not in (2, 3) or isinstance(x[0], str | bytes):
            raise ValueError(
                f"{argument}: give the rows as (anchors, positives) or (anchors, positives, "
                "negatives), each a list of texts"
            )
        names = ("anchors", "positives", "negatives")
        columns = tuple(
            as_text_batch(column, f"{argument}[{i}] ({names[i]})") for i, column in enumerate(x)
        )
        if any(len(column) != len(columns[0]) for column in columns):
            counts = ", ".join(f"{len(c)} {names[i]}" for i, c in enumerate(columns))
            raise ValueError(f"{argument}: one text of each kind per row, got {counts}")
        if not len(columns[0]):
            raise ValueError(f"{argument}: no rows")
        return columns

    def check_labels(self, y, num_examples, argument="y"):
        """None: a row's positive is its label. Dummy labels [N] for Keras."""
        if y is not None:
            raise ValueError(
                f"{argument}: leave it None; each anchor's positive is its target (in-batch "
                "negatives)"
            )
        return np.zeros([num_examples], np.float32)

    def dataset(self, columns, labels=None, batch_size=32, shuffle=False):
        """Texts [N] (predict) or, with labels, rows: ({"input_ids", ...} int32 [B, T, S], [B])."""
        if labels is None:
            return super().dataset(columns, labels, batch_size, shuffle)
        arguments.integer("batch_size", batch_size, 1)
        texts = tuple(tf.constant(list(column), tf.string) for column in columns)
        dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
        if shuffle:
            dataset = dataset.shuffle(len(columns[0]), reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size).map(
            lambda rows, y: (self._row_features(rows), y), tf.data.AUTOTUNE
        )
        return dataset.prefetch(tf.data.AUTOTUNE)

    def _row_features(self, rows):
        """T tf.string [B] -> int32 [B, T, S]: all of a batch's texts padded to its longest."""
        count = tf.shape(rows[0])[0]
        features = self.preprocessor.features(tf.concat(rows, axis=0))  # [T * B, S]
        return {
            name: tf.transpose(tf.reshape(ids, [len(rows), count, -1]), [1, 0, 2])
            for name, ids in features.items()
        }

    def evaluate(self, x=None, y=None, batch_size=None, return_dict=False, verbose="auto"):
        """Ranks each anchor's candidates (every positive and negative of x) as run_embedding.py
        evaluates: "loss" (the mean cross-entropy of the right candidate among all of them, scaled
        by similarity_scale), "recall@1", "recall@10" and "mrr@10"."""
        columns = self.check_training_texts(x)
        self.check_labels(y, len(columns[0]))
        anchors, *others = (
            self.predict(column, batch_size=batch_size, verbose=verbose) for column in columns
        )
        results = embedder_network.retrieval_metrics(
            anchors, np.concatenate(others, axis=0), self.similarity_scale
        )
        results = {name.removeprefix("eval_"): value for name, value in results.items()}
        results = {"loss": results.pop("loss"), **results}
        return results if return_dict else list(results.values())

    def task_info(self):
        """The TaskInfo export_saved_model.py --model_type=embedding exports this model with."""
        return TaskInfo(
            model_type=embedder_network.MODEL_TYPE,
            bert_config=self.task_model.config,
            do_lower_case=self.preprocessor.do_lower_case,
            max_seq_length=self.preprocessor.max_seq_length,
            pooling=self.task_model.pooling,
            normalize=self.task_model.normalize,
        )

    def write_export(self, export_dir):
        return embedder_network.export_model(
            self.task_model, self.task_info(), self.preprocessor.vocab_file, export_dir, version=1
        )

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
            "bert_config": self.task_model.config.to_dict(),
            "pooling": self.task_model.pooling,
            "normalize": self.task_model.normalize,
            "similarity_scale": self.similarity_scale,
        }


def _checked_scale(similarity_scale):
    return arguments.number("similarity_scale", similarity_scale, 0, low_inclusive=False)


@keras.saving.register_keras_serializable(package="bert_tf")
class InBatchNegativesLoss(keras.losses.Loss):
    """run_embedding.py's loss as a Keras loss: y_pred float [B, T, H] (anchor, positive[, hard
    negative] of each row), y_true ignored; the mean over the B anchors of
    bert_tf.models.networks.embedder_network.in_batch_negatives_loss."""

    def __init__(
        self, similarity_scale=embedder_network.DEFAULT_SCALE, name="in_batch_negatives", **kwargs
    ):
        super().__init__(name=name, **kwargs)
        self.similarity_scale = float(similarity_scale)

    def call(self, y_true, y_pred):
        count = tf.cast(tf.shape(y_pred)[0], tf.float32)
        return embedder_network.in_batch_negatives_loss(y_pred, self.similarity_scale) / count

    def get_config(self):
        return {**super().get_config(), "similarity_scale": self.similarity_scale}
