"""Long time slices for synthesis threads, so that every other thread preempts them.

Linux's scheduler since 6.6 (EEVDF) lets a running thread finish its time slice,
about 0.7 ms times (1 + log2 of the cores), 1.4 ms on two, before a thread that
wakes up gets its core, unless the woken thread's slice is the shorter one (from
6.12, a thread may ask for its own slice with sched_setattr). Between frames the
synthesis threads keep every core busy, so each wake-up that carries audio to a
listener, the server's event loop with a frame to send and then the client that
reads it, would wait for a slice to end. With the synthesis threads on longer
slices than anyone else's, a woken thread runs at once and a synthesis thread
waits instead, for a fraction of a millisecond: audio reaches the listener sooner,
and synthesis is no slower.

A thread started by one with a long slice inherits it, so OpenMP's workers of a
synthesis thread have it too. Among themselves the slice changes little: the
worker never runs more synthesis threads than cores. Kernels before 6.12 take the
request and ignore it; where it is refused (a seccomp filter, another OS), threads
keep the default.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading

_LOGGER = logging.getLogger(__name__)

#: Longer than any default slice (0.7 ms x (1 + log2 cores), 2.8 ms from 8 cores on),
#: short enough that a synthesis thread waiting for another is no worry.
SYNTHESIS_TIME_SLICE_NS = 8_000_000

# sched_setattr's system call numbers (glibc has no wrapper).
_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}
_FAIR_POLICIES = (getattr(os, "SCHED_OTHER", 0), getattr(os, "SCHED_BATCH", 3))


class _SchedAttr(ctypes.Structure):
    """Linux's `struct sched_attr`, its first version (48 bytes)."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),  # for the fair policies: the slice asked for
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
    ]


def use_long_time_slices(slice_ns: int = SYNTHESIS_TIME_SLICE_NS) -> bool:
    """Ask for `slice_ns` slices for the calling thread and the threads it will start.

    Its policy and nice value stay as they are; a thread under a real-time policy
    (someone's `chrt`) or SCHED_IDLE is left alone. True if the kernel took the request.
    """
    number = _SCHED_SETATTR.get(os.uname().machine)
    if number is None or not hasattr(os, "sched_getscheduler"):
        return False
    thread_id = threading.get_native_id()
    try:
        policy = os.sched_getscheduler(thread_id)
        if policy not in _FAIR_POLICIES:
            return False
        attr = _SchedAttr(
            size=ctypes.sizeof(_SchedAttr),
            sched_policy=policy,
            sched_nice=os.getpriority(os.PRIO_PROCESS, thread_id),
            sched_runtime=slice_ns,
        )
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(number, thread_id, ctypes.byref(attr), 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except OSError as error:
        _LOGGER.debug("this thread keeps the default time slice: %s", error)
        return False
    return True
