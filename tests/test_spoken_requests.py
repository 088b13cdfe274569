"""What the engine is asked to say: normalised text, SSML and the speaking rate, through
a connection as Home Assistant makes one (the worker records each text it gets)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np
import pytest
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from tests.support.instant import FRAMES_PER_REQUEST, InstantJob, instant_handler
from wyoming_pocket_tts.normalize import normalize
from wyoming_pocket_tts.normalize.spoken import TextOptions

# Home Assistant's kind of sentence, written as each language writes it.
SENSOR = {
    "en": "It is 21.5 °C and 64 % humidity.",
    "fr": "Il fait 21,5 °C et 64 % d'humidité.",
    "de": "Es sind 21,5 °C und 64 % Luftfeuchtigkeit.",
    "it": "Ci sono 21,5 °C e 64 % di umidità.",
    "pt": "Estão 21,5 °C e 64 % de humidade.",
    "es": "Hace 21,5 °C y 64 % de humedad.",
    "nl": "Het is 21,5 °C en 64 % luchtvochtigheid.",
}
LANGUAGES = sorted(SENSOR)


class RecordingWorker:
    """Frames at once (constant, so a silence shows as zeros), and every text it got."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def submit(self, voice: Any, text: str, options: Any, on_ready: Any, synthesizer: Any = None):
        self.texts.append(text)
        return InstantJob(on_ready)


async def _exchange(handler, events: list[Event], ends: int = 1) -> list[Event]:
    """Send `events`, read until the `ends`-th AudioStop (or SynthesizeStopped)."""

    async def serve(reader, writer):
        await handler(reader, writer).run()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    client = AsyncTcpClient("127.0.0.1", server.sockets[0].getsockname()[1])
    received = []
    try:
        await client.connect()
        for event in events:
            await client.write_event(event)
        end = "synthesize-stopped" if any(e.type == "synthesize-start" for e in events) else (
            "audio-stop"
        )
        while ends:
            answer = await asyncio.wait_for(client.read_event(), 10)
            assert answer is not None
            received.append(answer)
            ends -= answer.type == end
        await client.disconnect()
    finally:
        server.close()
        await server.wait_closed()
    return received


def _pcm(events: list[Event]) -> np.ndarray:
    audio = b"".join(event.payload or b"" for event in events if event.type == "audio-chunk")
    return np.frombuffer(audio, dtype=np.int16)


def _spoken(
    events: list[Event], language: str = "en", voice_speed: float | None = None, **text: Any
) -> tuple[list[str], list]:
    worker = RecordingWorker()
    handler = instant_handler(
        worker, language, voice_speed, text=TextOptions(**text), silence_samples=1920
    )
    received = asyncio.run(_exchange(handler, events))
    return worker.texts, received


@pytest.mark.parametrize("language", LANGUAGES)
def test_numbers_and_units_reach_the_engine_as_words(language: str) -> None:
    texts, _ = _spoken([Synthesize(text=SENSOR[language]).event()], language)
    assert texts == [normalize(SENSOR[language], language)]
    assert not any(character.isdigit() for character in texts[0]), texts[0]
    assert "°" not in texts[0] and "%" not in texts[0]


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_number_cut_between_stream_chunks_is_read_whole(language: str) -> None:
    """Home Assistant cuts an LLM's answer anywhere: "… 1" then "2.5 °C …" is 12.5."""
    sentence = SENSOR[language].replace("21", "12")
    cut = sentence.index("12") + 1
    events = [
        SynthesizeStart().event(),
        SynthesizeChunk(text=sentence[:cut]).event(),
        SynthesizeChunk(text=sentence[cut:]).event(),
        SynthesizeStop().event(),
    ]
    texts, _ = _spoken(events, language)
    assert texts == [normalize(sentence, language)]


@pytest.mark.parametrize("language", LANGUAGES)
def test_without_normalizing_the_engine_gets_the_text_as_sent(language: str) -> None:
    texts, _ = _spoken([Synthesize(text=SENSOR[language]).event()], language, normalize=False)
    assert texts == [SENSOR[language]]


def test_plain_text_with_a_tag_is_read_not_parsed() -> None:
    texts, _ = _spoken([Synthesize(text='Say <break time="1s"/> aloud.').event()])
    assert len(texts) == 1 and "break" in texts[0]


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_ssml_break_is_a_second_of_silence(language: str) -> None:
    first, second = SENSOR[language].split(" ", 1)
    markup = f'<speak>{first}<break time="1s"/>{second}</speak>'
    texts, received = _spoken([Synthesize(text=markup, text_format="ssml").event()], language)
    assert texts == [normalize(first, language), normalize(second, language)]
    samples = _pcm(received)
    silent = np.flatnonzero(samples == 0)
    assert len(silent) == 24000  # exactly the break, between the two texts' frames
    assert np.all(np.diff(silent) == 1)
    assert silent[0] == FRAMES_PER_REQUEST * 1920
    assert len(samples) == 2 * FRAMES_PER_REQUEST * 1920 + 24000
    assert [event.type for event in received].count("audio-start") == 1


def test_ssml_say_as_and_sub_are_read_as_asked() -> None:
    markup = (
        '<speak>Call <say-as interpret-as="telephone">555 0100</say-as>, '
        '<sub alias="World Wide Web Consortium">W3C</sub>.</speak>'
    )
    texts, _ = _spoken([Synthesize(text=markup, text_format="ssml").event()])
    assert len(texts) == 1
    assert "W3C" not in texts[0] and "World Wide Web Consortium" in texts[0]
    assert not any(character.isdigit() for character in texts[0])


def test_streamed_ssml_is_spoken_once_whole() -> None:
    chunks = ['<speak>Good <break tim', 'e="500ms"/>night.</speak>']
    events = [
        SynthesizeStart(text_format="ssml").event(),
        *(SynthesizeChunk(text=chunk).event() for chunk in chunks),
        SynthesizeStop().event(),
    ]
    texts, received = _spoken(events)
    assert texts == ["Good", "night."]
    assert (_pcm(received) == 0).sum() == 12000


def test_malformed_ssml_is_spoken_as_its_text_with_one_warning(caplog) -> None:
    caplog.set_level(logging.WARNING)
    markup = "<speak>Lights <b>off</speak> now"
    texts, received = _spoken([Synthesize(text=markup, text_format="ssml").event()])
    assert texts == ["Lights off now"]
    assert "audio-stop" in [event.type for event in received]
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("speed", [0.75, 1.5])
def test_the_speaking_rate_changes_the_length_of_the_audio(language: str, speed: float) -> None:
    texts, received = _spoken([Synthesize(text=SENSOR[language]).event()], language, speed=speed)
    assert texts == [normalize(SENSOR[language], language)]
    assert len(_pcm(received)) == round(FRAMES_PER_REQUEST * 1920 / speed)


def test_an_ssml_rate_multiplies_the_servers_speed() -> None:
    markup = '<speak><prosody rate="150%">Good night.</prosody></speak>'
    _, received = _spoken([Synthesize(text=markup, text_format="ssml").event()], speed=1.2)
    assert len(_pcm(received)) == round(FRAMES_PER_REQUEST * 1920 / 1.8)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_voices_own_speed_wins_over_the_servers(language: str) -> None:
    request = Synthesize(text=SENSOR[language]).event()
    _, received = _spoken([request], language, voice_speed=1.5, speed=0.75)
    assert len(_pcm(received)) == round(FRAMES_PER_REQUEST * 1920 / 1.5)
