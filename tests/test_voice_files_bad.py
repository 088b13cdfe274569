"""Voice files that cannot be a voice: each is refused when it is loaded, with an error
that names the file, and nothing else is affected (the engine, the other voices, a
server's other requests)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import soundfile
import torch
from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.support.reference_model import BuiltModel
from tests.support.voices_audio import speech_like_signal
from wyoming_pocket_tts.engine.errors import VoiceError
from wyoming_pocket_tts.engine.model.voice import VoiceState, load_voice_state
from wyoming_pocket_tts.voices.files import CACHE_FOLDER, VoiceFiles

REPO = Path(__file__).resolve().parents[1]
RATE = 24000
TIMEOUT = 120.0
Tensors = dict[str, torch.Tensor]


def _cache_key(layer: int) -> str:
    return f"transformer.layers.{layer}.self_attn/cache"


def _poison(value: float) -> Callable[[Tensors], Tensors]:
    def change(tensors: Tensors) -> Tensors:
        cache = tensors[_cache_key(1)].clone()
        cache[1, 0, 2, 0, 3] = value  # one value of the second layer's values
        return {**tensors, _cache_key(1): cache}

    return change


def _drop_heads(tensors: Tensors) -> Tensors:
    return {
        key: value[:, :, :, :1] if key.endswith("cache") else value
        for key, value in tensors.items()
    }


def _four_dimensional(tensors: Tensors) -> Tensors:
    return {**tensors, _cache_key(0): tensors[_cache_key(0)][:, 0]}


def _one_layer_shorter(tensors: Tensors) -> Tensors:
    return {**tensors, _cache_key(0): tensors[_cache_key(0)][:, :, :-1].contiguous()}


def _offset(value: torch.Tensor) -> Callable[[Tensors], Tensors]:
    def change(tensors: Tensors) -> Tensors:
        return {
            key: value.clone() if key.endswith("offset") else tensor
            for key, tensor in tensors.items()
        }

    return change


def _as_integers(tensors: Tensors) -> Tensors:
    return {
        key: (value * 100).to(torch.int32) if key.endswith("cache") else value
        for key, value in tensors.items()
    }


def _missing_layer(tensors: Tensors) -> Tensors:
    return {key: value for key, value in tensors.items() if ".layers.0." not in key}


#: A change to a good voice-state file's tensors, and what the error says.
BAD_STATES = {
    "nan": (_poison(float("nan")), "NaN or infinite"),
    "infinity": (_poison(float("inf")), "NaN or infinite"),
    "minus-infinity": (_poison(float("-inf")), "NaN or infinite"),
    "wrong-heads": (_drop_heads, "another model"),
    "four-dimensional": (_four_dimensional, "shape"),
    "layers-disagree": (_one_layer_shorter, "disagree"),
    "zero-length": (_offset(torch.tensor([0])), "invalid length"),
    "too-long": (_offset(torch.tensor([10_000])), "invalid length"),
    "empty-offset": (_offset(torch.zeros(0, dtype=torch.long)), "offset"),
    "float-offset": (_offset(torch.tensor([float("nan")])), "offset"),
    "integers": (_as_integers, "floating-point"),
    "missing-layer": (_missing_layer, "layer set"),
}


@pytest.fixture(scope="module")
def good_state(tmp_path_factory: pytest.TempPathFactory, voice: VoiceState) -> Path:
    path = tmp_path_factory.mktemp("good") / "good.safetensors"
    voice.save(path)
    return path


def write_bad_state(good: Path, path: Path, change: Callable[[Tensors], Tensors]) -> Path:
    tensors = change(safetensors.torch.load_file(good))
    contiguous = {key: value.contiguous() for key, value in tensors.items()}
    safetensors.torch.save_file(contiguous, str(path))
    return path


def truncated(good: Path, path: Path) -> Path:
    data = good.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def write_float_wav(path: Path, signal: np.ndarray) -> Path:
    soundfile.write(str(path), signal.astype(np.float32), RATE, subtype="FLOAT")
    return path


def speech(seconds: float = 1.0) -> np.ndarray:
    return speech_like_signal(seconds, RATE, seed=3, trailing_silence=0.2)


def with_value(value: float) -> np.ndarray:
    signal = speech()
    signal[RATE // 2] = value
    return signal


def bytes_file(data: bytes) -> Callable[[Path], Path]:
    def write(path: Path) -> Path:
        path.write_bytes(data)
        return path

    return write


#: Recordings that are not usable audio, and what the error says.
BAD_RECORDINGS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "empty.wav": (bytes_file(b""), "cannot decode"),
    "text.wav": (bytes_file(b"not a recording\n" * 50), "cannot decode"),
    "random.flac": (bytes_file(np.random.default_rng(0).bytes(4096)), "cannot decode"),
    "nan.wav": (lambda path: write_float_wav(path, with_value(float("nan"))), "non-finite"),
    "infinity.wav": (lambda path: write_float_wav(path, with_value(float("inf"))), "non-finite"),
    "huge.wav": (lambda path: write_float_wav(path, speech() * 1e38), "NaN or infinite"),
}


# ---------------------------------------------------------------------------
# Through VoiceFiles: the error names the file, the model carries on


@pytest.mark.parametrize("kind", sorted(BAD_STATES))
def test_a_bad_voice_state_is_refused_naming_the_file(model, good_state, tmp_path, kind):
    change, reason = BAD_STATES[kind]
    path = write_bad_state(good_state, tmp_path / f"{kind}.safetensors", change)
    with pytest.raises(VoiceError, match=reason) as raised:
        VoiceFiles(model, "tiny-test", None).load_state(path)
    assert path.name in str(raised.value)


@pytest.mark.parametrize("empty", [False, True])
def test_a_truncated_or_empty_voice_state_is_refused_naming_the_file(
    model, good_state, tmp_path, empty
):
    path = tmp_path / "cut.safetensors"
    bytes_file(b"")(path) if empty else truncated(good_state, path)
    with pytest.raises(VoiceError, match="not a readable voice file") as raised:
        VoiceFiles(model, "tiny-test", None).load_state(path)
    assert path.name in str(raised.value)


@pytest.mark.parametrize("name", sorted(BAD_RECORDINGS))
def test_a_recording_that_is_not_audio_is_refused_and_not_cached(model, tmp_path, name):
    make, reason = BAD_RECORDINGS[name]
    path = make(tmp_path / name)
    with pytest.raises(VoiceError, match=reason):
        VoiceFiles(model, "tiny-test", None).load_audio(path)
    assert not (tmp_path / CACHE_FOLDER).exists()


def test_a_damaged_cache_with_nan_is_encoded_again(model, voice_wav, tmp_path):
    recording = tmp_path / "voice.wav"
    shutil.copy(voice_wav, recording)
    files = VoiceFiles(model, "tiny-test", None)
    first = files.load_audio(recording)
    (cached,) = (tmp_path / CACHE_FOLDER).iterdir()
    tensors = safetensors.torch.load_file(cached)
    metadata = safetensors.safe_open(str(cached), framework="pt").metadata()
    safetensors.torch.save_file(_poison(float("nan"))(tensors), str(cached), metadata=metadata)

    again = files.load_audio(recording)

    assert torch.equal(again.keys, first.keys) and torch.equal(again.values, first.values)
    assert files.load_audio(recording) is not None  # and the cache was repaired
    assert torch.isfinite(safetensors.torch.load_file(cached)[_cache_key(1)]).all()


def test_a_state_read_back_equals_the_one_saved(voice, tmp_path):
    path = tmp_path / "voice.safetensors"
    voice.save(path)
    loaded = load_voice_state(path)
    assert torch.equal(loaded.keys, voice.keys) and torch.equal(loaded.values, voice.values)


@pytest.mark.parametrize(
    "keys, values, reason",
    [
        (torch.zeros(2, 3, 4, 8), torch.full((2, 3, 4, 8), float("nan")), "NaN"),
        (torch.zeros(2, 3, 4, 8), torch.zeros(2, 3, 5, 8), "shaped"),
        (torch.zeros(2, 3, 4, 8).double(), torch.zeros(2, 3, 4, 8).double(), "float32"),
        (torch.zeros(2, 3, 0, 8), torch.zeros(2, 3, 0, 8), "empty"),
    ],
)
def test_a_state_with_invalid_keys_or_values_cannot_be_made(keys, values, reason):
    with pytest.raises(VoiceError, match=reason):
        VoiceState(keys, values)


# ---------------------------------------------------------------------------
# Over the protocol: an error naming the voice, every other request served


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def bad_voices(tmp_path_factory, good_state: Path, voice_wav: Path) -> Path:
    folder = tmp_path_factory.mktemp("bad-voices")
    shutil.copy(voice_wav, folder / "fine.wav")
    shutil.copy(good_state, folder / "exported.safetensors")
    for kind in ("nan", "wrong-heads", "empty-offset"):
        write_bad_state(good_state, folder / f"{kind}.safetensors", BAD_STATES[kind][0])
    truncated(good_state, folder / "cut.safetensors")
    (folder / "blank.safetensors").write_bytes(b"")
    for name in ("text.wav", "nan.wav", "huge.wav"):
        BAD_RECORDINGS[name][0](folder / name.replace(".", "-audio."))
    return folder


@pytest.fixture(scope="module")
def server_port(tmp_path_factory, tiny_model: BuiltModel, voice_wav, bad_voices) -> Iterator[int]:
    port = _free_port()
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "wyoming_pocket_tts",
                "--uri", f"tcp://127.0.0.1:{port}",
                "--model", str(tiny_model.config_path),
                "--voice", str(voice_wav),
                "--voices-dir", str(bad_voices),
                "--max-loaded-voices", "2",
                "--eos-threshold", "-1000",
            ],
            cwd=REPO, stderr=log, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT
        while b"Ready" not in log_path.read_bytes():
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log_path.read_text()
    assert "Traceback" not in log_path.read_text()


async def _speak(port: int, voice: str) -> tuple[str | None, int]:
    """(the error's text or None, bytes of audio) of one request with `voice`."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(
            Synthesize(text="Hello there.", voice=SynthesizeVoice(name=voice)).event()
        )
        audio = 0
        while (event := await asyncio.wait_for(client.read_event(), TIMEOUT)) is not None:
            if Error.is_type(event.type):
                return Error.from_event(event).text, audio
            if AudioChunk.is_type(event.type):
                audio += len(AudioChunk.from_event(event).audio)
            if AudioStop.is_type(event.type):
                return None, audio
        return "closed", audio


def test_each_bad_voice_gets_an_error_naming_it_and_the_good_ones_still_speak(
    server_port, bad_voices
):
    bad = sorted(
        path for path in bad_voices.iterdir() if path.stem not in ("fine", "exported")
    )

    async def scenario() -> list[tuple[str, tuple[str | None, int]]]:
        names = ["fine", *(path.stem for path in bad), "exported", "fine"]
        # All at once: the bad ones must not hold up, or break, the good ones.
        answers = await asyncio.gather(*(_speak(server_port, name) for name in names))
        return list(zip(names, answers, strict=True))

    answers = asyncio.run(scenario())
    for name, (error, audio) in answers:
        if name in ("fine", "exported"):
            assert error is None and audio > 0, (name, error)
        else:
            assert error is not None and f"voice {name}" in error, (name, error)
            assert audio == 0
    assert len(answers) == len(bad) + 3


def test_a_bad_voice_fixed_on_disk_is_used_at_once(server_port, bad_voices, good_state):
    broken = bad_voices / "nan.safetensors"
    error, _ = asyncio.run(_speak(server_port, "nan"))
    assert error is not None
    os.replace(write_bad_state(good_state, bad_voices / ".fixed", lambda t: t), broken)

    error, audio = asyncio.run(_speak(server_port, "nan"))

    assert error is None and audio > 0
