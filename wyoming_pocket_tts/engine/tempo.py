"""Speaking rate: speech faster or slower, the same voice at the same pitch.

A streaming WSOLA (waveform-similarity overlap-add). The output is made of short
windows of the input, cross-faded at half overlap; each window lands one hop further
on in the output but `speed` hops further on in the input, and is shifted by a few
milliseconds to where its waveform best continues the window before it.
Pitch periods line up across every cross-fade and nothing is resampled, so pitch and
timbre stay as they were; only the number of periods changes. Imports no torch.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

MIN_SPEED = 0.5
MAX_SPEED = 2.0

# Four or more periods of a low voice, so that a window carries enough of the waveform's
# shape to match; the first frame still fills the first window at any speed.
WINDOW_SECONDS = 0.048
# Shifts searched each side of a window's nominal place: together they span a whole
# period of any voice above 42 Hz, so some shift always lines the periods up.
TOLERANCE_SECONDS = 0.012

Audio = npt.NDArray[np.float32]


def check_speed(speed: float) -> float:
    """`speed` as a float if it is a speaking rate this module can give, else ValueError."""
    if not MIN_SPEED <= speed <= MAX_SPEED:  # NaN fails every comparison
        raise ValueError(
            f"speed must be between {MIN_SPEED} and {MAX_SPEED} (1.0: unchanged), got {speed!r}"
        )
    return float(speed)


class TempoStream:
    """Changes the rate of one stream of mono float audio, frame by frame.

    `push` returns whatever output is ready (possibly none, possibly more than a frame).
    It holds back less than a window and its search tolerance of input (60 ms), so an
    80 ms frame yields audio at once. `flush` ends a stretch of speech: it returns the
    rest, so that the stretch's output lasts exactly its input's length over `speed`, and
    starts afresh. A caller flushes at the end of a sentence, sends its pause unchanged,
    and pushes the next sentence. At speed 1.0 every frame comes back as it was given.
    """

    def __init__(self, speed: float, sample_rate: int) -> None:
        self.speed = check_speed(speed)
        self._hop = round(WINDOW_SECONDS * sample_rate / 2)
        self._window = 2 * self._hop
        self._tolerance = round(TOLERANCE_SECONDS * sample_rate)
        # Periodic Hann halves: a fade-out and the next window's fade-in sum to one.
        hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(self._window) / self._window)
        self._fade_in = hann[: self._hop].astype(np.float32)
        self._fade_out = hann[self._hop :].astype(np.float32)
        self._start()

    def _start(self) -> None:
        self._input: Audio = np.zeros(0, np.float32)
        self._input_start = 0  # stream position of self._input[0]
        self._received = 0
        self._emitted = 0
        self._windows = 0  # windows placed so far
        self._previous = 0  # where in the input the last window was taken from
        self._tail: Audio = np.zeros(self._hop, np.float32)  # its fade-out, still to add

    def push(self, frame: Audio) -> Audio:
        if self.speed == 1.0:
            return frame
        self._input = np.concatenate((self._input, frame.astype(np.float32, copy=False)))
        self._received += len(frame)
        return self._place(self._ready_windows())

    def flush(self) -> Audio:
        if self.speed == 1.0:
            return np.zeros(0, np.float32)
        target = round(self._received / self.speed)
        windows = max(0, math.ceil((target - self._emitted) / self._hop))
        if windows:
            # The last windows read silence past the stretch's end, where its input stops.
            end = self._needs(self._windows + windows - 1)
            stream_end = self._input_start + len(self._input)
            if end > stream_end:
                padding = np.zeros(end - stream_end, np.float32)
                self._input = np.concatenate((self._input, padding))
        missing = target - self._emitted
        rest = self._place(windows)[: max(0, missing)]
        self._start()
        return rest

    def _nominal(self, index: int) -> int:
        return round(index * self._hop * self.speed)

    def _needs(self, index: int) -> int:
        """The stream position up to which window `index` may read."""
        return self._nominal(index) + self._tolerance + self._window

    def _ready_windows(self) -> int:
        available = self._input_start + len(self._input)
        count = 0
        while self._needs(self._windows + count) <= available:
            count += 1
        return count

    def _place(self, count: int) -> Audio:
        """Overlap-add `count` more windows; returns the output they complete."""
        if count == 0:
            return np.zeros(0, np.float32)
        hop, window = self._hop, self._window
        output = np.empty(count * hop, np.float32)
        for i in range(count):
            start = self._best_start() if self._windows else 0
            at = start - self._input_start
            segment = self._input[at : at + window]
            chunk = output[i * hop : (i + 1) * hop]
            if self._windows:
                np.multiply(segment[:hop], self._fade_in, out=chunk)
                chunk += self._tail
            else:
                chunk[:] = segment[:hop]  # the stream's first samples come unfaded
            np.multiply(segment[hop:], self._fade_out, out=self._tail)
            self._previous = start
            self._windows += 1
        self._emitted += len(output)
        self._forget()
        return output

    def _best_start(self) -> int:
        """Where near its nominal place the next window continues the last one best: the
        shift whose start correlates most with the last window's natural continuation
        over the stretch where the two are cross-faded."""
        hop = self._hop
        nominal = self._nominal(self._windows)
        lowest = max(0, nominal - self._tolerance)
        at = self._previous + hop - self._input_start
        continuation = self._input[at : at + hop]
        low = lowest - self._input_start
        candidates = self._input[low : nominal + self._tolerance + hop - self._input_start]
        correlation = np.correlate(candidates, continuation, mode="valid")
        return lowest + int(np.argmax(correlation))

    def _forget(self) -> None:
        """Drop the input that no later window can read."""
        keep_from = min(
            self._previous + self._hop, self._nominal(self._windows) - self._tolerance
        )
        drop = keep_from - self._input_start
        if drop > 0:
            self._input = self._input[drop:]
            self._input_start = keep_from
