"""Long texts in windows for BertTextClassifier: run_classifier.py --doc_stride's reading, on raw strings.

Training reads every window with its text's label; prediction combines a text's windows by the
model's window_combination. The windows are bert_tf.models.networks.text_windows.text_windows' (the export's own) and
the combination is combine_windows (what ClassifierRun's predictions use), so `predict` gives what
run_classifier.py and the export give.

B = texts of a batch, W = their windows, S = sequence length, L = labels.
"""

import numpy as np
import tensorflow as tf

from bert_tf.models.networks.text_windows import combine_windows, text_windows


def windows_dataset(tokenizer, doc_stride, texts, labels, batch_size, shuffle):
    """Batches of `batch_size` texts as their windows.

    Args:
      tokenizer: a bert_tf.preprocessing.GraphPreprocessor.
      doc_stride: Python int.
      texts: numpy object array [N].
      labels: numpy array [N, ...], or None (prediction).
      batch_size, shuffle: of the texts.

    Returns:
      A tf.data.Dataset of (features, labels of the windows) with labels, else of (features,
      text_index int32 [W]); features are {"input_ids", "input_mask", "segment_ids"} int32 [W, S].
    """
    text = tf.constant(list(texts), tf.string)
    if labels is None:
        dataset = tf.data.Dataset.from_tensor_slices(text).batch(batch_size)
        return dataset.map(lambda batch: text_windows(tokenizer, batch, doc_stride))
    dataset = tf.data.Dataset.from_tensor_slices((text, labels))
    if shuffle:
        dataset = dataset.shuffle(len(texts), reshuffle_each_iteration=True)

    def windows_of(batch, batch_labels):
        features, text_index = text_windows(tokenizer, batch, doc_stride)
        return features, tf.gather(batch_labels, text_index)

    return dataset.batch(batch_size).map(windows_of).prefetch(tf.data.AUTOTUNE)


def predict_texts(model, dataset, rule):
    """Each text's logits float32 [N, L], its windows' logits combined by `rule` (combine_windows)."""
    rows = []
    for features, text_index in dataset:
        logits = model.predict_on_batch(features)  # [W, L]
        combined = combine_windows(
            logits,
            text_index.numpy(),
            rule,
            is_regression=model.regression,
            num_tokens=features["input_mask"].numpy().sum(axis=-1),
            multi_label=model.multi_label,
        )
        rows.append(combined.astype(np.float32))
    return np.concatenate(rows, axis=0)
