"""Running a top-level script: its flags from its settings dataclass, one-line errors, quiet devices.

Every script is the same few lines: `load_tensorflow_quietly()` before its imports, then
`main(ItsSettings, its_run_function, __name__)`, or for a training script `run_main(ItsSettings,
make_its_run, __name__)`. This module imports no TensorFlow itself; it declares the dataclass's
flags (bert_tf.settings), parses the command line, builds the settings and calls the run function
(or makes the run and calls its `run()`). Bad input raises `InputError` anywhere below; it ends the program with one
`error: ...` line on stderr and exit status 1, not a traceback. A run stopped from outside (SIGTERM
at any point, a lost multi-worker peer: `RunStopped`) ends with one `stopped: ...` line and its own
exit status (143 for SIGTERM).
"""

import contextlib
import os
import re
import sys
import threading

# What TensorFlow writes to stderr while it looks for CUDA on a machine that has no NVIDIA GPU.
_CUDA_PROBE_LINES = re.compile(
    rb"cuInit|cuda_|cudart|CUDA|TensorRT|TF-TRT|GPU will not be used|absl::InitializeLog"
    rb"|cpu_feature_guard|To enable the following instructions"
)


def _has_nvidia_device():
    return any(os.path.exists(path) for path in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))


_probed = []  # [True] once load_tensorflow_quietly has listed the devices


def load_tensorflow_quietly():
    """Imports TensorFlow and lets it probe for GPUs, without its CUDA errors on a machine with none.

    On a machine without an NVIDIA device, TensorFlow's import and first device listing print
    "failed call to cuInit" and similar lines. For that window only, stderr (file descriptor 2)
    passes through a filter that drops those lines; everything else goes through unchanged, and the
    filter is gone before the script's work starts. A machine with a GPU is left alone. Scripts call
    this before their other imports (`import bert_tf` has imported TensorFlow by then, quietly:
    import_tensorflow_quietly).
    """
    if _probed or _has_nvidia_device():
        return
    _probed.append(True)
    with _cuda_probe_lines_dropped():
        import tensorflow as tf

        tf.config.list_physical_devices("GPU")


def import_tensorflow_quietly():
    """Imports TensorFlow with the CUDA lines of its import dropped, and no device probe (a program
    may still configure its devices): what `import bert_tf` does first."""
    if "tensorflow" in sys.modules or _has_nvidia_device():
        return
    with _cuda_probe_lines_dropped():
        import tensorflow  # noqa: F401


@contextlib.contextmanager
def _cuda_probe_lines_dropped():
    """stderr (file descriptor 2) without _CUDA_PROBE_LINES, inside the block."""
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    saved_stderr = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward():
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                if not _CUDA_PROBE_LINES.search(line):
                    os.write(saved_stderr, line)

    forwarder = threading.Thread(target=forward, daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved_stderr, 2)  # closes the pipe's last write end: the forwarder drains and ends
        forwarder.join(timeout=10)
        os.close(saved_stderr)


def main(settings_class, run_function, module_name, **flag_defaults):
    """Declares `settings_class`'s flags, parses argv and runs `run_function(settings)`.

    Args:
      settings_class: the script's settings dataclass (fields declared with bert_tf.settings.setting).
      run_function: (settings) -> anything (not the exit status); the script's work.
      module_name: the script's `__name__`: --helpshort lists its flags.
      **flag_defaults: the script's own defaults for some flags.
    """
    from absl import app

    _define_flags(settings_class, module_name, flag_defaults)
    app.run(_absl_main(settings_class, run_function=run_function))


def run_main(settings_class, make_run, module_name):
    """A training script's main: declares `settings_class`'s flags, parses argv, makes the run of
    the settings (`make_run(settings)`, which checks everything before any work) and calls its
    `run()`, the first call of the path to the gradient (docs/architecture.md's trail)."""
    from absl import app

    _define_flags(settings_class, module_name, {})
    app.run(_absl_main(settings_class, make_run=make_run))


def _define_flags(settings_class, module_name, flag_defaults):
    from absl import flags

    from bert_tf.settings import define_flags, script_module_name

    define_flags(settings_class, module_name, **flag_defaults)
    # absl lists the flags of the module that sys.argv[0] names. For a console command that is its
    # wrapper (e.g. .venv/bin/bert-run-pretraining), which defines none: file them under it too.
    name = script_module_name(module_name)
    if name != sys.argv[0]:
        for flag in flags.FLAGS.get_key_flags_for_module(name):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def _absl_main(settings_class, run_function=None, make_run=None):
    """absl's main: the settings of the parsed flags to `run_function(settings)`, or to
    `make_run(settings).run()`; one line for bad input or a stop from outside."""
    from absl import app

    from bert_tf import log_filter
    from bert_tf.errors import InputError, RunStopped
    from bert_tf.settings import from_flags
    from bert_tf.sigterm import stopping_on_sigterm

    def absl_main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
        try:
            log_filter.shorten_long_lines()
            with stopping_on_sigterm():
                settings = from_flags(settings_class)
                if make_run is None:
                    run_function(settings)
                else:
                    make_run(settings).run()
        except InputError as error:
            sys.exit(f"error: {error}")
        except RunStopped as error:  # SIGTERM or a lost peer: a rerun resumes
            print(f"stopped: {error}", file=sys.stderr, flush=True)
            sys.exit(error.exit_status)

    return absl_main
