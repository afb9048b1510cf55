"""Other formats of a BERT checkpoint, in and out (docs/formats.md, docs/checkpoints.md).

In: convert.py turns a Hugging Face, sentence-transformers or keras-hub folder into a Google-format
release (convert_checkpoint.py). Out: model_out.py reads a checkpoint and its task; huggingface_out.py
and keras_hub_preset.py write it, convert_out.py chooses between them. hf_names.py is the one table of
Hugging Face <-> Google names both ways use; sentence_transformers_folder.py reads and writes the
pooling of a sentence-transformers folder; formats_doc.py prints docs/formats.md from these tables.
"""
