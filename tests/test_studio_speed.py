"""A voice's own speaking rate, set in the studio's API against a real server process
(tiny model): kept in the voices folder, followed by renames and deletes, carried by
exported voice files, and heard in previews and Home Assistant's requests alike."""

from __future__ import annotations

import asyncio
import io
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import soundfile
from safetensors.numpy import load, save

from tests.support.server import SHORT, synthesize
from tests.support.studio_server import StudioServer, start_studio_server
from tests.support.voices_audio import speech_like_signal
from wyoming_pocket_tts.engine.model.voice import read_voice_metadata
from wyoming_pocket_tts.voices.settings import VoiceSettings

RATE = 24000
SENTENCE = "Turn the lights on."
# Time-scaling gives a stretch of speech its length over the rate, to a sample or two.
SAMPLES_TOLERANCE = 4


@pytest.fixture(scope="module")
def voices_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("speed-voices")


@pytest.fixture(scope="module")
def studio(tmp_path_factory, tiny_model, voice_wav, voices_dir) -> Iterator[StudioServer]:
    """`voice` comes from --voice: not a file of the voices folder, like a predefined one."""
    server = start_studio_server(
        tmp_path_factory.mktemp("speed"), tiny_model.config_path,
        "--voice", str(voice_wav), "--voices-dir", str(voices_dir), *SHORT,
    )
    yield server
    server.stop()


def recording(seed: int) -> bytes:
    out = io.BytesIO()
    soundfile.write(out, speech_like_signal(4.0, RATE, seed, trailing_silence=0.3), RATE,
                    format="WAV")
    return out.getvalue()


def add(studio: StudioServer, data: bytes, name: str):
    return studio.api("POST", "api/voices", files={"file": ("voice.bin", data)},
                      data={"name": name})


def set_speed(studio: StudioServer, name: str, speed: float | None):
    return studio.api("PATCH", f"api/voices/{name}", json={"speed": speed})


def listed_speeds(studio: StudioServer) -> dict[str, float | None]:
    return {voice["name"]: voice["speed"] for voice in studio.api("GET", "api/voices").json()}


def kept(voices_dir: Path) -> dict[str, float]:
    """What the server reads for every request: the voices folder's settings."""
    return VoiceSettings(voices_dir).speeds()


def metadata(data: bytes) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "voice.safetensors"
        path.write_bytes(data)
        return read_voice_metadata(path)


def preview_samples(studio: StudioServer, name: str) -> int:
    response = studio.api("GET", f"api/voices/{name}/preview", params={"text": SENTENCE})
    assert response.status_code == 200, response.text
    return (len(response.content) - 44) // 2


def wyoming_samples(studio: StudioServer, name: str) -> int:
    audio = asyncio.run(synthesize(studio, SENTENCE, name))
    return sum(len(chunk.audio) for chunk in audio.chunks) // 2


def test_the_status_gives_the_range_and_the_servers_speed(studio):
    status = studio.api("GET", "api/status").json()
    assert status["limits"]["speed"] == [0.5, 2.0]
    assert (status["speed"], status["normalize"]) == (1.0, True)
    assert listed_speeds(studio)["voice"] is None  # the server's


def test_a_speed_is_set_kept_and_cleared(studio, voices_dir):
    assert add(studio, recording(seed=31), "anna").status_code == 201
    assert listed_speeds(studio)["anna"] is None

    response = set_speed(studio, "anna", 1.25)
    assert response.status_code == 200, response.text
    assert (response.json()["name"], response.json()["speed"]) == ("anna", 1.25)
    assert listed_speeds(studio)["anna"] == 1.25
    assert kept(voices_dir) == {"anna": 1.25}

    cleared = set_speed(studio, "anna", None)
    assert cleared.status_code == 200 and cleared.json()["speed"] is None
    assert listed_speeds(studio)["anna"] is None and kept(voices_dir) == {}
    assert studio.api("DELETE", "api/voices/anna").status_code == 204


def test_a_voice_not_of_the_folder_has_a_speed_too(studio, voices_dir):
    response = set_speed(studio, "voice", 0.8)
    assert response.status_code == 200, response.text
    assert kept(voices_dir) == {"voice": 0.8}
    # Its speed is the user's; its file is not the studio's to rename.
    assert studio.api("PATCH", "api/voices/voice", json={"name": "other"}).status_code == 403
    assert set_speed(studio, "voice", None).status_code == 200
    assert kept(voices_dir) == {}


@pytest.mark.parametrize(
    "body",
    ['{"speed": 0.49}', '{"speed": 2.01}', '{"speed": NaN}', '{"speed": Infinity}',
     '{"speed": "fast"}', '{"speed": true}', '{"speed": [1.5]}', "{}", '{"pitch": 1.2}',
     '{"speed": 1.5, "pitch": 1.2}', "[1.5]", "1.5"],
)
def test_a_speed_that_is_not_one_is_refused(studio, voices_dir, body):
    response = studio.api("PATCH", "api/voices/voice", data=body,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert "speed" in response.json()["error"]
    assert kept(voices_dir) == {} and listed_speeds(studio)["voice"] is None


def test_an_out_of_range_speed_is_explained(studio):
    error = set_speed(studio, "voice", 3).json()["error"]
    assert "from 0.5 to 2.0" in error and "not 3" in error


def test_the_speed_of_an_unknown_voice_is_not_found(studio, voices_dir):
    response = set_speed(studio, "nobody", 1.5)
    assert response.status_code == 404 and "nobody" in response.json()["error"]
    assert kept(voices_dir) == {}


def test_renaming_keeps_the_speed_and_deleting_forgets_it(studio, voices_dir):
    assert add(studio, recording(seed=32), "bea").status_code == 201
    assert set_speed(studio, "bea", 1.5).status_code == 200
    renamed = studio.api("PATCH", "api/voices/bea", json={"name": "beatrice"})
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["name"], renamed.json()["speed"]) == ("beatrice", 1.5)
    assert kept(voices_dir) == {"beatrice": 1.5}

    # Both at once: renamed, then at its new speed.
    both = studio.api("PATCH", "api/voices/beatrice", json={"name": "bea", "speed": 0.75})
    assert both.status_code == 200, both.text
    assert (both.json()["name"], both.json()["speed"]) == ("bea", 0.75)
    assert kept(voices_dir) == {"bea": 0.75}

    assert studio.api("DELETE", "api/voices/bea").status_code == 204
    assert kept(voices_dir) == {}
    # A new voice under the name starts at the server's speed.
    assert add(studio, recording(seed=33), "bea").json()["speed"] is None
    assert studio.api("DELETE", "api/voices/bea").status_code == 204


def test_an_exported_voice_carries_its_speed_to_where_it_is_imported(studio, voices_dir):
    assert add(studio, recording(seed=34), "cleo").status_code == 201
    plain = studio.api("GET", "api/voices/cleo/export").content
    assert "speed" not in metadata(plain)
    assert set_speed(studio, "cleo", 1.25).status_code == 200
    exported = studio.api("GET", "api/voices/cleo/export").content
    assert metadata(exported) == {**metadata(plain), "speed": "1.25"}
    assert load(exported).keys() == load(plain).keys()

    imported = add(studio, exported, "cleo_copy")
    assert imported.status_code == 201, imported.text
    assert imported.json()["speed"] == 1.25 and "warning" not in imported.json()
    assert kept(voices_dir) == {"cleo": 1.25, "cleo_copy": 1.25}
    assert studio.api("GET", "api/voices/cleo_copy/preview", params={"text": "Hi."}).ok

    # The file keeps the speed it came with; its export says the voice's own, or none.
    assert set_speed(studio, "cleo_copy", 0.9).status_code == 200
    assert metadata(studio.api("GET", "api/voices/cleo_copy/export").content)["speed"] == "0.9"
    assert set_speed(studio, "cleo_copy", None).status_code == 200
    assert "speed" not in metadata(studio.api("GET", "api/voices/cleo_copy/export").content)
    for name in ("cleo", "cleo_copy"):
        assert studio.api("DELETE", f"api/voices/{name}").status_code == 204
    assert kept(voices_dir) == {}


@pytest.mark.parametrize("carried", ["fast", "9", "nan"])
def test_an_imported_speed_that_is_not_one_is_ignored_with_a_warning(
    studio, voices_dir, carried
):
    assert add(studio, recording(seed=35), "dora").status_code == 201
    exported = studio.api("GET", "api/voices/dora/export").content
    assert studio.api("DELETE", "api/voices/dora").status_code == 204
    odd = save(load(exported), metadata={**metadata(exported), "speed": carried})

    imported = add(studio, odd, "dora")
    assert imported.status_code == 201, imported.text
    assert imported.json()["speed"] is None
    assert repr(carried) in imported.json()["warning"]
    assert "ignored" in imported.json()["warning"]
    assert kept(voices_dir) == {}
    assert studio.api("DELETE", "api/voices/dora").status_code == 204


def test_previews_and_home_assistants_requests_speak_at_the_voices_speed(studio):
    assert add(studio, recording(seed=36), "emma").status_code == 201
    preview, wyoming = preview_samples(studio, "emma"), wyoming_samples(studio, "emma")
    assert preview > 0 and wyoming > 0
    for speed in (1.5, 0.75):
        assert set_speed(studio, "emma", speed).status_code == 200
        assert abs(preview_samples(studio, "emma") - preview / speed) <= SAMPLES_TOLERANCE
        assert abs(wyoming_samples(studio, "emma") - wyoming / speed) <= SAMPLES_TOLERANCE
    recent = studio.api("GET", "api/status").json()["recent_requests"]
    assert [record["kind"] for record in recent[:2]] == ["synthesize", "preview"]
    assert recent[1]["audio_seconds"] == pytest.approx(preview / 0.75 / RATE, abs=0.01)
    assert studio.api("DELETE", "api/voices/emma").status_code == 204

