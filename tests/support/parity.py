"""Speaking with our engine, and comparing its audio with the reference's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.model.voice import VoiceState
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

AUDIO_TOLERANCE = 1e-4


def ours(model: PocketTTS, voice_path: Path, text: str, **options: Any) -> np.ndarray:
    """Our whole audio at temperature 0 for a voice file (audio or voice state)."""
    voice = model.voice(voice_path)
    frames = Synthesizer(model).stream(voice, text, GenerationOptions(temperature=0.0, **options))
    return np.concatenate(list(frames))


def assert_same_audio(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    assert np.abs(expected).max() > 0.01, "reference audio is silent: the fixture is degenerate"
    np.testing.assert_allclose(actual, expected, rtol=0, atol=AUDIO_TOLERANCE)


def assert_same_voice_state(voice: VoiceState, reference_state: dict, atol: float = 1e-5) -> None:
    """Our voice's keys/values against the reference's flow-LM state for the same audio."""
    assert voice.num_layers == len(reference_state)
    for layer in range(voice.num_layers):
        cache = reference_state[f"transformer.layers.{layer}.self_attn"]["cache"]  # [2, 1, T, H, D]
        ours_cache = torch.stack([voice.keys[layer], voice.values[layer]]).transpose(1, 2)
        torch.testing.assert_close(ours_cache, cache[:, 0], rtol=0, atol=atol)
