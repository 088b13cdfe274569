"""The connection handler in this process, beside a real worker, where the jobs it submits can be seen.

The server tests (test_server.py) watch a server process from outside. A client that
goes away stops costing CPU there either way: nobody takes its frames, so the worker
pauses its job. Whether the job was cancelled, and left the worker, shows only in here.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial

from wyoming.client import AsyncTcpClient
from wyoming.info import Info
from wyoming.tts import Synthesize

from wyoming_pocket_tts.engine.scheduler import SynthesisWorker
from wyoming_pocket_tts.engine.synthesizer import GenerationOptions, Synthesizer
from wyoming_pocket_tts.handler import HandlerSettings, PocketTTSEventHandler
from wyoming_pocket_tts.voices import VoiceKind, VoiceSource, VoiceStore

LONG_TEXT = "The quick brown fox jumps over the lazy dog. " * 3  # hundreds of frames, no EOS


class RecordingWorker:
    """The real worker, keeping each job it was given for the test to look at."""

    def __init__(self, worker: SynthesisWorker):
        self.worker = worker
        self.jobs = []

    def submit(self, *args, **kwargs):
        job = self.worker.submit(*args, **kwargs)
        self.jobs.append(job)
        return job

    def wake(self) -> None:
        self.worker.wake()


async def _until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_client_that_disconnects_has_its_job_cancelled(model, voice):
    source = VoiceSource(name="test", path=None, kind=VoiceKind.STATE, description="test voice")
    voices = VoiceStore(
        sources=lambda: {"test": source}, load=lambda _: voice, default_voice="test", max_loaded=1
    )
    worker = SynthesisWorker(Synthesizer(model))
    recording = RecordingWorker(worker)
    handler = partial(
        PocketTTSEventHandler,
        info=Info,
        voices=voices,
        worker=recording,
        settings=HandlerSettings(sample_rate=model.sample_rate, options=GenerationOptions()),
    )

    async def scenario() -> None:
        async def serve(reader, writer):
            await handler(reader, writer).run()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            client = AsyncTcpClient("127.0.0.1", port)
            await client.connect()
            await client.write_event(Synthesize(text=LONG_TEXT).event())
            for _ in range(3):  # AudioStart and the first chunks
                assert await client.read_event() is not None
            await client.disconnect()
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
