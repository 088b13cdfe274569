"""The Wyoming wire: events read from an untrusted peer, events written in one piece,
audio frames as chunks.

`wyoming.event.async_read_event` trusts its peer: it reads whatever lengths the header
names, parses JSON of any depth and waits forever for the rest of an event. Here every
length is bounded, a peer that stalls in the middle of an event is given up on, and
every way input can be unusable ends in one of two exceptions: `BadEvent` (skip it,
the framing is intact) or `ProtocolError` (nothing after it can be trusted).
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import numpy as np
from wyoming.audio import AudioChunk
from wyoming.event import Event, write_event

from ..engine.pcm import CHANNELS, SAMPLE_WIDTH, pcm16

#: Largest data or payload section accepted; a TTS client sends text, never audio.
MAX_SECTION_BYTES = 1 << 20
#: Longest piece of client input quoted in an error message or a log line.
QUOTE_CHARS = 60


class ProtocolError(Exception):
    """The framing is broken (or would make us buffer too much): nothing after this
    point can be parsed reliably, so the connection ends."""


class BadEvent(Exception):
    """One event is unusable but the framing is intact: skip it and read on."""


class Idle(Exception):
    """No event began within the idle timeout; the connection is intact."""


def quote(value: Any) -> str:
    """`repr(value)`, cut short: client input in a message must not flood the log."""
    text = repr(value)
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 3] + "..."


def _section_length(header: dict[str, Any], key: str) -> int:
    length = header.get(key) or 0
    if not isinstance(length, int) or isinstance(length, bool) or length < 0:
        raise ProtocolError(f"invalid {key} {quote(length)}")
    if length > MAX_SECTION_BYTES:
        raise ProtocolError(f"{key} {length} is over the limit of {MAX_SECTION_BYTES} bytes")
    return length


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise BadEvent(f"{what} is not valid UTF-8 ({err.reason} at byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise BadEvent(f"{what} is not valid JSON ({err.msg})") from None
    except ValueError as err:  # a number too long for Python's int conversion
        raise BadEvent(f"{what} is not usable JSON ({err})") from None
    except RecursionError:
        raise BadEvent(f"{what} nests too deeply") from None
    if not isinstance(value, dict):
        raise BadEvent(f"{what} is not a JSON object")
    return value


async def read_event(
    reader: asyncio.StreamReader, *, idle_timeout: float | None, partial_timeout: float
) -> Event | None:
    """The next event, or None at end of input.

    Raises `Idle` when no event began within `idle_timeout` (None: wait for ever;
    nothing has been consumed then, so reading can go on), and `ProtocolError` when the
    rest of an event that has begun takes longer than `partial_timeout`.
    """
    try:
        async with asyncio.timeout(idle_timeout):
            first = await reader.read(1)
    except TimeoutError:
        raise Idle from None
    if not first:
        return None
    try:
        async with asyncio.timeout(partial_timeout):
            return await _read_rest(reader, first)
    except TimeoutError:
        raise ProtocolError(
            f"stalled for {partial_timeout:g} s in the middle of an event"
        ) from None


async def _read_rest(reader: asyncio.StreamReader, first: bytes) -> Event | None:
    try:
        line = first if first == b"\n" else first + await reader.readline()
    except ValueError:  # no newline within the reader's limit (64 KiB)
        raise ProtocolError("header line too long") from None
    if not line.endswith(b"\n"):
        return None  # the peer went away in the middle of a line
    header = _json_object(line, "header line")
    data_length = _section_length(header, "data_length")
    payload_length = _section_length(header, "payload_length")
    try:
        data_bytes = await reader.readexactly(data_length) if data_length else b""
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return None
    event_type = header.get("type")
    if not isinstance(event_type, str):
        raise BadEvent("header has no event type")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise BadEvent("event data is not a JSON object")
    if data_bytes:
        data.update(_json_object(data_bytes, "data section"))
    return Event(type=event_type, data=data, payload=payload)


def encode(*events: Event) -> bytes:
    """`events` as bytes for one write (wyoming's own writer makes up to three per
    event, and every write can wake the client)."""
    wire = io.BytesIO()
    for event in events:
        write_event(event, wire)
    return wire.getvalue()


def audio_chunks(frames: list[np.ndarray], rate: int, first_sample: int) -> list[Event]:
    """One AudioChunk event per frame, the first one at `first_sample`."""
    events = []
    for frame in frames:
        chunk = AudioChunk(
            rate, SAMPLE_WIDTH, CHANNELS, pcm16(frame), timestamp=first_sample * 1000 // rate
        )
        events.append(chunk.event())
        first_sample += len(frame)
    return events
