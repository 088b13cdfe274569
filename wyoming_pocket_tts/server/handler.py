"""One Wyoming connection: events in, synthesis jobs to the engine worker, audio out.

Each connection runs two tasks. The reader reads events (with limits, since the input
is untrusted) and answers the cheap ones at once; requests to speak go into a queue
that the speaker task works through in order, so audio leaves in the order it was
asked for while the reader keeps reading. That is what lets a disconnect be noticed
(the reader sees end of file) and cancel the synthesis within one frame, instead of
after the whole utterance as when synthesis runs inside the read loop.

Model code never runs here: the engine worker thread decodes frames and wakes the
speaker task through `call_soon_threadsafe`; each frame goes out as one AudioChunk
the moment it exists, and the job hears when it has (`passed_on`): after a first
frame the worker holds its next step until then, leaving Python's lock to the loop.
A client that reads slowly stalls `drain()`, the speaker stops taking frames, and
the worker stops advancing that job, so nothing piles up.

Whatever is sent at one moment leaves in one write, not wyoming's up to three per
event: every write can wake the client, and on a small CPU each wake-up takes a core
from the engine.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, write_event
from wyoming.info import Describe, Info
from wyoming.server import AsyncEventHandler
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from ..engine.errors import EngineError, TextError
from ..voices.store import UnknownVoiceError, VoiceStore
from .recent import RECENT_REQUESTS
from .sentences import SentenceStream

_LOGGER = logging.getLogger(__name__)

#: Largest data or payload section accepted; a TTS client sends text, never audio.
MAX_SECTION_BYTES = 1 << 20
#: Most text one stream may send (a single Synthesize is bounded by MAX_SECTION_BYTES).
MAX_STREAM_CHARS = 1_000_000
#: Most requests a connection may have waiting: with the limits above, bounds its memory.
MAX_QUEUED_REQUESTS = 8
#: Kernel send buffer of a TCP connection: under a second of audio. Left alone, Linux
#: grows it to megabytes for a client that does not read, and the worker would go on
#: synthesizing into it long after the client stopped listening.
SEND_BUFFER_BYTES = 64 * 1024
SAMPLE_WIDTH = 2  # int16
CHANNELS = 1
#: A player that had to wait this long for the next chunk stalled audibly: said at WARNING.
LATE_WARNING_SECONDS = 0.25


# ---------------------------------------------------------------------------
# Reading events from an untrusted peer


class ProtocolError(Exception):
    """The framing is broken (or would make us buffer too much): nothing after this
    point can be parsed reliably, so the connection ends."""


class BadEvent(Exception):
    """One event is unusable but the framing is intact: skip it and read on."""


def _section_length(header: dict[str, Any], key: str) -> int:
    length = header.get(key) or 0
    if not isinstance(length, int) or isinstance(length, bool) or length < 0:
        raise ProtocolError(f"invalid {key} {length!r}")
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
    if not isinstance(value, dict):
        raise BadEvent(f"{what} is not a JSON object")
    return value


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event, or None at end of input.

    Unlike `wyoming.event.async_read_event`, which trusts its peer, this bounds every
    length it reads and tells a skippable bad event from broken framing.
    """
    try:
        line = await reader.readline()
    except ValueError:  # no newline within the reader's limit (64 KiB)
        raise ProtocolError("header line too long") from None
    if not line:
        return None
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


def _text_of(event: Event) -> str:
    text = event.data.get("text")
    if not isinstance(text, str):
        raise BadEvent(f"{event.type} without a text string")
    return text


def _voice_of(event: Event) -> str | None:
    """The requested voice name; None (the default voice) when only a language is
    given, since there is one model and so one language per server."""
    voice = event.data.get("voice") or {}
    name = voice.get("name") if isinstance(voice, dict) else None
    if not isinstance(voice, dict) or not isinstance(name, (str, type(None))):
        raise BadEvent(f"{event.type} with an invalid voice {voice!r}")
    return name or None


# ---------------------------------------------------------------------------
# The engine worker, as the handler sees it


class SynthesisJob(Protocol):
    done: bool
    error: Exception | None

    def take(self) -> list[np.ndarray]: ...

    def passed_on(self) -> None: ...

    def cancel(self) -> None: ...


class Worker(Protocol):
    def submit(
        self, voice: Any, text: str, options: Any, on_ready: Callable[[], None]
    ) -> SynthesisJob: ...


@dataclass(frozen=True)
class HandlerSettings:
    sample_rate: int
    options: Any  # engine GenerationOptions, passed through untouched
    streaming: bool = True
    #: stdio: end of input means "no more requests", not "client gone", so finish them.
    finish_on_eof: bool = False
    #: FlowLM runs in int8 (`--quantize`); otherwise late audio comes with that advice.
    quantized: bool = False


def pcm16(frame: np.ndarray) -> bytes:
    """Float audio in [-1, 1] as little-endian 16-bit PCM."""
    return (np.clip(frame, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


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


# ---------------------------------------------------------------------------
# Requests queued for the speaker task


@dataclass
class _Utterance:
    """A plain Synthesize: one audio stream for the whole text."""

    voice: str | None
    text: str


@dataclass
class _TextStream:
    """A SynthesizeStart..SynthesizeStop stream: one audio stream per sentence, which
    arrive while earlier ones are spoken; None in `sentences` ends the stream."""

    voice: str | None
    sentences: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    splitter: SentenceStream = field(default_factory=SentenceStream)
    chars: int = 0


@dataclass
class _Reply:
    """An event to send in turn with the audio before it."""

    event: Event


@dataclass
class _Report:
    """Figures for the one INFO line each request gets."""

    kind: str
    voice: str
    loop: asyncio.AbstractEventLoop
    received: float
    chars: int = 0
    samples: int = 0
    busy: float = 0.0  # seconds spent speaking (not waiting for streamed text)
    first_audio: float | None = None
    #: The longest wait for a chunk of a player that starts each audio stream with its
    #: first chunk: 0 while synthesis keeps ahead of playback.
    late: float = 0.0

    def log(self, settings: HandlerSettings) -> None:
        audio_seconds = self.samples / settings.sample_rate
        waited = None if self.first_audio is None else self.first_audio - self.received
        first = "-" if waited is None else f"{waited:.3f} s"
        RECENT_REQUESTS.add(self.kind, self.voice, self.chars, audio_seconds, waited, self.busy)
        rtf = f"{self.busy / audio_seconds:.2f}" if audio_seconds else "-"
        _LOGGER.info(
            "%s: voice=%s chars=%d audio=%.2f s first_audio=%s rtf=%s late=%.2f s",
            self.kind,
            self.voice,
            self.chars,
            audio_seconds,
            first,
            rtf,
            self.late,
        )
        if self.late >= LATE_WARNING_SECONDS:
            _LOGGER.warning(
                "%s: the audio reached the client up to %.2f s after playback needed it: "
                "this CPU did not speak the requests at hand in real time%s",
                self.kind,
                self.late,
                "" if settings.quantized else "; --quantize speaks about twice as fast",
            )


class PocketTTSEventHandler(AsyncEventHandler):
    """Serves one connection (or the stdio pipe pair)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        info: Callable[[], Info],
        voices: VoiceStore,
        worker: Worker,
        settings: HandlerSettings,
    ) -> None:
        super().__init__(reader, writer)
        self._info = info
        self._voices = voices
        self._worker = worker
        self._settings = settings
        self._requests: asyncio.Queue[_Utterance | _TextStream | _Reply | None] = asyncio.Queue()
        self._stream: _TextStream | None = None
        self._speaker: asyncio.Task | None = None
        peer = writer.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer or "stdio")
        connection = writer.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)

    # -- reading ------------------------------------------------------------

    async def run(self) -> None:
        self._is_running = True
        self._speaker = asyncio.create_task(self._speak_requests(), name=f"speaker {self._peer}")
        at_eof = False
        try:
            while self._is_running:
                try:
                    event = await read_event(self.reader)
                except BadEvent as err:
                    _LOGGER.warning("%s: ignored a bad event: %s", self._peer, err)
                    continue
                if event is None:
                    at_eof = self._is_running
                    break
                if not await self.handle_event(event):
                    break
        except (ProtocolError, BadEvent) as err:  # a BadEvent here is a malformed request
            _LOGGER.warning("%s: closing the connection: %s", self._peer, err)
            await self._send_error(f"Bad request: {err}", "bad-request")
        except ConnectionError as err:
            _LOGGER.info("%s: connection lost: %s", self._peer, err)
        except Exception:
            _LOGGER.exception("%s: closing the connection after an internal error", self._peer)
        finally:
            await self._end(finish=at_eof and self._settings.finish_on_eof)
            self.writer.close()

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(self._info().event())
        elif Synthesize.is_type(event.type):
            if self._stream is None:  # inside a stream it only repeats the streamed text
                self._queue(_Utterance(_voice_of(event), _text_of(event)))
        elif not self._settings.streaming:
            _LOGGER.debug("%s: ignored %s (streaming is off)", self._peer, event.type)
        elif SynthesizeStart.is_type(event.type):
            if self._stream is not None:
                _LOGGER.warning("%s: synthesize-start inside a stream ends that stream", self._peer)
                self._close_stream()
            self._stream = _TextStream(_voice_of(event))
            self._queue(self._stream)
        elif SynthesizeChunk.is_type(event.type):
            if self._stream is None:
                _LOGGER.warning("%s: ignored synthesize-chunk outside a stream", self._peer)
            else:
                text = _text_of(event)
                self._stream.chars += len(text)
                if self._stream.chars > MAX_STREAM_CHARS:
                    raise ProtocolError(f"stream longer than {MAX_STREAM_CHARS} characters")
                for sentence in self._stream.splitter.add(text):
                    self._stream.sentences.put_nowait(sentence)
        elif SynthesizeStop.is_type(event.type):
            if self._stream is None:  # answered anyway: the client waits for it
                _LOGGER.warning("%s: synthesize-stop outside a stream", self._peer)
                self._queue(_Reply(SynthesizeStopped().event()))
            else:
                self._close_stream()
        else:
            _LOGGER.debug("%s: ignored unknown event %s", self._peer, event.type)
        return True

    def _queue(self, request: _Utterance | _TextStream | _Reply) -> None:
        if self._requests.qsize() >= MAX_QUEUED_REQUESTS:
            raise ProtocolError(f"more than {MAX_QUEUED_REQUESTS} requests waiting")
        self._requests.put_nowait(request)

    def _close_stream(self) -> None:
        assert self._stream is not None
        rest = self._stream.splitter.finish()
        if rest:
            self._stream.sentences.put_nowait(rest)
        self._stream.sentences.put_nowait(None)
        self._stream = None

    async def _end(self, finish: bool) -> None:
        """Stop the speaker: after the queued requests (stdio input ended), or at once
        (the client is gone: its jobs are cancelled by the speaker's cleanup)."""
        assert self._speaker is not None
        if finish:
            if self._stream is not None:
                self._close_stream()
            self._requests.put_nowait(None)
        else:
            self._speaker.cancel()
        try:
            await self._speaker
        except asyncio.CancelledError:
            pass

    # -- writing ------------------------------------------------------------

    async def write_event(self, event: Event) -> None:
        await self._send(event)

    async def _send(self, *events: Event) -> None:
        """Write `events` in one piece (wyoming's own writer makes up to three per
        event: header line, data, payload)."""
        wire = io.BytesIO()
        for event in events:
            write_event(event, wire)
        self.writer.write(wire.getvalue())
        await self.writer.drain()

    # -- speaking -----------------------------------------------------------

    async def _speak_requests(self) -> None:
        while (request := await self._requests.get()) is not None:
            try:
                if isinstance(request, _Reply):
                    await self.write_event(request.event)
                elif isinstance(request, _TextStream):
                    await self._speak_stream(request)
                else:
                    await self._speak_utterance(request)
            except (UnknownVoiceError, EngineError) as err:
                # Home Assistant ignores Error events and would wait for audio forever:
                # closing the connection is what actually ends its wait.
                _LOGGER.warning("%s: %s", self._peer, err)
                await self._send_error(str(err), type(err).__name__)
                await self.stop()
                return
            except ConnectionError as err:
                _LOGGER.info("%s: connection lost while speaking: %s", self._peer, err)
                await self.stop()
                return
            except Exception:
                _LOGGER.exception("%s: synthesis failed", self._peer)
                await self._send_error("Internal error: synthesis failed", "internal-error")
                await self.stop()
                return

    async def _speak_utterance(self, utterance: _Utterance) -> None:
        report = self._report("synthesize", utterance.voice)
        async with self._voices.use(utterance.voice) as voice:
            await self._speak(voice, utterance.text, report)
        report.log(self._settings)

    async def _speak_stream(self, stream: _TextStream) -> None:
        report = self._report("stream", stream.voice)
        async with AsyncExitStack() as stack:
            # Acquired up front: an unknown voice is reported before any text arrives,
            # the voice loads while the first sentence is being written, and it stays
            # loaded for the whole stream.
            voice = await stack.enter_async_context(self._voices.use(stream.voice))
            while (sentence := await stream.sentences.get()) is not None:
                if report.first_audio is None:
                    report.received = report.loop.time()
                await self._speak(voice, sentence, report)
        await self.write_event(SynthesizeStopped().event())
        report.log(self._settings)

    def _report(self, kind: str, voice: str | None) -> _Report:
        loop = asyncio.get_running_loop()
        return _Report(kind, voice or self._voices.default_voice, loop, loop.time())

    async def _speak(self, voice: Any, text: str, report: _Report) -> None:
        """One audio stream: AudioStart, an AudioChunk per decoded frame, AudioStop.

        AudioStart leaves with the first chunk: sent on its own, it would wake the
        client while the first frame is being computed, on a core that frame uses.
        """
        report.chars += len(text)
        rate = self._settings.sample_rate
        start = AudioStart(rate, SAMPLE_WIDTH, CHANNELS, timestamp=0).event()
        samples = 0
        started = report.loop.time()
        if text.strip():
            try:
                samples = await self._stream_frames(voice, text, report, start)
            except TextError as err:  # nothing speakable (only symbols, say): no audio
                _LOGGER.warning("%s: nothing to say: %s", self._peer, err)
        report.busy += report.loop.time() - started
        stop = AudioStop(timestamp=samples * 1000 // rate).event()
        unsent = [] if samples else [start]  # with no audio, no chunk carried it
        await self._send(*unsent, stop)

    async def _stream_frames(self, voice: Any, text: str, report: _Report, start: Event) -> int:
        """Send the job's frames as they come, after `start`; the number of samples sent."""
        loop = report.loop
        ready = asyncio.Event()

        def wake() -> None:  # called on the worker thread
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop is closed: the server is shutting down
                pass

        rate = self._settings.sample_rate
        samples = 0
        playing_since: float | None = None  # when this audio stream's first chunk left
        job = self._worker.submit(voice, text, self._settings.options, wake)
        try:
            while True:
                await ready.wait()
                ready.clear()
                finished = job.done  # read before take(): frames precede `done`
                frames = job.take()
                if frames:
                    now = loop.time()
                    if report.first_audio is None:
                        report.first_audio = now
                    chunks = audio_chunks(frames, rate, samples)
                    if playing_since is None:
                        playing_since = now
                        chunks.insert(0, start)
                    report.late = max(report.late, now - playing_since - samples / rate)
                    samples += sum(len(frame) for frame in frames)
                    await self._send(*chunks)
                    job.passed_on()  # after a first frame, the worker waits for this
                if finished:
                    break
        finally:
            job.cancel()  # a no-op when finished; stops the worker when we were cancelled
        report.samples += samples
        if job.error is not None:
            raise job.error
        return samples

    async def _send_error(self, text: str, code: str) -> None:
        try:
            await self.write_event(Error(text=text, code=code).event())
        except (ConnectionError, RuntimeError):
            pass  # the peer is gone already
