"""Telling the served languages apart, for requests that name no voice."""

from __future__ import annotations

import pytest

from tests.support.answers import ANSWERS
from wyoming_pocket_tts.language_detection import LanguageDetector

ALL = tuple(ANSWERS)

@pytest.fixture(scope="module")
def every_language() -> LanguageDetector:
    return LanguageDetector(ALL, "en")


@pytest.mark.parametrize("language", ALL)
def test_each_language_is_told_apart(every_language: LanguageDetector, language: str) -> None:
    assert every_language.detect(ANSWERS[language]) == language


@pytest.mark.parametrize("language", ALL)
def test_only_served_languages_are_answered(language: str) -> None:
    """A text in a language the server does not speak gets one it does."""
    served = ("en", "fr") if language not in ("en", "fr") else ("de", "nl")
    assert LanguageDetector(served, served[0]).detect(ANSWERS[language]) in served


@pytest.mark.parametrize("default", ALL)
@pytest.mark.parametrize("text", ["Done.", "OK", "", "   ", "🙂🙂🙂", "42", "\x00\x07"])
def test_too_little_text_falls_back_to_the_default(
    default: str, text: str
) -> None:
    assert LanguageDetector(ALL, default).detect(text) == default


@pytest.mark.parametrize("default", ["fr", "nl"])
def test_unsure_guesses_fall_back_to_the_default(default: str) -> None:
    """Digits and units alone carry no language."""
    assert LanguageDetector(ALL, default).detect("21.5 °C 64 % 12:30") == default


def test_one_language_needs_no_model() -> None:
    detector = LanguageDetector(("de",), "de")
    assert detector.detect(ANSWERS["fr"]) == "de"


def test_the_default_must_be_served() -> None:
    with pytest.raises(ValueError, match="'it' is not among"):
        LanguageDetector(("en", "fr"), "it")
