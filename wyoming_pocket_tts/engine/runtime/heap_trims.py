"""When the synthesis worker gives the C heap's free pages back to the system.

Requests of different lengths free buffers of sizes the next ones do not reuse
exactly, and glibc keeps that free space resident: a server that lives for months
would carry the highest water mark of its busiest moment, and under sustained load
the free space would creep up with the requests served. Trimming (`malloc_trim`)
returns it, at the price of a few milliseconds and of faulting the pages in again
when they are next used, so it waits for moments nobody hears:

* once the worker has been idle for `idle_after` seconds: a conversation's next
  answer often follows within a second, and would fault those pages in again;
* while it stays busy, every `busy_every` seconds, never in a busy spell's first
  seconds: a short answer is never held up, a long or sustained load is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

IDLE_TRIM_S = 2.0
BUSY_TRIM_S = 5.0


@dataclass
class HeapTrimSchedule:
    """Says when a trim is due, given the time and whether the worker holds any work."""

    idle_after: float = IDLE_TRIM_S
    busy_every: float = BUSY_TRIM_S
    _busy: bool = field(default=False, init=False)
    _since: float = field(default=-math.inf, init=False)  # the spell's start or last trim
    _trimmed: bool = field(default=True, init=False)  # this idle spell's trim is done

    def due(self, now: float, busy: bool) -> bool:
        """Whether to trim now; a True is acted on (the next trim counts from it)."""
        if busy != self._busy:  # a new spell: busy ones trim later, idle ones once
            self._busy, self._since = busy, now
            if not busy:
                self._trimmed = False
            return False
        if busy and now - self._since >= self.busy_every:
            self._since = now
            return True
        if not busy and not self._trimmed and now - self._since >= self.idle_after:
            self._trimmed = True
            return True
        return False
