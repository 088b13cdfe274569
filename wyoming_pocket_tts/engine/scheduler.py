"""One worker thread that advances every active synthesis one frame at a time.

Requests take turns frame by frame (round-robin), so a short answer is never stuck
behind a long one, and model code never runs on the caller's thread (for the
server: never on the event loop). A job whose consumer has not taken its frames is
skipped until it has, so a slow reader cannot make the server buffer unbounded
audio; a cancelled job is dropped before its next frame.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from .synthesizer import GenerationOptions, Synthesizer, Utterance
from .voice import VoiceState

_LOGGER = logging.getLogger(__name__)


class SynthesisJob:
    """The consumer's handle on one utterance being synthesized by the worker."""

    def __init__(self, utterance: Utterance, on_ready: Callable[[], None]):
        self._utterance = utterance
        self._on_ready = on_ready
        self._frames: deque[np.ndarray] = deque()
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self.done = False
        self.error: Exception | None = None
        self.submitted_at = time.monotonic()
        self.first_audio_at: float | None = None
        self.finished_at: float | None = None
        self.samples = 0

    def take(self) -> list[np.ndarray]:
        """All frames produced since the last call (possibly none); never blocks."""
        with self._lock:
            frames = list(self._frames)
            self._frames.clear()
        return frames

    def cancel(self) -> None:
        """Stop before the next frame (e.g. the client went away)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def buffered(self) -> int:
        with self._lock:
            return len(self._frames)

    def _push(self, frame: np.ndarray) -> None:
        if self.first_audio_at is None:
            self.first_audio_at = time.monotonic()
        self.samples += frame.shape[0]
        with self._lock:
            self._frames.append(frame)
        self._notify()

    def _finish(self, error: Exception | None = None) -> None:
        self._utterance.close()
        self.error = error
        self.finished_at = time.monotonic()
        self.done = True
        self._notify()

    def _notify(self) -> None:
        try:
            self._on_ready()
        except Exception:  # a consumer that is gone (closed loop) must not stop the worker
            _LOGGER.debug("on_ready callback failed", exc_info=True)


class SynthesisWorker:
    """Round-robin scheduler over all submitted jobs, on one background thread."""

    def __init__(self, synthesizer: Synthesizer, max_buffered_frames: int = 8):
        self.synthesizer = synthesizer
        self.max_buffered_frames = max_buffered_frames
        self._jobs: deque[SynthesisJob] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="synthesis-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()

    def submit(
        self, voice: VoiceState, text: str, options: GenerationOptions,
        on_ready: Callable[[], None],
    ) -> SynthesisJob:
        """Queue a text; raises EngineError at once for text or a voice that cannot work."""
        job = SynthesisJob(self.synthesizer.start(voice, text, options), on_ready)
        with self._wake:
            self._jobs.append(job)
            self._wake.notify()
        return job

    def wake(self) -> None:
        """Call after taking frames from a job that was full, so the worker resumes it."""
        with self._wake:
            self._wake.notify()

    @property
    def active_jobs(self) -> int:
        with self._wake:
            return len(self._jobs)

    def _next_runnable(self) -> SynthesisJob | None:
        """Rotate through the jobs; drop cancelled ones; skip those whose reader lags."""
        with self._wake:
            while not self._closing:
                for _ in range(len(self._jobs)):
                    job = self._jobs.popleft()
                    if job.cancelled:
                        job._finish()
                        continue
                    self._jobs.append(job)
                    if job.buffered < self.max_buffered_frames:
                        return job
                # Nothing to do: wait for a submission, a cancellation or a reader.
                self._wake.wait(timeout=0.05)
            return None

    def _run(self) -> None:
        while (job := self._next_runnable()) is not None:
            try:
                frame = job._utterance.next_frame()
            except Exception as error:  # report to the one request; keep serving others
                _LOGGER.exception("synthesis failed")
                self._remove(job)
                job._finish(error)
                continue
            if frame is None:
                self._remove(job)
                job._finish()
            else:
                job._push(frame)
        with self._wake:
            for job in self._jobs:
                job._finish()
            self._jobs.clear()

    def _remove(self, job: SynthesisJob) -> None:
        with self._wake:
            if job in self._jobs:
                self._jobs.remove(job)
