"""Each voice's own speaking rate, kept beside the voices."""

from __future__ import annotations

import json
import logging
import os

import pytest

from wyoming_pocket_tts.voices.settings import SETTINGS_FILE, VoiceSettings


def test_a_speed_is_kept_across_restarts(tmp_path) -> None:
    VoiceSettings(tmp_path / "fr").set_speed("estelle", 1.25)
    again = VoiceSettings(tmp_path / "fr")
    assert again.speed("estelle") == 1.25
    assert again.speed("other") is None
    assert again.speeds() == {"estelle": 1.25}


def test_renaming_and_forgetting_follow_the_voice(tmp_path) -> None:
    settings = VoiceSettings(tmp_path)
    settings.set_speed("oma", 0.8)
    settings.rename("oma", "grossmutter")
    assert VoiceSettings(tmp_path).speeds() == {"grossmutter": 0.8}
    settings.forget("grossmutter")
    assert VoiceSettings(tmp_path).speeds() == {}


@pytest.mark.parametrize("speed", [0.49, 2.01, float("nan"), float("inf")])
def test_a_speed_out_of_range_is_refused(tmp_path, speed: float) -> None:
    settings = VoiceSettings(tmp_path)
    with pytest.raises(ValueError, match=r"between 0\.5 and 2\.0"):
        settings.set_speed("alba", speed)
    assert not (tmp_path / SETTINGS_FILE).exists()


def test_an_edit_of_the_file_is_seen(tmp_path) -> None:
    settings = VoiceSettings(tmp_path)
    settings.set_speed("alba", 1.1)
    path = tmp_path / SETTINGS_FILE
    path.write_text(json.dumps({"voices": {"alba": {"speed": 1.7}, "bob": {"speed": 0.6}}}))
    os.utime(path, ns=(1, 1))  # another mtime than the write above, whatever the clock
    assert settings.speeds() == {"alba": 1.7, "bob": 0.6}


@pytest.mark.parametrize(
    "content", ["{not json", '{"voices": []}', '{"voices": {"a": {"speed": "fast"}}}',
                '{"voices": {"a": {"speed": 9}}}', "[]"],
)
def test_a_damaged_file_is_read_as_empty_with_a_warning(tmp_path, caplog, content) -> None:
    (tmp_path / SETTINGS_FILE).write_text(content)
    caplog.set_level(logging.WARNING)
    assert VoiceSettings(tmp_path).speeds() == {}
    assert "Ignoring the voice settings" in caplog.text
