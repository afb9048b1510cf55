"""The Keras API on real weights: all-MiniLM-L6-v2 converted by convert_checkpoint.py.

BertTextEmbedder.predict is checked against sentence-transformers' `encode` (recorded once in
tests/fixtures/sentence_transformers_minilm/outputs.npz, see tests/fixtures/README.md); the classifier's
encoder against the embedder's on the same folder (the pooled vectors come from the sequence output
the classifier's encoder computes too).
"""

import numpy as np

from bert_tf import BertTextClassifier, BertTextEmbedder


def test_embedder_predicts_sentence_transformers_encode(
    minilm_converted, minilm_reference, tmp_path
):
    embedder = BertTextEmbedder.from_preset(minilm_converted)
    assert embedder.preprocessor.max_seq_length == 256  # embedding.json's, cutting the long texts
    texts = [str(text) for text in minilm_reference["texts"]]
    vectors = embedder.predict(texts, batch_size=4, verbose=0)
    assert vectors.shape == minilm_reference["embeddings"].shape
    # float32 through two implementations; a wrong pooling, norm or cut is off by 1e-2 or more.
    np.testing.assert_allclose(vectors, minilm_reference["embeddings"], rtol=0, atol=1e-5)


def test_classifier_loads_the_converted_folder_with_a_new_head(minilm_converted, minilm_reference):
    classifier = BertTextClassifier.from_preset(minilm_converted, num_classes=6)
    texts = [str(text) for text in minilm_reference["texts"]][:3]
    logits = classifier.predict(texts, verbose=0)
    assert logits.shape == (3, 6) and logits.dtype == np.float32
    # Its encoder is MiniLM's: mean-pooled and normalized, its sequence output is encode's.
    features = classifier.preprocessor(np.array(texts))
    sequence = classifier.task_model.bert(features)["sequence_output"].numpy()
    mask = features["input_mask"].numpy()[:, :, None]
    mean = (sequence * mask).sum(1) / mask.sum(1)
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    np.testing.assert_allclose(mean, minilm_reference["embeddings"][:3], rtol=0, atol=1e-5)
