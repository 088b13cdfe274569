"""A server whose synthesis worker has died must not live on answering Describe and
nothing else: it says so and exits non-zero, so that s6, Docker or Kubernetes restart it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from wyoming.tts import Synthesize

from tests.support.server import TIMEOUT, event_types_until_close, launch, run
from wyoming_pocket_tts.server.wire import encode

# Runs the server with the batching policy broken once a trigger file exists: a fault
# outside any one request, which kills the worker's thread.
BROKEN_WORKER = """
import sys
from pathlib import Path

from wyoming_pocket_tts.__main__ import run
from wyoming_pocket_tts.engine.runtime import policy

trigger = Path(sys.argv.pop(1))
plan_step = policy.BatchingPolicy.plan_step


def broken(self, view):
    if trigger.exists():
        raise RuntimeError("injected fault in the worker")
    return plan_step(self, view)


policy.BatchingPolicy.plan_step = broken
sys.exit(run(sys.argv[1:]))
"""


async def ask_to_speak(port: int) -> list[str]:
    """The event types a client gets for a request, until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode(Synthesize(text="Turn on the kitchen light.").event()))
    await writer.drain()
    types = await event_types_until_close(reader)
    writer.close()
    return types


def test_a_dead_worker_ends_the_request_and_the_process_with_an_error(
    tmp_path: Path, tiny_model, voice_wav: Path
) -> None:
    trigger = tmp_path / "break-the-worker"
    server = launch(
        tmp_path, tiny_model, "--voice", str(voice_wav),
        program=("-c", BROKEN_WORKER, str(trigger)),
    )
    try:
        trigger.touch()
        assert server.port is not None
        types = run(ask_to_speak(server.port))
        deadline = time.monotonic() + TIMEOUT
        while server.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        code = server.process.poll()
    finally:
        server.stop()
    log = server.log()
    assert "audio-chunk" not in types  # the request ended, without audio it never got
    assert code == 1, log
    assert "The synthesis worker stopped" in log
