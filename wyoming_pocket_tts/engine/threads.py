"""How many cores torch's operators may use, and around which work.

torch has a single intra-op thread count for the whole process: setting it from
one thread changes it for every thread. The synthesis worker keeps it at one per
pipeline stage (FlowLM and Mimi each on a core of their own) and raises it only
around work that runs while the other stage has nothing to do, such as a new
request's text prompt on an idle engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def intra_op_threads(count: int | None) -> Iterator[None]:
    """Let torch's operators use `count` threads inside the block (None: leave as is)."""
    previous = torch.get_num_threads()
    if count is None or count == previous:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
