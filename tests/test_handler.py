"""The connection handler in this process, where the jobs it submits can be seen and paced.

The server tests (test_server.py) watch a server process from outside. A client that
goes away stops costing CPU there either way: nobody takes its frames, so the worker
pauses its job. Whether the job was cancelled, and left the worker, shows only in here,
beside a real worker; how the request's log reports audio that comes later than
playback needs it, beside a worker whose frames come when the test says.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from functools import partial

import numpy as np
import pytest
from wyoming.audio import AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Info
from wyoming.tts import Synthesize

from tests.support.instant import StoreSpeakers, instant_handler
from wyoming_pocket_tts.engine.errors import TextError
from wyoming_pocket_tts.engine.runtime import worker as worker_module
from wyoming_pocket_tts.engine.runtime.job import SynthesisJob
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker
from wyoming_pocket_tts.server.handler import HandlerSettings, PocketTTSEventHandler
from wyoming_pocket_tts.voices.store import VoiceKind, VoiceSource, VoiceStore

LONG_TEXT = "The quick brown fox jumps over the lazy dog. " * 3  # hundreds of frames, no EOS


class RecordingWorker:
    """The real worker, keeping each job it was given for the test to look at."""

    def __init__(self, worker: SynthesisWorker):
        self.worker = worker
        self.jobs: list[SynthesisJob] = []

    def submit(self, *args, **kwargs):
        job = self.worker.submit(*args, **kwargs)
        self.jobs.append(job)
        return job


async def _until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def _handler_beside(worker, voice, sample_rate: int = 24000, options=None, quantized=False):
    """A handler factory beside `worker`, with one voice, `test`, loaded as `voice`."""
    source = VoiceSource(name="test", path=None, kind=VoiceKind.STATE, description="test voice")
    voices = VoiceStore(
        sources=lambda: {"test": source}, load=lambda _: voice, default_voice="test", max_loaded=1
    )
    return partial(
        PocketTTSEventHandler, info=Info, speakers=StoreSpeakers(voices), worker=worker,
        settings=HandlerSettings(sample_rate=sample_rate, options=options, quantized=quantized),
    )


async def _ask_and_hang_up(port: int, events: int | None) -> None:
    """Ask for a long text and hang up after `events` events (None: after its AudioStop)."""
    client = AsyncTcpClient("127.0.0.1", port)
    await client.connect()
    await client.write_event(Synthesize(text=LONG_TEXT).event())
    heard = 0
    while True:
        event = await client.read_event()
        assert event is not None
        heard += 1
        if heard == events or (events is None and AudioStop.is_type(event.type)):
            break
    await client.disconnect()


def test_a_client_that_disconnects_has_its_job_cancelled(model, voice):
    worker = SynthesisWorker(Synthesizer(model))
    recording = RecordingWorker(worker)
    handler = _handler_beside(recording, voice, model.sample_rate, GenerationOptions())

    async def scenario() -> None:
        async def serve(reader, writer):
            await handler(reader, writer).run()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            await _ask_and_hang_up(port, 3)  # AudioStart and the first chunks
            await _until(lambda: recording.jobs and recording.jobs[0].cancelled)
            await _until(lambda: worker.active_jobs == 0)
        finally:
            server.close()
            await server.wait_closed()

    worker.start()
    try:
        asyncio.run(scenario())
    finally:
        worker.close()


@pytest.mark.parametrize("hang_up", [False, True], ids=["heard to the end", "hung up"])
def test_a_finished_connection_is_freed_without_the_garbage_collector(
    model, voice, hang_up
) -> None:
    """Reference counting alone frees a connection's handler and its job once it ends,
    however it ends: a job holds a stream's decoder state, and waiting for a full
    collection would keep megabytes of it for each connection an idle server served."""
    worker = SynthesisWorker(Synthesizer(model))
    left: list[weakref.ref] = []

    class WatchedWorker:
        def submit(self, *args, **kwargs):
            job = worker.submit(*args, **kwargs)
            left.append(weakref.ref(job))
            return job

    handler = _handler_beside(
        WatchedWorker(), voice, model.sample_rate, GenerationOptions(max_frames_per_chunk=12)
    )

    async def scenario() -> None:
        async def serve(reader, writer):
            connection = handler(reader, writer)
            left.append(weakref.ref(connection))
            await connection.run()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            await _ask_and_hang_up(port, 1 if hang_up else None)
            await _until(lambda: worker.active_jobs == 0 and len(left) == 2)
            deadline = time.monotonic() + 5  # the server's side may still be closing
            while (survivors := [type(ref()).__name__ for ref in left if ref() is not None]):
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.01)
            assert survivors == []
        finally:
            server.close()
            await server.wait_closed()

    gc.collect()
    gc.disable()
    worker.start()
    try:
        asyncio.run(scenario())
    finally:
        gc.enable()
        worker.close()


class PacedJob:
    """Frames that come when a test says, from a thread of their own."""

    def __init__(self, frames: list[np.ndarray], delays: list[float], on_ready):
        self.done = False
        self.error = None
        self._ready: list[np.ndarray] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._produce, args=(frames, delays, on_ready))
        self._thread.start()

    def _produce(self, frames, delays, on_ready) -> None:
        for frame, delay in zip(frames, delays, strict=True):
            time.sleep(delay)
            with self._lock:
                self._ready.append(frame)
            on_ready()
        self.done = True
        on_ready()

    def take(self) -> list[np.ndarray]:
        with self._lock:
            frames, self._ready = self._ready, []
        return frames

    def passed_on(self) -> None:
        pass

    def cancel(self) -> None:
        pass


class PacedWorker:
    """Gives each request the same frames, each after its delay."""

    def __init__(self, delays: list[float], samples_per_frame: int = 1920):
        self.delays = delays
        self.frame = np.zeros(samples_per_frame, dtype=np.float32)

    def submit(self, voice, text, options, on_ready, synthesizer=None) -> PacedJob:
        return PacedJob([self.frame] * len(self.delays), self.delays, on_ready)


def _speak_once(worker, quantized: bool = False, voice=None, options=None) -> None:
    """One Synthesize through a handler beside `worker`, read to its AudioStop (the
    voice and options are passed to the worker as they are)."""
    handler = _handler_beside(worker, voice, options=options, quantized=quantized)

    async def scenario() -> None:
        async def serve(reader, writer):
            await handler(reader, writer).run()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        client = AsyncTcpClient("127.0.0.1", server.sockets[0].getsockname()[1])
        try:
            await client.connect()
            await client.write_event(Synthesize(text="Hello there.").event())
            while True:
                event = await client.read_event()
                assert event is not None
                if AudioStop.is_type(event.type):
                    break
            await client.disconnect()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


def test_the_worker_steps_on_once_the_first_frame_is_written(model, voice, monkeypatch):
    """After a job's first frame the worker holds its next step until the consumer has
    passed the frame on: with that hold made longer than the test may take, a request
    still ends in seconds, since the handler says so once it has written the frame."""
    monkeypatch.setattr(worker_module, "FIRST_FRAME_HANDOVER_S", 120.0)
    recording = RecordingWorker(SynthesisWorker(Synthesizer(model)))
    recording.worker.start()
    try:
        started = time.monotonic()
        _speak_once(recording, voice=voice, options=GenerationOptions(max_frames_per_chunk=12))
        assert time.monotonic() - started < 60
        assert recording.jobs[0]._passed_on.is_set()
    finally:
        recording.worker.close()


def _request_lines(caplog) -> tuple[str, list[str]]:
    info = [
        r.getMessage() for r in caplog.records
        if r.levelname == "INFO" and "chars=" in r.getMessage()
    ]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(info) == 1, info
    return info[0], warnings


def test_audio_that_keeps_ahead_of_playback_is_logged_as_never_late(caplog):
    caplog.set_level("INFO", logger="wyoming_pocket_tts.server")
    _speak_once(PacedWorker([0.0, 0.05, 0.05, 0.05]), quantized=False)  # 80 ms of audio every 50 ms
    line, warnings = _request_lines(caplog)
    assert "late=0.00 s" in line
    assert warnings == []


@pytest.mark.parametrize("quantized", [False, True])
def test_audio_that_falls_behind_playback_is_logged_with_a_warning(caplog, quantized):
    """The second frame comes 0.4 s after the first, which a player had used up after
    80 ms: it waited about 0.32 s, an audible stall."""
    caplog.set_level("INFO", logger="wyoming_pocket_tts.server")
    _speak_once(PacedWorker([0.0, 0.4, 0.0]), quantized=quantized)
    line, warnings = _request_lines(caplog)
    late = float(line.split("late=")[1].split()[0])
    assert 0.3 <= late < 1.0
    assert len(warnings) == 1 and f"{late:.2f} s after playback needed it" in warnings[0]
    assert ("--quantize" in warnings[0]) is not quantized


class UnspeakableWorker:
    """A model that finds nothing to say in any text (only symbols, say)."""

    def submit(self, voice, text, options, on_ready, synthesizer=None):
        raise TextError(f"nothing is left to speak of {text!r}")


def test_text_with_nothing_speakable_gets_a_moment_of_silence():
    handler = instant_handler(UnspeakableWorker(), silence_samples=1920)

    async def scenario() -> list:
        async def serve(reader, writer):
            await handler(reader, writer).run()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        try:
            async with AsyncTcpClient("127.0.0.1", server.sockets[0].getsockname()[1]) as client:
                await client.write_event(Synthesize(text="\u2026 \u00bb").event())
                events = [await client.read_event()]
                while not AudioStop.is_type(events[-1].type):
                    events.append(await client.read_event())
                return events
        finally:
            server.close()
            await server.wait_closed()

    start, chunk, stop = asyncio.run(scenario())
    assert (start.type, chunk.type, stop.type) == ("audio-start", "audio-chunk", "audio-stop")
    assert chunk.payload == bytes(2 * 1920)
