"""The studio's preview reads a text as the server reads Home Assistant's: numbers and
units said as words in the voice's language, with the server's text options, at the
voice's own speed. Real server processes on the tiny random-weight model, served as
each of the seven languages the text front-end knows, at temperature 0: a text comes
out one way, so a preview of digits sounds as its words written out."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.studio_server import StudioServer, start_studio_server
from wyoming_pocket_tts.normalize import normalize

LANGUAGES = ("en", "fr", "de", "it", "pt", "es", "nl")
WRITTEN = dict.fromkeys(LANGUAGES, "21,5 °C") | {"en": "21.5 °C"}
# Each text ends at its minimum of frames (short audio), said one way.
SHORT_AND_SURE = ("--eos-threshold", "-1000", "--temperature", "0")
# Random weights magnify rounding (thread counts differ by the load): a few 16-bit steps.
TOLERANCE = 4


def voice_of(code: str) -> str:
    return f"{code}_voice"


@pytest.fixture(scope="module")
def voices_dir(tmp_path_factory, voice_wav: Path) -> Path:
    """The same recording as each language's voice: English's in the folder, the others'
    in their subfolders."""
    folder = tmp_path_factory.mktemp("normalize-voices")
    for code in LANGUAGES:
        into = folder if code == "en" else folder / code
        into.mkdir(exist_ok=True)
        shutil.copy(voice_wav, into / f"{voice_of(code)}.wav")
    return folder


def models(tiny_model) -> list[str]:
    return [arg for code in LANGUAGES for arg in ("--model", f"{code}={tiny_model.config_path}")]


@pytest.fixture(scope="module")
def studio(tmp_path_factory, tiny_model, voices_dir) -> Iterator[StudioServer]:
    """The tiny model served as every language."""
    server = start_studio_server(
        tmp_path_factory.mktemp("normalize"), tiny_model.config_path, *models(tiny_model),
        "--voices-dir", str(voices_dir), "--max-loaded-models", str(len(LANGUAGES)),
        *SHORT_AND_SURE,
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def as_written(tmp_path_factory, tiny_model, voice_wav) -> Iterator[StudioServer]:
    """English read as written (--no-normalize), at 1.25 unless a voice says otherwise."""
    voices = tmp_path_factory.mktemp("as-written-voices")
    shutil.copy(voice_wav, voices / f"{voice_of('en')}.wav")
    server = start_studio_server(
        tmp_path_factory.mktemp("as-written"), tiny_model.config_path,
        "--voices-dir", str(voices), "--no-normalize", "--speed", "1.25", *SHORT_AND_SURE,
    )
    yield server
    server.stop()


def preview(studio: StudioServer, name: str, text: str) -> np.ndarray:
    response = studio.api("GET", f"api/voices/{name}/preview", params={"text": text})
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content[44:], dtype="<i2").astype(int)


def last_chars(studio: StudioServer) -> int:
    return studio.api("GET", "api/status").json()["recent_requests"][0]["chars"]


def assert_same(heard: np.ndarray, expected: np.ndarray) -> None:
    assert heard.shape == expected.shape
    assert np.abs(heard - expected).max() <= TOLERANCE


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_preview_says_numbers_and_units_as_words_in_its_language(studio, code):
    words = normalize(WRITTEN[code], code)
    assert words != WRITTEN[code] and "21" not in words
    heard = preview(studio, voice_of(code), WRITTEN[code])
    assert last_chars(studio) == len(words)  # what the engine was given to say
    assert_same(heard, preview(studio, voice_of(code), words))


def test_the_written_text_would_sound_otherwise(studio, as_written):
    """What the normalising server says for the digits is what the other says for the
    words, not what it says for the digits."""
    as_words = normalize(WRITTEN["en"], "en")
    assert as_written.api("PATCH", f"api/voices/{voice_of('en')}", json={"speed": 1.0}).ok
    try:
        digits = preview(as_written, voice_of("en"), WRITTEN["en"])
        assert last_chars(as_written) == len(WRITTEN["en"])  # read as written
        words = preview(as_written, voice_of("en"), as_words)
    finally:
        as_written.api("PATCH", f"api/voices/{voice_of('en')}", json={"speed": None})
    heard = preview(studio, voice_of("en"), WRITTEN["en"])
    assert_same(heard, words)
    assert digits.shape != heard.shape or np.abs(digits - heard).max() > 100


def test_a_voice_without_a_speed_speaks_at_the_servers(as_written):
    name = voice_of("en")
    assert as_written.api("GET", "api/status").json()["speed"] == 1.25
    at_server_speed = len(preview(as_written, name, "Hello there."))
    assert as_written.api("PATCH", f"api/voices/{name}", json={"speed": 1.0}).ok
    try:
        own = len(preview(as_written, name, "Hello there."))
    finally:
        as_written.api("PATCH", f"api/voices/{name}", json={"speed": None})
    assert abs(at_server_speed - own / 1.25) <= 4
