"""Sentence embeddings trained on (anchor, positive[, negative]) pairs, run_embedding.py's task.

`task.py`: the model (the encoder's token vectors pooled), the in-batch negatives loss, its run and
export (`EmbeddingRun`, `SPEC`); `pairs.py` reads the pairs and the texts to embed. Its settings
are `tasks/task_settings.py`'s `EmbeddingSettings`. Nothing is imported here: import the modules.
"""
