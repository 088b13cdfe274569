"""The last few requests the server spoke, for the voice studio's page.

Each request already gets one log line (server/report.py); the same figures go here,
in a small ring buffer that forgets the oldest, so the page can show them without
reading logs. The server makes one and hands it to the Wyoming handlers and the
studio; only the event loop thread writes and reads it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

#: Requests remembered: enough for a screenful.
CAPACITY = 20


@dataclass(frozen=True)
class RequestRecord:
    kind: str  # "synthesize", "stream" or "preview"
    voice: str
    chars: int
    audio_seconds: float
    first_audio_seconds: float | None  # None: no audio was made
    busy_seconds: float
    finished_at: float  # seconds since the epoch

    @property
    def speed(self) -> float | None:
        """Seconds of audio made per second spent making it (above 1: faster than real time)."""
        return self.audio_seconds / self.busy_seconds if self.busy_seconds > 0 else None

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "speed": self.speed}


class RecentRequests:
    """The last `capacity` requests, spoken by the Wyoming handlers or previewed."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=capacity)

    def add(
        self, kind: str, voice: str, chars: int, audio_seconds: float,
        first_audio_seconds: float | None, busy_seconds: float,
    ) -> None:
        self._records.append(RequestRecord(
            kind, voice, chars, audio_seconds, first_audio_seconds, busy_seconds, time.time()
        ))

    def newest_first(self) -> list[RequestRecord]:
        return list(reversed(self._records))

