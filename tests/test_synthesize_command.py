"""`synthesize` reads texts as the server does: normalised, SSML, at a speaking rate.

Speech ends at its seventh frame (an end-of-speech threshold no logit misses), and
runs are compared within a few steps of 16-bit audio: with random weights a long
text magnifies the rounding that a change of thread count (cpu/contention.py) makes.
"""

from __future__ import annotations

import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.support.reference_model import BuiltModel
from tests.support.server import REPO

TOLERANCE = 4


def _synthesize(model: BuiltModel, voice: Path, output: Path, *args: str) -> np.ndarray:
    done = subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", "synthesize", "--model",
         str(model.config_path), "--voice", str(voice), "--output", str(output), "--quiet",
         "--temperature", "0", "--eos-threshold=-1e9", "--frames-after-eos", "1", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with wave.open(str(output)) as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)


def test_an_ssml_break_is_silence_in_the_file(tmp_path, tiny_model, voice_wav) -> None:
    plain = _synthesize(tiny_model, voice_wav, tmp_path / "a.wav", "--text", "Good night.")
    markup = '<speak>Good night.<break time="1500ms"/>Good night.</speak>'
    marked = _synthesize(tiny_model, voice_wav, tmp_path / "b.wav", "--ssml", "--text", markup)
    assert len(marked) == 2 * len(plain) + 36000
    np.testing.assert_array_equal(marked[len(plain) : len(plain) + 36000], 0)
    np.testing.assert_allclose(marked[: len(plain)], plain, atol=TOLERANCE)


@pytest.mark.parametrize("speed", [0.75, 1.5])
def test_the_speed_changes_the_length_only(tmp_path, tiny_model, voice_wav, speed) -> None:
    plain = _synthesize(tiny_model, voice_wav, tmp_path / "a.wav", "--text", "Good night.")
    faster = _synthesize(
        tiny_model, voice_wav, tmp_path / "b.wav", "--text", "Good night.", "--speed", str(speed)
    )
    assert len(faster) == round(len(plain) / speed)


def test_numbers_are_read_unless_told_not_to(tmp_path, tiny_model, voice_wav) -> None:
    """"21 °C" and its words say the same; without normalising, the digits are read as
    the model reads them (another text, other audio)."""
    words = _synthesize(
        tiny_model, voice_wav, tmp_path / "a.wav", "--text", "It is twenty-one degrees Celsius."
    )
    digits = _synthesize(tiny_model, voice_wav, tmp_path / "b.wav", "--text", "It is 21 °C.")
    raw = _synthesize(
        tiny_model, voice_wav, tmp_path / "c.wav", "--text", "It is 21 °C.", "--no-normalize"
    )
    np.testing.assert_allclose(words, digits, atol=TOLERANCE)
    assert raw.shape != words.shape or np.abs(raw.astype(int) - words).max() > 100 * TOLERANCE


def test_a_speed_out_of_range_is_refused(tmp_path, tiny_model, voice_wav) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", "synthesize", "--model",
         str(tiny_model.config_path), "--voice", str(voice_wav), "--text", "Hi.",
         "--output", str(tmp_path / "x.wav"), "--speed", "3"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 2
    assert "--speed must be between 0.5 and 2.0" in done.stderr
