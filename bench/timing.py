"""How the benchmarks time a call: one clock pair, one turn-taking rule.

Wall time is what a user waits for; CPU time (all of the process's threads) says whether a gap in wall
time is work or waiting, so every timing returns both.
"""

import time


def timed(function, *args):
    """(wall seconds, CPU seconds of all the process's threads, function(*args)) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def timed_in_turns(calls, repeats):
    """{name: [wall seconds of each repeat]}, the calls taking turns repeat after repeat, so that load
    from other work on the machine falls on all of them alike."""
    seconds = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            wall, _, _ = timed(call)
            seconds[name].append(wall)
    return seconds
