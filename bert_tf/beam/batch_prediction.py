"""batch_predict.py's library: any export over many files, as an Apache Beam pipeline.

    input files -> rows ((file, line), example) -> Reshuffle -> RunInference(ExportModelHandler)
      -> JSON lines -> <output_file>-SSSSS-of-NNNNN.jsonl

Each file is read whole by one worker (so every row keeps its file and 1-based line number); the
rows are then spread over the workers, batched and predicted (bert_tf/beam/inference.py), and
written by Beam's file sink, which writes temporary files and gives them their final names only
when the whole pipeline has succeeded: a failed run leaves no output file.

Input formats, chosen by the file's extension (a further ".gz" is read through gzip):
  * .tsv: a header line naming the signature's inputs (`text_a`, `text_b`, `question`, `context`,
    `text`, ...; other columns are ignored), then one row per line, tab-separated, no quoting. A
    list input (multiple choice's `choices`) takes every column of that name, in order.
  * .jsonl or .json: one JSON object per line with the inputs as keys (a list of strings for a list
    input; other keys are ignored); blank lines are skipped.
Each output line: {"input_file": the path as --input_file matched it, "line": its 1-based line
number, then one key per output of the signature}, values as nested lists, strings as UTF-8 text.

Everything that can be checked in the main process is, before the pipeline is submitted: the
options, the export and its signature, the files' existence, format and TSV headers. A bad row met
by a worker (a missing column, invalid JSON or UTF-8) stops the run with one line naming its file
and line. On Dataflow, Flink or Spark the workers need this package too (e.g. Dataflow's
`setup_file=./setup.py`), and the export and files must be where they can read them (gs://...).
"""

import dataclasses
import json
import os

import numpy as np
from absl import logging

from bert_tf import file_io
from bert_tf.beam import pipeline
from bert_tf.errors import InputError
from bert_tf.settings import setting

_JSON_EXTENSIONS = (".jsonl", ".json")
_TSV_EXTENSIONS = (".tsv",)
OUTPUT_SUFFIX = ".jsonl"
_SHARD_PATTERN = pipeline.SHARD_GLOB + OUTPUT_SUFFIX
_KEYS = ("input_file", "line")


@dataclasses.dataclass(kw_only=True)
class BatchPredictSettings:
    """batch_predict.py's settings."""

    export_dir: str | None = setting(
        None,
        "The export: the folder TF Serving watches (its highest numbered version is used) or one "
        "version folder. gs:// and other TensorFlow file system URLs work.",
    )
    input_file: str | None = setting(
        None,
        "Input files, comma-separated, globs allowed. By extension: .tsv = a header naming the "
        "export's inputs (text_a, text_b, question, context, text, ...; other columns ignored; "
        "a list input such as choices takes every column of its name), then tab-separated rows; "
        ".jsonl or .json = JSON lines, one object with those keys per line. A further .gz is "
        "read through gzip.",
    )
    output_file: str | None = setting(
        None,
        "Output prefix: JSON lines in <output_file>-SSSSS-of-NNNNN.jsonl, one per input row: "
        '{"input_file", "line" (1-based), then one key per output of the export}.',
    )
    beam_pipeline_options: str = setting(
        "",
        "Comma-separated KEY=VALUE Beam pipeline options, e.g. runner=DataflowRunner,project=P,"
        "region=R,temp_location=gs://B/tmp,setup_file=./setup.py or runner=DirectRunner,"
        "direct_num_workers=2,direct_running_mode=multi_processing. Default '': Beam's local "
        "runner with its defaults (one worker, in this process).",
    )
    min_batch_size: int = setting(8, "Fewest rows per call of the export. Default 8.")
    max_batch_size: int = setting(
        64,
        "Most rows per call of the export; Beam grows batches from min to max as calls allow. "
        "Default 64.",
    )
    num_shards: int = setting(0, "Output files; 0 = as many as the runner chooses. Default 0.")


def run(settings):
    """batch_predict.py: checks the settings and files, then runs the pipeline to its end.

    Returns:
      The output files, sorted.

    Raises:
      InputError: in one line, for anything refused before submission or by a worker.
    """
    for name in ("export_dir", "input_file", "output_file"):
        if not getattr(settings, name):
            raise InputError(f"--{name} is required")
    if settings.num_shards < 0:
        raise InputError(f"--num_shards must be >= 0, got {settings.num_shards}")
    options = pipeline.parse_options(settings.beam_pipeline_options)
    from bert_tf.beam.inference import ExportModelHandler  # needs apache_beam: after parse_options

    handler = ExportModelHandler(
        settings.export_dir,
        min_batch_size=settings.min_batch_size,
        max_batch_size=settings.max_batch_size,
    )
    reserved = sorted(set(_KEYS) & set(handler.signature.outputs))
    if reserved:
        raise InputError(f"{handler.folder}: an output is named {reserved[0]!r}, a key of ours")
    files = file_io.expand_globs(settings.input_file, "--input_file")
    for path in files:
        check_input_file(path, handler.signature.inputs)
    _check_output_prefix(settings.output_file)
    logging.info(
        "Predicting %d file(s) with %s (%s)",
        len(files),
        handler.folder,
        handler.signature.describe_inputs(),
    )
    beam_pipeline = pipeline.make_pipeline(options)
    add_predictions(beam_pipeline, handler, files, settings.output_file, settings.num_shards)
    with pipeline.removing_sink_temporaries(settings.output_file):
        pipeline.run(beam_pipeline)
    written = output_files(settings.output_file)
    logging.info("Wrote %d file(s): %s", len(written), f"{settings.output_file}*{OUTPUT_SUFFIX}")
    return written


def add_predictions(root, handler, files, output_file, num_shards=0, label="Predict"):
    """Adds to a pipeline (its root) the steps from `files` to the JSON lines under `output_file`,
    as one composite step `label` (a pipeline may hold several, each with its own label)."""
    import apache_beam as beam

    steps = beam.ptransform_fn(_predict_files)(handler, files, output_file, num_shards)
    return root | label >> steps


def _predict_files(root, handler, files, output_file, num_shards):
    import apache_beam as beam
    from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

    return (
        root
        | "Files" >> beam.Create(list(files))
        | "Rows" >> beam.FlatMap(read_examples, handler.signature.inputs)
        | "Spread" >> beam.Reshuffle()
        | "Predict" >> RunInference(KeyedModelHandler(handler))
        | "Json" >> beam.MapTuple(json_line)
        | "Write"
        >> beam.io.WriteToText(output_file, file_name_suffix=OUTPUT_SUFFIX, num_shards=num_shards)
    )


def output_files(output_file):
    """The files a run with this --output_file writes, sorted."""
    import tensorflow as tf

    return sorted(tf.io.gfile.glob(pipeline.escaped(output_file) + _SHARD_PATTERN))


# Input rows


def input_format(path):
    """An input file's format, "tsv" or "json", from its extension (looking through a ".gz")."""
    name = os.fspath(path).lower().removesuffix(".gz")
    if name.endswith(_JSON_EXTENSIONS):
        return "json"
    if name.endswith(_TSV_EXTENSIONS):
        return "tsv"
    raise InputError(
        f"--input_file: {path}: its extension names no format (.tsv, or .jsonl / .json for JSON "
        "lines)"
    )


def check_input_file(path, inputs):
    """In the main process, before submission: the format, and a TSV file's header against the
    signature's inputs ({name: rank}). Raises InputError naming the file."""
    if input_format(path) == "tsv":
        lines = file_io.read_lines(path)
        try:
            _tsv_columns(path, next(lines, None), inputs)
        finally:
            lines.close()


def read_examples(path, inputs):
    """Yields ((path, line number), example) for every row of an input file (run by a worker).

    Args:
      path: an input file, as --input_file matched it.
      inputs: {input name: rank} of the export's serving_default.

    Raises:
      InputError: naming the file and line of a bad row (marked for `pipeline.run`).
    """
    with pipeline.worker_input_errors():
        if input_format(path) == "json":
            yield from _json_examples(path, inputs)
        else:
            yield from _tsv_examples(path, inputs)


def _tsv_columns(path, header, inputs):
    """The header line (number, text) -> ({input name: column index, or [indexes] for a list
    input}, the number of columns)."""
    if header is None:
        raise InputError(f"{path}: empty; a TSV file starts with a header naming its columns")
    number, text = header
    names = [name.strip() for name in text.split("\t")]
    columns = {}
    for name, rank in inputs.items():
        found = [index for index, column in enumerate(names) if column == name]
        if not found:
            raise InputError(
                f"{path}:{number}: the header has no column {name!r} (the export takes "
                f"{', '.join(inputs)}; the header names {', '.join(names)})"
            )
        if rank == 1 and len(found) > 1:
            raise InputError(f"{path}:{number}: the header names {name!r} {len(found)} times")
        columns[name] = found if rank == 2 else found[0]
    return columns, len(names)


def _tsv_examples(path, inputs):
    lines = file_io.read_lines(path)
    columns, width = _tsv_columns(path, next(lines, None), inputs)
    for number, line in lines:
        cells = line.split("\t")
        if len(cells) != width:
            raise InputError(
                f"{path}:{number}: {len(cells)} column(s), but the header names {width}"
            )
        example = {
            name: [cells[i] for i in index] if isinstance(index, list) else cells[index]
            for name, index in columns.items()
        }
        yield (path, number), example


def _json_examples(path, inputs):
    for number, line in file_io.read_lines(path):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}:{number}: not valid JSON (column {error.colno}: {error.msg})"
            ) from None
        if not isinstance(value, dict):
            raise InputError(f"{path}:{number}: a JSON object expected, got {type(value).__name__}")
        yield (path, number), _json_example(value, f"{path}:{number}", inputs)


def _json_example(value, where, inputs):
    example = {}
    for name, rank in inputs.items():
        if name not in value:
            raise InputError(f"{where}: no {name!r} (the export takes {', '.join(inputs)})")
        text = value[name]
        is_text = (
            isinstance(text, str)
            if rank == 1
            else isinstance(text, list) and all(isinstance(t, str) for t in text)
        )
        if not is_text:
            expected = "a string" if rank == 1 else "a list of strings"
            raise InputError(f"{where}: {name!r} must be {expected}, got {json.dumps(text)[:80]}")
        example[name] = text
    return example


# Output lines


def json_line(key, result):
    """((path, line), PredictionResult) -> its output line (JSON text)."""
    path, number = key
    record = {"input_file": path, "line": number}
    record.update({name: _jsonable(value) for name, value in sorted(result.inference.items())})
    return json.dumps(record, ensure_ascii=False)


def _jsonable(value):
    """A numpy value -> nested lists of numbers, or of text (UTF-8; an invalid byte becomes U+FFFD)."""
    value = np.asarray(value)
    return _decoded(value.tolist()) if value.dtype.kind in "OS" else value.tolist()


def _decoded(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value


def _check_output_prefix(output_file):
    """Refuses a prefix whose shards exist (an earlier run's would mix with this one's)."""
    existing = output_files(output_file)
    if existing:
        raise InputError(
            f"--output_file={output_file}: {existing[0]} exists (an earlier run's output?); "
            "remove it or choose another prefix"
        )
    folder, name = os.path.split(output_file)
    if not name:
        raise InputError(f"--output_file={output_file}: a prefix of file names, not a folder")
    if folder and not file_io.is_url(folder):
        file_io.check_writable_folder(folder, "--output_file")
