"""`BertTextEmbedder`: raw strings to sentence vectors, as sentence-transformers' `encode` computes them.

It composes `BertPreprocessor` with the embedder run_embedding.py trains
(bert_tf.tasks.embedding.BertEmbedder: the encoder's token vectors pooled, mean, cls or max, and
optionally L2-normalized), and exports with that task's export_model.

N = texts, H = hidden size.
"""

import keras

from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.formats.sentence_transformers_folder import POOLINGS
from bert_tf.modeling import BertConfig
from bert_tf.models import presets
from bert_tf.models.preprocessor import BertPreprocessor
from bert_tf.models.task import BertTask
from bert_tf.tasks import embedding
from bert_tf.tasks.run_files import TaskInfo


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
    ```
    """

    text_pairs = False

    def __init__(self, preprocessor, bert_config, pooling="mean", normalize=True, **kwargs):
        """
        Args:
          preprocessor: a BertPreprocessor (or its config).
          bert_config: a BertConfig, or a dict of bert_config.json keys.
          pooling: "mean", "cls" or "max" over the real tokens (see bert_tf.tasks.embedding.pool).
          normalize: divide each vector by its L2 norm.
        """
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if isinstance(bert_config, dict):
            bert_config = BertConfig.from_dict(bert_config)
        task_model = embedding.BertEmbedder(bert_config, pooling=pooling, normalize=normalize)
        kwargs.setdefault("name", "bert_text_embedder")
        super().__init__(preprocessor, task_model, **kwargs)

    @classmethod
    def from_preset(
        cls,
        folder,
        *,
        pooling=None,
        normalize=None,
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
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        recorded = {"pooling": "mean", "normalize": True}
        if preset.kind == "run":
            info = preset.task_info
            if info.model_type != embedding.MODEL_TYPE:
                raise ValueError(
                    f"the run in {folder} trained a {info.model_type} model, not embeddings"
                )
            recorded = {"pooling": info.settings.pooling, "normalize": info.settings.normalize}
        elif preset.embedding is not None:
            recorded = {key: preset.embedding[key] for key in recorded}
        pooling = recorded["pooling"] if pooling is None else pooling
        normalize = recorded["normalize"] if normalize is None else bool(normalize)
        model = cls(BertPreprocessor.of_preset(preset), preset.bert_config, pooling, normalize)
        restore_init_checkpoint(model.task_model, preset.checkpoint)
        return model

    def call(self, inputs, training=None):
        """{"input_ids", "input_mask", "segment_ids"}: int32 [N, S] -> float32 [N, H]."""
        return self.task_model(inputs, training=training)["embeddings"]

    def default_loss(self):
        return None

    def default_metrics(self):
        return None

    def check_labels(self, y, num_examples, argument="y"):
        raise ValueError(
            f"{argument}: BertTextEmbedder is not trained by fit; run_embedding.py fine-tunes "
            "embeddings (in-batch negatives)"
        )

    def task_info(self):
        """The TaskInfo export_saved_model.py --model_type=embedding exports this model with."""
        return TaskInfo(
            model_type=embedding.MODEL_TYPE,
            bert_config=self.task_model.config,
            do_lower_case=self.preprocessor.do_lower_case,
            max_seq_length=self.preprocessor.max_seq_length,
            pooling=self.task_model.pooling,
            normalize=self.task_model.normalize,
        )

    def write_export(self, export_dir):
        return embedding.export_model(
            self.task_model, self.task_info(), self.preprocessor.vocab_file, export_dir, version=1
        )

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
            "bert_config": self.task_model.config.to_dict(),
            "pooling": self.task_model.pooling,
            "normalize": self.task_model.normalize,
        }
