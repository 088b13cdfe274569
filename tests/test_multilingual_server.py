"""One server speaking several languages, each with its own (random-weight) model."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from wyoming.error import Error
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from tests.support.answers import ANSWERS
from tests.support.reference_model import BuiltModel, build_model
from tests.support.server import (
    REPO,
    ServerProcess,
    assert_pcm_frames,
    describe,
    launch,
    read_audio,
    run,
    synthesize,
)
from wyoming_pocket_tts.engine.pcm import pcm16
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions

SENTENCES = ANSWERS
# The server's, with --temperature 0 and an end-of-speech threshold no logit misses:
# each text is said one way, and ends at its seventh frame. Within a few steps of 16-bit
# audio: with random weights a long text magnifies the rounding that a change of
# thread count (cpu/contention.py) makes.
OPTIONS = GenerationOptions(temperature=0.0, eos_threshold=-1e9)
TOLERANCE = 4


@pytest.fixture(scope="module")
def models(
    models_dir: Path, tokenizer_dir: Path, tiny_model: BuiltModel
) -> dict[str, BuiltModel]:
    return {
        "en": tiny_model,
        "fr": build_model(models_dir / "tiny_fr", base="french", tiny=True, seed=1,
                          tokenizer_dir=tokenizer_dir),
        "de": build_model(models_dir / "tiny_de", base="german", tiny=True, seed=2,
                          tokenizer_dir=tokenizer_dir),
    }


@pytest.fixture(scope="module")
def voices(tmp_path_factory, voice_wav: Path, other_voice_wav: Path) -> Path:
    """alba and shared for English (the folder), estelle and shared for French (fr/),
    oma for German (de/)."""
    folder = tmp_path_factory.mktemp("voices")
    (folder / "fr").mkdir()
    (folder / "de").mkdir()
    shutil.copy(voice_wav, folder / "de" / "oma.wav")
    shutil.copy(voice_wav, folder / "alba.wav")
    shutil.copy(other_voice_wav, folder / "shared.wav")
    shutil.copy(other_voice_wav, folder / "fr" / "estelle.wav")
    shutil.copy(voice_wav, folder / "fr" / "shared.wav")
    return folder


def _model_args(models: dict[str, BuiltModel], *codes: str) -> list[str]:
    return [arg for code in codes for arg in ("--model", f"{code}={models[code].config_path}")]


def _launch(tmp_path: Path, models, voices: Path, *codes: str, extra: tuple[str, ...] = ()):
    return launch(
        tmp_path, models["en"], *_model_args(models, *codes), "--voices-dir", str(voices),
        "--temperature", "0", "--eos-threshold=-1e9", *extra,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory, models, voices: Path):
    process = _launch(tmp_path_factory.mktemp("server"), models, voices, "en", "fr")
    yield process
    process.stop()


def _expected(model: BuiltModel, wav: Path, text: str) -> np.ndarray:
    """What the model alone says, as the server sends it (16-bit PCM)."""
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

    loaded = PocketTTS.load(model.config_path)
    voice = loaded.voice_from_audio(wav)
    frames = list(Synthesizer(loaded).stream(voice, text, OPTIONS))
    return np.frombuffer(pcm16(np.concatenate(frames)), dtype=np.int16)


def _samples(stream) -> np.ndarray:
    return np.frombuffer(b"".join(chunk.audio for chunk in stream.chunks), dtype=np.int16)


def test_describe_lists_each_language_with_its_own_voices(server: ServerProcess) -> None:
    async def scenario():
        async with server.client() as client:
            return await describe(client)

    (program,) = run(scenario()).tts
    languages = {voice.name: voice.languages for voice in program.voices}
    assert languages == {
        "alba": ["en"], "shared": ["en"], "estelle": ["fr"], "shared-fr": ["fr"],
    }


@pytest.mark.parametrize(
    ("voice", "code", "wav"),
    [("alba", "en", "voice"), ("shared", "en", "other"), ("estelle", "fr", "other"),
     ("shared-fr", "fr", "voice")],
)
def test_each_voice_speaks_with_its_own_model(
    server: ServerProcess, models, voice_wav: Path, other_voice_wav: Path,
    voice: str, code: str, wav: str,
) -> None:
    recording = voice_wav if wav == "voice" else other_voice_wav
    text = SENTENCES[code]
    stream = run(synthesize(server, text, voice))
    assert_pcm_frames(stream)
    heard = _samples(stream)
    own = _expected(models[code], recording, text)
    other = _expected(models["fr" if code == "en" else "en"], recording, text)
    assert heard.shape == own.shape
    assert np.abs(heard.astype(int) - own).max() <= TOLERANCE
    assert other.shape != own.shape or np.abs(other.astype(int) - own).max() > 100


@pytest.mark.parametrize("code", ["en", "fr"])
def test_a_request_without_a_voice_follows_its_language_or_its_text(
    server: ServerProcess, models, voice_wav: Path, other_voice_wav: Path, code: str
) -> None:
    """French's default voice is estelle (its first), English's alba."""
    default_wav = voice_wav if code == "en" else other_voice_wav
    other = "fr" if code == "en" else "en"

    async def by_language() -> np.ndarray:
        async with server.client() as client:
            # The client's language wins over the text's.
            await client.write_event(
                Synthesize(text=SENTENCES[other], voice=SynthesizeVoice(language=code)).event()
            )
            return _samples(await read_audio(client))

    expected = _expected(models[code], default_wav, SENTENCES[other])
    assert np.abs(run(by_language()).astype(int) - expected).max() <= TOLERANCE
    by_text = _samples(run(synthesize(server, SENTENCES[code])))
    expected = _expected(models[code], default_wav, SENTENCES[code])
    assert np.abs(by_text.astype(int) - expected).max() <= TOLERANCE


@pytest.mark.parametrize(("voice", "code"), [("shared", "en"), ("estelle", "fr")])
def test_home_assistants_streaming_flow_in_each_language(
    server: ServerProcess, voice: str, code: str
) -> None:
    async def scenario():
        async with server.client() as client:
            voice_info = SynthesizeVoice(name=voice)
            await client.write_event(SynthesizeStart(voice=voice_info).event())
            words = SENTENCES[code].split()
            for index in range(0, len(words), 3):
                piece = " ".join(words[index : index + 3]) + " "
                await client.write_event(SynthesizeChunk(text=piece).event())
            await client.write_event(SynthesizeStop().event())
            await client.write_event(Synthesize(text=SENTENCES[code], voice=voice_info).event())
            stream = await read_audio(client)
            stopped = await client.read_event()
            assert stopped is not None and stopped.type == "synthesize-stopped"
            return stream

    assert_pcm_frames(run(scenario()))


def test_requests_in_two_languages_at_once(server: ServerProcess) -> None:
    async def scenario():
        return await asyncio.gather(
            synthesize(server, SENTENCES["fr"] * 3, "estelle"),
            synthesize(server, SENTENCES["en"], "alba"),
        )

    for stream in run(scenario()):
        assert_pcm_frames(stream)


def test_a_voice_state_of_one_model_is_refused_for_another(
    tmp_path: Path, models, voices: Path, voice_wav: Path
) -> None:
    """An English voice state dropped among the French voices: the error names the
    model it was made for."""
    folder = tmp_path / "voices"
    shutil.copytree(voices, folder)
    state = folder / "fr" / "anglaise.safetensors"
    subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", "export-voice", "--model",
         str(models["en"].config_path), str(voice_wav), str(state)],
        check=True, cwd=REPO, capture_output=True,
    )
    server = _launch(tmp_path / "server", models, folder, "en", "fr")
    try:
        async def scenario():
            async with server.client() as client:
                voice = SynthesizeVoice(name="anglaise")
                await client.write_event(Synthesize(text=SENTENCES["fr"], voice=voice).event())
                event = await client.read_event()
                assert event is not None and Error.is_type(event.type), event
                return Error.from_event(event).text

        message = run(scenario())
        assert "anglaise.safetensors was made for the model" in message
        assert models["en"].config_path.stem in message or "english" in message
    finally:
        server.stop()


def test_beyond_max_loaded_models_the_least_recently_used_is_unloaded(
    tmp_path: Path, models, voices: Path
) -> None:
    server = _launch(tmp_path, models, voices, "en", "fr", "de",
                     extra=("--max-loaded-models", "2"))
    try:
        for code in ("fr", "de", "fr", "en"):
            assert_pcm_frames(run(synthesize(server, SENTENCES[code])))
        log = server.log()
        assert log.count("Loading the fr model") == 2  # unloaded for German, then again
        assert log.count("Loading the de model") == 1
        assert "Unloaded the fr model (least recently used)" in log
        assert "Unloaded the de model (least recently used)" in log
        assert "Loading the en model" in log and log.count("Loading the en model") == 1
    finally:
        server.stop()


def test_preload_model_loads_a_language_at_start_up(tmp_path: Path, models, voices: Path) -> None:
    server = _launch(tmp_path, models, voices, "en", "de", extra=("--preload-model", "de"))
    try:
        assert "Loaded the de model" in server.log().split("Ready")[0]
    finally:
        server.stop()


def test_a_missing_model_of_another_language_stops_start_up_clearly(
    tmp_path: Path, models, voices: Path
) -> None:
    """Every language's files are found before serving: a missing one is one line."""
    missing = tmp_path / "nowhere.yaml"
    server = launch(
        tmp_path, models["en"], "--model", f"en={models['en'].config_path}",
        "--model", f"fr={missing}", "--voices-dir", str(voices), wait=False,
    )
    assert server.process.wait(timeout=120) == 1
    log = server.log()
    assert "nowhere.yaml" in log and "Traceback" not in log
    assert "Ready" not in log
