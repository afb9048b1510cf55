"""Streaming, parallel raw text -> pretraining TFRecords (the engine of create_instances.py).

The input is read once, in order, as a stream of *chunks*: runs of whole consecutive documents
holding about `chunk_bytes` of text. Each chunk is one task for a worker process, which
tokenizes it, makes `dupe_factor` passes of instances with a random generator seeded from
(random_seed, chunk index), encodes and frames them. The main process takes the results in chunk
order, passes the records through a bounded shuffle buffer and deals them round-robin to the
output files. Memory is bounded by the chunk size, the tasks in flight (one per worker, plus one)
and the shuffle buffer, never by the corpus; and the output depends on the inputs, the flags and
the seed only, not on the number of workers.

Differences from the original, which holds the whole corpus in memory:
  * a "random next" segment comes from another document of the same chunk, not of the corpus;
  * instances are shuffled within their chunk and then through a buffer of
    `shuffle_buffer_size` instances, not globally (shuffle input files when reading, as
    `bert_tf.data.pretraining` does, for more mixing);
  * a new input file always starts a new document.
"""

import dataclasses
import multiprocessing
import os
import random
import time

from absl import logging

from bert_tf import io
from bert_tf.data.pretraining import encoding, instances
from bert_tf.errors import InputError
from bert_tf.io import expand_globs, read_lines
from bert_tf.objectives import ObjectiveSetting
from bert_tf.settings import setting
from bert_tf.sigterm import doing


@dataclasses.dataclass(kw_only=True)
class CreateConfig(ObjectiveSetting):
    """create_pretraining_data.py's settings: the original's flags, then ours."""

    input_file: str | None = setting(
        None,
        "Input raw text file(s): comma-separated, globs allowed. One sentence per line, a blank "
        "line between documents.",
    )
    output_file: str | None = setting(
        None, "Output TFRecord file(s), comma-separated; instances are dealt round-robin."
    )
    vocab_file: str | None = setting(
        None, "The WordPiece vocabulary file the model is trained with."
    )
    do_lower_case: bool = setting(True, "Lower-case the text (uncased models). Default True.")
    do_whole_word_mask: bool = setting(
        False, "Mask whole words (a word and its ## pieces together). Default False."
    )
    max_seq_length: int = setting(128, "Tokens per example, [CLS]/[SEP] included. Default 128.")
    max_predictions_per_seq: int = setting(
        20, "Most masked-LM predictions per example. Default 20."
    )
    random_seed: int = setting(12345, "Seed of every random choice. Default 12345.")
    dupe_factor: int = setting(10, "Passes over the input, each with different masks. Default 10.")
    masked_lm_prob: float = setting(0.15, "Fraction of tokens to predict. Default 0.15.")
    short_seq_prob: float = setting(
        0.1,
        "Probability of a document's target length being random and shorter than "
        "max_seq_length. Default 0.1.",
    )
    num_workers: int | None = setting(
        None,
        "Processes making instances; default: the number of cores; 1 = in-process. The output "
        "does not depend on it.",
    )
    chunk_bytes: int = setting(
        1 << 18,
        "Bytes of input text per work unit (whole consecutive documents, two at least); a "
        "'random next' segment is drawn from another document of the same unit (the original: "
        "from the whole corpus). Memory per worker grows with it. Default 262144 (256 KiB).",
    )
    shuffle_buffer_size: int = setting(
        1 << 16,
        "Instances in the writer's shuffle buffer (about 1 KB each at max_seq_length 128). "
        "Default 65536.",
    )
    output_compression: str = setting(
        "",
        "'' for plain TFRecords, 'gzip' for compressed ones (read with compression_type='GZIP'). "
        "Default ''.",
        choices=["", "gzip"],
    )
    skip_invalid_utf8: bool = setting(
        False,
        "Skip (and count) input lines that are not valid UTF-8 instead of stopping with an error "
        "naming the file and line. Default False.",
    )
    progress_interval_s: float = setting(10.0, "Seconds between progress lines. Default 10.")


def run(config):
    """create_pretraining_data.py: checks the flags and files, then writes the TFRecords."""
    from bert_tf import tokenization

    for name in ("input_file", "output_file", "vocab_file"):
        if not getattr(config, name):
            raise InputError(f"--{name} is required")
    if not io.exists(config.vocab_file):
        raise InputError(f"--vocab_file={config.vocab_file} does not exist")
    for name in ("chunk_bytes", "shuffle_buffer_size"):
        if getattr(config, name) <= 0:
            raise InputError(f"--{name} must be positive, got {getattr(config, name)}")
    tokenization.check_vocab(config.vocab_file, (*tokenization.REQUIRED_TOKENS, "[MASK]"))
    tokenizer = tokenization.FullTokenizer(config.vocab_file, do_lower_case=config.do_lower_case)
    options = instances.InstanceOptions.from_vocab(
        tokenizer.vocab,
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        masked_lm_prob=config.masked_lm_prob,
        short_seq_prob=config.short_seq_prob,
        do_whole_word_mask=config.do_whole_word_mask,
        objective=config.objective,
    )
    with doing(f"writing {config.output_file}"):
        return create_pretraining_data(
            config.input_file,
            config.output_file,
            tokenizer,
            options,
            dupe_factor=config.dupe_factor,
            random_seed=config.random_seed,
            num_workers=config.num_workers,
            chunk_bytes=config.chunk_bytes,
            shuffle_buffer_size=config.shuffle_buffer_size,
            compression=config.output_compression,
            skip_invalid_utf8=config.skip_invalid_utf8,
            progress_interval_s=config.progress_interval_s,
        )


@dataclasses.dataclass
class Summary:
    """What a run read and wrote."""

    input_files: list
    output_files: list
    documents: int = 0
    instances: int = 0
    skipped_invalid_lines: int = 0
    instances_per_file: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0


# A "random next" segment comes from another document of the same chunk, so a chunk holds at least
# two documents (unless the corpus has only one), however large they are: a book-length document
# would otherwise fill a chunk alone and draw its "random" segments from itself.
MIN_CHUNK_DOCUMENTS = 2


def read_document_chunks(input_files, chunk_bytes, skip_invalid_utf8=False, summary=None):
    """Yields lists of consecutive documents (lists of stripped sentence strings).

    A chunk closes after the document that brings it to `chunk_bytes` of text and to
    MIN_CHUNK_DOCUMENTS documents; a shorter last chunk joins the one before. One sentence per
    line, blank (or whitespace-only) lines between documents; a UTF-8 BOM and CRLF line ends are
    accepted; files ending in ".gz" are read through gzip.

    Raises:
      InputError: on invalid UTF-8, naming the file and line (unless skip_invalid_utf8, which
        drops the line and counts it in `summary.skipped_invalid_lines`).
    """
    previous = None
    for chunk in _chunks_by_size(input_files, chunk_bytes, skip_invalid_utf8, summary):
        if previous is not None and len(chunk) >= MIN_CHUNK_DOCUMENTS:
            yield previous
            previous = None
        previous = chunk if previous is None else previous + chunk
    if previous:
        yield previous


def _chunks_by_size(input_files, chunk_bytes, skip_invalid_utf8, summary):
    """read_document_chunks, but its last chunk may hold fewer than MIN_CHUNK_DOCUMENTS."""
    chunk, chunk_size = [], 0

    def on_invalid(line_number, error):
        del line_number
        if not skip_invalid_utf8:
            raise InputError(f"{error}, or pass --skip_invalid_utf8 to skip such lines")
        if summary is not None:
            summary.skipped_invalid_lines += 1

    for path in input_files:
        document, document_size = [], 0
        for _, line in read_lines(path, on_invalid=on_invalid):
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
            chunk_size += document_size
        if len(chunk) >= MIN_CHUNK_DOCUMENTS and chunk_size >= chunk_bytes:
            yield chunk
            chunk, chunk_size = [], 0
    if chunk:
        yield chunk


@dataclasses.dataclass(frozen=True)
class _ChunkJob:
    """Everything a worker needs besides the chunk: fixed for the run."""

    tokenizer: object
    options: instances.InstanceOptions
    dupe_factor: int
    random_seed: int


_JOB = None  # the _ChunkJob of this worker process


def _init_worker(job):
    global _JOB
    _JOB = job


def _process_chunk(chunk_index, documents, job=None):
    """Tokenize, make instances, encode, frame.

    Returns:
      (framed records in shuffled order, non-empty documents, first instances for the log).
    """
    job = job or _JOB
    tokenizer = job.tokenizer
    tokenized = []
    for document in documents:
        sentences = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in document]
        sentences = [s for s in sentences if s]
        if sentences:
            tokenized.append(sentences)
    rng = random.Random(f"{job.random_seed}/chunk/{chunk_index}")
    encoder = encoding.ExampleEncoder(
        job.options.max_seq_length, job.options.max_predictions_per_seq, job.options.vocab_size
    )
    # create_instances(), but each instance is encoded at once: bytes take a third of the memory.
    examples, first_instances = [], []
    for _ in range(job.dupe_factor):
        for document_index in range(len(tokenized)):
            for instance in instances.create_instances_from_document(
                tokenized, document_index, job.options, rng
            ):
                examples.append(encoder.encode(instance))
                if chunk_index == 0 and len(first_instances) < 3:
                    first_instances.append(instance)
    rng.shuffle(examples)
    return encoding.frame_records(examples), len(tokenized), first_instances


def _chunk_results(chunks, job, num_workers):
    """Yields `_process_chunk` results in chunk order, with one task queued beyond the running."""
    if num_workers <= 1:
        for chunk_index, documents in enumerate(chunks):
            yield _process_chunk(chunk_index, documents, job)
        return
    # fork: workers start at once and inherit the imported modules (no TensorFlow among them).
    context = multiprocessing.get_context("fork")
    with context.Pool(num_workers, initializer=_init_worker, initargs=(job,)) as pool:
        pending = []
        for chunk_index, documents in enumerate(chunks):
            pending.append(pool.apply_async(_process_chunk, (chunk_index, documents)))
            if len(pending) > num_workers:  # one task queued beyond those running
                yield pending.pop(0).get()
        while pending:
            yield pending.pop(0).get()


class _ShuffleBuffer:
    """A fixed-size reservoir: each new record evicts a uniformly random one."""

    def __init__(self, size, rng):
        self._size = max(1, size)
        self._rng = rng
        self._records = []

    def push(self, records):
        """Adds records; yields the ones evicted."""
        buffer, rng, size = self._records, self._rng, self._size
        for record in records:
            if len(buffer) < size:
                buffer.append(record)
                continue
            k = int(rng.random() * size)
            yield buffer[k]
            buffer[k] = record

    def drain(self):
        self._rng.shuffle(self._records)
        yield from self._records
        self._records = []


def create_pretraining_data(
    input_patterns,
    output_files,
    tokenizer,
    options,
    dupe_factor=10,
    random_seed=12345,
    num_workers=None,
    chunk_bytes=1 << 18,
    shuffle_buffer_size=1 << 16,
    compression="",
    skip_invalid_utf8=False,
    progress_interval_s=10.0,
):
    """Turns raw text files into masked-LM + next-sentence TFRecord files.

    Args:
      input_patterns: comma-separated string or list of globs: one sentence per line, a blank
        line between documents.
      output_files: comma-separated string or list of paths; instances are dealt round-robin.
      tokenizer: a `FullTokenizer` (picklable; used in the workers).
      options: a `instances.InstanceOptions`.
      dupe_factor: passes over each document, each with different masks.
      random_seed: the seed of everything random; the output does not depend on num_workers.
      num_workers: processes making instances; None = the number of cores; <= 1 = in-process.
      chunk_bytes: bytes of text per task; also the pool "random next" documents come from.
      shuffle_buffer_size: instances held in the writer's shuffle buffer.
      compression: "" or "gzip" (read back with compression_type="GZIP").
      skip_invalid_utf8: drop (and count) lines that are not UTF-8 instead of failing.
      progress_interval_s: seconds between progress lines in the log.

    Returns:
      A `Summary`.

    Raises:
      InputError: a pattern matches nothing, an output folder does not exist, invalid UTF-8 (file
        and line named), or bad flag values.
    """
    start = time.monotonic()
    input_files = expand_globs(input_patterns, "--input_file")
    if isinstance(output_files, str):
        output_files = [p.strip() for p in output_files.split(",") if p.strip()]
    if not output_files:
        raise InputError("--output_file names no file")
    seen = set()
    for path in output_files:
        if os.path.abspath(path) in seen:
            raise InputError(f"--output_file names {path!r} more than once")
        seen.add(os.path.abspath(path))
    for path in output_files:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise InputError(f"--output_file={path}: the folder {directory} does not exist")
    if dupe_factor < 1:
        raise InputError(f"--dupe_factor must be >= 1, got {dupe_factor}")
    num_workers = os.cpu_count() if num_workers is None else num_workers
    summary = Summary(input_files=input_files, output_files=list(output_files))
    logging.info(
        "Reading %d input file(s) with %d worker(s)", len(input_files), max(1, num_workers)
    )

    job = _ChunkJob(tokenizer, options, dupe_factor, random_seed)
    chunks = read_document_chunks(input_files, chunk_bytes, skip_invalid_utf8, summary)
    shuffle_buffer = _ShuffleBuffer(shuffle_buffer_size, random.Random(f"{random_seed}/shuffle"))
    writers = []
    try:
        writers = [encoding.AtomicRecordFile(path, compression) for path in output_files]

        def write(records):
            for record in records:
                writers[summary.instances % len(writers)].write(record)
                summary.instances += 1

        last_progress = time.monotonic()
        for records, num_documents, first_instances in _chunk_results(chunks, job, num_workers):
            for instance in first_instances:
                _log_instance(instance, tokenizer)
            summary.documents += num_documents
            write(shuffle_buffer.push(records))
            if time.monotonic() - last_progress >= progress_interval_s:
                last_progress = time.monotonic()
                _log_progress(summary, start)
        write(shuffle_buffer.drain())
        # Every file complete before any takes its final name: a failure (a full disk, say) while
        # finishing one leaves none of them published.
        for writer in writers:
            writer.finish()
        for writer in writers:
            writer.publish()
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    summary.instances_per_file = [w.num_records for w in writers]
    summary.seconds = time.monotonic() - start
    _log_summary(summary)
    return summary


def _log_progress(summary, start):
    elapsed = time.monotonic() - start
    logging.info(
        "documents %d, instances %d, %.0f instances/s",
        summary.documents,
        summary.instances,
        summary.instances / max(elapsed, 1e-9),
    )


def _log_summary(summary):
    logging.info(
        "Wrote %d instances from %d documents (%d input file(s)) in %.1f s (%.0f instances/s)%s",
        summary.instances,
        summary.documents,
        len(summary.input_files),
        summary.seconds,
        summary.instances / max(summary.seconds, 1e-9),
        f"; skipped {summary.skipped_invalid_lines} invalid UTF-8 line(s)"
        if summary.skipped_invalid_lines
        else "",
    )
    for path, count in zip(summary.output_files, summary.instances_per_file, strict=True):
        logging.info("  %s: %d instances", path, count)


def _log_instance(instance, tokenizer):
    tokens = tokenizer.convert_ids_to_tokens(instance.input_ids)
    logging.info(
        "*** Example ***\ntokens: %s\nsegment_ids: %s\nis_random_next: %s\n"
        "masked_lm_positions: %s\nmasked_lm_labels: %s",
        " ".join(tokens),
        " ".join(map(str, instance.segment_ids)),
        instance.is_random_next,
        " ".join(map(str, instance.masked_lm_positions)),
        " ".join(tokenizer.convert_ids_to_tokens(instance.masked_lm_ids)),
    )
