"""Speaking with our engine, and comparing its audio with the reference's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from wyoming_pocket_tts.engine.model import PocketTTS
from wyoming_pocket_tts.engine.synthesizer import GenerationOptions, Synthesizer

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
