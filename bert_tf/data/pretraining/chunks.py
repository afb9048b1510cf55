"""Raw text -> chunks of whole documents -> framed TFRecords: create_pretraining_data's unit of work.

A chunk is a run of consecutive documents of one input file holding about `chunk_bytes` of text;
it never crosses a file. Its key is (file index, chunk index in the file), where the file index is
the file's place in the sorted matches of `--input_file`. Everything random about a chunk is seeded
from (random_seed, key), so a chunk gives the same records whichever process or machine makes it:
the one-machine pool (writer.py) and the Beam pipeline (bert_tf/beam) write the same multiset of
records from the same flags.
"""

import dataclasses
import random

from absl import logging

from bert_tf.data.pretraining import dynamic, encoding, instances
from bert_tf.errors import InputError

# A "random next" segment comes from another document of the same chunk, so a chunk holds at least
# two documents (unless its file has only one), however large they are: a book-length document
# would otherwise fill a chunk alone and draw its "random" segments from itself.
MIN_CHUNK_DOCUMENTS = 2


def file_chunks(lines, chunk_bytes):
    """Yields the chunks of one file: lists of documents (lists of stripped sentence strings).

    A chunk closes after the document that brings it to `chunk_bytes` of text and to
    MIN_CHUNK_DOCUMENTS documents; a shorter last chunk joins the one before. One sentence per line,
    blank (or whitespace-only) lines between documents.

    Args:
      lines: the file's lines (strings, without their ends), in order.
      chunk_bytes: bytes of text that close a chunk.
    """
    previous = None
    for chunk in _chunks_by_size(lines, chunk_bytes):
        if previous is not None and len(chunk) >= MIN_CHUNK_DOCUMENTS:
            yield previous
            previous = None
        previous = chunk if previous is None else previous + chunk
    if previous:
        yield previous


def _chunks_by_size(lines, chunk_bytes):
    """file_chunks, but its last chunk may hold fewer than MIN_CHUNK_DOCUMENTS."""
    chunk, chunk_size = [], 0
    document, document_size = [], 0
    for line in lines:
        line = line.strip()
        if line:
            document.append(line)
            document_size += len(line.encode("utf-8")) + 1  # the line's bytes, "\n" end
            continue
        if document:
            chunk.append(document)
            chunk_size += document_size
            document, document_size = [], 0
        if len(chunk) >= MIN_CHUNK_DOCUMENTS and chunk_size >= chunk_bytes:
            yield chunk
            chunk, chunk_size = [], 0
    if document:
        chunk.append(document)
    if chunk:
        yield chunk


def log_single_document_files(count):
    """Warns, once, that `count` files hold a single document (their 'random next' is themselves)."""
    if count:
        logging.warning(
            "%d input file(s) hold one document only: their 'random next' segments come from that "
            "same document. Separate a file's documents with blank lines.",
            count,
        )


def skipping_invalid_utf8(skip, counter):
    """The `on_invalid` of file_io.read_lines for --skip_invalid_utf8: count the line, or refuse it.

    Args:
      skip: --skip_invalid_utf8.
      counter: called with no argument for each line skipped.
    """

    def on_invalid(line_number, error):
        del line_number
        if not skip:
            raise InputError(f"{error}, or pass --skip_invalid_utf8 to skip such lines")
        counter()

    return on_invalid


@dataclasses.dataclass(frozen=True)
class ChunkJob:
    """Everything that turns a chunk into records besides the chunk: fixed for the run."""

    tokenizer: object
    options: instances.InstanceOptions
    dupe_factor: int
    random_seed: int


def _chunk_seed(random_seed, file_index, chunk_index):
    # The first file's chunks keep the seeds they had when chunks were numbered across files, so
    # a one-file corpus gives the records earlier versions gave with the same --random_seed.
    if file_index == 0:
        return f"{random_seed}/chunk/{chunk_index}"
    return f"{random_seed}/file/{file_index}/chunk/{chunk_index}"


def process_chunk(key, documents, job):
    """Tokenize, make `dupe_factor` passes of instances, encode, shuffle, frame.

    Args:
      key: (file index, chunk index in the file); with job.random_seed, the seed of the chunk.
      documents: the chunk's documents.
      job: a ChunkJob.

    Returns:
      (framed records in shuffled order, non-empty documents, the first instances of chunk (0, 0)
      for the log).
    """
    file_index, chunk_index = key
    tokenizer = job.tokenizer
    tokenized = []
    for document in documents:
        sentences = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in document]
        sentences = [s for s in sentences if s]
        if sentences:
            tokenized.append(sentences)
    rng = random.Random(_chunk_seed(job.random_seed, file_index, chunk_index))
    encode = _encoder(job.options)
    # create_instances(), but each instance is encoded at once: bytes take a third of the memory.
    examples, first_instances = [], []
    for _ in range(job.dupe_factor):
        for document_index in range(len(tokenized)):
            for instance in instances.create_instances_from_document(
                tokenized, document_index, job.options, rng
            ):
                examples.append(encode(instance))
                if key == (0, 0) and len(first_instances) < 3:
                    first_instances.append(instance)
    rng.shuffle(examples)
    return encoding.frame_records(examples), len(tokenized), first_instances


def _encoder(options):
    """(instance) -> its serialized Example: masked, or unmasked for dynamic masking."""
    encoder = encoding.ExampleEncoder(
        options.max_seq_length, options.max_predictions_per_seq, options.vocab_size
    )
    if not options.dynamic_masking:
        return encoder.encode
    special_ids = frozenset((options.cls_id, options.sep_id))

    def encode(instance):
        word_ids = dynamic.word_ids(instance.input_ids, special_ids, options.subword_ids)
        return encoder.encode_unmasked(instance, word_ids, options.mask_id, options.vocab_size)

    return encode
