"""One name per voice across every served language.

Home Assistant groups voices by language but sends only a voice's name, so no two
languages may offer the same one. Each model offers every predefined voice, and a
custom voice's name is its file's: a name found in several languages stays with the
language that claims it most (a custom voice, or a predefined voice in its speaker's
own language, over a predefined voice of another language's speaker; then the
default language, then the order the languages were given), and is `NAME-LANG` in
the others. With one language, every voice keeps its name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .store import VoiceSource


@dataclass(frozen=True)
class LanguageVoice:
    """A voice as one language's voice store knows it."""

    language: str
    name: str


def name_voices(
    available: Mapping[str, Mapping[str, VoiceSource]],
    native: Callable[[str, VoiceSource], bool],
) -> dict[str, LanguageVoice]:
    """The served names of the voices `available` in each language (in order, the
    default first). `native(language, source)` tells whether a voice belongs to that
    language rather than being offered by it as every model offers every voice."""
    languages: Sequence[str] = list(available)
    claims: dict[str, list[tuple[bool, int, str]]] = {}
    for rank, language in enumerate(languages):
        for name, source in available[language].items():
            claims.setdefault(name, []).append((not native(language, source), rank, language))
    named: dict[str, LanguageVoice] = {}
    renamed: list[LanguageVoice] = []
    for name, claimants in claims.items():
        claimants.sort()
        named[name] = LanguageVoice(claimants[0][2], name)
        renamed.extend(LanguageVoice(language, name) for _, _, language in claimants[1:])
    for voice in renamed:
        served = f"{voice.name}-{voice.language}"
        while served in named:  # a custom voice already has that name
            served = f"{served}-{voice.language}"
        named[served] = voice
    return named
