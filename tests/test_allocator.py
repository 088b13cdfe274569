"""The engine makes the C allocator keep one heap for all threads (see engine/allocator.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="arenas are glibc's",
)

# Threads that allocate, then glibc's own report of its heaps: one <heap> per arena.
COUNT_HEAPS = textwrap.dedent(
    """
    import ctypes, tempfile, threading
    import torch
    import wyoming_pocket_tts.engine

    def allocate():
        for size in range(1, 200):
            torch.empty(size * 1024).fill_(1.0)

    threads = [threading.Thread(target=allocate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    with tempfile.NamedTemporaryFile(suffix=".xml") as report:
        stream = libc.fopen(report.name.encode(), b"w")
        libc.malloc_info(0, stream)
        libc.fclose(stream)
        print(open(report.name).read().count("<heap nr="))
    """
)


def _heaps(**environment: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | environment
    done = subprocess.run(
        [sys.executable, "-c", COUNT_HEAPS], capture_output=True, text=True, env=env, check=True
    )
    return int(done.stdout.strip().splitlines()[-1])


def test_threads_of_a_process_with_the_engine_share_one_heap():
    assert _heaps() == 1


def test_an_arena_limit_set_by_the_user_is_kept():
    # Also shows that the threads above would have had heaps of their own.
    assert _heaps(MALLOC_ARENA_MAX="8") > 1
