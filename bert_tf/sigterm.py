"""SIGTERM outside the training loop: one `stopped:` line naming the step, status 143.

The training loop catches SIGTERM itself and saves the current step (bert_tf.training.preemption). Anywhere
else (evaluation, prediction, feature writing, between a sweep's runs) `stopping_on_sigterm`, which
every script runs its work in (bert_tf.cli), raises `Terminated` at once, naming the step the process
is in (`doing`). Every output is written under a temporary name and renamed when complete
(bert_tf.file_io), so nothing half-written stays, and the same command redoes only what was unfinished.

This module imports no TensorFlow: create_pretraining_data.py forks its workers from a process
without it.
"""

import contextlib
import os
import signal
import threading

from bert_tf.errors import RunStopped

# What the scripts exit with when SIGTERM stopped the run (the shell's status of a SIGTERMed process).
PREEMPTED_EXIT_STATUS = 128 + signal.SIGTERM


class Terminated(RunStopped):
    """SIGTERM outside the training loop: the step it came in stopped at once, nothing of it kept."""

    exit_status = PREEMPTED_EXIT_STATUS


# What the process is doing, innermost last (`doing`); SIGTERM's line names the innermost.
_DOING = []


@contextlib.contextmanager
def doing(what):
    """Names the step the process is in (e.g. "evaluation") for the line a SIGTERM prints."""
    _DOING.append(what)
    try:
        yield
    finally:
        _DOING.pop()


@contextlib.contextmanager
def stopping_on_sigterm():
    """Around a script's work: SIGTERM raises `Terminated` (in the main thread, where Python runs
    signal handlers) unless the training loop's own handler is watching (StopSignal)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        if os.getpid() != owner:  # a forked child (a process pool's worker): die as by default
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        what = _DOING[-1] if _DOING else "start-up"
        raise Terminated(
            f"SIGTERM during {what}: stopped there, nothing half-written kept; the same command "
            "redoes only what was unfinished"
        )

    owner = os.getpid()
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
