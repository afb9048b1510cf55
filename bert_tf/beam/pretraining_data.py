"""create_pretraining_data.py as an Apache Beam pipeline: the same records, on as many machines.

    input files -> (file index, path), spread over the workers
      -> chunks of whole documents, keyed (file index, chunk index)
      -> instances, encoded and framed (chunks.process_chunk, seeded from the key)
      -> dealt over the shards and grouped by shard (Beam's shuffle)
      -> TFRecord shards <output_file>-SSSSS-of-NNNNN

Chunks and their seeds come from the data (chunks.py), never from a worker, so the shards hold
exactly the records the one-machine run writes with the same flags, as a multiset; only their order
and their files differ. A file is read by one worker, which streams it and makes its records: the
files are the unit of parallelism, so a corpus should come as at least as many files as there are
workers. Per worker, memory holds a chunk's records and a shard's page, whatever the corpus size.

Bad input is refused before the pipeline is submitted: no file matches, an unknown pipeline option,
and, for local files, invalid UTF-8 (file and line). Files of remote file systems (gs://, ...) are
checked by the workers, whose error reaches the user as the same one line. The shards are written
under temporary names and renamed when all are complete (Beam's file sink): a failed pipeline leaves
no shard under a final name.
"""

import math
import os
import time

from absl import logging

from bert_tf import file_io
from bert_tf.beam import pipeline
from bert_tf.data.pretraining import chunks, writer
from bert_tf.errors import InputError
from bert_tf.sigterm import doing

# --num_output_shards=0: one shard per this much input text times dupe_factor, about 64 MB of
# records at max_seq_length 128. A worker holds much of a shard while it writes it (measured on the
# local runner: bench/bench_beam_data.py), so shards stay this size whatever the corpus.
TEXT_BYTES_PER_SHARD = 32 << 20
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
_COUNTERS = ("documents", "instances", "skipped_invalid_lines", "single_document_files")


def run(config):
    """create_pretraining_data.py --beam_pipeline_options=...: checks everything, runs, logs.

    Returns:
      A writer.Summary; its output_files are the shards.
    """
    start = time.monotonic()
    options = pipeline.parse_options(config.beam_pipeline_options)
    tokenizer, instance_options = writer.prepare(config)
    inputs = match_inputs(config.input_file)
    prefix = _output_prefix(config.output_file)
    if config.num_output_shards < 0:
        raise InputError(f"--num_output_shards must be >= 0, got {config.num_output_shards}")
    if config.chunk_bytes <= 0:
        raise InputError(f"--chunk_bytes must be positive, got {config.chunk_bytes}")
    if not config.skip_invalid_utf8:
        for path, _ in inputs:
            if not file_io.is_url(path):
                file_io.check_utf8(path)
    total_bytes = sum(size for _, size in inputs)
    num_shards = config.num_output_shards or max(
        1, math.ceil(total_bytes * config.dupe_factor / TEXT_BYTES_PER_SHARD)
    )
    job = chunks.ChunkJob(tokenizer, instance_options, config.dupe_factor, config.random_seed)
    beam_pipeline = pipeline.make_pipeline(options)
    _build(beam_pipeline, [path for path, _ in inputs], job, config, prefix, num_shards)
    logging.info(
        "Beam: %d input file(s), %.1f MB, into %d shard(s) %s%s",
        len(inputs),
        total_bytes / 1e6,
        num_shards,
        prefix,
        SHARD_TEMPLATE,
    )
    with doing(f"writing {prefix}{SHARD_TEMPLATE}"), pipeline.removing_sink_temporaries(prefix):
        result = pipeline.run(beam_pipeline)
    shards = [_shard_name(prefix, k, num_shards) for k in range(num_shards)]
    _remove_stale_shards(prefix, shards)
    summary = writer.Summary(input_files=[path for path, _ in inputs], output_files=shards)
    for name, value in _counters(result).items():
        setattr(summary, name, value)
    summary.seconds = time.monotonic() - start
    _log_summary(summary)
    return summary


def _build(beam_pipeline, paths, job, config, prefix, num_shards):
    beam = pipeline.import_beam()
    (
        beam_pipeline
        | "Files" >> beam.Create(list(enumerate(paths)))
        | "Spread files" >> beam.Reshuffle()
        # Reading and making records stay fused in one worker: spreading the chunks through a
        # shuffle would make a local worker hold its whole share of the text (measured: 2 GB per
        # worker on 1.1 GB of text), so a file is the unit of parallelism.
        | "Chunks" >> beam.ParDo(_ReadChunks(config.chunk_bytes, config.skip_invalid_utf8))
        | "Records" >> beam.ParDo(_MakeRecords(job))
        # Beam's sink with a fixed shard count deals each bundle's records over the shards from a
        # random start and groups them by shard: that grouping is the shuffle across the corpus.
        | "Shuffle into shards"
        >> beam.io.Write(_record_sink(prefix, num_shards, config.output_compression))
    )


def match_inputs(patterns):
    """Comma-separated globs -> [(path, size in bytes)], each pattern's matches sorted by path.

    The same files, in the same order, as file_io.expand_globs gives the one-machine run; through Beam's
    file systems, so gs:// and the other paths a runner reads work too.

    Raises:
      InputError: naming the first pattern that matches no file.
    """
    from apache_beam.io.filesystems import FileSystems

    matched = []
    for pattern in (p.strip() for p in patterns.split(",")):
        if not pattern:
            continue
        try:
            found = FileSystems.match([pattern])[0].metadata_list
        except Exception as error:  # a file system's own error type (permissions, a bad bucket)
            raise InputError(f"--input_file={pattern}: cannot list it ({error})") from None
        files = sorted((m.path, m.size_in_bytes) for m in found if not m.path.endswith("/"))
        if not files:
            raise InputError(f"--input_file={pattern}: no file matches it")
        matched.extend(files)
    if not matched:
        raise InputError("--input_file names no file")
    return matched


def _output_prefix(output_file):
    prefix = output_file.strip()
    if "," in prefix:
        raise InputError(
            f"--output_file={output_file}: with --beam_pipeline_options it is one prefix of the "
            "shards (<output_file>-00000-of-000NN), not a list"
        )
    if not file_io.is_url(prefix):
        folder = os.path.dirname(os.path.abspath(prefix))
        if not os.path.isdir(folder):
            raise InputError(f"--output_file={output_file}: the folder {folder} does not exist")
    return prefix


def _shard_name(prefix, index, num_shards):
    return f"{prefix}-{index:05d}-of-{num_shards:05d}"


def _remove_stale_shards(prefix, shards):
    """Deletes shards of the same prefix left by an earlier run with another shard count.

    `<output_file>*` must read this run's records only.
    """
    from apache_beam.io.filesystems import FileSystems

    found = FileSystems.match([pipeline.escaped(prefix) + pipeline.SHARD_GLOB])
    stale = sorted(m.path for m in found[0].metadata_list if m.path not in set(shards))
    if stale:
        logging.info("Removing %d shard(s) of an earlier run: %s, ...", len(stale), stale[0])
        FileSystems.delete(stale)


def _record_sink(prefix, num_shards, compression):
    """Beam's file sink, writing records that are already framed as TFRecords."""
    from apache_beam import coders
    from apache_beam.io import filebasedsink
    from apache_beam.io.filesystem import CompressionTypes

    class FramedRecordSink(filebasedsink.FileBasedSink):
        def write_encoded_record(self, file_handle, encoded_value):
            file_handle.write(encoded_value)

    return FramedRecordSink(
        prefix,
        coder=coders.BytesCoder(),
        num_shards=num_shards,
        shard_name_template=SHARD_TEMPLATE,
        mime_type="application/octet-stream",
        compression_type=CompressionTypes.GZIP if compression else CompressionTypes.UNCOMPRESSED,
    )


def _counter(name):
    from apache_beam.metrics import Metrics

    return Metrics.counter("create_pretraining_data", name)


def _counters(result):
    from apache_beam.metrics import MetricsFilter

    totals = dict.fromkeys(_COUNTERS, 0)
    query = result.metrics().query(MetricsFilter().with_namespace("create_pretraining_data"))
    for counter in query["counters"]:
        totals[counter.key.metric.name] += counter.committed or 0
    return totals


def _log_summary(summary):
    logging.info(
        "Wrote %d instances from %d documents (%d input file(s)) in %.1f s to %d shard(s)%s",
        summary.instances,
        summary.documents,
        len(summary.input_files),
        summary.seconds,
        len(summary.output_files),
        f"; skipped {summary.skipped_invalid_lines} invalid UTF-8 line(s)"
        if summary.skipped_invalid_lines
        else "",
    )
    chunks.log_single_document_files(summary.single_document_files)


def _do_fn():
    return pipeline.import_beam().DoFn


class _ReadChunks(_do_fn()):
    """(file index, path) -> ((file index, chunk index), documents), streaming the file."""

    def __init__(self, chunk_bytes, skip_invalid_utf8):
        self._chunk_bytes = chunk_bytes
        self._skip_invalid_utf8 = skip_invalid_utf8

    def process(self, indexed_path):
        from apache_beam.io.filesystems import FileSystems

        file_index, path = indexed_path
        skipped = _counter("skipped_invalid_lines")
        on_invalid = chunks.skipping_invalid_utf8(self._skip_invalid_utf8, skipped.inc)
        with pipeline.worker_input_errors(), FileSystems.open(path) as f:
            lines = (line for _, line in file_io.decode_lines(f, path, on_invalid=on_invalid))
            for chunk_index, documents in enumerate(chunks.file_chunks(lines, self._chunk_bytes)):
                yield (file_index, chunk_index), documents


class _MakeRecords(_do_fn()):
    """((file index, chunk index), documents) -> framed TFRecords (chunks.process_chunk)."""

    def __init__(self, job):
        self._job = job

    def process(self, keyed_chunk):
        key, documents = keyed_chunk
        records, num_documents, _ = chunks.process_chunk(tuple(key), documents, self._job)
        _counter("documents").inc(num_documents)
        _counter("instances").inc(len(records))
        if key[1] == 0 and num_documents == 1:
            _counter("single_document_files").inc()
        yield from records
