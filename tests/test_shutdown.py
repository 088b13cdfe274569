"""Stopping the server (SIGTERM from Docker, s6 or Kubernetes; SIGINT from a terminal)
while it speaks: every client's request ends the way Home Assistant waits for, the
process exits 0 within the seconds its supervisors give it, and says so in its log."""

from __future__ import annotations

import asyncio
import signal
import socket
import time

import pytest
from wyoming.event import Event, write_event
from wyoming.event import read_event as wyoming_read_event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from tests.support.server import LONG_TEXT, TIMEOUT, event_types_until_close, launch, run
from wyoming_pocket_tts.server.wire import encode, read_event

#: Docker's default stop timeout is 10 s, s6's 3 s grace then kill: exit well before.
#: A stop takes about a second, so this leaves a loaded machine room too.
EXIT_WITHIN_SECONDS = 5.0


async def request(port: int, events: list[Event], started: asyncio.Event) -> list[str]:
    """Send a request and read what comes back, as Home Assistant does, until the server
    closes the connection: the types of the events after the first audio."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode(*events))
    await writer.drain()
    first = await read_event(reader, idle_timeout=TIMEOUT, partial_timeout=TIMEOUT)
    assert first is not None and first.type == "audio-start", first
    started.set()
    types = await event_types_until_close(reader)
    writer.close()
    return types


@pytest.mark.wall_clock
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_four_requests_in_flight_and_exits_0(tmp_path, tiny_model, voice_wav, signum):
    server = launch(tmp_path, tiny_model, "--voice", str(voice_wav))  # no end of speech
    text = " ".join([LONG_TEXT] * 3)
    plain = [Synthesize(text=text).event()]
    stream = [
        SynthesizeStart().event(),
        SynthesizeChunk(text=text).event(),
        Synthesize(text=text).event(),
    ]  # no SynthesizeStop: the client is still writing when the server stops

    async def scenario():
        started = [asyncio.Event() for _ in range(4)]
        requests = [
            asyncio.create_task(request(server.port, events, flag))
            for events, flag in zip(
                (plain, plain, stream, [*stream, SynthesizeStop().event()]), started, strict=True
            )
        ]
        for flag in started:
            await flag.wait()
        server.process.send_signal(signum)
        signalled = time.monotonic()
        return await asyncio.gather(*requests), signalled

    try:
        endings, signalled = run(scenario())
        code = server.process.wait(timeout=TIMEOUT)
        took = time.monotonic() - signalled
    finally:
        server.stop()
    log = server.log()
    assert code == 0, log
    assert took < EXIT_WITHIN_SECONDS, f"exited {took:.1f} s after the signal"
    for ending in endings[:2]:
        assert ending[-1] == "audio-stop", ending
    for ending in endings[2:]:
        assert ending[-2:] == ["audio-stop", "synthesize-stopped"], ending
    assert log.count("(cut short: the server is stopping)") == 4, log
    assert "Traceback" not in log


@pytest.mark.wall_clock
def test_a_client_that_stops_reading_does_not_hold_up_the_exit(tmp_path, tiny_model, voice_wav):
    server = launch(tmp_path, tiny_model, "--voice", str(voice_wav))
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", server.port))
    try:
        stalled.sendall(encode(Synthesize(text=" ".join([LONG_TEXT] * 3)).event()))
        assert stalled.recv(4096)  # audio has started; from now on nothing is read
        deadline = time.monotonic() + TIMEOUT
        while True:  # until the buffers on the way are full and synthesis pauses
            before = server.cpu_seconds()
            time.sleep(0.5)
            if server.cpu_seconds() - before < 0.05:
                break
            assert time.monotonic() < deadline, "the server never paused"
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        code = server.process.wait(timeout=TIMEOUT)
        took = time.monotonic() - signalled
    finally:
        stalled.close()
        server.stop()
    assert code == 0, server.log()
    assert took < EXIT_WITHIN_SECONDS, f"exited {took:.1f} s after the signal"
    assert "Traceback" not in server.log()


@pytest.mark.wall_clock
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_stdio_request_in_flight_and_exits_0(
    tmp_path, tiny_model, voice_wav, signum
):
    """Over stdio the input stays open (a pipe from a parent that waits): the signal,
    not the end of input, ends the request, with its audio-stop, and the process."""
    server = launch(tmp_path, tiny_model, "--voice", str(voice_wav), stdio=True)
    stdin, stdout = server.process.stdin, server.process.stdout
    try:
        write_event(Synthesize(text=" ".join([LONG_TEXT] * 3)).event(), stdin)
        stdin.flush()
        types = [wyoming_read_event(stdout).type]  # audio-start: speaking
        server.process.send_signal(signum)
        signalled = time.monotonic()
        while (event := wyoming_read_event(stdout)) is not None:
            types.append(event.type)
        code = server.process.wait(timeout=TIMEOUT)
        took = time.monotonic() - signalled
    finally:
        stdin.close()
        server.stop()
    log = server.log()
    assert code == 0, log
    assert took < EXIT_WITHIN_SECONDS, f"exited {took:.1f} s after the signal"
    assert types[0] == "audio-start" and types[-1] == "audio-stop", types
    assert "(cut short: the server is stopping)" in log
    assert "Traceback" not in log
