"""Every voice name belongs to exactly one served language."""

from __future__ import annotations

from pathlib import Path

import pytest

from wyoming_pocket_tts.catalog import load_catalog
from wyoming_pocket_tts.voices.names import LanguageVoice, name_voices
from wyoming_pocket_tts.voices.store import VoiceKind, VoiceSource

ALL = ("en", "fr", "de", "it", "pt", "es", "nl")
CATALOG = load_catalog()
SPEAKER_LANGUAGE = {
    voice.name: voice.language for voice in CATALOG.find_model(CATALOG.default_model).voices
}


def _predefined() -> dict[str, VoiceSource]:
    return {
        name: VoiceSource(name, None, VoiceKind.PREDEFINED, "")
        for name in SPEAKER_LANGUAGE
    }


def _custom(name: str, folder: str) -> VoiceSource:
    return VoiceSource(name, Path(folder, f"{name}.wav"), VoiceKind.AUDIO, "")


def _native(language: str, source: VoiceSource) -> bool:
    return source.kind is not VoiceKind.PREDEFINED or SPEAKER_LANGUAGE[source.name] == language


def _served(
    *languages: str, custom: dict[str, list[str]] | None = None
) -> dict[str, LanguageVoice]:
    available = {}
    for language in languages:
        voices = _predefined()
        for name in (custom or {}).get(language, []):
            voices[name] = _custom(name, language)
        available[language] = voices
    return name_voices(available, _native)


@pytest.mark.parametrize("language", ALL)
def test_one_language_keeps_every_name(language: str) -> None:
    named = _served(language)
    assert named == {name: LanguageVoice(language, name) for name in SPEAKER_LANGUAGE}


@pytest.mark.parametrize("language", ALL)
def test_every_language_at_once_names_each_voice_once(language: str) -> None:
    """Each language offers every predefined voice: each (language, voice) gets one name,
    and a speaker's plain name goes to the language they speak."""
    named = _served(*ALL)
    assert len(named) == len(ALL) * len(SPEAKER_LANGUAGE)
    assert len(set(named.values())) == len(named)
    own = [name for name, speaker in SPEAKER_LANGUAGE.items() if speaker == language]
    assert own, f"the catalog has a voice of {language}"
    for name in own:
        assert named[name] == LanguageVoice(language, name)
    for name in SPEAKER_LANGUAGE.keys() - set(own):
        assert named[f"{name}-{language}"] == LanguageVoice(language, name)


@pytest.mark.parametrize("default", ["fr", "nl"])
def test_a_foreign_speaker_goes_to_the_default_language(default: str) -> None:
    """German is not served: its speaker's plain name is the default language's."""
    named = _served(default, "it")
    assert named["juergen"] == LanguageVoice(default, "juergen")
    assert named["juergen-it"] == LanguageVoice("it", "juergen")


def test_a_custom_voice_beats_a_foreign_predefined_one() -> None:
    """Alba speaks English, which is not served: the user's own German "alba" wins over
    the default language's."""
    named = _served("fr", "de", custom={"de": ["alba"]})
    assert named["alba"] == LanguageVoice("de", "alba")
    assert named["alba-fr"] == LanguageVoice("fr", "alba")


def test_two_custom_voices_of_one_name_go_by_language_order() -> None:
    named = _served("de", "es", custom={"de": ["oma"], "es": ["oma"]})
    assert named["oma"] == LanguageVoice("de", "oma")
    assert named["oma-es"] == LanguageVoice("es", "oma")


def test_a_renamed_voice_never_takes_an_existing_name() -> None:
    named = _served("pt", "it", custom={"pt": ["rafael-it"]})
    assert named["rafael-it"] == LanguageVoice("pt", "rafael-it")
    assert named["rafael-it-it"] == LanguageVoice("it", "rafael")
    assert len(set(named.values())) == len(named)
