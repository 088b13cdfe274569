"""Whether other programs want the cores this process runs on.

Splitting an operator across cores pays only while every core is ours: its threads
meet at a barrier hundreds of times a frame, and once a neighbour holds one of the
cores, each barrier waits for the preempted thread's next turn (a scheduler slice,
milliseconds), so synthesis slows many-fold instead of by the share it lost. The
worker asks this monitor before each round and, while the cores are contended, runs
every operator on one thread, FlowLM and Mimi side by side.

The signal is the busy time of our cores (Linux's /proc/stat, steal time included:
a hypervisor's other guests are neighbours too) less this process's own CPU time,
both over the same interval. Linux's pressure-stall information would not do: it
also counts our own threads waiting for each other's cores.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# Columns of a /proc/stat cpu line that are busy time: user, nice, system, (not idle,
# iowait), irq, softirq, steal. Guest time is counted in user already.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


class Contention(Protocol):
    """Tells whether other programs use our cores now (`CoreContention`)."""

    def contended(self) -> bool: ...


@dataclass(frozen=True)
class ContentionThresholds:
    """When the cores count as contended, and when as free again.

    A neighbour using `busy_cores` of our cores over one `interval_s` is contention
    at once; the cores are free again once others used under `free_cores` for
    `free_after_s` (a neighbour that rests for a moment has not left).
    """

    busy_cores: float = 0.25
    free_cores: float = 0.1
    interval_s: float = 0.25
    free_after_s: float = 2.0


class CoreContention:
    """Samples how busy other programs keep our cores; `contended()` says the verdict.

    Cheap to ask often, from any thread: it reads /proc/stat at most once an interval.
    Where there is no /proc/stat (not Linux), the cores are never contended.
    """

    def __init__(
        self,
        thresholds: ContentionThresholds = ContentionThresholds(),
        cores: set[int] | None = None,
        stat_path: Path = Path("/proc/stat"),
        own_cpu_seconds: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.thresholds = thresholds
        if cores is None:  # not Linux: no affinity, and no /proc/stat either
            cores = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
        self._cores = cores
        self._stat_path = stat_path
        self._own_cpu_seconds = own_cpu_seconds
        self._clock = clock
        self._tick_s = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
        self._contended = False
        self._free_since: float | None = None
        self.others_cores = 0.0  # cores others used over the last interval
        self._lock = threading.Lock()
        self._last = self._sample()

    def contended(self) -> bool:
        """Whether other programs use our cores now (sampled once an interval)."""
        if self._last is None:
            return False
        with self._lock:
            now = self._clock()
            if now - self._last[0] >= self.thresholds.interval_s:
                self._update(now)
            return self._contended

    def _update(self, now: float) -> None:
        sample = self._sample()
        if sample is None or self._last is None:
            return
        (before, busy_before, own_before), (after, busy_after, own_after) = self._last, sample
        self._last = sample
        elapsed = after - before
        if elapsed <= 0:
            return
        others = max(0.0, (busy_after - busy_before) - (own_after - own_before)) / elapsed
        self.others_cores = others
        if others >= self.thresholds.busy_cores:
            self._contended, self._free_since = True, None
        elif others < self.thresholds.free_cores and self._contended:
            self._free_since = self._free_since if self._free_since is not None else before
            if now - self._free_since >= self.thresholds.free_after_s:
                self._contended, self._free_since = False, None
        else:
            self._free_since = None

    def _sample(self) -> tuple[float, float, float] | None:
        """(time, busy seconds of our cores, this process's CPU seconds); None if unread."""
        try:
            text = self._stat_path.read_text()
        except OSError:
            return None
        busy_ticks = 0
        for line in text.splitlines():
            name, _, values = line.partition(" ")
            if not name.startswith("cpu") or name == "cpu":
                continue
            try:
                core = int(name[3:])
            except ValueError:
                continue
            if core in self._cores:
                columns = values.split()
                busy_ticks += sum(int(columns[i]) for i in _BUSY_COLUMNS if i < len(columns))
        return self._clock(), busy_ticks * self._tick_s, self._own_cpu_seconds()
