"""The memory of a process that serves a model: one heap for all threads and large blocks
in mappings of their own (float32) or a heap per core (int8), no buffers kept by MKL,
2 MB pages. docs/design.md gives the figures behind each choice.

One arena: glibc gives each thread a heap (an "arena") of its own and keeps the memory
freed in it for that arena's next allocations. Our threads free tensors of sizes the
others then allocate anew, so every arena would keep its own reserve of free pages;
with one arena they share a single reserve, and FlowLM's and Mimi's threads allocate
too rarely for the shared lock to matter. Not with int8 FlowLM: fbgemm's products
allocate on every thread of a parallel region at once, and those threads would queue
for the one heap's lock. An int8 process gets a heap per core, as many as threads
that run at once, instead of glibc's eight per core, each keeping its own free pages.
So a process chooses by its model before its first thread allocates (`choose_heap`,
from process.py's `prepare_process`): glibc fixes the limit once a thread other than
the main one has allocated under it.

Large blocks: glibc maps a block of its own for a large allocation and unmaps it when
freed, but raises that threshold to the size of every such block freed, up to 32 MB.
After the first few requests, each request's working buffers (tens of MB) would come
from the heap instead, where requests of different lengths leave holes between blocks
still in use, and a busy server's resident memory crept up with the requests served.
A fixed threshold of 8 MB keeps them in mappings that go back to the system when freed
(`use_fixed_mmap_threshold`). Not with int8 FlowLM, whose steps it made slower: an
int8 process keeps glibc's own threshold.

MKL's buffers: MKL, whose products PyTorch's attention calls, keeps each thread's work
buffers for that thread's next product and never gives them back. With
MKL_DISABLE_FAST_MM set, each product takes its buffers from the C heap and frees them,
so the threads share that free space, at no cost in speed. MKL reads the setting as
torch is imported, so a command sets it before anything imports torch
(`use_transient_blas_buffers`).

Huge pages: FlowLM reads all its weights, hundreds of MB, for every frame. In 4 kB
pages that is a page-table walk every 4 kB, more pages than any CPU's TLB holds; in
the 2 MB pages Linux can give (transparent huge pages) it is one per 2 MB. PyTorch
puts its tensors of 2 MB and more in such pages when THP_MEM_ALLOC_ENABLE is set,
which covers the float32 weights as laid out for oneDNN. fbgemm's int8 weights are
allocated outside PyTorch's allocator and stay in 4 kB pages (collapsing them
afterwards made int8 no faster). Once the model is loaded, the process takes no more
huge pages (`keep_huge_pages_to_the_weights`): a request's large buffers would be
placed in heap ranges marked for them, and after a trim gave those ranges back, the
kernel's background collapsing (khugepaged) would fill each 2 MB range again as soon
as one of its pages was in use, so that a server's memory crept up for minutes after
every busy spell, idle or not.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable

from .cores import available_cores

_LOGGER = logging.getLogger(__name__)

M_ARENA_MAX = -8  # mallopt's parameter numbers in glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 8 * 1024 * 1024
HUGE_PAGES_VARIABLE = "THP_MEM_ALLOC_ENABLE"
PR_SET_THP_DISABLE = 41  # prctl's option number in linux/prctl.h
MKL_BUFFERS_VARIABLE = "MKL_DISABLE_FAST_MM"


def choose_heap(quantized: bool) -> None:
    """For a process serving a float32 model, one arena and large blocks in mappings of
    their own; for int8 FlowLM, an arena per core (see the module docstring). Call
    before any thread but the main one has allocated: first thing in a command's `main`."""
    if quantized:
        limit_arenas(available_cores())
    else:
        limit_arenas(1)
        use_fixed_mmap_threshold()


def limit_arenas(count: int) -> None:
    """Limit glibc to `count` arenas for the threads that allocate from now on (glibc
    fixes its limit once more than eight arenas exist, or at the first thread after this).

    Not where `MALLOC_ARENA_MAX` is set (glibc reads it itself; the user's choice
    stands), nor with a C library that has no arenas (musl) or no `mallopt`.
    """
    if "MALLOC_ARENA_MAX" not in os.environ and not _mallopt(M_ARENA_MAX, count):
        _LOGGER.debug("mallopt(M_ARENA_MAX, %d) was refused: keeping glibc's arenas", count)


def use_fixed_mmap_threshold() -> None:
    """Give allocations of `MMAP_THRESHOLD_BYTES` and more mappings of their own, for
    good (see the module docstring). Not where `MALLOC_MMAP_THRESHOLD_` is set (the
    user's choice stands), nor with a C library that has no `mallopt`."""
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def _mallopt(parameter: int, value: int) -> bool:
    """glibc's `mallopt`; False where it refused or where the C library has none."""
    mallopt = _c_function("mallopt", ctypes.c_int, ctypes.c_int)
    return mallopt is not None and mallopt(parameter, value) == 1


def _c_function(name: str, *argtypes: type) -> Callable[..., int] | None:
    """A function of the C library this process runs on, or None where it has none."""
    try:
        function = ctypes.CDLL(None)[name]
    except (AttributeError, OSError):
        return None
    function.argtypes = argtypes
    return function


def use_transient_blas_buffers() -> None:
    """Have MKL free its work buffers after each product instead of keeping them (see
    the module docstring).

    MKL reads the setting once, as PyTorch loads it, so this must come before
    `import torch`. A value set in the environment is kept; without MKL (aarch64
    builds) it changes nothing.
    """
    os.environ.setdefault(MKL_BUFFERS_VARIABLE, "1")


def use_huge_pages() -> None:
    """Let PyTorch put its large tensors in 2 MB pages (see the module docstring).

    PyTorch reads the setting once, at the process's first tensor allocation, so
    this must come before any tensor is made (importing torch makes none). A value
    set in the environment is kept (0 turns it off); where the kernel has no
    transparent huge pages, or they are set to `never`, the request changes nothing.
    """
    os.environ.setdefault(HUGE_PAGES_VARIABLE, "1")


def keep_huge_pages_to_the_weights() -> None:
    """Give this process no more huge pages; those it has stay (see the module docstring).

    Called once a model is loaded, so that its weights keep the 2 MB pages they were
    loaded into while what requests allocate later stays in 4 kB pages, which a trim
    gives back for good. Not on a system without `prctl` (anything but Linux).
    """
    prctl = _c_function("prctl", ctypes.c_int, *[ctypes.c_ulong] * 4)
    if prctl is not None and prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        _LOGGER.debug("prctl(PR_SET_THP_DISABLE) was refused: huge pages stay on")


def return_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`).

    Loading makes float32 copies of weights a file stores narrower, for the moment a
    faster form is made from them (see model/pocket_tts.py), and frees them: glibc keeps such
    space for the process's next allocations. Without a C library that trims, nothing.
    """
    trim = _c_function("malloc_trim", ctypes.c_size_t)
    if trim is not None:
        trim(0)
