"""The Predictor alone: a model without weights whose outputs are known, so each row says which
example it came from."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import Predictor


class EchoModel(keras.Model):
    """Outputs each example's id times ten, and a per-token output as long as the batch's sequences."""

    def call(self, features, training=False):
        ids = features["ids"]
        return {
            "tens": tf.cast(ids, tf.float32) * 10.0,
            "tokens": tf.cast(features["tokens"], tf.float32) + 0.5,
            "hidden": [ids],  # not a tensor: never gathered
        }


def _predictor():
    return Predictor(EchoModel(name="echo"), tf.distribute.OneDeviceStrategy("/cpu:0"))


def _dataset(batches):
    return tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature={
            name: tf.TensorSpec([None] * np.ndim(value), tf.as_dtype(np.asarray(value).dtype))
            for name, value in batches[0].items()
        },
    )


def _batch(ids, real=None, index=None, width=2):
    batch = {
        "ids": np.array(ids, np.int32),
        "tokens": np.tile(np.arange(width, dtype=np.int32), (len(ids), 1)),
    }
    if real is not None:
        batch["is_real_example"] = np.array(real, np.int32)
    if index is not None:
        batch["example_index"] = np.array(index, np.int32)
    return batch


def test_predictions_come_in_input_order_with_the_padding_rows_dropped():
    # 5 examples in batches of 4: the last batch padded with 3 fake examples (id 0).
    dataset = _dataset([_batch([1, 2, 3, 4], [1, 1, 1, 1]), _batch([5, 0, 0, 0], [1, 0, 0, 0])])
    result = _predictor().predict(dataset, ["tens"], feature_keys=["ids"])
    np.testing.assert_array_equal(result["ids"], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(result["tens"], [10, 20, 30, 40, 50])
    assert set(result) == {"tens", "ids", "is_real_example"}


def test_rows_are_put_back_in_example_index_order():
    # Length bucketing read the examples out of order; example_index is each one's place in the file.
    dataset = _dataset([_batch([7, 5], [1, 1], index=[2, 0]), _batch([6, 9], [1, 0], index=[1, 3])])
    result = _predictor().predict(dataset, ["tens"], feature_keys=["ids"])
    np.testing.assert_array_equal(result["ids"], [5, 6, 7])
    np.testing.assert_array_equal(result["tens"], [50, 60, 70])
    np.testing.assert_array_equal(result["example_index"], [0, 1, 2])


def test_an_input_without_padding_features_keeps_every_row_and_every_tensor_output():
    dataset = _dataset([_batch([3, 1]), _batch([2])])
    result = _predictor().predict(dataset)
    assert set(result) == {"tens", "tokens"}  # the list output is not gathered
    np.testing.assert_array_equal(result["tens"], [30, 10, 20])


def test_sequence_outputs_of_varying_length_are_zero_padded_to_the_longest_batch():
    dataset = _dataset([_batch([1], width=2), _batch([2, 3], width=3)])
    result = _predictor().predict(dataset, ["tokens"])
    np.testing.assert_array_equal(
        result["tokens"], [[0.5, 1.5, 0], [0.5, 1.5, 2.5]] + [[0.5, 1.5, 2.5]]
    )


def test_an_output_the_model_lacks_is_a_key_error_naming_the_outputs():
    dataset = _dataset([_batch([1, 2])])
    with pytest.raises(KeyError, match=r"no \['logits'\] among \['tens', 'tokens'\]"):
        _predictor().predict(dataset, ["logits"])


def test_prediction_logs_its_first_batch_then_every_log_every_batches(caplog):
    import logging

    batches = [_batch([1, 2, 3, 4]) for _ in range(5)]
    dataset = tf.data.Dataset.from_tensor_slices(
        {name: np.stack([b[name] for b in batches]) for name in batches[0]}
    )  # a known cardinality: the lines show the total and an ETA
    predictor = Predictor(
        EchoModel(name="echo"), tf.distribute.OneDeviceStrategy("/cpu:0"), log_every=2
    )
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        predictor.predict_batches(dataset, ["tens"])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("predict batch")]
    assert [line.split()[2] for line in lines] == ["1/5", "2/5", "4/5", "5/5"]
    assert all(" examples/s  ETA " in line for line in lines)
