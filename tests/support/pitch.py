"""The fundamental frequency (F0) of speech, by YIN (de Cheveigné and Kawahara, 2002).

Tests compare the median F0 of speech before and after a change of speaking rate: a
change of pitch shows there even where a listener would need the sound to notice it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# A frame holds at least two periods of the lowest voice searched.
FRAME_SECONDS = 0.040
HOP_SECONDS = 0.010
# Below this cumulative-mean-normalised difference a lag counts as a period; frames with
# no such lag are unvoiced. Lenient (YIN's paper uses 0.1-0.15 for clean tones): speech
# whose period drifts within a frame still counts, where a strict threshold would keep
# only the steadiest frames, and which frames those are shifts with any processing.
APERIODICITY = 0.3
# Frames quieter than this, relative to the loudest frame, are pauses, not speech.
SILENCE_DB = -35.0


def f0_track(
    signal: npt.NDArray[np.floating], sample_rate: int, fmin: float = 60.0, fmax: float = 400.0
) -> npt.NDArray[np.float64]:
    """F0 in Hz of every voiced frame, in order (unvoiced and silent frames left out)."""
    x = np.asarray(signal, dtype=np.float64)
    width = round(FRAME_SECONDS * sample_rate)
    hop = round(HOP_SECONDS * sample_rate)
    shortest = int(sample_rate / fmax)
    longest = int(np.ceil(sample_rate / fmin))
    starts = range(0, len(x) - width - longest, hop)
    if not starts:
        return np.zeros(0)

    loudness = np.array([np.sqrt(np.mean(x[s : s + width] ** 2)) for s in starts])
    floor = loudness.max() * 10 ** (SILENCE_DB / 20)
    track = []
    for start, level in zip(starts, loudness, strict=True):
        if level < floor:
            continue
        lag = _period(x[start : start + width + longest], width, shortest, longest)
        if lag is not None:
            track.append(sample_rate / lag)
    return np.array(track)


def median_f0(signal: npt.NDArray[np.floating], sample_rate: int) -> float:
    track = f0_track(signal, sample_rate)
    if track.size == 0:
        raise ValueError("no voiced frame in the signal")
    return float(np.median(track))


def _period(
    segment: npt.NDArray[np.float64], width: int, shortest: int, longest: int
) -> float | None:
    """The first lag whose normalised difference dips under the threshold, refined
    between samples by a parabola through its neighbours; None if none dips."""
    head = segment[:width]
    # d(tau) = sum (x_j - x_{j+tau})^2 = energy(head) + energy(shifted) - 2 correlation
    squares = np.concatenate(([0.0], np.cumsum(segment**2)))
    shifted_energy = squares[width : width + longest + 1] - squares[: longest + 1]
    correlation = np.correlate(segment, head, mode="valid")[: longest + 1]
    difference = np.maximum(shifted_energy[0] + shifted_energy - 2 * correlation, 0.0)

    lags = np.arange(1, longest + 1)
    running_mean = np.cumsum(difference[1:]) / lags
    normalised = np.ones(longest + 1)
    normalised[1:] = difference[1:] / np.maximum(running_mean, 1e-12)

    below = np.flatnonzero(normalised[shortest : longest + 1] < APERIODICITY)
    if below.size == 0:
        return None
    lag = shortest + int(below[0])
    while lag < longest and normalised[lag + 1] < normalised[lag]:
        lag += 1
    if lag >= longest:
        return float(lag)
    before, here, after = normalised[lag - 1 : lag + 2]
    curvature = before - 2 * here + after
    return lag + (0.5 * (before - after) / curvature if curvature > 0 else 0.0)
