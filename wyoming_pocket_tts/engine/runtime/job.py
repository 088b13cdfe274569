"""The consumer's handle on one utterance being synthesized by the worker."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np

from .synthesizer import Utterance

_LOGGER = logging.getLogger(__name__)


class SynthesisJob:
    """The consumer's handle on one utterance being synthesized by the worker."""

    def __init__(
        self, utterance: Utterance, on_ready: Callable[[], None] | None,
        resume_worker: Callable[[], None] | None = None,
    ):
        self._utterance = utterance
        self._on_ready = on_ready
        self._resume_worker = resume_worker  # a job with a full backlog waits for take()
        self._frames: deque[np.ndarray] = deque()
        self._changed = threading.Condition()
        self._cancelled = threading.Event()
        self._passed_on = threading.Event()  # the consumer has passed audio on
        self._in_decoder = 0  # latents handed to the decoder, not yet audio
        self.done = False
        self.error: Exception | None = None
        self.submitted_at = time.monotonic()
        self.first_audio_at: float | None = None
        self.finished_at: float | None = None
        self.samples = 0

    def take(self) -> list[np.ndarray]:
        """All audio frames produced since the last call (possibly none); never blocks.

        Taking frames makes room in the job's backlog, so the worker is woken: a job it
        skipped as full goes on at once. (Readers that did not wake it waited for the
        worker's idle recheck: four paragraphs read by `frames()` stalled for 50 ms
        some twenty times in 12 s, with Mimi's thread idle meanwhile.)
        """
        with self._changed:
            frames = list(self._frames)
            self._frames.clear()
        if frames and self._resume_worker is not None:
            self._resume_worker()
        return frames

    def passed_on(self) -> None:
        """Say that the frames taken have gone on (the server: written to its socket).

        After a job's first frame the worker holds its next step until then
        (`FIRST_FRAME_HANDOVER_S` at most), so that the consumer has Python's lock to
        itself meanwhile.
        """
        self._passed_on.set()

    def frames(self) -> Iterator[np.ndarray]:
        """Blocking iteration over the audio (for threads); raises the job's error, if any."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._frames or self.done)
            frames = self.take()
            yield from frames
            self.passed_on()  # the caller is back for more
            if not frames and self.done:
                if self.error is not None:
                    raise self.error
                return

    def cancel(self) -> None:
        """Stop before the next frame (e.g. the client went away)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _backlog(self) -> int:
        with self._changed:
            return len(self._frames) + self._in_decoder

    def _awaits_first_frame(self) -> bool:
        """Nobody has heard this job and none of its frames is made: its text prompt is next."""
        return self.first_audio_at is None and self._backlog() == 0

    def _lead(self, sample_rate: int) -> float:
        """Seconds of audio this job's listener has in hand, if playing since the first frame."""
        if self.first_audio_at is None:
            return 0.0
        return self.samples / sample_rate - (time.monotonic() - self.first_audio_at)

    def _hand_over_frame(self) -> None:
        """A latent of this job goes to be decoded: it counts against the backlog."""
        with self._changed:
            self._in_decoder += 1

    def _push(self, frames: list[np.ndarray]) -> None:
        if self.first_audio_at is None:
            self.first_audio_at = time.monotonic()
        with self._changed:
            self._frames.extend(frames)
            self._in_decoder -= len(frames)
            self.samples += sum(frame.shape[0] for frame in frames)
            self._changed.notify_all()
        self._notify()

    def _finish(self, error: Exception | None = None) -> None:
        with self._changed:
            if self.done:
                return
            self.error = error
            self.finished_at = time.monotonic()
            self.done = True
            self._changed.notify_all()
        self._notify()

    def _notify(self) -> None:
        if self._on_ready is None:
            return
        try:
            self._on_ready()
        except Exception:  # a consumer that is gone (closed loop) must not stop the worker
            _LOGGER.debug("on_ready callback failed", exc_info=True)
