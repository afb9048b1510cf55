"""Streaming, parallel raw text -> pretraining TFRecords on one machine (create_pretraining_data.py).

The input is read once, in order, as a stream of *chunks* (chunks.py): runs of whole consecutive
documents of one file holding about `chunk_bytes` of text. Each chunk is one task for a worker
process, which tokenizes it, makes `dupe_factor` passes of instances with a random generator seeded
from (random_seed, file index, chunk index), encodes and frames them. The main process takes the
results in chunk order, passes the records through a bounded shuffle buffer and deals them
round-robin to the output files. Memory is bounded by the chunk size, the tasks in flight (one per
worker, plus one) and the shuffle buffer, never by the corpus; and the output depends on the
inputs, the flags and the seed only, not on the number of workers. The Beam pipeline
(bert_tf/beam/pretraining_data.py) writes the same records from the same chunks.

Differences from the original, which holds the whole corpus in memory:
  * a "random next" segment comes from another document of the same chunk, not of the corpus (so a
    file of one document draws them from itself);
  * instances are shuffled within their chunk and then through a buffer of
    `shuffle_buffer_size` instances, not globally (shuffle input files when reading, as
    `bert_tf.data.pretraining` does, for more mixing);
  * a new input file always starts a new document.
"""

import contextlib
import dataclasses
import multiprocessing
import os
import random
import time

from absl import logging

from bert_tf import file_io
from bert_tf.data.pretraining import chunks, encoding, instances
from bert_tf.errors import InputError
from bert_tf.file_io import expand_globs, read_lines
from bert_tf.settings import restated, setting
from bert_tf.shared_settings import DynamicMaskingSetting, ObjectiveSetting, VocabFileSetting
from bert_tf.sigterm import doing


@dataclasses.dataclass(kw_only=True)
class CreateSettings(ObjectiveSetting, DynamicMaskingSetting, VocabFileSetting):
    """create_pretraining_data.py's settings: the original's flags, then ours."""

    input_file: str | None = setting(
        None,
        "Input raw text file(s): comma-separated, globs allowed. One sentence per line, a blank "
        "line between documents.",
    )
    output_file: str | None = setting(
        None, "Output TFRecord file(s), comma-separated; instances are dealt round-robin."
    )
    vocab_file: str | None = restated(
        VocabFileSetting,
        "vocab_file",
        help="The WordPiece vocabulary file the model is trained with.",
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
    beam_pipeline_options: str = setting(
        "",
        "Run as an Apache Beam pipeline (the [beam] extra) with these comma-separated KEY=VALUE "
        "pipeline options, e.g. runner=DataflowRunner,project=P,region=R,temp_location=gs://B/tmp "
        "or runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing. "
        "--output_file is then one prefix: the shards are <output_file>-00000-of-000NN. The "
        "records are those the one-machine run writes. Default '': one machine.",
    )
    num_output_shards: int = setting(
        0,
        "With --beam_pipeline_options: output shards; 0 = one per 32 MiB of input text times "
        "--dupe_factor (about 64 MB of records each), at least one. Default 0.",
    )


def run(settings):
    """create_pretraining_data.py on one machine: checks the flags and files, writes the TFRecords."""
    tokenizer, options = prepare(settings)
    with doing(f"writing {settings.output_file}"):
        return create_pretraining_data(
            settings.input_file,
            settings.output_file,
            tokenizer,
            options,
            dupe_factor=settings.dupe_factor,
            random_seed=settings.random_seed,
            num_workers=settings.num_workers,
            chunk_bytes=settings.chunk_bytes,
            shuffle_buffer_size=settings.shuffle_buffer_size,
            compression=settings.output_compression,
            skip_invalid_utf8=settings.skip_invalid_utf8,
            progress_interval_s=settings.progress_interval_s,
        )


def prepare(settings):
    """Checks the flags every run needs (one machine or Beam); returns (tokenizer, options)."""
    from bert_tf import tokenization

    for name in ("input_file", "output_file", "vocab_file"):
        if not getattr(settings, name):
            raise InputError(f"--{name} is required")
    if not file_io.exists(settings.vocab_file):
        raise InputError(f"--vocab_file={settings.vocab_file} does not exist")
    for name in ("chunk_bytes", "shuffle_buffer_size"):
        if getattr(settings, name) <= 0:
            raise InputError(f"--{name} must be positive, got {getattr(settings, name)}")
    tokenization.check_vocab(settings.vocab_file, (*tokenization.REQUIRED_TOKENS, "[MASK]"))
    tokenizer = tokenization.FullTokenizer(
        settings.vocab_file, do_lower_case=settings.do_lower_case
    )
    options = instances.InstanceOptions.from_vocab(
        tokenizer.vocab,
        max_seq_length=settings.max_seq_length,
        max_predictions_per_seq=settings.max_predictions_per_seq,
        masked_lm_prob=settings.masked_lm_prob,
        short_seq_prob=settings.short_seq_prob,
        do_whole_word_mask=settings.do_whole_word_mask,
        objective=settings.objective,
        dynamic_masking=settings.dynamic_masking,
    )
    if settings.dupe_factor < 1:
        raise InputError(f"--dupe_factor must be >= 1, got {settings.dupe_factor}")
    if settings.dynamic_masking:
        logging.info(
            "--dynamic_masking: unmasked instances; run_pretraining.py --dynamic_masking=True masks "
            "them by its own --masked_lm_prob, --max_predictions_per_seq, --do_whole_word_mask"
        )
    return tokenizer, options


@dataclasses.dataclass
class Summary:
    """What a run read and wrote."""

    input_files: list
    output_files: list
    documents: int = 0
    instances: int = 0
    skipped_invalid_lines: int = 0
    single_document_files: int = 0
    instances_per_file: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def read_document_chunks(input_files, chunk_bytes, skip_invalid_utf8=False, summary=None):
    """Yields ((file index, chunk index), documents) for the files in order (chunks.file_chunks).

    A UTF-8 BOM and CRLF line ends are accepted; files ending in ".gz" are read through gzip.

    Raises:
      InputError: on invalid UTF-8, naming the file and line (unless skip_invalid_utf8, which
        drops the line and counts it in `summary.skipped_invalid_lines`).
    """

    def count_skipped():
        if summary is not None:
            summary.skipped_invalid_lines += 1

    on_invalid = chunks.skipping_invalid_utf8(skip_invalid_utf8, count_skipped)
    for file_index, path in enumerate(input_files):
        lines = (line for _, line in read_lines(path, on_invalid=on_invalid))
        for chunk_index, documents in enumerate(chunks.file_chunks(lines, chunk_bytes)):
            yield (file_index, chunk_index), documents


_JOB = None  # the chunks.ChunkJob of this worker process


def _init_worker(job):
    global _JOB
    _JOB = job


def _process_chunk(key, documents, job=None):
    return chunks.process_chunk(key, documents, job or _JOB)


def _chunk_results(keyed_chunks, job, num_workers):
    """Yields (key, `_process_chunk` result) in chunk order, one task queued beyond the running."""
    if num_workers <= 1:
        for key, documents in keyed_chunks:
            yield key, _process_chunk(key, documents, job)
        return
    # fork: workers start at once and inherit the imported modules (no TensorFlow among them).
    context = multiprocessing.get_context("fork")
    pool = context.Pool(num_workers, initializer=_init_worker, initargs=(job,))
    try:
        pending = []
        for key, documents in keyed_chunks:
            pending.append((key, pool.apply_async(_process_chunk, (key, documents))))
            if len(pending) > num_workers:  # one task queued beyond those running
                key, result = pending.pop(0)
                yield key, result.get()
        while pending:
            key, result = pending.pop(0)
            yield key, result.get()
        # At the end the workers exit on their own: `with Pool` would terminate them with SIGTERM,
        # and a worker whose SIGTERM waited for Python (blocked on the task queue's lock) once left
        # the main process waiting for it forever (seen once in about a dozen benchmark runs).
        pool.close()
        pool.join()
    finally:
        pool.terminate()  # on an error or an early stop; nothing left to stop after a join


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
    output_files = _output_paths(output_files)
    if dupe_factor < 1:
        raise InputError(f"--dupe_factor must be >= 1, got {dupe_factor}")
    num_workers = os.cpu_count() if num_workers is None else num_workers
    summary = Summary(input_files=input_files, output_files=list(output_files))
    logging.info(
        "Reading %d input file(s) with %d worker(s)", len(input_files), max(1, num_workers)
    )

    job = chunks.ChunkJob(tokenizer, options, dupe_factor, random_seed)
    keyed_chunks = read_document_chunks(input_files, chunk_bytes, skip_invalid_utf8, summary)
    shuffle_buffer = _ShuffleBuffer(shuffle_buffer_size, random.Random(f"{random_seed}/shuffle"))
    record_lists = _counted(
        _chunk_results(keyed_chunks, job, num_workers),
        summary,
        tokenizer,
        start,
        progress_interval_s,
    )
    # Closed on a failure too: the worker pool stops at once, not when the traceback is dropped.
    with contextlib.closing(record_lists):
        summary.instances_per_file = _write_records(
            record_lists, output_files, compression, shuffle_buffer, summary
        )
    summary.seconds = time.monotonic() - start
    _log_summary(summary)
    return summary


def _output_paths(output_files):
    """--output_file's paths (a comma-separated string or a list), each once, in existing folders."""
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
    return output_files


def _counted(results, summary, tokenizer, start, progress_interval_s):
    """Yields the records of each chunk's result, in chunk order; counts its documents in
    `summary`, logs its first instances, and a progress line every progress_interval_s."""
    last_progress = time.monotonic()
    for key, (records, num_documents, first_instances) in results:
        for instance in first_instances:
            _log_instance(instance, tokenizer)
        summary.documents += num_documents
        summary.single_document_files += key[1] == 0 and num_documents == 1
        yield records
        if time.monotonic() - last_progress >= progress_interval_s:
            last_progress = time.monotonic()
            _log_progress(summary, start)


def _write_records(record_lists, output_files, compression, shuffle_buffer, summary):
    """Passes the records through the shuffle buffer and deals them round-robin to the output files
    (counted in summary.instances); returns each file's record count.

    The files take their final names together at the end; on any failure none does."""
    writers = []
    try:
        writers = [encoding.AtomicRecordFile(path, compression) for path in output_files]

        def write(records):
            for record in records:
                writers[summary.instances % len(writers)].write(record)
                summary.instances += 1

        for records in record_lists:
            write(shuffle_buffer.push(records))
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
    return [w.num_records for w in writers]


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
    chunks.log_single_document_files(summary.single_document_files)


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
