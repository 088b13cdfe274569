"""A job's audio on an event loop (`FrameStream`): every frame in order, an early end
that stops the worker's job, and the job's error where it failed."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.support.contention import SetContention
from tests.support.waiting import wait_until
from wyoming_pocket_tts.engine.errors import EngineError
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.streaming import FrameStream
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

OPTIONS = GenerationOptions(temperature=0.0, max_frames_per_chunk=12)
TEXT = "The front door is locked. The garage is closed."


@pytest.fixture
def worker(model):
    with SynthesisWorker(Synthesizer(model), contention=SetContention(busy=False)) as worker:
        yield worker


async def _all_frames(worker, voice, text: str = TEXT) -> list[np.ndarray]:
    frames: list[np.ndarray] = []
    async with FrameStream(worker, voice, text, OPTIONS) as stream:
        async for batch in stream:
            assert batch, "an iteration gives at least one frame"
            frames.extend(batch)
    return frames


def test_the_stream_gives_the_same_audio_as_the_synthesizer_alone(model, voice, worker):
    expected = np.concatenate(list(Synthesizer(model).stream(voice, TEXT, OPTIONS)))
    frames = asyncio.run(_all_frames(worker, voice))
    np.testing.assert_allclose(np.concatenate(frames), expected, atol=1e-4, rtol=0)


def test_stop_ends_the_iteration_and_the_workers_job(voice, worker):
    async def scenario():
        long_text = " ".join([TEXT] * 8)
        async with FrameStream(worker, voice, long_text, OPTIONS) as stream:
            heard = 0
            async for batch in stream:
                heard += len(batch)
                stream.stop()
            return stream, heard

    stream, heard = asyncio.run(scenario())
    assert heard > 0 and stream.stopped and stream.job.cancelled
    wait_until(lambda: worker.active_jobs == 0, timeout=30)


def test_a_cancelled_listener_cancels_the_job(voice, worker):
    async def scenario():
        first = asyncio.Event()
        streams = []

        async def listen():
            async with FrameStream(worker, voice, " ".join([TEXT] * 8), OPTIONS) as stream:
                streams.append(stream)
                async for _ in stream:
                    first.set()

        task = asyncio.create_task(listen())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return streams[0]

    stream = asyncio.run(scenario())
    assert stream.job.cancelled
    wait_until(lambda: worker.active_jobs == 0, timeout=30)


def test_a_failed_job_raises_its_error_after_its_audio(model, voice, worker, monkeypatch):
    """The synthesis fails after some frames: the iteration gives them, then raises."""
    steps = 0
    advance = worker.synthesizer.advance

    def failing_advance(utterances, threads=None):
        nonlocal steps
        steps += 1
        if steps > 4:
            raise RuntimeError("a broken voice")
        return advance(utterances, threads)

    monkeypatch.setattr(worker.synthesizer, "advance", failing_advance)

    async def scenario():
        frames = 0
        with pytest.raises(EngineError, match="a broken voice"):
            async with FrameStream(worker, voice, TEXT, OPTIONS) as stream:
                async for batch in stream:
                    frames += len(batch)
        return frames

    assert asyncio.run(scenario()) > 0


def test_a_text_that_cannot_work_raises_on_entry(voice, worker):
    async def scenario():
        async with FrameStream(worker, voice, "   ", OPTIONS):
            pass

    with pytest.raises(Exception, match="empty"):
        asyncio.run(scenario())
