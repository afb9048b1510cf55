"""Quiet logs: at the default verbosity no log line is longer than 300 characters, TensorFlow's own
included (an export logs `signature_serialization` lines of thousands of characters, listing every
input name). A longer line is cut, saying how much was left out; `--verbosity=1` (absl's flag)
shows every line whole.

A script calls `shorten_long_lines()` once its flags are parsed (bert_tf/cli.py); it filters the
handlers that print Python's log records: absl's, the root logger's and TensorFlow's.
"""

import logging

from absl import logging as absl_logging

# The longest line a script prints at the default verbosity, its log prefix included.
MAX_LINE_CHARS = 300
# Room for absl's prefix ("W1207 18:05:20.185719 140631962225536 signature_serialization.py:152] ").
_PREFIX_CHARS = 80


def shorten(text, limit=MAX_LINE_CHARS - _PREFIX_CHARS):
    """`text` with every line longer than `limit` cut to `limit` characters, the cut named.

    Args:
      text: a log message (one line or several).
      limit: the longest line kept whole; a cut line, its note included, has at most this many.

    Returns:
      the text, its long lines ending in `... [<n> more characters; --verbosity=1 shows them]`.
    """
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if len(line) > limit:
            note = "... [{} more characters; --verbosity=1 shows them]"
            keep = limit - len(note.format(len(line)))
            keep = limit - len(note.format(len(line) - keep))  # the count may have a digit less
            lines[index] = line[:keep] + note.format(len(line) - keep)
    return "\n".join(lines)


class LongLineFilter(logging.Filter):
    """Cuts the long lines of each record a handler prints, unless absl's verbosity is above 0."""

    def filter(self, record):
        if absl_logging.get_verbosity() > 0:
            return True
        message = record.getMessage()
        short = shorten(message)
        if short != message:
            record.msg, record.args = short, None
        return True


def shorten_long_lines():
    """Adds a LongLineFilter to the handlers of absl, of the root logger and of TensorFlow's logger
    (once each); returns the handlers filtered."""
    handlers = [absl_logging.get_absl_handler(), *logging.getLogger().handlers]
    handlers += logging.getLogger("tensorflow").handlers
    filtered = []
    for handler in dict.fromkeys(handlers):
        if not any(isinstance(f, LongLineFilter) for f in handler.filters):
            handler.addFilter(LongLineFilter())
        filtered.append(handler)
    return filtered
