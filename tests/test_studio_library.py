"""The studio's voice library in this process, on the tiny model: an upload is decoded
and encoded (or a voice file loaded) once, and the voice it keeps is the one its file
gives back; a language whose model is not in memory is listed, and its voices renamed
and deleted, without loading it."""

from __future__ import annotations

import asyncio
import io
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from tests.support.reference_model import BuiltModel
from tests.support.voices_audio import speech_like_signal
from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.download import DownloadOptions
from wyoming_pocket_tts.engine.errors import VoiceError
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.model.voice import VoiceState, read_voice_metadata
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.languages import Language, Languages
from wyoming_pocket_tts.speakers import LoadedLanguage
from wyoming_pocket_tts.studio.library import VoiceLibrary
from wyoming_pocket_tts.studio.uploads import Recording, StudioError, as_wav
from wyoming_pocket_tts.voices import files as files_module
from wyoming_pocket_tts.voices.files import CACHE_FOLDER, VoiceFiles, audio_digest
from wyoming_pocket_tts.voices.store import VoiceKind, VoiceSource, VoiceStore, scan_voices_dir

RATE = 24000


def recording(seconds: float = 4.0, rate: int = 44100) -> bytes:
    samples = speech_like_signal(seconds, rate, seed=3, trailing_silence=0.3)
    out = io.BytesIO()
    soundfile.write(out, samples, rate, format="WAV", subtype="FLOAT")
    return out.getvalue()


def same_voice(a: VoiceState, b: VoiceState) -> bool:
    return torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


class Counted:
    """The calls made to one function, which still runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
        self.calls = 0
        function = getattr(owner, name)

        def counting(*args, **kwargs):
            self.calls += 1
            return function(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = (tmp_path / "voices").resolve()
    folder.mkdir()
    return folder


def served(code: str, config: Path, folder: Path, cache: Path) -> resolve.ResolvedModel:
    options = resolve.ModelOptions(
        model=str(config), languages=(code,), voices_dir=folder,
        download=DownloadOptions(download_dir=cache),
    )
    return resolve.resolve_model(options)


@pytest.fixture
def english(tiny_model: BuiltModel, folder: Path, tmp_path: Path) -> resolve.ResolvedModel:
    return served("en", tiny_model.config_path, folder, tmp_path / "cache")


@pytest.fixture
def files(model: PocketTTS, english: resolve.ResolvedModel) -> VoiceFiles:
    return resolve.voice_files(model, english)


@pytest.fixture
def loads() -> list[str]:
    """What was loaded from files: languages' models, and voices by their stores."""
    return []


@pytest.fixture
def library(model, tiny_model, english, folder, loads, tmp_path) -> Iterator[VoiceLibrary]:
    """English in the folder, and French (the same model, as far as these tests go) in
    its subfolder: its model is loaded only when something needs it."""
    french = served("fr", tiny_model.config_path, folder, tmp_path / "cache")

    def load(language: Language) -> LoadedLanguage:  # as the server's loader does
        loads.append(language.code)
        files = resolve.voice_files(model, language.resolved)

        def load_voice(source: VoiceSource) -> VoiceState:
            loads.append(source.name)
            path = source.checked_path()
            if source.kind is VoiceKind.STATE:
                return files.load_state(path)
            return files.load_audio(path)

        store = VoiceStore(
            sources=language.voices, load=load_voice, default_voice=language.default_voice,
            max_loaded=4, executor=executor,
        )
        return LoadedLanguage(language, model, Synthesizer(model), store)

    with ThreadPoolExecutor(1) as executor:
        languages = Languages(
            [
                Language("en", english, lambda: scan_voices_dir(folder), "none", folder),
                Language(
                    "fr", french, lambda: scan_voices_dir(folder / "fr"), "none", folder / "fr"
                ),
            ],
            load=load, max_loaded=2, native=lambda code, source: True, executor=executor,
        )
        asyncio.run(languages.preload("en"))  # as the server does before serving
        loads.clear()
        yield VoiceLibrary(
            languages=languages, folder=folder, caches=resolve.voice_files(model, english),
            executor=executor,
        )


def test_the_wav_kept_reads_back_as_the_samples_encoded():
    samples = np.linspace(-1.2, 1.2, 9601, dtype=np.float32)  # past full scale: clipped
    wav = as_wav(Recording(samples, RATE))
    read, rate = soundfile.read(io.BytesIO(wav.data), dtype="float32")
    assert rate == RATE and read.dtype == wav.recording.samples.dtype
    assert np.array_equal(read, wav.recording.samples)
    assert np.abs(wav.recording.samples - np.clip(samples, -1, 1)).max() <= 2 / 32768


async def add_and_use(library: VoiceLibrary, name: str, data: bytes) -> tuple[dict, VoiceState]:
    added = await library.add(name, f"{name}.upload", data)
    async with library.languages.use("en") as english, english.voices.use(name) as voice:
        return added, voice


def test_a_recording_is_decoded_and_encoded_once_and_not_read_back(
    library, model, english, files, folder, loads, monkeypatch
):
    encodes = Counted(monkeypatch, model.mimi, "encode")
    file_reads = Counted(monkeypatch, soundfile, "read")  # how the engine reads a file
    hashes = Counted(monkeypatch, files_module, "audio_digest")

    added, kept = asyncio.run(add_and_use(library, "anna", recording()))

    assert added["name"] == "anna" and added["loaded"]
    assert (encodes.calls, file_reads.calls, hashes.calls, loads) == (1, 0, 0, [])
    # The cache has the file's own digest: a restart reuses it instead of encoding again.
    path = folder / "anna.wav"
    cached = folder / CACHE_FOLDER / f"anna.{english.description.name}.safetensors"
    assert read_voice_metadata(cached)["audio_sha256"] == audio_digest(path)
    assert same_voice(files.load_audio(path), kept)
    assert encodes.calls == 1
    # And the voice encoded from the samples in hand is the one the file makes.
    assert same_voice(model.voice_from_audio(path), kept)


def test_a_voice_file_is_loaded_once(library, model, folder, loads, monkeypatch):
    state = folder.parent / "exported.safetensors"
    model.voice_from_audio(write_wav(folder.parent / "source.wav")).save(state)
    data = state.read_bytes()
    reads = Counted(monkeypatch, model, "load_voice")

    added, kept = asyncio.run(add_and_use(library, "bea", data))

    assert added["source"] == "state" and added["loaded"]
    assert (reads.calls, loads) == (1, [])
    assert (folder / "bea.safetensors").read_bytes() == data
    assert same_voice(model.load_voice(state), kept)


def test_a_recording_the_model_cannot_encode_leaves_no_file(library, model, folder, monkeypatch):
    def refuse(samples: np.ndarray, sample_rate: int) -> VoiceState:
        raise VoiceError("no voice in this")

    monkeypatch.setattr(model, "voice_from_samples", refuse)
    with pytest.raises(StudioError, match="no voice in this") as refused:
        asyncio.run(library.add("carl", "carl.wav", recording()))
    assert refused.value.status == 422
    assert list(folder.iterdir()) == []


def write_wav(path: Path) -> Path:
    path.write_bytes(recording(rate=RATE))
    return path


def test_a_language_not_in_memory_is_listed_and_changed_without_loading_it(
    library, folder, voice_wav, loads
):
    (folder / "fr").mkdir()
    shutil.copy(voice_wav, folder / "fr" / "estelle.wav")

    async def scenario() -> tuple[list[dict], dict, list[str]]:
        listed = await library.listing()
        renamed = await library.rename("estelle", "claire")
        after = [voice["name"] for voice in await library.listing()]
        await library.delete("claire")
        return listed, renamed, after

    listed, renamed, after = asyncio.run(scenario())
    assert [(v["name"], v["language"], v["loaded"]) for v in listed] == [("estelle", "fr", False)]
    assert (renamed["name"], renamed["language"], renamed["editable"]) == ("claire", "fr", True)
    assert after == ["claire"]
    assert list((folder / "fr").iterdir()) == []
    assert loads == [] and library.languages.loaded == ["en"]


def test_a_languages_first_voice_makes_its_folder(library, folder, loads):
    async def scenario() -> tuple[dict, list[dict]]:
        return await library.add("jeanne", "jeanne.wav", recording(), "fr"), \
            await library.listing()

    added, listed = asyncio.run(scenario())
    assert (added["name"], added["language"], added["loaded"]) == ("jeanne", "fr", True)
    assert (folder / "fr" / "jeanne.wav").is_file() and not (folder / "jeanne.wav").exists()
    assert [(v["name"], v["language"]) for v in listed] == [("jeanne", "fr")]
    assert loads == ["fr"]  # its model, to encode the recording; the voice is not read back
