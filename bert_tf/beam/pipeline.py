"""`--beam_pipeline_options`: parsed and checked up front, the local runner pinned, one-line errors.

The flag takes TFDS's form, comma-separated KEY=VALUE pairs of Beam pipeline options:

    runner=DataflowRunner,project=my-project,region=us-central1,temp_location=gs://b/tmp
    runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing

`runner=DirectRunner` (and no runner at all) runs on Beam's Python FnApiRunner. Since Beam 2.68,
DirectRunner first tries Prism, a Go binary it downloads at run time; an offline machine would wait
for that download, so the local runner is pinned here instead.

A worker's bad input (an invalid UTF-8 line, a missing column) reaches the user as the same one-line
`InputError` a one-machine run gives: `worker_input_errors()` marks its message inside the worker,
and `run()` finds the mark in whatever the runner raised (runners wrap workers' errors in their own
tracebacks).
"""

import contextlib
import glob
import logging
import os
import re
import shutil
import sys
import tempfile

from absl import logging as absl_logging

from bert_tf.errors import InputError

FLAG = "--beam_pipeline_options"
_LOCAL_RUNNERS = {"directrunner", "direct", "fnapirunner", "bundlebasedirectrunner"}
_MARK_START, _MARK_END = "<<bert_tf input error: ", " :end>>"
_MARKED = re.compile(re.escape(_MARK_START) + "(.*?)" + re.escape(_MARK_END), re.DOTALL)


def import_beam():
    """apache_beam, or a one-line InputError saying how to install it."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its import warns that Google Cloud's BigQuery client is absent
    try:
        import apache_beam
    except ImportError:
        raise InputError(
            f"{FLAG} needs Apache Beam, the [beam] extra: pip install -e '.[beam]'"
        ) from None
    finally:
        root.setLevel(level)
    return apache_beam


def _known_options():
    """Every Beam pipeline option's name -> its argparse action (all runners' options)."""
    from apache_beam.options import pipeline_options

    parser = pipeline_options._BeamArgumentParser(allow_abbrev=False)
    classes = {}
    pending = list(pipeline_options.PipelineOptions.__subclasses__())
    while pending:
        cls = pending.pop()
        classes.setdefault(cls.__qualname__, cls)
        pending.extend(cls.__subclasses__())
    for cls in classes.values():
        with contextlib.suppress(Exception):  # a class whose options another already declared
            cls._add_argparse_args(parser)
    return {
        option.removeprefix("--"): action
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--")
    }


def parse_options(text):
    """'KEY=VALUE,...' -> PipelineOptions; an unknown key or a bad value is a one-line InputError."""
    import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    known = _known_options()
    argv = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, has_value, value = item.partition("=")
        key = key.strip().removeprefix("--")
        action = known.get(key)
        if action is None:
            raise InputError(
                f"{FLAG}: unknown option {key!r} (not a pipeline option of Beam or of its runners)"
            )
        if action.nargs == 0:  # a switch such as save_main_session: KEY or KEY=true
            if value.strip().lower() in ("", "true", "1", "yes"):
                argv.append(f"--{key}")
            elif value.strip().lower() not in ("false", "0", "no"):
                raise InputError(f"{FLAG}: {key} is a switch, so true or false, not {value!r}")
        elif not has_value:
            raise InputError(f"{FLAG}: {key} needs a value ({key}=VALUE)")
        else:
            argv.append(f"--{key}={value}")
    options = PipelineOptions(argv)
    try:
        options.get_all_options()
    except SystemExit:  # argparse's way to refuse a value; it has printed its usage line
        raise InputError(f"{FLAG}={text}: a value is not valid for its option") from None
    return options


def is_local(options):
    """Whether `options` run on this machine (DirectRunner, or no runner named)."""
    from apache_beam.options.pipeline_options import StandardOptions

    runner = options.view_as(StandardOptions).runner
    return runner is None or runner.lower() in _LOCAL_RUNNERS


def make_pipeline(options):
    """A beam.Pipeline on the runner `options` name; the local one is always the FnApiRunner."""
    beam = import_beam()
    if is_local(options):
        from apache_beam.options.pipeline_options import WorkerOptions
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        harness = options.view_as(WorkerOptions)
        harness.default_sdk_harness_log_level = harness.default_sdk_harness_log_level or "WARNING"
        # State-backed iterables: a worker reads a group (a shard's records) in pages, as the
        # production runners hand it over, instead of as one element (measured: 3.1 GB per worker
        # without them, 0.8 GB with them, on 1.2 GB of records; bench/bench_beam_data.py).
        return beam.Pipeline(runner=FnApiRunner(use_state_iterables=True), options=options)
    return beam.Pipeline(options=options)


@contextlib.contextmanager
def worker_input_errors():
    """Inside a worker: an InputError's message is marked so that `run` can find it again."""
    try:
        yield
    except InputError as error:
        raise InputError(f"{_MARK_START}{error}{_MARK_END}") from None


# The shard names Beam's file sinks write ("-SSSSS-of-NNNNN"), as a glob to append to a prefix.
SHARD_GLOB = "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"


def escaped(path):
    """`path` with its glob characters escaped (local paths; URLs are left as they are)."""
    from bert_tf import file_io

    return path if file_io.is_url(path) else glob.escape(path)


@contextlib.contextmanager
def removing_sink_temporaries(prefix):
    """Around a run writing files under `prefix` through a Beam file sink: if the run fails, removes
    the temporary folders the sink made beside it (beam-temp-<name>-<uuid>) during the run. The
    sink gives files their final names only when the whole pipeline has succeeded."""
    from bert_tf import file_io

    folder, name = os.path.split(prefix)
    pattern = escaped(os.path.join(folder, f"beam-temp-{name}-")) + "*"
    if file_io.is_url(prefix):
        gfile = file_io._gfile()
        list_folders, remove = gfile.glob, gfile.rmtree
    else:
        list_folders, remove = glob.glob, shutil.rmtree
    before = set(list_folders(pattern))
    try:
        yield
    except BaseException:
        for leftover in set(list_folders(pattern)) - before:
            remove(leftover)
        raise


def run(pipeline):
    """Runs `pipeline` to its end; a worker's InputError comes back as one line.

    Raises:
      InputError: with the worker's own message (file and line), however the runner wrapped it.
    """
    local = is_local(pipeline.options)
    try:
        with _local_workers_logging_apart() if local else contextlib.nullcontext():
            result = pipeline.run()
            result.wait_until_finish()
    except Exception as error:  # runners raise their own types around a worker's error
        found = _MARKED.search(str(error))
        if found is None:
            raise
        raise InputError(found.group(1)) from None
    return result


@contextlib.contextmanager
def _local_workers_logging_apart():
    """Local worker processes write their logs to a file, not to the user's terminal.

    They inherit file descriptor 2 when the runner starts them, and their INFO chatter and copies of
    an error's traceback would bury the one line `run` gives. For the run, descriptor 2 points to
    a log file and this process's own logging goes on to the terminal through a copy of it.
    """
    path = os.path.join(tempfile.gettempdir(), f"bert_tf_beam_workers_{os.getpid()}.log")
    absl_logging.info("Beam's local workers log to %s", path)
    sys.stderr.flush()
    terminal = os.dup(2)
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    ours = os.fdopen(os.dup(terminal), "w", buffering=1)
    handlers = [h for h in _stream_handlers() if h.stream is sys.stderr]
    saved_stderr, sys.stderr = sys.stderr, ours
    for handler in handlers:
        handler.setStream(ours)
    forwarding = logging.getLogger("apache_beam.runners.portability.local_job_service")
    saved_level = forwarding.level
    forwarding.setLevel(logging.CRITICAL)  # it repeats the workers' log lines here
    try:
        yield
    finally:
        forwarding.setLevel(saved_level)
        for handler in handlers:
            handler.setStream(saved_stderr)
        sys.stderr = saved_stderr
        ours.close()
        os.dup2(terminal, 2)
        os.close(terminal)


def _stream_handlers():
    """The root logger's stream handlers, absl's among them."""
    for handler in logging.getLogger().handlers:
        for candidate in (handler, getattr(handler, "python_handler", None)):
            if isinstance(candidate, logging.StreamHandler):
                yield candidate
