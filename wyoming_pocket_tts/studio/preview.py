"""A voice speaking a sentence over HTTP: a WAV streamed while it is synthesized.

The WAV header goes out first with its sizes unknown (the largest values, as a live
stream has them, which browsers play), then each frame the engine decodes, in
chunked transfer encoding, so playback starts after the first frame. As in the
Wyoming handler, the event loop only passes frames on (`FrameStream`); a listener
who goes away cancels the job. The text is read as the server reads a request for the
voice: normalised in its language, at its own speed, so the preview is what Home
Assistant will hear.
"""

from __future__ import annotations

import asyncio
import logging
import struct

from aiohttp import web

from ..engine.errors import EngineError
from ..engine.pcm import CHANNELS, SAMPLE_WIDTH, pcm16
from ..engine.runtime.options import GenerationOptions
from ..engine.runtime.streaming import FrameStream
from ..engine.runtime.worker import SynthesisWorker
from ..normalize.spoken import SpokenText, TextOptions, spoken
from ..recent import RecentRequests
from ..speakers import LoadedLanguage
from .served import StudioVoice

_LOGGER = logging.getLogger(__name__)

UNKNOWN_SIZE = 0xFFFFFFFF
#: What a voice says when no text is given, in its own language.
SAMPLE_TEXTS = {
    "en": "Hello! This is how I sound when I read your messages aloud.",
    "fr": "Bonjour ! Voici ma voix quand je lis vos messages à haute voix.",
    "de": "Hallo! So klinge ich, wenn ich Ihre Nachrichten vorlese.",
    "it": "Ciao! Ecco come suono quando leggo ad alta voce i tuoi messaggi.",
    "pt": "Olá! É assim que eu soo quando leio as suas mensagens em voz alta.",
    "es": "¡Hola! Así sueno cuando leo tus mensajes en voz alta.",
    "nl": "Hallo! Zo klink ik wanneer ik je berichten voorlees.",
}


def sample_text(code: str) -> str:
    return SAMPLE_TEXTS.get(code, SAMPLE_TEXTS["en"])


def as_spoken(
    text: str, language: str, options: TextOptions, voice_speed: float | None
) -> SpokenText:
    """`text` as the server says it with a voice of `language` (see normalize/spoken.py):
    read with the server's options, at the voice's own speed if it has one."""
    (piece,) = spoken(text, language, options.for_voice(voice_speed)).pieces  # plain: one
    assert isinstance(piece, SpokenText)
    return piece


def streaming_wav_header(sample_rate: int) -> bytes:
    """A 16-bit mono PCM WAV header whose RIFF and data sizes are left unknown."""
    block = CHANNELS * SAMPLE_WIDTH
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", UNKNOWN_SIZE, b"WAVE",
        b"fmt ", 16, 1, CHANNELS, sample_rate, sample_rate * block, block, 8 * SAMPLE_WIDTH,
        b"data", UNKNOWN_SIZE,
    )


async def stream_preview(
    request: web.Request, *, language: LoadedLanguage, voice: StudioVoice,
    worker: SynthesisWorker, options: GenerationOptions, recent: RecentRequests,
    speech: SpokenText,
) -> web.StreamResponse:
    """Speak `speech` at its rate with `voice` and its language's model (in memory:
    `language`) into the response. Errors before the first byte (unknown voice,
    unspeakable text) propagate, for the caller to answer with a status."""
    loop = asyncio.get_running_loop()
    received = loop.time()
    samples, first_audio = 0, None
    sample_rate = language.model.sample_rate
    name = voice.served
    async with (
        language.voices.use(voice.source.name) as state,
        FrameStream(
            worker, state, speech.text, options, synthesizer=language.synthesizer,
            speed=speech.rate, sample_rate=sample_rate,
        ) as frames,
    ):
        response = web.StreamResponse(
            headers={"Content-Type": "audio/wav", "Cache-Control": "no-store"}
        )
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            await response.write(streaming_wav_header(sample_rate))
            async for batch in frames:
                first_audio = first_audio or loop.time()
                samples += sum(len(frame) for frame in batch)
                await response.write(b"".join(pcm16(frame) for frame in batch))
        except ConnectionError:
            _LOGGER.debug("Preview of %s: the listener went away", name)
            return response
        except EngineError as error:  # the status is sent: the audio just ends early
            _LOGGER.warning("Preview of %s failed: %s", name, error)
        finally:
            recent.add(
                "preview", name, len(speech.text), samples / sample_rate,
                None if first_audio is None else first_audio - received, loop.time() - received,
            )
        await response.write_eof()
        return response
