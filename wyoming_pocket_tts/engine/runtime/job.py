"""One utterance being synthesized by the worker: the consumer's handle on it.

The consumer takes audio (`take`, `frames`), says when it has passed it on, and may
cancel. The worker, on its threads, counts the latents it makes (`frame_made`),
delivers audio (`deliver`) and ends the job (`finish`); everything either side reads
of the other goes through these methods, under the job's own lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np

_LOGGER = logging.getLogger(__name__)


class SynthesisJob:
    """The consumer's handle on one utterance being synthesized by the worker."""

    def __init__(
        self, on_ready: Callable[[], None] | None = None,
        resume_worker: Callable[[], None] | None = None,
    ):
        self._on_ready = on_ready
        self._resume_worker = resume_worker  # a job with a full backlog waits for take()
        self._frames: deque[np.ndarray] = deque()
        self._changed = threading.Condition()
        self._cancelled = threading.Event()
        self._passed_on = threading.Event()  # the consumer has passed audio on
        self._in_decoder = 0  # latents made, not yet audio
        self.done = False
        self.error: Exception | None = None
        self.submitted_at = time.monotonic()
        self.first_audio_at: float | None = None
        self.finished_at: float | None = None
        self.samples = 0

    # -- the consumer's side --------------------------------------------------------

    def take(self) -> list[np.ndarray]:
        """All audio frames produced since the last call (possibly none); never blocks.

        Taking frames makes room in the job's backlog, so the worker is woken: a job it
        skipped as full goes on at once, not after its idle recheck.
        """
        with self._changed:
            frames = list(self._frames)
            self._frames.clear()
        if frames and self._resume_worker is not None:
            self._resume_worker()
        return frames

    def passed_on(self) -> None:
        """Say that the frames taken have gone on (the server: written to its socket).

        After a job's first frame the worker holds its next step until then (a few
        milliseconds at most), so that the consumer has Python's lock to itself meanwhile.
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

    # -- the worker's side ----------------------------------------------------------

    @property
    def backlog(self) -> int:
        """Frames made and not yet taken by the consumer, decoded or not."""
        with self._changed:
            return len(self._frames) + self._in_decoder

    def lead(self, sample_rate: int, now: float) -> float:
        """Seconds of audio the listener has in hand at `now`, if playing since the first frame."""
        if self.first_audio_at is None:
            return 0.0
        return self.samples / sample_rate - (now - self.first_audio_at)

    def frame_made(self, count: int = 1) -> None:
        """Latents of this job went to be decoded: they count against its backlog."""
        with self._changed:
            self._in_decoder += count

    def frames_dropped(self, count: int) -> None:
        """Latents `frame_made` counted will never be audio (the job was cancelled)."""
        self.frame_made(-count)

    def deliver(self, frames: list[np.ndarray]) -> None:
        """Hand out the audio of latents `frame_made` counted, in order."""
        if self.first_audio_at is None:
            self.first_audio_at = time.monotonic()
        with self._changed:
            self._frames.extend(frames)
            self._in_decoder -= len(frames)
            self.samples += sum(frame.shape[0] for frame in frames)
            self._changed.notify_all()
        self._notify()

    def wait_passed_on(self, timeout: float) -> None:
        """Wait (`timeout` at most) until the consumer has passed its audio on."""
        self._passed_on.wait(timeout)

    def finish(self, error: Exception | None = None) -> None:
        """End the job, with `error` if it failed; once only, later calls are ignored."""
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
