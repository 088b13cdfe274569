"""server/wire.py: reading events from a peer that may send anything, and PCM."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from wyoming.event import Event

from wyoming_pocket_tts.engine.pcm import pcm16
from wyoming_pocket_tts.server.wire import (
    MAX_SECTION_BYTES,
    BadEvent,
    Idle,
    ProtocolError,
    encode,
    read_event,
)


def read(data: bytes, *, eof: bool = True, idle: float | None = None, partial: float = 5.0):
    """The first event of `data` (or what reading it raises)."""

    async def scenario():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        if eof:
            reader.feed_eof()
        return await read_event(reader, idle_timeout=idle, partial_timeout=partial)

    return asyncio.run(scenario())


def test_an_event_round_trips_with_data_and_payload():
    event = Event("synthesize", {"text": "Hello there."}, payload=b"\x00\x01")
    assert read(encode(event)) == event


def test_end_of_input_before_or_inside_an_event_is_the_end():
    assert read(b"") is None
    assert read(b'{"type": "desc') is None
    assert read(b'{"type": "x", "data_length": 10}\n{"te') is None


@pytest.mark.parametrize(
    "nested",
    [
        pytest.param(b"[" * 30_000 + b"\n", id="header"),
        pytest.param(b'{"type": "x", "data": ' + b"[" * 30_000 + b"\n", id="header-data"),
    ],
)
def test_deep_nesting_is_a_bad_event_not_a_recursion_error(nested):
    with pytest.raises(BadEvent):
        read(nested)


def test_deep_nesting_in_the_data_section_is_a_bad_event():
    data = b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    with pytest.raises(BadEvent, match="nests too deeply"):
        read(json.dumps({"type": "x", "data_length": len(data)}).encode() + b"\n" + data)


def test_a_number_too_long_for_python_is_a_bad_event():
    with pytest.raises(BadEvent):
        read(b'{"type": "x", "data": {"n": ' + b"9" * 20_000 + b"}}\n")


def test_lengths_are_bounded_before_anything_is_read():
    for length in (MAX_SECTION_BYTES + 1, 10**18):
        with pytest.raises(ProtocolError, match="over the limit"):
            read(json.dumps({"type": "x", "payload_length": length}).encode() + b"\n", eof=False)


def test_a_header_line_without_end_is_refused_at_the_reader_limit():
    with pytest.raises(ProtocolError, match="too long"):
        read(b'{"type": "' + b"x" * 200_000, eof=False)


def test_a_peer_that_stalls_inside_an_event_is_given_up_on():
    with pytest.raises(ProtocolError, match="stalled"):
        read(b'{"type": "describe"', eof=False, partial=0.05)
    with pytest.raises(ProtocolError, match="stalled"):
        read(b'{"type": "x", "data_length": 10}\n{"te', eof=False, partial=0.05)


def test_an_idle_peer_can_be_read_on_after_the_idle_timeout():
    async def scenario():
        reader = asyncio.StreamReader()
        with pytest.raises(Idle):
            await read_event(reader, idle_timeout=0.05, partial_timeout=5)
        reader.feed_data(b'{"type": "describe"}\n')
        return await read_event(reader, idle_timeout=0.05, partial_timeout=5)

    assert asyncio.run(scenario()) == Event("describe", {})


def test_pcm16_rounds_to_the_nearest_step_and_clips():
    frame = np.array([0.0, 0.5 / 32767, -0.6 / 32767, 1.0, -1.0, 2.0, -7.0], dtype=np.float32)
    samples = np.frombuffer(pcm16(frame), dtype="<i2")
    assert samples.tolist() == [0, 0, -1, 32767, -32767, 32767, -32767]
