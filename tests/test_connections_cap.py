"""At --max-connections, connections that hold their place without doing their part (half
an event sent, nothing sent, audio never read) make room for a client that does, long
before the idle timeout would cut them; a connection speaking to a client that reads
keeps its place. A real server process on the tiny model without end of speech, so
that audio nobody reads fills the buffers on the way and stalls.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.info import Info
from wyoming.tts import Synthesize

from tests.support.server import (
    LONG_TEXT,
    TIMEOUT,
    AudioStream,
    ServerProcess,
    assert_pcm_frames,
    describe,
    launch,
    read_audio,
    run,
    served_or_refused,
)
from wyoming_pocket_tts.server.connections import FIRST_EVENT_SECONDS, STALLED_SECONDS
from wyoming_pocket_tts.server.wire import encode

#: Long, so that only making room can explain a client served while others stall.
IDLE_TIMEOUT = 60
#: From connecting to the end of a short utterance: far below the idle timeout.
PROMPTLY = 20.0
#: Past the second a connection gets to send an event: stalled, not on its way.
STALLED_FOR = 2 * FIRST_EVENT_SECONDS
#: Audio enough to fill the buffers of a client that does not read it.
UNREAD_TEXT = " ".join([LONG_TEXT] * 3)
#: Audio that a reading client is still receiving when the test is over: 3,340 frames,
#: read at 16 times the speed of playback (a client that keeps up, on any machine).
ENDLESS_TEXT = " ".join([LONG_TEXT] * 20)
SECONDS_A_CHUNK = 0.08 / 16
SHORT_TEXT = "Is the kitchen light on?"


@pytest.fixture
def start(tmp_path, tiny_model, voice_wav) -> Iterator[Callable[[int], ServerProcess]]:
    """Start a server with `--max-connections` set to the number given."""
    servers: list[ServerProcess] = []

    def start(limit: int) -> ServerProcess:
        server = launch(
            tmp_path / f"server-{len(servers)}", tiny_model, "--voice", str(voice_wav),
            "--max-connections", str(limit), "--idle-timeout", str(IDLE_TIMEOUT), "--debug",
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        assert server.stop() == 0, server.log()
        assert "Traceback" not in server.log()


# ---------------------------------------------------------------------------
# Clients that hold a place and do nothing with it


def half_an_event(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    sock.sendall(b'{"type": "synthesize", "data_len')
    return sock


def silent(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)


def not_reading(port: int) -> socket.socket:
    """A client that asks for a long synthesis and never reads it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # its audio backs up sooner
    sock.settimeout(TIMEOUT)
    sock.connect(("127.0.0.1", port))
    sock.sendall(encode(Synthesize(text=UNREAD_TEXT).event()))
    return sock


def closed_by_the_server(sock: socket.socket, within: float = 10.0) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# ---------------------------------------------------------------------------
# Clients that do their part


async def describe_and_synthesize(server: ServerProcess) -> tuple[Info, AudioStream]:
    async with server.client() as client:
        info = await describe(client)
        await client.write_event(Synthesize(text=SHORT_TEXT).event())
        return info, await read_audio(client)


async def speaking(server: ServerProcess) -> tuple[AsyncTcpClient, asyncio.Task]:
    """A client whose long audio has begun, and the task that reads all of it: it ends
    with the number of chunks at audio-stop, and fails if the connection closes first."""
    client = server.client()
    await client.connect()
    await client.write_event(Synthesize(text=ENDLESS_TEXT).event())
    event = await client.read_event()
    assert event is not None and event.type == "audio-start", event

    async def read_to_the_end() -> int:
        chunks = 0
        while (event := await client.read_event()) is not None:
            if event.type == "audio-stop":
                return chunks
            chunks += event.type == "audio-chunk"
            await asyncio.sleep(SECONDS_A_CHUNK)
        raise AssertionError(f"closed after {chunks} chunks, before audio-stop")

    return client, asyncio.create_task(read_to_the_end())


def assert_still_speaking(*readings: asyncio.Task) -> None:
    for reading in readings:
        if reading.done():  # closed (this raises), or a text too short to tell
            pytest.fail(f"the audio ended after {reading.result()} chunks")


def peer(sock: socket.socket) -> str:
    """The client as the server's log names it."""
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


# ---------------------------------------------------------------------------


def test_stalled_and_non_reading_connections_beyond_the_limit_make_room(start):
    """The issue's case, at a limit of 4: three clients that never read their audio, fifty
    that sent half an event header, three that sent nothing; then Home Assistant."""
    server = start(4)
    held = [not_reading(server.port) for _ in range(3)]
    held += [half_an_event(server.port) for _ in range(50)]
    held += [silent(server.port) for _ in range(3)]
    last_place = peer(held[3])
    try:
        time.sleep(STALLED_FOR)
        started = time.monotonic()
        info, stream = run(describe_and_synthesize(server))
        took = time.monotonic() - started
    finally:
        for sock in held:
            sock.close()
    assert info.tts
    assert_pcm_frames(stream)
    assert took < PROMPTLY, f"served {took:.1f} s after connecting"
    # The half-sent event that held the last place made room, before any request.
    assert f"{last_place}: closed to make room: idle" in server.log()
    assert ": closed to make room: its request" not in server.log()


def test_clients_that_stop_reading_their_audio_give_up_their_places(start):
    server = start(4)
    held = [not_reading(server.port) for _ in range(4)]
    try:
        # While their audio is flowing, or has only just stopped, they keep their places.
        assert run(served_or_refused(server, SHORT_TEXT)) == "refused"
        began = time.monotonic()
        while (outcome := run(served_or_refused(server, SHORT_TEXT))) == "refused":
            assert time.monotonic() - began < STALLED_SECONDS + PROMPTLY, "never made room"
            time.sleep(0.5)
        waited = time.monotonic() - began
    finally:
        for sock in held:
            sock.close()
    assert outcome == "served"
    assert waited < STALLED_SECONDS + PROMPTLY
    log = server.log()
    assert log.count(": closed to make room: its request waited on the client") == 1, log
    assert log.count("WARNING:wyoming_pocket_tts.server.connections:Refusing requests") == 1


def test_a_connection_speaking_to_a_reader_keeps_its_place_and_a_stalled_one_goes(start):
    """At a limit of 2: the first place speaks to a client that reads (the older one),
    the second holds half an event. A newcomer takes the second; once both places
    speak, the next newcomer is refused and neither speaker is closed for it."""
    server = start(2)

    async def scenario() -> None:
        first, first_reading = await speaking(server)
        stalled = half_an_event(server.port)
        stalled_peer = peer(stalled)
        try:
            await asyncio.sleep(STALLED_FOR)
            second, second_reading = await speaking(server)  # makes room
            await asyncio.sleep(0.5)
            assert_still_speaking(first_reading)  # the stalled one made room, not this one
            assert await served_or_refused(server, SHORT_TEXT) == "refused"
            await asyncio.sleep(0.5)
            assert_still_speaking(first_reading, second_reading)
            assert await asyncio.to_thread(closed_by_the_server, stalled)
            log = server.log()
            assert f"{stalled_peer}: closed to make room: idle" in log
            assert log.count(": closed to make room") == 1
        finally:
            stalled.close()
        for client, reading in ((first, first_reading), (second, second_reading)):
            reading.cancel()
            await client.disconnect()

    run(scenario())
