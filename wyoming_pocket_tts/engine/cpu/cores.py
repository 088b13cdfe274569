"""How many cores this process may use: read before torch is imported (the heap's set-up)
as well as after, so it imports nothing heavy."""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
