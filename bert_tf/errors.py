"""The errors a script prints as one line: bad input (naming the file, line, example or flag), and a
run stopped from outside (SIGTERM, a lost peer).

The scripts print an `InputError` as one line (no traceback) and exit with status 1; library callers get
an ordinary `ValueError` subclass.
"""


class InputError(ValueError):
    """Bad input data or settings; the message says where (file and line, example id or flag)."""


class WriteError(InputError):
    """An output the disk or its permissions refused (full, too large, read-only); names the path.

    Not bad input, but the user's to fix the same way: one line, exit status 1, nothing half-written.
    """


class Diverged(InputError):
    """The training loss became NaN or infinite: the run stops before saving such weights.

    As the original's Estimator did (its NanTensorHook), but in one line naming the steps, the last
    checkpoint kept and the settings to change; a rerun with the same settings would diverge again.
    """


class RunStopped(Exception):
    """A run stopped before its end by something outside it (SIGTERM, a lost peer); rerun to resume.

    The scripts print it as one line (no traceback) and exit with `exit_status`.
    """

    exit_status = 1


class DamagedCheckpoint(InputError):
    """A checkpoint file that cannot be read whole (truncated, or a checksum that does not match);
    the message names the file. A resume skips such a checkpoint for the newest intact one."""
