"""Fuzzing the Wyoming side: the event reader with bytes of every kind, and a real
connection handler with event sequences no client should send.

Whatever arrives, reading ends in an event, the end of input, or one of the two
errors the handler turns into a log line; a connection given nonsense answers in
well-formed events (or closes), logs no traceback, and another connection served
meanwhile is unaffected. The handler runs beside a worker that has its frames at once
(tests/support/instant.py), so each example takes milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from tests.support.instant import instant_handler
from wyoming_pocket_tts.server.connections import Connections
from wyoming_pocket_tts.server.wire import BadEvent, ProtocolError, encode, read_event

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# ---------------------------------------------------------------------------
# The reader

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
lengths = st.one_of(
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=-5, max_value=10**20),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(
            st.sampled_from(["describe", "synthesize", "synthesize-chunk"]), json_values
        ),
        "data": json_values,
        "data_length": lengths,
        "payload_length": lengths,
    },
).map(lambda header: json.dumps(header).encode() + b"\n")
nesting = st.builds(
    lambda depth, opener, where: where.replace(b"@", opener * depth),
    st.integers(min_value=1, max_value=40_000),
    st.sampled_from([b"[", b'{"a":']),
    st.sampled_from([b"@\n", b'{"type": "x", "data": @}\n']),
)
invalid_utf8 = st.builds(
    lambda text, junk: b'{"type": "' + text.encode() + junk + b'"}\n',
    st.text(max_size=10),
    st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]),
)
inputs = st.lists(
    st.one_of(st.binary(max_size=200), headers, nesting, invalid_utf8), min_size=1, max_size=6
).map(b"".join)


@FUZZ
@given(data=inputs)
def test_reading_anything_ends_in_an_event_or_a_known_error(data: bytes):
    async def read_all() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        while True:
            try:
                event = await read_event(reader, idle_timeout=None, partial_timeout=1.0)
            except BadEvent:
                continue
            except ProtocolError:
                return
            if event is None:
                return
            assert isinstance(event.type, str) and isinstance(event.data, dict)

    asyncio.run(read_all())


# ---------------------------------------------------------------------------
# A real handler


texts = st.one_of(st.text(max_size=30), json_values)
voices = st.one_of(st.none(), st.just({"name": "test"}), st.just({"name": "nobody"}), json_values)
client_events = st.one_of(
    st.builds(
        lambda text, voice: Event("synthesize", {"text": text, "voice": voice}), texts, voices
    ),
    st.builds(lambda voice: Event("synthesize-start", {"voice": voice}), voices),
    st.builds(lambda text: Event("synthesize-chunk", {"text": text}), texts),
    st.just(SynthesizeStop().event()),
    st.just(Describe().event()),
    st.builds(Event, st.sampled_from(["audio-chunk", "ping", "synthesize-stopped"]),
              st.dictionaries(st.text(max_size=5), json_values, max_size=2)),
)


def check_well_formed(received: list[Event]) -> None:
    """Audio comes in AudioStart .. AudioStop streams (the last may be cut by a close)."""
    in_audio = False
    for event in received:
        if event.type == "audio-start":
            assert not in_audio
            in_audio = True
        elif AudioChunk.is_type(event.type):
            assert in_audio
        elif event.type == "audio-stop":
            assert in_audio
            in_audio = False
        else:
            assert event.type in ("info", "error", "synthesize-stopped"), event


async def exchange(port: int, events: list[Event]) -> list[Event]:
    """Send `events`, end the input, and read everything until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode(*events))
    await writer.drain()
    writer.get_extra_info("socket").shutdown(socket.SHUT_WR)
    received = []
    while (event := await read_event(reader, idle_timeout=30, partial_timeout=30)) is not None:
        received.append(event)
    writer.close()
    return received


async def well_behaved(port: int) -> None:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Describe().event())
        assert Info.is_type((await client.read_event()).type)
        for event in (SynthesizeStart().event(), SynthesizeChunk(text="Hello there.").event(),
                      Synthesize(text="Hello there.").event(), SynthesizeStop().event()):
            await client.write_event(event)
        types = []
        while (event := await client.read_event()).type != "synthesize-stopped":
            types.append(event.type)
        assert types == ["audio-start", "audio-chunk", "audio-chunk", "audio-stop"]


@FUZZ
@given(events=st.lists(client_events, max_size=12))
def test_any_event_sequence_leaves_the_server_and_others_unharmed(events, caplog):
    caplog.set_level(logging.DEBUG, logger="wyoming_pocket_tts")
    caplog.clear()

    async def scenario() -> None:
        connections = Connections(instant_handler(max_text_chars=200), Info, limit=4)
        server = await asyncio.start_server(connections.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            received, _ = await asyncio.gather(exchange(port, events), well_behaved(port))
            check_well_formed(received)
            await well_behaved(port)
        finally:
            server.close()
            await connections.shut_down(grace=5)

    asyncio.run(scenario())
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) <= 4
