"""The error a user's bad input raises: a message that names the file, line, example or flag.

The scripts print an `InputError` as one line (no traceback) and exit with status 1; library callers get
an ordinary `ValueError` subclass.
"""


class InputError(ValueError):
    """Bad input data or settings; the message says where (file and line, example id or flag)."""


class WriteError(InputError):
    """An output the disk or its permissions refused (full, too large, read-only); names the path.

    Not bad input, but the user's to fix the same way: one line, exit status 1, nothing half-written.
    """
