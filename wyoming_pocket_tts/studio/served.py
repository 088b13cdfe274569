"""The served languages as the studio sees them: each voice under the one name it is
served by, and a language's model only while it is in memory.

Listing, renaming and deleting voices never load a model: a language whose model is
not in memory has no voice loaded or speaking, and renaming or deleting its files
needs no model. Previewing, exporting and adding a voice do load it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from .. import resolve
from ..catalog import load_catalog
from ..languages import Languages
from ..speakers import LoadedLanguage
from ..voices.files import VoiceFiles
from ..voices.names import LanguageVoice
from ..voices.store import VoiceSource


@dataclass(frozen=True)
class StudioVoice:
    """A voice by its served name, with the language whose model speaks it."""

    served: str  # the one name Home Assistant and the studio know it by
    language: str
    source: VoiceSource  # `source.name` is its name in its own language, its file's stem

    @property
    def local(self) -> LanguageVoice:
        return LanguageVoice(self.language, self.source.name)


def served_voices(languages: Languages[LoadedLanguage]) -> dict[str, StudioVoice]:
    """Every voice of every language by its served name, from one scan of the folders."""
    return {
        name: StudioVoice(name, voice.language, source)
        for name, (voice, source) in languages.voice_sources().items()
    }


@asynccontextmanager
async def in_memory(
    languages: Languages[LoadedLanguage], code: str
) -> AsyncIterator[LoadedLanguage | None]:
    """The language's model and voices if they are in memory, kept there for the block;
    None if they are not, and then they are not loaded."""
    if code not in languages.loaded:
        yield None
        return
    async with languages.use(code) as loaded:  # in memory: taken without waiting
        yield loaded


async def loaded_voices(languages: Languages[LoadedLanguage]) -> set[LanguageVoice]:
    """The voices in memory, of every language whose model is."""
    loaded: set[LanguageVoice] = set()
    # Least recently used first: using each in that order leaves their order as it was.
    for code in languages.loaded:
        async with in_memory(languages, code) as language:
            if language is not None:
                loaded.update(LanguageVoice(code, name) for name in language.voices.loaded)
    return loaded


def language_name(code: str) -> str:
    """What the catalog calls a language ("French"), else its code."""
    return load_catalog().languages.get(code, code)


def voice_files(language: LoadedLanguage) -> VoiceFiles:
    """The voice files of the language's model, as its voice store reads them."""
    return resolve.voice_files(language.model, language.language.resolved)
