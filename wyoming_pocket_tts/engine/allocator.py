"""The C allocator of a process that serves a model: one heap for all its threads.

glibc gives each thread, at its first allocation, a heap (an "arena") of its own
while there are fewer than eight per core, and memory freed in an arena is kept
for that arena's next allocations. Our threads (the loaders, FlowLM's, Mimi's,
the event loop's) each free tensors of sizes the others then allocate anew, so
every arena keeps its own reserve of free pages: 57-111 MB of a float32 server's
resident memory was such free space. With one arena they share a single reserve.
Measured with the standard model and three voices, processes with and without
alternating: peak memory 744 against 763 MB (medians of sixteen and four runs),
speed and four concurrent streams within the spread (FlowLM's and Mimi's threads
allocate a few thousand times a second between them, too few for the shared lock
to matter).
"""

from __future__ import annotations

import ctypes
import logging
import os

_LOGGER = logging.getLogger(__name__)

M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h


def use_one_arena() -> None:
    """Limit glibc to one arena for the threads that allocate from now on.

    Not where `MALLOC_ARENA_MAX` is set (glibc reads it itself; the user's choice
    stands), nor with a C library that has no arenas (musl) or no `mallopt`.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (AttributeError, OSError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    if mallopt(M_ARENA_MAX, 1) != 1:
        _LOGGER.debug("mallopt(M_ARENA_MAX, 1) was refused: keeping the C library's arenas")
