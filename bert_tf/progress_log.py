"""Progress lines of long work: one at the first item, then one every `every` items or `seconds`
seconds, whichever comes first, with the count, the rate and (when the total is known) the ETA.

The training loop's own line (loss, learning rate) is bert_tf/training/progress.py's; this one is for
the rest: evaluation and prediction batches, feature writing, pretraining records.
"""

import math
import time

from absl import logging

# The longest wait between two progress lines of any loop or data stage.
LOG_SECONDS = 30.0


def format_seconds(seconds):
    """H:MM:SS of a duration; "?" when it is not finite."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ProgressLog:
    """Counts items and logs `<what> <done>[/<total>]  <rate> <unit>/s  ETA <h:mm:ss>` when it is due.

    Args:
      what: the work, first in the line ("predict batch", "features written").
      total: the count at the end, or None when unknown (the line then has no total and no ETA).
      every: a line every this many items (besides the first item and every `seconds`); None:
        by time alone.
      unit: what the rate counts ("examples"), which `add` may count apart from the items.
      seconds: the longest wait between two lines.
      clock: () -> seconds (time.monotonic; a test's fake).
      first: whether the first item has a line (work that is quick needs none).

    Example:
    ```python
    progress = ProgressLog("predict batch", total=120, every=100, unit="examples")
    for batch in batches:
        ...
        progress.add(1, units=len(batch))
    ```
    """

    def __init__(
        self, what, total=None, every=100, unit=None, seconds=LOG_SECONDS, clock=None, first=True
    ):
        self.what, self.total, self.unit = what, total, unit
        self.every = None if every is None else max(int(every), 1)
        self.seconds, self.clock, self.first = seconds, clock or time.monotonic, first
        self.start = self.last_time = self.clock()
        self.done = self.units = 0
        self.last_done = 0

    def add(self, count=1, units=None):
        """Counts `count` items (and `units` of the rate's unit, default `count`); logs when due.

        Returns:
          the line logged, or None.
        """
        self.done += count
        self.units += count if units is None else units
        now = self.clock()
        every = self.every
        crossed = every is not None and self.done // every > self.last_done // every
        first = self.first and not self.last_done
        if not (first or crossed or now - self.last_time >= self.seconds):
            return None
        return self._log(now)

    def finish(self):
        """Logs the last line unless the last item's line was just logged, or no line came before
        (work quicker than one line's wait); returns it or None."""
        if self.done == self.last_done or not self.last_done:
            return None
        return self._log(self.clock())

    def _log(self, now):
        self.last_done, self.last_time = self.done, now
        elapsed = max(now - self.start, 1e-9)
        line = f"{self.what} {self.done}" + (f"/{self.total}" if self.total else "")
        line += f"  {self.units / elapsed:.1f} {self.unit or 'items'}/s"
        if self.total:
            line += f"  ETA {format_seconds((self.total - self.done) * elapsed / self.done)}"
        logging.info("%s", line)
        return line
