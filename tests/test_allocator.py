"""A float32 model makes the C allocator keep one heap for all threads, and the engine has
PyTorch put large tensors in 2 MB pages (see engine/allocator.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wyoming_pocket_tts.engine.allocator import HUGE_PAGES_VARIABLE

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="arenas are glibc's",
)
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")

# Threads that allocate, then glibc's own report of its heaps: one <heap> per arena.
COUNT_HEAPS = textwrap.dedent(
    """
    import ctypes, os, tempfile, threading
    import torch
    from wyoming_pocket_tts.engine import allocator
    if os.environ.get("FLOAT32"):
        allocator.choose_arenas(quantized=os.environ["FLOAT32"] == "0")

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


@glibc_only
def test_threads_of_a_float32_process_share_one_heap():
    assert _heaps(FLOAT32="1") == 1


@glibc_only
def test_threads_of_an_int8_process_have_heaps_of_their_own():
    """int8 FlowLM's products allocate on their threads at the same moment."""
    assert _heaps(FLOAT32="0") > 1
    assert _heaps() > 1  # importing the engine chooses nothing


@glibc_only
def test_an_arena_limit_set_by_the_user_is_kept():
    assert _heaps(FLOAT32="1", MALLOC_ARENA_MAX="8") > 1


@pytest.mark.parametrize("quantize", [False, True])
def test_the_server_chooses_its_arenas_before_it_loads(monkeypatch, quantize):
    from wyoming_pocket_tts.catalog import CatalogError
    from wyoming_pocket_tts.commands import serve

    events = []
    monkeypatch.setattr(serve, "choose_arenas", lambda quantized: events.append(quantized))

    def resolve(args):
        events.append("resolve")
        raise CatalogError("stop here")

    monkeypatch.setattr(serve, "resolve_model", resolve)
    parser = serve.argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args(["--quantize"] if quantize else [])
    assert serve.main(args) == 1
    assert events == [quantize, "resolve"]


# A process as the server starts (its command module imported first), then a 64 MB
# tensor: how many kB of it the kernel backs with huge pages.
HUGE_PAGES_OF_A_TENSOR = textwrap.dedent(
    """
    import wyoming_pocket_tts.commands.serve
    import torch

    def anonymous_huge_kb():
        with open("/proc/self/smaps_rollup") as rollup:
            line = next(line for line in rollup if line.startswith("AnonHugePages:"))
        return int(line.split()[1])

    before = anonymous_huge_kb()
    weights = torch.empty(16 * 1024 * 1024)
    weights.fill_(1.0)
    print(anonymous_huge_kb() - before)
    """
)


def _huge_kb(**environment: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != HUGE_PAGES_VARIABLE} | environment
    done = subprocess.run(
        [sys.executable, "-c", HUGE_PAGES_OF_A_TENSOR],
        capture_output=True, text=True, env=env, check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


def _thp_mode() -> str | None:
    """The kernel's transparent huge page mode (always, madvise, never), if it has them."""
    try:
        text = THP_MODE.read_text()
    except OSError:
        return None
    return text[text.index("[") + 1 : text.index("]")]


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"), reason="no transparent huge pages")
def test_large_tensors_of_a_server_process_are_in_huge_pages():
    assert _huge_kb() >= 32 * 1024  # at least half of the 64 MB tensor


@pytest.mark.skipif(
    _thp_mode() != "madvise", reason="only in madvise mode does the kernel wait to be asked"
)
def test_huge_pages_turned_off_by_the_user_stay_off():
    assert _huge_kb(**{HUGE_PAGES_VARIABLE: "0"}) == 0
