"""Many clients at once, and many requests one after another: every client is served or
refused in a way Home Assistant handles, Describe stays quick, memory stays flat."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Iterator

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.info import Info
from wyoming.tts import Synthesize

from tests.support.instant import instant_handler
from tests.support.server import (
    SHORT,
    TIMEOUT,
    ServerProcess,
    assert_pcm_frames,
    describe,
    launch,
    read_audio,
    run,
    served_or_refused,
    synthesize,
)
from wyoming_pocket_tts.server.connections import Connections

LIMIT = 16
#: Home Assistant's timeout for Describe.
DESCRIBE_SECONDS = 1.0


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory, tiny_model, voice_wav) -> Iterator[ServerProcess]:
    process = launch(
        tmp_path_factory.mktemp("busy-server"), tiny_model, "--voice", str(voice_wav),
        "--max-connections", str(LIMIT), *SHORT,
    )
    yield process
    assert process.stop() == 0, process.log()
    assert "Traceback" not in process.log()


def test_as_many_clients_as_the_limit_are_all_served_at_once(busy_server):
    async def scenario():
        return await asyncio.gather(
            *(synthesize(busy_server, f"Request number {index} is here.") for index in range(LIMIT))
        )

    for stream in run(scenario()):
        assert_pcm_frames(stream)


def test_four_times_the_limit_are_served_or_refused_while_describe_answers(busy_server):
    async def describe_quickly() -> list[Info]:
        answers = []
        for _ in range(10):
            async with busy_server.client() as client:
                answers.append(await asyncio.wait_for(describe(client), DESCRIBE_SECONDS))
            await asyncio.sleep(0.05)
        return answers

    async def scenario():
        text = "The kitchen light is on."
        requests = asyncio.gather(
            *(served_or_refused(busy_server, text) for _ in range(4 * LIMIT))
        )
        answers = await describe_quickly()
        return await requests, answers

    outcomes, answers = run(scenario())
    assert len(outcomes) == 4 * LIMIT and outcomes.count("served") >= 1
    assert all(answer.tts for answer in answers)
    # Still serving everyone once the crowd has gone.
    assert_pcm_frames(run(synthesize(busy_server, "Is anybody there?")))


def test_memory_does_not_grow_with_the_requests_served():
    """Each request leaves nothing behind in the connection code: the memory Python
    holds after two hundred more requests is what it held after the first fifty."""

    async def requests(port: int, count: int) -> None:
        for _ in range(count):
            async with AsyncTcpClient("127.0.0.1", port) as client:
                await client.write_event(Synthesize(text="The kitchen light is on.").event())
                await read_audio(client)

    async def scenario() -> tuple[int, int]:
        connections = Connections(instant_handler(), Info, limit=4)
        server = await asyncio.start_server(connections.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            await requests(port, 50)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            await requests(port, 200)
            gc.collect()
            return before, tracemalloc.get_traced_memory()[0]
        finally:
            server.close()
            await connections.shut_down(grace=TIMEOUT)

    tracemalloc.start()
    try:
        before, after = asyncio.run(scenario())
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024, f"{after - before} bytes more after 200 requests"
