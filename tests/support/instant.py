"""A connection handler beside a worker whose frames are there at once: the real
Wyoming side, at no cost of synthesis, for tests that run many requests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import numpy as np
from wyoming.info import Info

from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.streaming import Worker
from wyoming_pocket_tts.server.handler import HandlerSettings, PocketTTSEventHandler
from wyoming_pocket_tts.speakers import Speaker
from wyoming_pocket_tts.voices.names import LanguageVoice
from wyoming_pocket_tts.voices.store import VoiceKind, VoiceSource, VoiceStore

FRAMES_PER_REQUEST = 2


class InstantJob:
    def __init__(self, on_ready: Callable[[], None]) -> None:
        self.error: Exception | None = None
        self.done = True
        self._frames = [np.full(1920, 0.1, dtype=np.float32)] * FRAMES_PER_REQUEST
        on_ready()

    def take(self) -> list[np.ndarray]:
        frames, self._frames = self._frames, []
        return frames

    def passed_on(self) -> None:
        pass

    def cancel(self) -> None:
        pass


class InstantWorker:
    def submit(
        self, voice: Any, text: str, options: Any, on_ready: Callable[[], None],
        synthesizer: Any = None,
    ) -> InstantJob:
        return InstantJob(on_ready)


class StoreSpeakers:
    """One language's voices as the handler sees them, spoken by the worker's own model:
    for handler tests, which are about the connection, not about languages
    (tests/test_languages.py and the server tests choose among languages)."""

    def __init__(
        self, voices: VoiceStore[Any], language: str = "en", speed: float | None = None
    ) -> None:
        self.voices = voices
        self.language = language
        self.speed = speed

    def choose(self, voice: str | None, language: str | None, text: str) -> LanguageVoice:
        return LanguageVoice(self.language, voice or self.voices.default_voice)

    def needs_text(self, voice: str | None, language: str | None) -> bool:
        return False

    @asynccontextmanager
    async def use(self, choice: LanguageVoice) -> AsyncIterator[Speaker]:
        async with self.voices.use(choice.name) as voice:
            yield Speaker(voice, None, self.language, self.speed)


def instant_handler(
    worker: Worker | None = None, language: str = "en", voice_speed: float | None = None,
    **settings: Any,
) -> Callable[..., PocketTTSEventHandler]:
    """A handler factory with one voice, `test`, of `language` (and its own speed, if
    given), beside `worker` (an InstantWorker by default), with `settings` for
    HandlerSettings."""
    source = VoiceSource("test", None, VoiceKind.STATE, "test voice")
    voices = VoiceStore(
        sources=lambda: {"test": source}, load=lambda _: object(), default_voice="test",
        max_loaded=1,
    )
    return partial(
        PocketTTSEventHandler, info=Info, speakers=StoreSpeakers(voices, language, voice_speed),
        worker=worker or InstantWorker(),
        settings=HandlerSettings(sample_rate=24000, options=GenerationOptions(), **settings),
    )
