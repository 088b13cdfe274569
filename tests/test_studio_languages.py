"""The voice studio of a server speaking English and French, each with its own
(random-weight) model: voices grouped by language, each previewed with its own model,
and a voice added to, renamed in and deleted from the language it is for."""

from __future__ import annotations

import asyncio
import io
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

from tests.support.reference_model import BuiltModel
from tests.support.studio_server import StudioServer, french_model, start_bilingual_studio
from tests.support.voices_audio import speech_like_signal
from wyoming_pocket_tts.engine.model.voice import read_voice_metadata
from wyoming_pocket_tts.engine.pcm import pcm16
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions

SENTENCES = {
    "en": "The kitchen light is on and the front door is locked.",
    "fr": "La lumière de la cuisine est allumée et la porte d'entrée est fermée.",
}
# The server's, with --temperature 0: each text is said one way.
OPTIONS = GenerationOptions(temperature=0.0)


@pytest.fixture(scope="module")
def models(
    models_dir: Path, tokenizer_dir: Path, tiny_model: BuiltModel
) -> dict[str, BuiltModel]:
    return {"en": tiny_model, "fr": french_model(models_dir, tokenizer_dir)}


@pytest.fixture(scope="module")
def voices_dir(tmp_path_factory, voice_wav: Path, other_voice_wav: Path) -> Path:
    """alba and shared for English (the folder), estelle and shared for French (fr/)."""
    folder = tmp_path_factory.mktemp("studio-languages-voices")
    (folder / "fr").mkdir()
    shutil.copy(voice_wav, folder / "alba.wav")
    shutil.copy(other_voice_wav, folder / "shared.wav")
    shutil.copy(other_voice_wav, folder / "fr" / "estelle.wav")
    shutil.copy(voice_wav, folder / "fr" / "shared.wav")
    return folder


@pytest.fixture(scope="module")
def studio(tmp_path_factory, models, voices_dir: Path) -> Iterator[StudioServer]:
    server = start_bilingual_studio(
        tmp_path_factory.mktemp("studio-languages"), models["en"], models["fr"],
        "--voices-dir", str(voices_dir), "--temperature", "0",
    )
    yield server
    server.stop()


def recording(seed: int) -> bytes:
    samples = speech_like_signal(4.0, 24000, seed, trailing_silence=0.3)
    out = io.BytesIO()
    soundfile.write(out, samples, 24000, format="WAV")
    return out.getvalue()


def add(studio: StudioServer, data: bytes, name: str, language: str | None = None):
    form = {"name": name, **({"language": language} if language else {})}
    return studio.api("POST", "api/voices", files={"file": ("voice.wav", data)}, data=form)


def languages_of_voices(studio: StudioServer) -> dict[str, str]:
    return {voice["name"]: voice["language"] for voice in studio.api("GET", "api/voices").json()}


def wyoming_voices(studio: StudioServer) -> dict[str, list[str]]:
    async def describe() -> dict[str, list[str]]:
        async with AsyncTcpClient("127.0.0.1", studio.wyoming_port) as client:
            await client.write_event(Describe().event())
            event = await client.read_event()
        assert event is not None and Info.is_type(event.type)
        return {voice.name: voice.languages for voice in Info.from_event(event).tts[0].voices}

    return asyncio.run(describe())


def expected(model: BuiltModel, wav: Path, text: str) -> np.ndarray:
    """What the model alone says, as the studio sends it (16-bit PCM)."""
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

    loaded = PocketTTS.load(model.config_path)
    voice = loaded.voice_from_audio(wav)
    frames = list(Synthesizer(loaded).stream(voice, text, OPTIONS))
    return np.frombuffer(pcm16(np.concatenate(frames)), dtype=np.int16)


def preview(studio: StudioServer, name: str, text: str | None) -> np.ndarray:
    params = {} if text is None else {"text": text}
    response = studio.api("GET", f"api/voices/{name}/preview", params=params)
    assert response.status_code == 200, response.text
    body = response.content
    assert struct.unpack("<I", body[24:28]) == (24000,)
    return np.frombuffer(body[44:], dtype="<i2")


def test_status_and_listing_group_the_voices_by_language(studio, models, voices_dir):
    assert languages_of_voices(studio) == {
        "alba": "en", "shared": "en", "estelle": "fr", "shared-fr": "fr",
    }
    status = studio.api("GET", "api/status").json()
    english, french = status["languages"]
    assert {key: english[key] for key in ("code", "name", "model", "default", "loaded")} == {
        "code": "en", "name": "English", "model": models["en"].config_path.stem,
        "default": True, "loaded": True,
    }
    # Listing the voices loaded no model: French's loads when a French voice is heard.
    assert {key: french[key] for key in ("code", "name", "model", "default", "loaded")} == {
        "code": "fr", "name": "French", "model": models["fr"].config_path.stem,
        "default": False, "loaded": False,
    }
    assert english["voices_folder"] == str(voices_dir.resolve())
    assert french["voices_folder"] == str(voices_dir.resolve() / "fr")
    assert (english["default_voice"], french["default_voice"]) == ("alba", "estelle")
    assert status["default_voice"] == "alba" and status["model"]["name"] == english["model"]
    defaults = [voice["name"] for voice in studio.api("GET", "api/voices").json()
                if voice["default"]]
    assert sorted(defaults) == ["alba", "estelle"]  # each language's own


@pytest.mark.parametrize(
    ("voice", "code", "wav"),
    [("alba", "en", "voice"), ("estelle", "fr", "other"), ("shared-fr", "fr", "voice")],
)
def test_each_voice_is_previewed_with_its_own_languages_model(
    studio, models, voice_wav, other_voice_wav, voice, code, wav
):
    recording_path = voice_wav if wav == "voice" else other_voice_wav
    text = SENTENCES[code]
    heard = preview(studio, voice, text)
    own = expected(models[code], recording_path, text)
    other = expected(models["fr" if code == "en" else "en"], recording_path, text)
    assert heard.shape == own.shape
    assert np.abs(heard.astype(int) - own).max() <= 2
    assert other.shape != own.shape or np.abs(other.astype(int) - own).max() > 100


def test_a_preview_without_text_speaks_its_languages_sample(studio):
    samples = {
        language["code"]: language["sample_text"]
        for language in studio.api("GET", "api/status").json()["languages"]
    }
    assert samples["fr"] != samples["en"]
    for voice, code in (("estelle", "fr"), ("shared", "en")):
        assert len(preview(studio, voice, None)) > 0
        recent = studio.api("GET", "api/status").json()["recent_requests"][0]
        assert (recent["voice"], recent["chars"]) == (voice, len(samples[code]))


def test_a_voice_added_for_french_lives_in_its_folder(studio, models, voices_dir):
    french = voices_dir / "fr"
    created = add(studio, recording(seed=21), "camille", "fr")
    assert created.status_code == 201, created.text
    assert (created.json()["name"], created.json()["language"]) == ("camille", "fr")
    assert (french / "camille.wav").is_file() and not (voices_dir / "camille.wav").exists()
    model = models["fr"].config_path.stem  # encoded once, by the French model
    assert (french / ".pocket-tts-cache" / f"camille.{model}.safetensors").is_file()
    assert languages_of_voices(studio)["camille"] == "fr"
    assert wyoming_voices(studio)["camille"] == ["fr"]
    assert len(preview(studio, "camille", SENTENCES["fr"])) > 0

    renamed = studio.api("PATCH", "api/voices/camille", json={"name": "camille_b"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["language"] == "fr"
    assert (french / "camille_b.wav").is_file() and not list(french.rglob("camille.*"))
    assert studio.api("DELETE", "api/voices/camille_b").status_code == 204
    assert not list(voices_dir.rglob("camille*")), "the recording or its cache is left behind"
    # A language's default voice stays, as the default language's does.
    assert studio.api("DELETE", "api/voices/estelle").status_code == 409


def test_a_name_is_taken_whichever_language_has_it(studio, voices_dir):
    before = sorted(path.name for path in voices_dir.rglob("*"))
    for name, language in (("alba", "fr"), ("estelle", "en"), ("shared-fr", "en")):
        response = add(studio, recording(seed=23), name, language)
        assert response.status_code == 409, response.text
        assert "exists already" in response.json()["error"]
    assert "in English" in add(studio, recording(seed=23), "alba", "fr").json()["error"]
    assert add(studio, recording(seed=24), "margaux", "fr").status_code == 201
    renamed = studio.api("PATCH", "api/voices/margaux", json={"name": "shared"})
    assert renamed.status_code == 409 and "in English" in renamed.json()["error"]
    assert studio.api("DELETE", "api/voices/margaux").status_code == 204
    assert sorted(path.name for path in voices_dir.rglob("*")) == before


def exported_model(data: bytes) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "voice.safetensors"
        path.write_bytes(data)
        return read_voice_metadata(path)["model"]


def test_a_voice_file_is_for_the_language_whose_model_made_it(studio, models, voices_dir):
    english, french = (models[code].config_path.stem for code in ("en", "fr"))
    alba = studio.api("GET", "api/voices/alba/export").content
    estelle = studio.api("GET", "api/voices/estelle/export").content
    assert (exported_model(alba), exported_model(estelle)) == (english, french)

    refused = add(studio, alba, "alba_fr", "fr")
    assert refused.status_code == 422, refused.text
    assert f"made for the model {english}" in refused.json()["error"]
    assert f"runs {french}" in refused.json()["error"]
    assert f"made for the model {french}" in add(studio, estelle, "estelle_en").json()["error"]
    assert not list(voices_dir.rglob("*_en.*")) and not list(voices_dir.rglob("alba_fr*"))

    imported = add(studio, estelle, "estelle_copy", "fr")
    assert imported.status_code == 201, imported.text
    assert (imported.json()["language"], imported.json()["source"]) == ("fr", "state")
    assert (voices_dir / "fr" / "estelle_copy.safetensors").read_bytes() == estelle
    assert studio.api("DELETE", "api/voices/estelle_copy").status_code == 204


@pytest.mark.parametrize("language", ["de", "ja", "../fr"])
def test_a_language_the_server_does_not_speak_is_refused(studio, language):
    response = add(studio, recording(seed=25), "kenji", language)
    assert response.status_code == 400, response.text
    assert "does not speak" in response.json()["error"]
