"""The memory of a process that serves a model: one heap for all threads (float32), no
buffers kept by MKL, 2 MB pages.

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

Not with int8 FlowLM: fbgemm's products allocate a buffer on each thread of their
parallel region, at the same moment, and the threads then queued for the one
heap's lock, about twenty sleeps a step. An int8 step took 7.7-8.3 ms in one heap
against 6.3-6.8 with a heap per thread (Intel Xeon, two cores; float32 steps, whose
oneDNN products do not allocate so, level). int8's memory, at 0.43x the
reference's, has room for the heaps. So a process chooses by its model before its
first thread allocates (`choose_arenas`, called by process.py's `prepare_process`):
glibc fixes the limit once a thread other than the main one has allocated under it,
and a loader thread that allocated before it kept a heap of its own (float32's peak
766 MB against 729-734 when the choice came at the model's load).

MKL, whose products PyTorch's attention calls, keeps each thread's work buffers for
the thread's next product and never gives them back: at a float32 server's peak
they held 37 MB (heaptrack: 21 MB on FlowLM's thread, 16 MB on its OpenMP worker).
With MKL_DISABLE_FAST_MM set, each product takes its buffers from the C heap and
frees them, and the threads share that free space. Measured with the standard
model and three voices (Intel Xeon, two cores), processes with and without
alternating: peak memory 712-722 against 733-738 MB (four pairs), a paragraph's
speed level (3.45-3.60x against 3.46-3.55x real time). With int8 FlowLM (a heap
per thread) memory and speed were level, and a voice took 312-335 against 268-277
ms to encode (float32 level), a cost paid once per voice. MKL reads the setting as
PyTorch loads it: a command sets it before anything imports torch
(`use_transient_blas_buffers`, called by process.py's `prepare_process`).

FlowLM reads all its weights, hundreds of MB, for every frame. In 4 kB pages that
is one page-table walk for every 4 kB read, more pages than any CPU's TLB holds;
in the 2 MB pages Linux can give (transparent huge pages) it is one per 2 MB.
PyTorch puts its tensors of 2 MB and more in such pages when THP_MEM_ALLOC_ENABLE
is set (it aligns them and asks the kernel with madvise), which covers the
float32 transformer's weights as laid out for oneDNN. Measured on an AMD EPYC (2
cores, AVX2), processes with and without alternating: a float32 FlowLM step 21.7
against 22.5 ms (best of three rounds, median of eight processes; faster in seven
of eight; with all the process's memory collapsed into 2 MB pages after loading,
20.5 against 21.7, five of five); a float32 paragraph as served 2.53x against 2.46x
real time (medians of ten processes each, ahead in six pairs of ten: the machine's
spread is wider than the gain); peak memory with three voices and a paragraph
740-747 against 711-735 MB (three processes each; int8 level). The int8 weights
are fbgemm's, allocated outside PyTorch's allocator: they stay in 4 kB pages
(collapsing them into 2 MB ones after loading, with MADV_COLLAPSE, made the int8
step no faster: slower in six processes of eight).
"""

from __future__ import annotations

import ctypes
import logging
import os

_LOGGER = logging.getLogger(__name__)

M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h
HUGE_PAGES_VARIABLE = "THP_MEM_ALLOC_ENABLE"
MKL_BUFFERS_VARIABLE = "MKL_DISABLE_FAST_MM"


def choose_arenas(quantized: bool) -> None:
    """One arena for a process serving a float32 model, one per thread for int8
    FlowLM (see the module docstring). Call before any thread but the main one has
    allocated: first thing in a command's `main`."""
    if not quantized:
        use_one_arena()


def use_one_arena() -> None:
    """Limit glibc to one arena for the threads that allocate from now on (glibc fixes
    its limit once more than eight arenas exist, or at the first thread after this).

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


def return_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`).

    Loading makes float32 copies of weights a file stores narrower, for the moment a
    faster form is made from them (see model/pocket_tts.py), and frees them: glibc keeps such
    space for the process's next allocations. Without a C library that trims, nothing.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return
    trim.argtypes = (ctypes.c_size_t,)
    trim(0)
