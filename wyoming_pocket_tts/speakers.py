"""Who speaks a request: a served language's model in memory and one of its voices.

The server's handler asks for a voice by the name Home Assistant knows it by (or for
none, with a language or a text to go by) and gets the voice state and the model
that go together; the studio lists and edits the voices of each language. Imports no
torch: the engine's objects are passed through untyped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from .languages import Language, Languages
from .voices.names import LanguageVoice
from .voices.store import VoiceStore


@dataclass(frozen=True)
class LoadedLanguage:
    """A language whose model is in memory, with its voices."""

    language: Language
    model: Any  # the engine's PocketTTS
    synthesizer: Any  # the engine's Synthesizer of that model
    voices: VoiceStore[Any]  # its voices, loaded on first use


@dataclass(frozen=True)
class Speaker:
    """A voice state, the model it was made for, the language they speak, and the
    voice's own speaking rate if the user set one."""

    voice: Any
    synthesizer: Any
    language: str
    speed: float | None = None


class Speakers:
    """The handler's view of the served languages (see languages.py)."""

    def __init__(self, languages: Languages[LoadedLanguage]) -> None:
        self.languages = languages

    def choose(self, voice: str | None, language: str | None, text: str) -> LanguageVoice:
        return self.languages.choose(voice, language, text)

    def needs_text(self, voice: str | None, language: str | None) -> bool:
        """Whether only the text can tell which language speaks a request."""
        return (
            voice is None and self.languages.served_code(language) is None
            and len(self.languages.codes) > 1
        )

    @asynccontextmanager
    async def use(self, choice: LanguageVoice) -> AsyncIterator[Speaker]:
        """The chosen voice and its model, both kept in memory until the block exits."""
        async with (
            self.languages.use(choice.language) as loaded,
            loaded.voices.use(choice.name) as voice,
        ):
            settings = loaded.language.settings
            speed = settings.speed(choice.name) if settings is not None else None
            yield Speaker(voice, loaded.synthesizer, choice.language, speed)
