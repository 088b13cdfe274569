"""The one INFO line each request gets: voice, characters, time to first audio, speed.

A request is logged however it ends (spoken, cut short, failed), and a player that
had to wait for audio gets a WARNING that says so, since an audible stall is what a
user will ask about. The same figures go to the recent requests the studio shows.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ..recent import RecentRequests

_LOGGER = logging.getLogger(__name__)

#: A player that had to wait this long for the next chunk stalled audibly: said at WARNING.
LATE_WARNING_SECONDS = 0.25


@dataclass
class RequestReport:
    """Figures for the one INFO line each request gets."""

    kind: str
    voice: str
    loop: asyncio.AbstractEventLoop
    received: float
    chars: int = 0
    samples: int = 0
    busy: float = 0.0  # seconds spent speaking (not waiting for streamed text)
    first_audio: float | None = None
    #: The longest wait for a chunk of a player that starts each audio stream with its
    #: first chunk: 0 while synthesis keeps ahead of playback.
    late: float = 0.0
    #: Why the request ended before its end ("" when it did not).
    cut_short: str = ""

    def end(self, reason: str) -> None:
        self.cut_short = self.cut_short or reason

    def log(self, sample_rate: int, quantized: bool, recent: RecentRequests | None) -> None:
        """The request's INFO line (and a WARNING if its audio came late); remembered
        in `recent` for the voice studio's page."""
        audio_seconds = self.samples / sample_rate
        waited = None if self.first_audio is None else self.first_audio - self.received
        first = "-" if waited is None else f"{waited:.3f} s"
        if recent is not None:
            recent.add(self.kind, self.voice, self.chars, audio_seconds, waited, self.busy)
        rtf = f"{self.busy / audio_seconds:.2f}" if audio_seconds else "-"
        _LOGGER.info(
            "%s: voice=%s chars=%d audio=%.2f s first_audio=%s rtf=%s late=%.2f s%s",
            self.kind,
            self.voice,
            self.chars,
            audio_seconds,
            first,
            rtf,
            self.late,
            f" ({self.cut_short})" if self.cut_short else "",
        )
        if self.late >= LATE_WARNING_SECONDS:
            _LOGGER.warning(
                "%s: the audio reached the client up to %.2f s after playback needed it: "
                "this CPU did not speak the requests at hand in real time%s",
                self.kind,
                self.late,
                "" if quantized else "; --quantize speaks about twice as fast",
            )
