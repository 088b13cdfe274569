"""One Wyoming connection: events in, synthesis jobs to the engine worker, audio out.

Each connection runs two tasks. The reader reads events (through wire.py, with limits,
since the input is untrusted) and answers the cheap ones at once; requests to speak go
into a queue that the speaker task works through in order, so audio leaves in the order
it was asked for while the reader keeps reading. That is what lets a disconnect be
noticed (the reader sees end of file) and cancel the synthesis within one frame, instead
of after the whole utterance as when synthesis runs inside the read loop.

Model code never runs here: the engine worker thread decodes frames and the speaker
task takes them through a `FrameStream` (engine/runtime/streaming.py); each frame goes
out as one AudioChunk the moment it exists.
A client that reads slowly stalls `drain()`, the speaker stops taking frames, and
the worker stops advancing that job, so nothing piles up.

Every request ends the way Home Assistant waits for: an audio stream for each
utterance (a short silence when there is nothing to say, since an empty one gives it
no audio to convert), `synthesize-stopped` after a text stream, or a closed connection,
also after an error, since Home Assistant ignores `error` events. At shutdown the audio
stream in progress ends where it is, and the stream it belongs to with it.

The handler also says whether the connection is waiting on its client (for an event,
for a stream's text, for it to take its audio) and since when: at the connection limit,
the one that has waited longest may be closed to make room (connections.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from wyoming.audio import AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
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
from ..engine.pcm import CHANNELS, SAMPLE_WIDTH
from ..engine.runtime.options import GenerationOptions
from ..engine.runtime.streaming import FrameStream, Worker
from ..normalize.spoken import Silence, SpokenRequest, SpokenText, TextOptions, spoken
from ..recent import RecentRequests
from ..speakers import Speaker
from ..voices.names import LanguageVoice
from ..voices.store import UnknownVoiceError
from .report import RequestReport
from .sentences import SentenceStream
from .wire import (
    BadEvent,
    Idle,
    ProtocolError,
    audio_chunks,
    encode,
    quote,
    read_event,
)

_LOGGER = logging.getLogger(__name__)

#: Most requests a connection may have waiting: with the text limit, bounds its memory.
MAX_QUEUED_REQUESTS = 8
#: Bad events a connection may send before it is closed: a client that sends one is
#: confused, one that goes on is broken or hostile, and each would be a log line.
MAX_BAD_EVENTS = 3
#: Kernel send buffer of a TCP connection: under a second of audio. Left alone, Linux
#: grows it to megabytes for a client that does not read, and the worker would go on
#: synthesizing into it long after the client stopped listening.
SEND_BUFFER_BYTES = 64 * 1024


# ---------------------------------------------------------------------------
# Requests as the client sends them


def _is_ssml(event: Event) -> bool:
    """Whether the text is SSML markup (wyoming's `text_format`); anything else is read
    as plain text, where a "<" is said, not parsed."""
    return event.data.get("text_format") == "ssml"


def _text_of(event: Event) -> str:
    text = event.data.get("text")
    if not isinstance(text, str):
        raise BadEvent(f"{event.type} without a text string")
    return text


@dataclass(frozen=True)
class _VoiceRequest:
    """The voice a request names (None: a language's default voice) and the language
    it asks for, if any."""

    name: str | None
    language: str | None


def _voice_of(event: Event) -> _VoiceRequest:
    voice = event.data.get("voice") or {}
    name = voice.get("name") if isinstance(voice, dict) else None
    language = voice.get("language") if isinstance(voice, dict) else None
    if not isinstance(voice, dict) or not all(
        isinstance(value, (str, type(None))) for value in (name, language)
    ):
        raise BadEvent(f"{event.type} with an invalid voice {quote(voice)}")
    return _VoiceRequest(name or None, language or None)


class Speakers(Protocol):
    """Who speaks a request (`speakers.Speakers`): a voice and its model."""

    def choose(self, voice: str | None, language: str | None, text: str) -> LanguageVoice: ...

    def needs_text(self, voice: str | None, language: str | None) -> bool: ...

    def use(self, choice: LanguageVoice) -> AbstractAsyncContextManager[Speaker]: ...


# ---------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class HandlerSettings:
    sample_rate: int
    options: GenerationOptions
    streaming: bool = True
    #: stdio: end of input means "no more requests", not "client gone", so finish them.
    finish_on_eof: bool = False
    #: FlowLM runs in int8 (`--quantize`); otherwise late audio comes with that advice.
    quantized: bool = False
    #: Most characters one request may bring: a Synthesize's text, or a whole stream's.
    max_text_chars: int = 10_000
    #: Seconds a client may take to finish an event it has begun, and that a connection
    #: with nothing in flight may stay silent, before it is closed.
    idle_timeout: float = 30.0
    #: Seconds an open text stream may send nothing while all its text has been spoken,
    #: before the connection is closed: long, since a language model may think or call
    #: a tool between sentences, but a stream left open must not hold its slot for ever.
    stream_timeout: float = 120.0
    #: Samples of the silence that answers a text with nothing to say: one model frame.
    silence_samples: int = 1920
    #: How texts are read: normalised or not, and at what speed.
    text: TextOptions = field(default_factory=TextOptions)


# ---------------------------------------------------------------------------
# Requests queued for the speaker task


@dataclass
class _Utterance:
    """A plain Synthesize: one audio stream for the whole text."""

    voice: _VoiceRequest
    text: str
    ssml: bool = False


@dataclass
class _TextStream:
    """A SynthesizeStart..SynthesizeStop stream: one audio stream per sentence, which
    arrive while earlier ones are spoken; None in `sentences` ends the stream."""

    voice: _VoiceRequest
    ssml: bool = False  # markup is spoken once whole: a tag may be cut between chunks
    sentences: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    splitter: SentenceStream = field(default_factory=SentenceStream)
    markup: list[str] = field(default_factory=list)
    chars: int = 0


@dataclass
class _AudioOut:
    """An audio stream being sent: its AudioStart (which leaves with the first chunk),
    the samples sent, and since when they play."""

    rate: int
    start: Event
    samples: int = 0
    playing_since: float | None = None


@dataclass
class _Reply:
    """An event to send in turn with the audio before it."""

    event: Event


class PocketTTSEventHandler(AsyncEventHandler):
    """Serves one connection (or the stdio pipe pair)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        info: Callable[[], Info],
        speakers: Speakers,
        worker: Worker,
        settings: HandlerSettings,
        recent: RecentRequests | None = None,
    ) -> None:
        super().__init__(reader, writer)
        self._info = info
        self._speakers = speakers
        self._worker = worker
        self._settings = settings
        self._recent = recent
        self._requests: asyncio.Queue[_Utterance | _TextStream | _Reply | None] = asyncio.Queue()
        self._stream: _TextStream | None = None
        self._speaker: asyncio.Task[None] | None = None
        self._speaking = False  # the speaker is working on a request
        self._reading: asyncio.Task[bool] | None = None
        self._awaiting_input = False  # the reader is waiting for the client
        self._interrupted = False  # reading was stopped from here, not by the client
        self._closing = False  # the server is shutting down
        self._frames: FrameStream | None = None  # the audio being spoken
        self._bad_events = 0
        # Since when the client owes the open stream's next text (None: it owes nothing).
        self._text_due_since: float | None = None
        # When the client last did its part (connected, completed an event, took enough
        # audio for a write to go out), and the writes now waiting for it to read.
        self._progress = time.monotonic()
        self._writes_waiting = 0
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer or "local")
        connection = writer.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)

    # -- reading ------------------------------------------------------------

    async def run(self, first: Event | None = None) -> None:
        """Serve the connection to its end; `first` is an event already read from it."""
        self._is_running = True
        self._reading = asyncio.current_task()
        self._speaker = asyncio.create_task(self._speak_requests(), name=f"speaker {self.peer}")
        _LOGGER.debug("%s: connected", self.peer)
        at_eof = False
        try:
            at_eof = await self._read_events(first)
        except (ProtocolError, BadEvent) as err:  # a BadEvent here is a malformed request
            _LOGGER.warning("%s: closing the connection: %s", self.peer, err)
            await self._send_error(f"Bad request: {err}", "bad-request")
        except ConnectionError as err:
            _LOGGER.info("%s: connection lost: %s", self.peer, err)
        except Exception:
            _LOGGER.exception("%s: closing the connection after an internal error", self.peer)
        finally:
            await self._end(finish=self._closing or (at_eof and self._settings.finish_on_eof))
            # A cancelled task keeps its exception, whose traceback holds this handler
            # (and the job and voice its frames were using): without these references
            # they would wait for a full garbage collection, which an idle server
            # seldom makes.
            self._speaker = self._reading = None
            self.writer.close()
            _LOGGER.debug("%s: disconnected", self.peer)

    async def _read_events(self, first: Event | None) -> bool:
        """Handle `first`, then read and handle events until the client or the server
        ends the connection: True at the end of the input, or when reading was stopped
        from here."""
        loop = asyncio.get_running_loop()
        if first is not None and not await self.handle_event(first):
            return False
        while self._is_running:
            self._awaiting_input = True
            try:
                event = await read_event(
                    self.reader,
                    idle_timeout=self._silence_allowed(loop.time()),
                    partial_timeout=self._settings.idle_timeout,
                )
            except Idle:
                if self._text_due_since is not None and self._silence_allowed(loop.time()) <= 0:
                    _LOGGER.info(
                        "%s: closing: the text stream sent nothing for %g s (--stream-timeout)",
                        self.peer, self._settings.stream_timeout,
                    )
                    return False
                if self.has_work():
                    continue
                _LOGGER.debug("%s: idle for %g s, closing", self.peer, self._settings.idle_timeout)
                return False
            except BadEvent as err:
                self._skip(err)
                continue
            except asyncio.CancelledError:
                if not self._interrupted:
                    raise
                self._interrupted = False
                reader = asyncio.current_task()
                assert reader is not None  # this runs in the reading task
                reader.uncancel()
                return True
            finally:
                self._awaiting_input = False
            if event is None:
                return True
            self._progress = time.monotonic()
            if self._text_due_since is not None:  # the stream's clock starts again
                self._text_due_since = loop.time()
            if not await self.handle_event(event):
                return False
        return True

    def _silence_allowed(self, now: float) -> float:
        """How long the client may now stay silent before the reader wakes up to judge:
        `idle_timeout`, or less while a stream is open (its text may fall due meanwhile)."""
        allowed = self._settings.idle_timeout
        if self._stream is not None:
            allowed = min(allowed, self._settings.stream_timeout)
        if self._text_due_since is not None:
            remaining = self._text_due_since + self._settings.stream_timeout - now
            allowed = max(0.0, min(allowed, remaining))
        return allowed

    def _skip(self, err: BadEvent) -> None:
        """Ignore a bad event, in one log line; close the connection after a few."""
        self._bad_events += 1
        if self._bad_events >= MAX_BAD_EVENTS:
            raise ProtocolError(f"{self._bad_events} bad events; the last: {err}")
        _LOGGER.warning("%s: ignored a bad event: %s", self.peer, err)

    def _interrupt_reading(self) -> None:
        """Stop reading from the client, as if its input had ended."""
        self._is_running = False
        if self._awaiting_input and self._reading is not None and not self._interrupted:
            self._interrupted = True
            self._reading.cancel()

    # -- at the connection limit --------------------------------------------

    def has_work(self) -> bool:
        """A request is being spoken or waits its turn, or a text stream is open."""
        return self._speaking or self._stream is not None or not self._requests.empty()

    def waiting_since(self) -> float | None:
        """Since when (`time.monotonic()`) the connection has waited on its client: for
        an event or the rest of one, for the text its stream owes, or for it to take the
        audio already sent; None while it waits on the server (a voice loading, frames
        being synthesized)."""
        if self._writes_waiting or not self._speaking or self._text_due_since is not None:
            return self._progress
        return None

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            _LOGGER.debug("%s: describe", self.peer)
            await self.write_event(self._info().event())
        elif Synthesize.is_type(event.type):
            if self._stream is None:  # inside a stream it only repeats the streamed text
                text = _text_of(event)
                self._check_length(len(text))
                self._queue(_Utterance(_voice_of(event), text, _is_ssml(event)))
        elif not self._settings.streaming:
            _LOGGER.debug("%s: ignored %s (streaming is off)", self.peer, event.type)
        elif SynthesizeStart.is_type(event.type):
            if self._stream is not None:
                _LOGGER.debug("%s: synthesize-start inside a stream ends that stream", self.peer)
                self._close_stream()
            self._stream = _TextStream(_voice_of(event), _is_ssml(event))
            self._queue(self._stream)
        elif SynthesizeChunk.is_type(event.type):
            if self._stream is None:
                self._skip(BadEvent("synthesize-chunk outside a stream"))
                return True
            text = _text_of(event)
            self._stream.chars += len(text)
            self._check_length(self._stream.chars)
            if self._stream.ssml:
                self._stream.markup.append(text)
            else:
                for sentence in self._stream.splitter.add(text):
                    self._stream.sentences.put_nowait(sentence)
        elif SynthesizeStop.is_type(event.type):
            if self._stream is None:  # answered anyway: the client waits for it
                _LOGGER.debug("%s: synthesize-stop outside a stream", self.peer)
                self._queue(_Reply(SynthesizeStopped().event()))
            else:
                self._close_stream()
        else:
            _LOGGER.debug("%s: ignored unknown event %s", self.peer, quote(event.type))
        return True

    def _check_length(self, chars: int) -> None:
        limit = self._settings.max_text_chars
        if chars > limit:
            raise ProtocolError(
                f"the text is longer than the limit of {limit} characters (--max-text-chars)"
            )

    def _queue(self, request: _Utterance | _TextStream | _Reply) -> None:
        if self._requests.qsize() >= MAX_QUEUED_REQUESTS:
            raise ProtocolError(f"more than {MAX_QUEUED_REQUESTS} requests waiting")
        self._requests.put_nowait(request)

    def _close_stream(self) -> None:
        assert self._stream is not None
        stream = self._stream
        rest = "".join(stream.markup) if stream.ssml else stream.splitter.finish()
        if rest:
            self._stream.sentences.put_nowait(rest)
        self._stream.sentences.put_nowait(None)
        self._stream = None

    async def _end(self, finish: bool) -> None:
        """Stop the speaker: after the queued requests (stdio input ended, or the server
        is shutting down and ends them short), or at once (the client is gone: its jobs
        are cancelled by the speaker's cleanup)."""
        assert self._speaker is not None
        if finish:
            if self._stream is not None:
                self._close_stream()
            self._requests.put_nowait(None)
        else:
            self._speaker.cancel()
        await asyncio.wait({self._speaker})

    # -- shutting down ------------------------------------------------------

    def shut_down(self) -> None:
        """End the connection soon: the audio in progress stops where it is with its
        AudioStop (and SynthesizeStopped for a stream), nothing more is read or spoken."""
        self._closing = True
        if self._frames is not None:
            self._frames.stop()  # the worker's time goes to the connections still ending
        if self._stream is not None:
            self._stream.sentences.put_nowait(None)
            self._stream = None
        self._interrupt_reading()

    def abort(self) -> None:
        """Drop the connection without another word (a client that does not read)."""
        self.writer.transport.abort()

    # -- writing ------------------------------------------------------------

    async def write_event(self, event: Event) -> None:
        await self._send(event)

    async def _send(self, *events: Event) -> None:
        """Write `events` in one piece: every write can wake the client, and on a small
        CPU each wake-up takes a core from the engine."""
        self.writer.write(encode(*events))
        self._writes_waiting += 1
        try:
            await self.writer.drain()
        finally:
            self._writes_waiting -= 1
        self._progress = time.monotonic()

    async def _send_error(self, text: str, code: str) -> None:
        try:
            await self.write_event(Error(text=text, code=code).event())
        except (ConnectionError, RuntimeError):
            pass  # the peer is gone already

    # -- speaking -----------------------------------------------------------

    async def _speak_requests(self) -> None:
        while (request := await self._requests.get()) is not None and not self._closing:
            self._speaking = True
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
                _LOGGER.warning("%s: %s", self.peer, err)
                await self._send_error(str(err), type(err).__name__)
                self._interrupt_reading()
                return
            except ConnectionError as err:
                _LOGGER.info("%s: connection lost while speaking: %s", self.peer, err)
                self._interrupt_reading()
                return
            except Exception:
                _LOGGER.exception("%s: synthesis failed", self.peer)
                await self._send_error("Internal error: synthesis failed", "internal-error")
                self._interrupt_reading()
                return
            finally:
                self._speaking = False

    async def _speak_utterance(self, utterance: _Utterance) -> None:
        request = utterance.voice
        choice = self._speakers.choose(request.name, request.language, utterance.text)
        with self._reported("synthesize", request.name or choice.name) as report:
            async with self._speakers.use(choice) as speaker:
                said = self._spoken(utterance.text, speaker, utterance.ssml)
                await self._speak(speaker, said, report)

    async def _speak_stream(self, stream: _TextStream) -> None:
        request = stream.voice
        with self._reported("stream", request.name or "") as report:
            async with AsyncExitStack() as stack:
                # Acquired up front where the request tells who speaks: an unknown voice is
                # reported before any text arrives, the voice loads while the first
                # sentence is being written, and it stays loaded for the whole stream.
                # Otherwise the first sentence's language decides.
                speaker: Speaker | None = None

                async def speaker_for(text: str) -> Speaker:
                    choice = self._speakers.choose(request.name, request.language, text)
                    report.voice = request.name or choice.name
                    return await stack.enter_async_context(self._speakers.use(choice))

                if not self._speakers.needs_text(request.name, request.language):
                    speaker = await speaker_for("")
                spoken = False
                while (sentence := await self._next_sentence(stream)) is not None:
                    if self._closing:
                        break
                    if report.first_audio is None:
                        report.received = report.loop.time()
                    speaker = speaker or await speaker_for(sentence)
                    said = self._spoken(sentence, speaker, stream.ssml)
                    await self._speak(speaker, said, report)
                    spoken = True
                if not spoken:  # a stream without text still gets its (silent) audio
                    await self._speak(speaker or await speaker_for(""), SpokenRequest(()), report)
            await self.write_event(SynthesizeStopped().event())

    async def _next_sentence(self, stream: _TextStream) -> str | None:
        """The stream's next sentence; while it has none, the client owes text."""
        if stream.sentences.empty():
            self._text_due_since = asyncio.get_running_loop().time()
        try:
            return await stream.sentences.get()
        finally:
            self._text_due_since = None

    def _spoken(self, text: str, speaker: Speaker, ssml: bool) -> SpokenRequest:
        """The text as the voice's language says it, at the voice's own speed if it has
        one (see normalize/spoken.py)."""
        options = self._settings.text.for_voice(speaker.speed)
        return spoken(text, speaker.language, options, ssml=ssml)

    @contextlib.contextmanager
    def _reported(self, kind: str, voice: str) -> Iterator[RequestReport]:
        """A request's report, logged however the request ends."""
        loop = asyncio.get_running_loop()
        report = RequestReport(kind, voice, loop, loop.time())
        try:
            yield report
        except asyncio.CancelledError:
            report.end("cut short: the client left")
            raise
        except ConnectionError:
            report.end("cut short: the connection was lost")
            raise
        except Exception:
            report.end("failed")
            raise
        finally:
            report.log(self._settings.sample_rate, self._settings.quantized, self._recent)

    async def _speak(self, speaker: Speaker, request: SpokenRequest, report: RequestReport) -> None:
        """One audio stream: AudioStart, an AudioChunk per decoded frame (and per frame
        of a silence the request asks for), AudioStop.

        AudioStart leaves with the first chunk: sent on its own, it would wake the
        client while the first frame is being computed, on a core that frame uses.
        """
        report.chars += request.chars
        if request.warning:
            _LOGGER.warning("%s: %s", self.peer, request.warning)
        rate = self._settings.sample_rate
        out = _AudioOut(rate, AudioStart(rate, SAMPLE_WIDTH, CHANNELS, timestamp=0).event())
        started = report.loop.time()
        for piece in request.pieces:
            if self._closing:
                break
            if isinstance(piece, Silence):
                await self._send_audio(out, self._silence(piece.seconds), report)
            elif piece.text.strip():
                try:
                    await self._stream_frames(speaker, piece, report, out)
                except TextError as err:  # nothing speakable (only symbols, say)
                    _LOGGER.debug("%s: nothing to say: %s", self.peer, err)
        report.busy += report.loop.time() - started
        if not out.samples:  # Home Assistant needs audio to convert, if only a moment's silence
            await self._send_audio(out, self._silence(0.0), report)
        await self._send(AudioStop(timestamp=out.samples * 1000 // rate).event())

    def _silence(self, seconds: float) -> list[np.ndarray]:
        """`seconds` of silence in frames of the model's size (at least one frame)."""
        frame = self._settings.silence_samples
        total = max(frame, round(seconds * self._settings.sample_rate))
        return [np.zeros(min(frame, total - start), dtype=np.float32)
                for start in range(0, total, frame)]

    async def _stream_frames(
        self, speaker: Speaker, piece: SpokenText, report: RequestReport, out: _AudioOut
    ) -> None:
        """Send the job's frames as they come, at the piece's speaking rate."""
        stream = FrameStream(
            self._worker, speaker.voice, piece.text, self._settings.options, self.peer,
            synthesizer=speaker.synthesizer, speed=piece.rate, sample_rate=out.rate,
        )
        async with stream:
            self._frames = stream
            try:
                async for frames in stream:
                    await self._send_audio(out, frames, report)
            finally:
                self._frames = None
        if stream.stopped:
            report.end("cut short: the server is stopping")

    async def _send_audio(
        self, out: _AudioOut, frames: list[np.ndarray], report: RequestReport
    ) -> None:
        """A chunk per frame (AudioStart before the stream's first), and how late it is."""
        frames = [frame for frame in frames if len(frame)]
        if not frames:
            return
        now = report.loop.time()
        if report.first_audio is None:
            report.first_audio = now
        chunks = audio_chunks(frames, out.rate, out.samples)
        if out.playing_since is None:
            out.playing_since = now
            chunks.insert(0, out.start)
        report.late = max(report.late, now - out.playing_since - out.samples / out.rate)
        count = sum(len(frame) for frame in frames)
        out.samples += count
        report.samples += count
        await self._send(*chunks)
