"""Custom voice folders on the tiny model: recordings encoded once and cached, voice
states checked against the model, nothing read or written outside the folders."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from tests.support.disk import small_tmpfs
from tests.support.reference_model import BuiltModel, reference_export_voice
from tests.support.voices_audio import speech_like_signal, write_voice_wav
from wyoming_pocket_tts.engine.errors import VoiceError
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.model.voice import VoiceState, read_voice_metadata
from wyoming_pocket_tts.voices.files import CACHE_FOLDER, VoiceFiles, audio_digest
from wyoming_pocket_tts.voices.store import (
    InvalidVoiceNameError,
    VoiceKind,
    VoiceStore,
    scan_voices_dir,
)

MODEL = "tiny-test"  # the name the server would serve the model under
RATE = 24000


@pytest.fixture(scope="module")
def model(tiny_model: BuiltModel) -> PocketTTS:
    return PocketTTS.load(tiny_model.config_path)


@pytest.fixture
def encodes(model: PocketTTS, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts runs of the Mimi encoder (one per recording encoded)."""
    calls: list[int] = []
    encode = model.mimi.encode

    def counting(audio: torch.Tensor) -> torch.Tensor:
        calls.append(audio.shape[-1])
        return encode(audio)

    monkeypatch.setattr(model.mimi, "encode", counting)
    return calls


@pytest.fixture
def voices(tmp_path: Path) -> Path:
    folder = tmp_path / "voices"
    folder.mkdir()
    return folder


def write_recording(path: Path, seed: int = 0, seconds: float = 1.5) -> Path:
    """A speech-like recording in the format its suffix names."""
    if path.suffix == ".wav":
        return write_voice_wav(path, seconds=seconds, seed=seed)
    signal = speech_like_signal(seconds, RATE, seed=seed, trailing_silence=0.3)
    soundfile.write(str(path), signal.astype(np.float32), RATE)
    return path


def cache_of(folder: Path, stem: str, model: str = MODEL) -> Path:
    return folder / CACHE_FOLDER / f"{stem}.{model}.safetensors"


def same_voice(a: VoiceState, b: VoiceState) -> bool:
    return torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def leftovers(folder: Path) -> list[Path]:
    """Temporary files a write could leave behind (ours and safetensors' own)."""
    return [p for p in folder.rglob("*") if p.name.endswith(".partial") or ".tmp" in p.name]


# ---------------------------------------------------------------------------
# Encoded once, cached


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".ogg", ".mp3"])
def test_a_recording_is_encoded_once_and_cached(model, encodes, voices, suffix):
    audio = write_recording(voices / f"anna{suffix}")

    first = VoiceFiles(model, MODEL, None).load_audio(audio)
    assert len(encodes) == 1
    cached = cache_of(voices, "anna")
    assert read_voice_metadata(cached)["model"] == MODEL
    assert read_voice_metadata(cached)["audio_sha256"] == audio_digest(audio)

    # A new loader, as after a restart: the cache is used, the encoder is not.
    again = VoiceFiles(model, MODEL, None).load_audio(audio)
    assert len(encodes) == 1
    assert same_voice(again, first)
    assert leftovers(voices) == []


def test_a_changed_recording_is_encoded_again_a_touched_one_is_not(model, encodes, voices):
    audio = write_recording(voices / "anna.wav", seed=0)
    files = VoiceFiles(model, MODEL, None)
    first = files.load_audio(audio)

    write_recording(audio, seed=1)
    changed = files.load_audio(audio)
    assert len(encodes) == 2
    assert not same_voice(changed, first)
    assert read_voice_metadata(cache_of(voices, "anna"))["audio_sha256"] == audio_digest(audio)

    stat = audio.stat()
    os.utime(audio, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert same_voice(files.load_audio(audio), changed)
    assert len(encodes) == 2


def test_a_users_voice_state_of_the_same_name_is_never_overwritten(model, encodes, voices):
    audio = write_recording(voices / "anna.wav")
    own = voices / "anna.safetensors"
    own.write_bytes(b"the user's own file")

    VoiceFiles(model, MODEL, None).load_audio(audio)

    assert own.read_bytes() == b"the user's own file"
    assert cache_of(voices, "anna").is_file()
    assert scan_voices_dir(voices)["anna"].path == own  # and it still names the voice


def test_a_damaged_cache_is_encoded_again_and_replaced(model, encodes, voices):
    audio = write_recording(voices / "anna.wav")
    files = VoiceFiles(model, MODEL, None)
    first = files.load_audio(audio)
    cached = cache_of(voices, "anna")
    cached.write_bytes(cached.read_bytes()[:-100])

    assert same_voice(files.load_audio(audio), first)
    assert len(encodes) == 2
    assert same_voice(model.load_voice(cached), first)


def test_each_model_has_its_own_cache(model, encodes, voices):
    audio = write_recording(voices / "anna.wav")
    VoiceFiles(model, MODEL, None).load_audio(audio)
    VoiceFiles(model, "another-model", None).load_audio(audio)
    assert len(encodes) == 2
    assert read_voice_metadata(cache_of(voices, "anna"))["model"] == MODEL
    assert read_voice_metadata(cache_of(voices, "anna", "another-model"))["model"] == (
        "another-model"
    )
    VoiceFiles(model, MODEL, None).load_audio(audio)
    assert len(encodes) == 2


def test_a_catalog_alias_shares_its_models_cache(model, encodes, voices):
    audio = write_recording(voices / "anna.wav")
    VoiceFiles(model, "english", None).load_audio(audio)
    VoiceFiles(model, "english_2026-10", None).load_audio(audio)
    assert len(encodes) == 1
    assert cache_of(voices, "anna", "english_2026-10").is_file()


# ---------------------------------------------------------------------------
# Folders that cannot be written


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], None]]:
    """Makes a folder read-only: a read-only bind mount as root (who ignores file modes),
    the folder's mode otherwise."""
    mounts: list[Path] = []
    modes: list[Path] = []

    def make(folder: Path) -> None:
        if os.geteuid() != 0:
            folder.chmod(0o555)
            modes.append(folder)
            return
        if run(["mount", "--bind", str(folder), str(folder)]) != 0:
            pytest.skip("cannot bind-mount a folder here")
        mounts.append(folder)
        if run(["mount", "-o", "remount,ro,bind", str(folder)]) != 0:
            pytest.skip("cannot make a bind mount read-only here")

    yield make
    for folder in reversed(mounts):
        subprocess.run(["umount", str(folder)], check=True)
    for folder in modes:
        folder.chmod(0o755)


def run(command: list[str]) -> int:
    return subprocess.run(command, capture_output=True, check=False).returncode


def test_a_read_only_folder_is_cached_in_the_fallback_folder(
    model, encodes, voices, tmp_path, read_only
):
    audio = write_recording(voices / "anna.wav")
    read_only(voices)
    fallback = tmp_path / "download-cache" / "voices"
    files = VoiceFiles(model, MODEL, fallback)

    first = files.load_audio(audio)
    assert len(encodes) == 1
    assert sorted(p.name for p in voices.iterdir()) == ["anna.wav"]
    (cached,) = fallback.rglob("*.safetensors")
    assert cached.name == f"anna.{MODEL}.safetensors"

    assert same_voice(VoiceFiles(model, MODEL, fallback).load_audio(audio), first)
    assert len(encodes) == 1


def test_without_any_writable_cache_the_voice_still_works(
    model, encodes, voices, read_only, caplog
):
    audio = write_recording(voices / "anna.wav")
    read_only(voices)
    files = VoiceFiles(model, MODEL, None)

    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts"):
        first = files.load_audio(audio)
        again = files.load_audio(audio)

    assert same_voice(first, again)
    assert len(encodes) == 2
    assert any("encoded again on its next load" in r.getMessage() for r in caplog.records)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "small-disk", "256k") as mount_point:
        yield mount_point


def fill(folder: Path) -> None:
    with (folder / "filler").open("wb", buffering=0) as stream:
        with pytest.raises(OSError) as caught:
            while True:
                stream.write(b"\0" * 4096)
        assert caught.value.errno == errno.ENOSPC


def test_a_full_disk_leaves_no_half_written_cache(model, encodes, full_disk, caplog):
    audio = write_recording(full_disk / "anna.wav", seconds=1.0)
    (full_disk / CACHE_FOLDER).mkdir()
    fill(full_disk)

    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts"):
        voice = VoiceFiles(model, MODEL, None).load_audio(audio)

    assert voice.num_positions > 0
    assert list((full_disk / CACHE_FOLDER).iterdir()) == []
    assert leftovers(full_disk) == []
    assert any("Cannot cache the voice anna.wav" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------
# Voice states and the model they were made for


def test_a_voice_state_exported_by_the_reference_is_accepted(
    model, tiny_model, voice_wav, tmp_path
):
    exported = reference_export_voice(tiny_model, voice_wav, tmp_path / "theirs.safetensors")
    assert read_voice_metadata(exported) == {}

    voice = VoiceFiles(model, MODEL, None).load_state(exported)

    ours = model.voice_from_audio(voice_wav)
    torch.testing.assert_close(voice.keys, ours.keys, rtol=0, atol=1e-4)
    torch.testing.assert_close(voice.values, ours.values, rtol=0, atol=1e-4)


def test_our_own_voice_state_is_accepted_by_the_model_it_names(model, voice_wav, tmp_path):
    voice = model.voice_from_audio(voice_wav)
    path = tmp_path / "mine.safetensors"
    voice.save(path, metadata={"model": MODEL})
    assert same_voice(VoiceFiles(model, MODEL, None).load_state(path), voice)
    # An alias is the same model: english is english_2026-10's weights.
    voice.save(path, metadata={"model": "english_2026-10"})
    assert same_voice(VoiceFiles(model, "english", None).load_state(path), voice)


def test_a_voice_state_made_for_another_model_is_refused_by_name(model, voice_wav, tmp_path):
    path = tmp_path / "french-voice.safetensors"
    model.voice_from_audio(voice_wav).save(path, metadata={"model": "french"})

    with pytest.raises(VoiceError) as caught:
        VoiceFiles(model, MODEL, None).load_state(path)
    message = str(caught.value)
    assert "made for the model french" in message
    assert f"this server runs {MODEL}" in message
    assert f"--model {MODEL}" in message


def test_a_voice_state_of_another_shape_is_refused(model, tmp_path):
    path = tmp_path / "bigger.safetensors"
    VoiceState(torch.zeros(6, 16, 5, 64), torch.zeros(6, 16, 5, 64)).save(path)
    with pytest.raises(VoiceError, match="made for another model"):
        VoiceFiles(model, MODEL, None).load_state(path)


def test_a_cache_made_for_another_model_is_not_reused(model, encodes, voices):
    audio = write_recording(voices / "anna.wav")
    files = VoiceFiles(model, MODEL, None)
    files.load_audio(audio)
    cached = cache_of(voices, "anna")
    voice = model.load_voice(cached)
    voice.save(cached, metadata={"model": "french", "audio_sha256": audio_digest(audio)})

    files.load_audio(audio)
    assert len(encodes) == 2
    assert read_voice_metadata(cached)["model"] == MODEL


# ---------------------------------------------------------------------------
# Staying inside the voices folder


def test_links_out_of_the_voices_folder_are_not_voices(voices, tmp_path, voice_wav):
    outside = tmp_path / "private"
    outside.mkdir()
    shutil.copy(voice_wav, outside / "secret.wav")
    shutil.copy(voice_wav, voices / "anna.wav")
    (voices / "leak.wav").symlink_to(outside / "secret.wav")
    (voices / "alias.wav").symlink_to(voices / "anna.wav")
    (voices / "sub").symlink_to(outside, target_is_directory=True)

    found = scan_voices_dir(voices)

    assert sorted(found) == ["alias", "anna"]
    assert found["anna"].kind is VoiceKind.AUDIO
    assert found["alias"].checked_path() == (voices / "anna.wav").resolve()


@pytest.mark.parametrize(
    "name", ["../private/secret", "/etc/passwd", "sub/secret", "..", ".", "a\\b", "x\0y"]
)
def test_a_path_as_voice_name_is_refused(voices, name):
    shutil.copy(Path(__file__), voices / "anna.wav")
    store = VoiceStore(
        sources=lambda: scan_voices_dir(voices),
        load=lambda source: pytest.fail("nothing may be loaded"),
        default_voice="anna",
        max_loaded=1,
    )
    with pytest.raises(InvalidVoiceNameError) as caught:
        store.lookup(name)
    assert "plain names, not paths" in str(caught.value)
    assert "Available voices: anna" in str(caught.value)


def test_a_file_swapped_for_a_link_after_listing_is_refused(voices, tmp_path, voice_wav):
    shutil.copy(voice_wav, voices / "anna.wav")
    source = scan_voices_dir(voices)["anna"]
    (voices / "anna.wav").unlink()
    (voices / "anna.wav").symlink_to(voice_wav)  # outside the folder

    with pytest.raises(VoiceError, match="points outside"):
        source.checked_path()


def test_a_cache_folder_that_links_out_is_neither_read_nor_written(
    model, encodes, voices, tmp_path
):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (voices / CACHE_FOLDER).symlink_to(outside, target_is_directory=True)
    audio = write_recording(voices / "anna.wav")
    fallback = tmp_path / "fallback"

    VoiceFiles(model, MODEL, fallback).load_audio(audio)
    VoiceFiles(model, MODEL, fallback).load_audio(audio)

    assert list(outside.iterdir()) == []
    assert len(list(fallback.rglob("*.safetensors"))) == 1
    assert len(encodes) == 1


# ---------------------------------------------------------------------------
# Recordings that cannot be a voice


def test_unusable_recordings_are_clear_errors(model, voices):
    silent = voices / "silent.wav"
    soundfile.write(str(silent), np.zeros(RATE, dtype=np.float32), RATE)
    short = voices / "short.wav"
    signal = speech_like_signal(0.5, RATE, seed=0, trailing_silence=0.0)
    soundfile.write(str(short), signal[:1000].astype(np.float32), RATE)  # under 80 ms
    garbage = voices / "garbage.mp3"
    garbage.write_bytes(b"ID3 not really an mp3" * 10)
    files = VoiceFiles(model, MODEL, None)

    for path, reason in [
        (silent, "silent"),
        (short, "shorter than one frame"),
        (garbage, "cannot decode"),
    ]:
        with pytest.raises(VoiceError, match=reason):
            files.load_audio(path)
    assert not (voices / CACHE_FOLDER).exists()
