"""How a run stops when its machine is taken away: SIGTERM, and a lost multi-worker peer.

Preemptible VMs, Kubernetes and TPU maintenance stop a job with SIGTERM and a grace period. While
training, `StopSignal` catches it and sets a flag that the training loop reads before every step; the
loop then saves model.ckpt-<step> at the current step and raises `Preempted` (the scripts print one
line and exit with status 143, 128 + SIGTERM). The same command resumes from that checkpoint.

Anywhere else (evaluation, prediction, feature writing, between a sweep's runs) SIGTERM stops the
script at once (bert_tf.sigterm).

A worker of a multi_worker_mirrored job whose peer died gets an error from TensorFlow's coordination
service or from a collective that timed out (--collective_timeout_seconds); `peer_errors` turns it into
`PeerLost`, one line naming the lost task(s). Relaunching every worker resumes from the last checkpoint.
"""

import contextlib
import os
import re
import signal
import threading
import time

import tensorflow as tf
from absl import logging
from tensorflow.python.eager import context

from bert_tf.errors import RunStopped
from bert_tf.sigterm import PREEMPTED_EXIT_STATUS

# The errors a collective or the coordination service raises when a peer is gone or silent.
_PEER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.InternalError,
)
# Lines of a TensorFlow error message around its reason: where the failing op was defined, gRPC detail.
_NOT_A_REASON = ("Graph execution error", "Detected at node", "Additional GRPC", ":UNKNOWN")
# What an eager op's error wraps its reason in: "{{function_node ...}} <reason> [Op:...] name:".
_OP_CONTEXT = re.compile(r"\{\{function_node [^}]*\}\}|\[Op:\w+\].*$")
_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
# TensorFlow's coordination service marks a task unhealthy after this long without a heartbeat when
# coordination_config.heartbeat_timeout_in_ms is 0 (its default; about 10 s measured here too).
_DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 10
_HEARTBEAT_MARGIN_SECONDS = 5  # the service checks heartbeats periodically, not at the instant


class Preempted(RunStopped):
    """SIGTERM stopped training; the checkpoint of the current step is saved."""

    exit_status = PREEMPTED_EXIT_STATUS


class PeerLost(RunStopped):
    """A multi-worker peer died or stopped answering; relaunch every worker to resume."""


class StopSignal:
    """A flag that SIGTERM sets while `watching()`, readable inside a tf.function.

    A Python signal handler runs only when the main thread is back in Python, not while it waits for
    a tf.function of many steps. So the signal also wakes a helper thread (signal.set_wakeup_fd),
    which sets the flag at once; the training loop reads it before each step.
    """

    def __init__(self):
        self.flag = tf.Variable(False, trainable=False, name="stop_requested")
        self.agree = None  # the workers' collective over their flags (any_worker_stopping)

    def requested(self):
        return bool(self.flag.numpy())

    @contextlib.contextmanager
    def watching(self):
        """Catches SIGTERM for the duration (in the main thread only; elsewhere it does nothing)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        previous_handler = signal.signal(signal.SIGTERM, lambda signum, frame: self._set())
        previous_fd = signal.set_wakeup_fd(write_end)
        watcher = threading.Thread(target=self._watch, args=(read_end,), daemon=True)
        watcher.start()
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous_fd)
            signal.signal(signal.SIGTERM, previous_handler)
            os.write(write_end, b"\0")  # ends the watcher
            watcher.join(timeout=10)
            os.close(write_end)

    def _watch(self, read_end):
        with os.fdopen(read_end, "rb", buffering=0) as wakeups:
            while (byte := wakeups.read(1)) and byte != b"\0":
                if byte[0] == signal.SIGTERM:
                    self._set()

    def _set(self):
        self.flag.assign(True)


def any_worker_stopping(strategy, stop_signal):
    """Whether SIGTERM reached any worker (all of them agree: a collective); one process: its flag."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return stop_signal.requested()
    if stop_signal.agree is None:

        def replica_fn():
            local = tf.cast(stop_signal.flag, tf.int32)
            context = tf.distribute.get_replica_context()
            return context.all_reduce(tf.distribute.ReduceOp.SUM, local)

        stop_signal.agree = tf.function(
            lambda: strategy.experimental_local_results(strategy.run(replica_fn))[0]
        )
    return int(stop_signal.agree().numpy()) > 0


@contextlib.contextmanager
def peer_errors(strategy):
    """Turns a multi-worker collective's failure into PeerLost, one line naming the lost task(s)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        yield
        return
    try:
        yield
    except _PEER_ERRORS as error:
        raise PeerLost(_describe_loss(strategy, error)) from None


def _describe_loss(strategy, error):
    """'lost worker 1 (...)': the tasks the coordination service reports unhealthy, or the message's."""
    resolver = strategy.cluster_resolver
    me = (resolver.task_type, resolver.task_id)
    lost = _unhealthy_tasks(resolver.cluster_spec(), me)
    if not lost and isinstance(error, tf.errors.DeadlineExceededError):
        # A silent peer (a frozen process, a machine gone from the network) can time a collective
        # out before the coordination service misses its heartbeats; wait for that verdict.
        lost = _await_unhealthy_tasks(resolver.cluster_spec(), me)
    if not lost:
        named = {(job, int(task)) for job, task in _TASK_NAME.findall(str(error.message))}
        lost = sorted(named - {me})
    tasks = ", ".join(f"{job} {task}" for job, task in lost) or "a peer (which one is unknown)"
    logging.debug("Lost %s: %s", tasks, error.message)
    return (
        f"lost {tasks} of the multi_worker_mirrored cluster ({type(error).__name__}: "
        f"{error_reason(str(error.message))}); relaunch every worker to resume from the last checkpoint"
    )


def error_reason(message):
    """The line of a TensorFlow error message that says what happened (not where the op was built)."""
    for line in message.splitlines():
        if line and not line[0].isspace() and not line.startswith(_NOT_A_REASON):
            return _OP_CONTEXT.sub("", line).strip()[:200]
    return "no detail"


def _await_unhealthy_tasks(cluster_spec, me, poll_seconds=0.5):
    """_unhealthy_tasks, asked until the coordination service's heartbeat timeout (plus a margin)
    has passed; [] if it names no one by then."""
    configured = context.context().config.experimental.coordination_config.heartbeat_timeout_in_ms
    timeout = configured / 1000 or _DEFAULT_HEARTBEAT_TIMEOUT_SECONDS
    deadline = time.monotonic() + timeout + _HEARTBEAT_MARGIN_SECONDS
    while time.monotonic() < deadline:
        time.sleep(poll_seconds)
        if lost := _unhealthy_tasks(cluster_spec, me):
            return lost
    return []


def _unhealthy_tasks(cluster_spec, me):
    """(job, task) of every other task the coordination service reports in error, or []."""
    jobs = [(job, cluster_spec.num_tasks(job)) for job in cluster_spec.jobs]
    tasks = [(job, index) for job, count in jobs for index in range(count)]
    try:
        states = context.context().get_task_states(jobs)  # a None or an error per task
    except (tf.errors.OpError, ValueError):  # no coordination service to ask
        return []
    return [task for task, state in zip(tasks, states, strict=True) if state and task != me]
