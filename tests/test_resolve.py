"""Models and voices are found, checked, cached and refused the same way by the server
and the subcommands (wyoming_pocket_tts/resolve.py)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import threading
from concurrent.futures import Executor, Future
from pathlib import Path

import pytest
import yaml

from tests.support.reference_model import BuiltModel
from tests.support.voices_audio import write_voice_wav
from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.engine.cpu.threads import OwnThreadExecutor
from wyoming_pocket_tts.engine.errors import VoiceError
from wyoming_pocket_tts.resolve import ModelOptions
from wyoming_pocket_tts.voices.files import CACHE_FOLDER
from wyoming_pocket_tts.voices.store import UnknownVoiceError, VoiceKind, VoiceStore

REPO = Path(__file__).resolve().parent.parent


def wyoming_pocket_tts(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        check=False,
    )


def test_a_yaml_model_speaks_the_languages_given(tiny_model):
    path = str(tiny_model.config_path)
    resolved = resolve.resolve_model(ModelOptions(model=path, languages=("fr", "de")))
    assert resolved.description.languages == ("fr", "de")
    assert resolved.entry is None  # no catalog entry: no predefined voices
    assert resolve.resolve_model(ModelOptions(model=path)).description.languages == ("en",)


def test_a_voice_argument_is_a_file_or_a_plain_name(tmp_path, voice_wav):
    assert resolve.voice_argument("alba") is None
    assert resolve.voice_argument(str(voice_wav)).kind is VoiceKind.AUDIO
    for missing in (str(tmp_path / "alba.wav"), "voices/alba", "alba.safetensors"):
        with pytest.raises(VoiceError, match="voice file not found"):
            resolve.voice_argument(missing)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a voice")
    with pytest.raises(VoiceError, match="not a voice file"):
        resolve.voice_argument(str(notes))


def test_voices_of_a_folder_replace_predefined_ones_and_a_file_wins(tmp_path, voice_wav):
    from wyoming_pocket_tts.catalog import load_catalog

    entry = load_catalog().find_model(load_catalog().default_model)
    predefined = entry.voice_names[0]
    folder = tmp_path / "voices"
    folder.mkdir()
    shutil.copy(voice_wav, folder / f"{predefined}.wav")
    shutil.copy(voice_wav, folder / "zoe.wav")
    sources = resolve.voice_sources(entry, folder)()
    assert set(entry.voice_names) | {"zoe"} == set(sources)
    assert sources[predefined].kind is VoiceKind.AUDIO
    assert sources[entry.voice_names[1]].kind is VoiceKind.PREDEFINED
    explicit = resolve.voice_argument(str(voice_wav))
    assert resolve.voice_sources(entry, folder, explicit)()[explicit.name] is explicit


def test_synthesize_takes_a_voice_by_name_from_a_folder_and_caches_it_as_the_server_does(
    tmp_path, tiny_model, voice_wav
):
    folder = tmp_path / "voices"
    folder.mkdir()
    shutil.copy(voice_wav, folder / "alba.wav")
    output = tmp_path / "speech.wav"
    done = wyoming_pocket_tts(
        "synthesize", "--model", str(tiny_model.config_path), "--voices-dir", str(folder),
        "--voice", "alba", "--text", "Hello.", "--output", str(output), "--quiet",
        "--eos-threshold=-1e9", "--frames-after-eos", "1",
    )
    assert done.returncode == 0, done.stderr
    assert output.stat().st_size > 44
    # The recording's encoding was kept where the server looks for it.
    assert [path.name for path in (folder / CACHE_FOLDER).iterdir()] == [
        f"alba.{tiny_model.config_path.stem}.safetensors"
    ]


def test_an_unknown_voice_is_refused_alike_by_synthesize_and_load_voice(
    tmp_path, tiny_model, voice_wav, model
):
    folder = tmp_path / "voices"
    folder.mkdir()
    shutil.copy(voice_wav, folder / "alba.wav")
    options = ModelOptions(model=str(tiny_model.config_path), voices_dir=folder)
    with pytest.raises(UnknownVoiceError) as caught:
        resolve.load_voice(model, resolve.resolve_model(options), "zed")
    done = wyoming_pocket_tts(
        "synthesize", "--model", str(tiny_model.config_path), "--voices-dir", str(folder),
        "--voice", "zed", "--text", "Hello.", "--output", str(tmp_path / "x.wav"),
    )
    assert done.returncode == 1
    assert str(caught.value) in done.stderr  # "Unknown voice 'zed'. Available voices: alba"
    assert "Traceback" not in done.stderr


# ---------------------------------------------------------------------------
# A damaged model: one line naming the file, a non-zero exit, no traceback.


def _damaged_model(tiny_model: BuiltModel, directory: Path, damage: str) -> tuple[Path, Path]:
    """A copy of the tiny model with one thing wrong: its YAML and the file to be named."""
    directory.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(tiny_model.config_path.read_text())
    config_path = directory / "model.yaml"
    if damage == "truncated-weights":
        weights = directory / "model.safetensors"
        data = tiny_model.weights_path.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
        config["weights_path"] = str(weights)
        named = weights
    elif damage == "not-a-config":
        config = {"name": "my notes", "items": ["milk", "bread"]}
        named = config_path
    elif damage in ("missing-tokenizer", "garbled-tokenizer"):
        named = directory / "tokenizer.model"
        if damage == "garbled-tokenizer":
            named.write_bytes(bytes(range(256)) * 4)
        config["flow_lm"]["lookup_table"]["tokenizer_path"] = str(named)
    else:
        raise ValueError(damage)
    config_path.write_text(yaml.safe_dump(config))
    return config_path, named


DAMAGES = ["truncated-weights", "not-a-config", "missing-tokenizer", "garbled-tokenizer"]


def _one_error_line(log: str) -> str:
    assert "Traceback" not in log, log
    errors = [line for line in log.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, log
    return errors[0]


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_server_refuses_a_damaged_model_in_one_line(tmp_path, tiny_model, damage):
    config_path, named = _damaged_model(tiny_model, tmp_path / "model", damage)
    done = wyoming_pocket_tts("--uri", "tcp://127.0.0.1:0", "--model", str(config_path))
    assert done.returncode == 1
    assert str(named) in _one_error_line(done.stderr)


@pytest.mark.parametrize("damage", DAMAGES)
def test_synthesize_refuses_a_damaged_model_in_one_line(tmp_path, tiny_model, voice_wav, damage):
    config_path, named = _damaged_model(tiny_model, tmp_path / "model", damage)
    output = tmp_path / "x.wav"
    done = wyoming_pocket_tts(
        "synthesize", "--model", str(config_path), "--voice", str(voice_wav),
        "--text", "Hello.", "--output", str(output),
    )
    assert done.returncode == 1
    assert str(named) in _one_error_line(done.stderr)
    assert not output.exists()


def test_list_voices_shows_a_folders_voices_beside_the_predefined_ones(tmp_path, voice_wav):
    from wyoming_pocket_tts.catalog import load_catalog

    predefined = load_catalog().find_model(load_catalog().default_model).voice_names
    folder = tmp_path / "voices"
    folder.mkdir()
    shutil.copy(voice_wav, folder / f"{predefined[0]}.wav")
    shutil.copy(voice_wav, folder / "zoe.wav")
    done = wyoming_pocket_tts(
        "list-voices", "--voices-dir", str(folder), "--download-dir", str(tmp_path / "cache"),
        "--local-files-only",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    custom = lines[lines.index(f"Custom voices in {folder}:") + 1 :]
    assert [line.split()[0] for line in custom] == sorted([predefined[0], "zoe"])
    replaced = next(line for line in lines if line.split()[0] == predefined[0])
    assert replaced.endswith("(replaced)")


class HeldEncoder(Executor):
    """Runs each call on a thread of its own, once `release` is set: an encoding that
    lasts as long as the test wants."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()

        def run() -> None:
            self.started.set()
            self.release.wait(60)
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as error:  # noqa: BLE001 (handed to the waiter)
                future.set_exception(error)

        threading.Thread(target=run, daemon=True).start()
        return future


def test_a_cached_voice_is_read_while_another_recording_is_being_encoded(
    tmp_path, tiny_model, model
):
    folder = tmp_path / "voices"
    folder.mkdir()
    write_voice_wav(folder / "cached.wav", seed=3)
    write_voice_wav(folder / "fresh.wav", seed=4)
    options = ModelOptions(model=str(tiny_model.config_path), voices_dir=folder)
    resolved = resolve.resolve_model(options)
    sources = resolve.voice_sources(None, folder)
    resolve.voice_loader(model, resolved)(sources()["cached"])  # encoded and cached once
    encoder = HeldEncoder()
    readers = OwnThreadExecutor("test-voice-reader", cores=1)
    store = VoiceStore(
        sources=sources, load=resolve.voice_loader(model, resolved, encoder),
        default_voice="cached", max_loaded=2, executor=readers,
    )

    async def scenario() -> tuple[bool, int, int]:
        async def use(name: str) -> int:
            async with store.use(name) as voice:
                return voice.num_positions

        fresh = asyncio.create_task(use("fresh"))
        await asyncio.to_thread(encoder.started.wait, 60)
        cached = await asyncio.wait_for(use("cached"), 60)  # not behind the encoding
        fresh_waited = not fresh.done()
        encoder.release.set()
        return fresh_waited, cached, await asyncio.wait_for(fresh, 60)

    try:
        fresh_waited, cached_positions, fresh_positions = asyncio.run(scenario())
    finally:
        encoder.release.set()
        readers.shutdown()
    assert fresh_waited
    assert cached_positions > 0 and fresh_positions > 0
    assert (folder / CACHE_FOLDER).is_dir() and len(list((folder / CACHE_FOLDER).iterdir())) == 2
