"""Deterministic speech-like WAV files to use as voice prompts in tests.

Real recordings cannot ship with the tests, and white noise or a pure tone is a
poor stand-in: the reference trims a prompt at its last loud 20 ms frame, so the
signal needs syllables (loud stretches with quiet gaps) and trailing silence,
and two voices must differ in pitch and timbre for a voice change to matter.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np


def speech_like_signal(
    seconds: float, sample_rate: int, seed: int, trailing_silence: float
) -> np.ndarray:
    """Voiced harmonics under a gliding pitch and a syllable envelope, in [-1, 1]."""
    rng = np.random.default_rng(seed)
    voiced = round(seconds * sample_rate)
    t = np.arange(voiced) / sample_rate

    # Pitch: a per-seed base (about 90-260 Hz) with a slow glide and a faster vibrato.
    base = rng.uniform(90.0, 260.0)
    glide = 1.0 + 0.25 * np.sin(2 * np.pi * rng.uniform(0.3, 0.8) * t + rng.uniform(0, 2 * np.pi))
    vibrato = 1.0 + 0.03 * np.sin(2 * np.pi * rng.uniform(4.0, 7.0) * t)
    phase = 2 * np.pi * np.cumsum(base * glide * vibrato) / sample_rate

    # Timbre: harmonic amplitudes with a per-seed spectral tilt and a formant bump.
    formant = rng.uniform(500.0, 1500.0)
    signal = np.zeros(voiced)
    for harmonic in range(1, 16):
        frequency = harmonic * base
        if frequency > sample_rate / 2 * 0.9:
            break
        weight = harmonic ** -rng.uniform(0.8, 1.6) * (
            1.0 + 2.0 * np.exp(-(((frequency - formant) / 300.0) ** 2))
        )
        signal += weight * np.sin(harmonic * phase + rng.uniform(0, 2 * np.pi))
    signal += 0.02 * rng.standard_normal(voiced)  # breath noise

    # Syllables: 3-6 per second, each a raised-cosine bump separated by short gaps.
    envelope = np.zeros(voiced)
    position = 0
    while position < voiced:
        length = int(sample_rate * rng.uniform(0.12, 0.28))
        gap = int(sample_rate * rng.uniform(0.03, 0.10))
        stop = min(position + length, voiced)
        envelope[position:stop] = rng.uniform(0.5, 1.0) * np.sin(
            np.linspace(0, np.pi, stop - position)
        )
        position = stop + gap
    signal *= envelope

    signal *= 0.6 / max(np.abs(signal).max(), 1e-9)
    silence = np.zeros(round(trailing_silence * sample_rate))
    return np.concatenate([signal, silence])


def write_voice_wav(
    path: Path,
    seconds: float = 2.0,
    sample_rate: int = 24000,
    channels: int = 1,
    seed: int = 0,
    trailing_silence: float = 0.3,
) -> Path:
    """Write a 16-bit PCM WAV of a speech-like voice; different seeds sound clearly different."""
    mono = speech_like_signal(seconds, sample_rate, seed, trailing_silence)
    # Extra channels get slightly different gains so that downmixing is observable.
    frames = np.stack([mono * (1.0 - 0.2 * c) for c in range(channels)], axis=1)
    pcm = np.round(frames * 32767).astype("<i2")
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm.tobytes())
    return path
