"""How many cores this process may use: read before torch is imported (the heap's set-up)
as well as after, so it imports nothing heavy."""

from __future__ import annotations

import os

# The most cores the user lets the process use (`--threads`); None: as many as it may run on.
_limit: int | None = None


def limit_cores(count: int | None) -> None:
    """Use at most `count` cores from now on (None: no limit): part of the process set-up."""
    global _limit
    if count is not None and count < 1:
        raise ValueError(f"a process needs at least one core, not {count}")
    _limit = count


def available_cores() -> int:
    """Cores this process may use: those it may run on (its CPU affinity, e.g. a
    container's cpuset), at most the limit set by `limit_cores`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores if _limit is None else min(cores, _limit)
