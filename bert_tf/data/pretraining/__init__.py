"""Pretraining data, one module per job: raw text -> instances -> TFRecords -> tf.data.

- `instances`: the original's algorithm, documents -> masked-LM + next-sentence instances (no TensorFlow);
- `encoding`: instances -> tf.train.Example bytes and TFRecord framing, by hand (no TensorFlow);
- `writer`: create_pretraining_data.py's engine, streaming and parallel;
- `reader`: the TFRecords -> the training input (the original's input_fn, in tf.data).

Import the submodules directly: the first three never import TensorFlow.
"""
