"""The engine's float audio as 16-bit PCM: the one conversion of the package, so that
the server, the studio and the `synthesize` command give the same samples for the
same audio. Imports no torch."""

from __future__ import annotations

import numpy as np

SAMPLE_WIDTH = 2  # bytes: int16
CHANNELS = 1


def pcm16(frame: np.ndarray) -> bytes:
    """Float audio in [-1, 1] as little-endian 16-bit PCM, rounded to the nearest step."""
    return bytes((np.clip(frame, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes())
