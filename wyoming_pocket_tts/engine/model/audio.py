"""Reading a voice prompt: any common file, rate and channel count -> 24 kHz mono, ready to
encode."""

from __future__ import annotations

from math import gcd
from pathlib import Path

import numpy as np
import soundfile
import torch

from ..errors import VoiceError

MAX_PROMPT_SECONDS = 30.0


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """Decode an audio file (wav, flac, ogg, mp3, ...) to mono float32 and its sample rate."""
    try:
        samples, sample_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except FileNotFoundError:
        raise VoiceError(f"voice audio not found: {path}") from None
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
        raise VoiceError(f"cannot decode {path} as audio: {error}") from error
    if samples.shape[0] == 0:
        raise VoiceError(f"{path} contains no audio")
    return samples.mean(axis=1), sample_rate


def to_sample_rate(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Polyphase resampling (the same filter the reference uses, so voices match it)."""
    if from_rate == to_rate:
        return samples
    # Imported here: scipy.signal costs tens of MB of memory and a second of start-up,
    # and a server whose voices are all at 24 kHz (or prepared) never needs it.
    from scipy.signal import resample_poly

    divisor = gcd(int(from_rate), int(to_rate))
    return resample_poly(samples, to_rate // divisor, from_rate // divisor).astype(np.float32)


def end_on_pause(
    audio: torch.Tensor, sample_rate: int, pause: float = 0.08, fade: float = 0.02,
    floor_db: float = 35.0,
) -> torch.Tensor:
    """Trim trailing quiet, fade out, and end on exactly `pause` seconds of silence.

    The model was trained on prompts that stop between two words: one that stops on
    speech makes it continue that word, one with a long silence delays the onset.
    "Quiet" is a 20 ms frame more than `floor_db` below the loudest frame.
    """
    frame = max(1, int(0.02 * sample_rate))
    frames = audio.shape[-1] // frame
    if frames == 0:
        return audio
    energy = audio[..., : frames * frame].reshape(-1, frames, frame).square().mean(dim=(0, 2))
    level = 20 * torch.log10(energy.sqrt() + 1e-12)
    # `>=`: a prompt so loud that its energy overflows float32 still has a loudest frame.
    last_loud = int(torch.nonzero(level >= level.max() - floor_db).flatten()[-1])
    end = (last_loud + 1) * frame
    audio = audio[..., :end].clone()
    fade_length = min(int(fade * sample_rate), end)
    audio[..., end - fade_length :] *= torch.linspace(1, 0, fade_length, dtype=audio.dtype)
    silence = audio.new_zeros(*audio.shape[:-1], int(pause * sample_rate))
    return torch.cat([audio, silence], dim=-1)


def prepare_prompt(samples: np.ndarray, sample_rate: int, target_rate: int) -> torch.Tensor:
    """Mono samples at any rate -> [1, 1, T] at `target_rate`, cut to 30 s, ending on a pause."""
    samples = samples[: int(MAX_PROMPT_SECONDS * sample_rate)]
    samples = to_sample_rate(samples, sample_rate, target_rate)
    if samples.shape[0] == 0 or not np.any(samples):
        raise VoiceError("the voice audio is silent: record a few seconds of clear speech")
    if not np.isfinite(samples).all():
        raise VoiceError("the voice audio contains invalid (non-finite) samples")
    audio = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))[None]
    return end_on_pause(audio, target_rate)[None]
