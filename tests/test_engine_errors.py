"""Bad input to the engine gets a clear EngineError, never a traceback from deep in torch."""

from __future__ import annotations

import re
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
import yaml

from tests.support.reference_model import BuiltModel
from tests.support.spm import build_sentencepiece_model
from tests.support.voices_audio import write_voice_wav
from wyoming_pocket_tts.engine.errors import (
    CheckpointError,
    ConfigError,
    TextError,
    TokenizerError,
    VoiceError,
)
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer


def _with_weights(tiny_model: BuiltModel, tmp_path: Path, edit) -> Path:
    """A copy of the tiny model's YAML pointing at an edited copy of its weights."""
    tensors = safetensors.torch.load_file(str(tiny_model.weights_path))
    edit(tensors)
    weights = tmp_path / "edited.safetensors"
    safetensors.torch.save_file(tensors, str(weights))
    config = yaml.safe_load(tiny_model.config_path.read_text())
    config["weights_path"] = str(weights)
    path = tmp_path / "model-edited.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text(model, voice_wav, text):
    with pytest.raises(TextError):
        Synthesizer(model).start(model.voice_from_audio(voice_wav), text)


def test_missing_tensor_is_named(tiny_model, tmp_path):
    path = _with_weights(tiny_model, tmp_path, lambda t: t.pop("flow_lm.out_norm.weight"))
    with pytest.raises(CheckpointError, match=re.escape("flow_lm.out_norm.weight")):
        PocketTTS.load(path)


def test_unexpected_tensor_is_named(tiny_model, tmp_path):
    path = _with_weights(tiny_model, tmp_path, lambda t: t.update(extra=torch.zeros(1)))
    with pytest.raises(CheckpointError, match="extra"):
        PocketTTS.load(path)


def test_misshaped_tensor_is_named(tiny_model, tmp_path):
    def edit(tensors):
        tensors["flow_lm.bos_emb"] = torch.zeros(3)

    with pytest.raises(CheckpointError, match=r"flow_lm.bos_emb.*\(3,\)"):
        PocketTTS.load(_with_weights(tiny_model, tmp_path, edit))


def test_corrupt_checkpoint(tiny_model, tmp_path):
    weights = tmp_path / "corrupt.safetensors"
    weights.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(CheckpointError, match=re.escape("corrupt.safetensors")):
        PocketTTS.load(tiny_model.config_path, weights_path=weights)


def test_voice_cloning_weights_are_optional(tiny_model, tmp_path, voice_wav):
    def drop_encoder(tensors):
        encoder = ("mimi.encoder.", "mimi.encoder_transformer.")
        for key in [k for k in tensors if k.startswith(encoder)]:
            del tensors[key]

    model = PocketTTS.load(_with_weights(tiny_model, tmp_path, drop_encoder))
    assert not model.has_voice_cloning
    with pytest.raises(VoiceError, match="voice-cloning"):
        model.voice_from_audio(voice_wav)


def test_bfloat16_checkpoint_is_cast(tiny_model, tmp_path, model):
    def to_bf16(tensors):
        for key, tensor in tensors.items():
            if tensor.is_floating_point():
                tensors[key] = tensor.to(torch.bfloat16)

    loaded = PocketTTS.load(_with_weights(tiny_model, tmp_path, to_bf16))
    weight = loaded.flow_lm.out_norm.weight
    assert weight.dtype == torch.float32
    torch.testing.assert_close(weight, model.flow_lm.out_norm.weight, atol=1e-2, rtol=1e-2)


def test_tokenizer_of_the_wrong_size(tiny_model, tmp_path):
    wrong = build_sentencepiece_model(tmp_path / "tok", vocab_size=300)
    with pytest.raises(TokenizerError, match="300"):
        PocketTTS.load(tiny_model.config_path, tokenizer_path=wrong)


def test_config_errors(tmp_path, tiny_model):
    with pytest.raises(ConfigError, match="not found"):
        PocketTTS.load(tmp_path / "missing.yaml")
    config = yaml.safe_load(tiny_model.config_path.read_text())
    config["flow_lm"]["transformer"]["unknown_setting"] = 1
    bad = tmp_path / "model-bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="unknown_setting"):
        PocketTTS.load(bad)
    config = yaml.safe_load(tiny_model.config_path.read_text())
    config["weights_path"] = "hf://kyutai/pocket-tts/languages/english/model.safetensors@abc"
    remote = tmp_path / "model-remote.yaml"
    remote.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="download"):
        PocketTTS.load(remote)


def test_silent_voice(model, tmp_path):
    path = tmp_path / "silent.wav"
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(24000)
        wav.writeframes(bytes(2 * 48000))
    with pytest.raises(VoiceError, match="silent"):
        model.voice_from_audio(path)


def test_voice_shorter_than_a_frame(model, tmp_path):
    path = write_voice_wav(tmp_path / "short.wav", seconds=0.05, trailing_silence=0.0)
    with pytest.raises(VoiceError, match="shorter than one frame"):
        model.voice_from_audio(path)


@pytest.mark.parametrize("name,content", [
    ("garbage.wav", b"RIFF\x00\x00garbage"),
    ("text.flac", b"this is not audio at all"),
    ("empty.ogg", b""),
])
def test_undecodable_voice(model, tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(VoiceError, match=name):
        model.voice_from_audio(path)


def test_voice_file_errors(model, tmp_path):
    with pytest.raises(VoiceError, match="not found"):
        model.voice(tmp_path / "nope.safetensors")
    not_a_voice = tmp_path / "weights.safetensors"
    safetensors.torch.save_file({"something": torch.zeros(2)}, str(not_a_voice))
    with pytest.raises(VoiceError, match="not a Pocket TTS voice"):
        model.load_voice(not_a_voice)
    other_shape = tmp_path / "other.safetensors"
    safetensors.torch.save_file(
        {"transformer.layers.0.self_attn/cache": torch.zeros(2, 1, 5, 3, 8),
         "transformer.layers.0.self_attn/offset": torch.tensor([5])},
        str(other_shape),
    )
    with pytest.raises(VoiceError, match="another model"):
        model.load_voice(other_shape)


def test_cli_synthesize_and_export(tiny_model, voice_wav, tmp_path):
    command = [sys.executable, "-m", "wyoming_pocket_tts"]
    model_args = ["--model", str(tiny_model.config_path)]
    voice_file = tmp_path / "voice.safetensors"
    done = subprocess.run(
        [*command, "export-voice", *model_args, str(voice_wav), str(voice_file)],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    output = tmp_path / "speech.wav"
    done = subprocess.run(
        [*command, "synthesize", *model_args, "--voice", str(voice_file), "--text", "-",
         "--output", str(output), "--temperature", "0", "--eos-threshold=-1e9",
         "--frames-after-eos", "1"],
        input="Turn on the light.", check=False, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    with wave.open(str(output)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24000, 1, 2)
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    assert samples.shape[0] == (6 + 1) * 1920 and np.abs(samples).max() > 0
    # The same as the engine gives in-process, to 16-bit precision.
    model = PocketTTS.load(tiny_model.config_path)
    expected = np.concatenate(list(Synthesizer(model).stream(
        model.load_voice(voice_file), "Turn on the light.",
        GenerationOptions(temperature=0.0, eos_threshold=-1e9, frames_after_eos=1),
    )))
    np.testing.assert_allclose(samples / 32767, expected, atol=2 / 32767)


@pytest.mark.parametrize("arguments,message", [
    (["--voice", "{voice}", "--text", " "], "empty"),
    (["--voice", "/no/such/voice.wav", "--text", "Hi."], "not found"),
])
def test_cli_errors_are_one_line(tiny_model, voice_wav, tmp_path, arguments, message):
    arguments = [a.replace("{voice}", str(voice_wav)) for a in arguments]
    done = subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", "synthesize", "--model",
         str(tiny_model.config_path), "--output", str(tmp_path / "x.wav"), *arguments],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and message in done.stderr
    assert not (tmp_path / "x.wav").exists()
