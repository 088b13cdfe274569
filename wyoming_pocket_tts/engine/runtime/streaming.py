"""A job's audio on an event loop: the one way an asyncio caller consumes frames.

The worker makes frames on its threads and wakes the loop through the job's callback;
the loop only passes them on. Leaving the iteration early (the client went away, the
caller stopped it, or its task was cancelled) cancels the job, so the worker drops it
before its next frame. Imports no torch: the server imports it before the process
is set up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Protocol

import numpy as np

from ..tempo import TempoStream
from .options import DEFAULT_OPTIONS, GenerationOptions

_LOGGER = logging.getLogger(__name__)


class Job(Protocol):
    """What a stream needs of a job (`job.SynthesisJob`)."""

    @property
    def done(self) -> bool: ...

    @property
    def error(self) -> Exception | None: ...

    def take(self) -> list[np.ndarray]: ...

    def passed_on(self) -> None: ...

    def cancel(self) -> None: ...


class Worker(Protocol):
    """What a stream needs of the worker (`worker.SynthesisWorker`); `voice` is the
    engine's voice state and `synthesizer` the model's (None: the worker's own), whose
    modules the server does not import."""

    def submit(
        self, voice: Any, text: str, options: GenerationOptions, on_ready: Callable[[], None],
        synthesizer: Any = None,
    ) -> Job: ...


class FrameStream:
    """`async with FrameStream(worker, voice, text) as stream: async for frames in stream`.

    Each iteration gives the frames decoded since the last one (at least one). The
    iteration ends at the job's end, raising the job's error if it failed, or early
    once `stop()` is called (then without the error). The frames of one iteration
    count as passed on when the caller comes back for more: after a first frame, the
    worker holds its next step until then, a few milliseconds at most.
    """

    def __init__(
        self, worker: Worker, voice: Any, text: str,
        options: GenerationOptions = DEFAULT_OPTIONS, name: str = "synthesis",
        synthesizer: Any = None, speed: float = 1.0, sample_rate: int = 24000,
    ) -> None:
        self._worker, self._voice, self._text, self._options = worker, voice, text, options
        self._synthesizer = synthesizer
        # Another speaking rate than the model's: frames are time-scaled as they come.
        self._tempo = None if speed == 1.0 else TempoStream(speed, sample_rate)
        self._name = name  # who it is for, in log lines
        self._ready = asyncio.Event()
        # The job once stopped before its end, until the worker has dropped it. Only then
        # does the wake-up refer to the job, which holds the wake-up: a cycle of
        # references would keep both for the garbage collector.
        self._abandoned: list[Job] = []
        self._job: Job | None = None
        self._stopped = False
        self._handed_out = False  # frames were given out and not yet marked passed on

    async def __aenter__(self) -> FrameStream:
        loop = asyncio.get_running_loop()
        ready, abandoned, name = self._ready, self._abandoned, self._name

        def wake() -> None:  # called on the worker's threads
            try:
                loop.call_soon_threadsafe(woken)
            except RuntimeError:  # the loop is closed: the server is shutting down
                pass

        def woken() -> None:
            ready.set()
            if abandoned and abandoned[0].done:  # said once: a job ends once
                _LOGGER.debug("%s: the worker has dropped the cancelled synthesis", name)
                abandoned.clear()

        # Raises at once for a text or voice that cannot work.
        self._job = self._worker.submit(
            self._voice, self._text, self._options, wake, synthesizer=self._synthesizer
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        job = self.job
        if not job.done:
            self._abandoned.append(job)
        job.cancel()  # a no-op when finished

    @property
    def job(self) -> Job:
        if self._job is None:
            raise RuntimeError("a FrameStream is used inside `async with`")
        return self._job

    def stop(self) -> None:
        """End the iteration at its next wake-up, without the job's error; from the loop."""
        self._stopped = True
        self.job.cancel()
        self._ready.set()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def _at_speed(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        if self._tempo is None or not frames:
            return frames
        scaled = [self._tempo.push(frame) for frame in frames]
        return [frame for frame in scaled if len(frame)]

    def __aiter__(self) -> AsyncIterator[list[np.ndarray]]:
        return self

    async def __anext__(self) -> list[np.ndarray]:
        job = self.job
        if self._handed_out:
            self._handed_out = False
            job.passed_on()
        while not self._stopped:
            finished = job.done  # read before take(): frames precede `done`
            frames = self._at_speed(job.take())
            if frames:
                self._handed_out = True
                return frames
            if finished:
                if job.error is not None:
                    raise job.error
                rest = self._tempo.flush() if self._tempo is not None else None
                self._tempo = None
                if rest is not None and len(rest):
                    return [rest]
                break
            await self._ready.wait()  # the worker's next delivery, its end, or stop()
            self._ready.clear()
        raise StopAsyncIteration
