"""The speaking rate on real speech (tests/data/speech/), fed as the server streams it:
80 ms frames of 24 kHz float audio, a flush at the end of each sentence."""

from __future__ import annotations

import functools
import tracemalloc
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import soundfile
from scipy.signal import resample_poly

from tests.support.pitch import median_f0
from wyoming_pocket_tts.engine.tempo import MAX_SPEED, MIN_SPEED, TempoStream

SPEECH = Path(__file__).parent / "data" / "speech"
LANGUAGES = ("en", "fr")
RATE = 24000
FRAME = 1920

DURATION_TOLERANCE = 0.03
PITCH_TOLERANCE = 0.05
# A cross-fade of two windows whose periods line up is no steeper than the speech itself;
# splicing the same speech without the cross-fade gives jumps 1.5-2.8 times its steepest.
JUMP_ALLOWANCE = 1.1

Audio = npt.NDArray[np.float32]


@functools.cache
def speech(language: str) -> Audio:
    audio, rate = soundfile.read(SPEECH / f"{language}.wav", dtype="float32")
    assert rate == RATE
    return audio


def streamed(audio: Audio, speed: float, frame: int = FRAME) -> list[Audio]:
    """What each push returned, then what the flush returned."""
    stream = TempoStream(speed, RATE)
    pieces = [stream.push(audio[i : i + frame]) for i in range(0, len(audio), frame)]
    return [*pieces, stream.flush()]


def speaking_span(audio: Audio) -> float:
    """Seconds from the first to the last 5 ms block within 35 dB of the loudest."""
    block = RATE // 200
    blocks = audio[: len(audio) // block * block].reshape(-1, block)
    loudness = np.sqrt(np.mean(blocks.astype(np.float64) ** 2, axis=1))
    loud = np.flatnonzero(loudness > loudness.max() * 10 ** (-35 / 20))
    return float((loud[-1] - loud[0] + 1) * block / RATE)


def largest_jump(audio: Audio) -> float:
    """The largest sample-to-sample step, silence before and after included."""
    return float(np.abs(np.diff(audio, prepend=0.0, append=0.0)).max())


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("speed", [0.5, 0.75, 1.25, 1.5, 2.0])
def test_duration_follows_the_speed(language: str, speed: float) -> None:
    original = speech(language)
    output = np.concatenate(streamed(original, speed))

    target = len(original) / speed
    assert abs(len(output) / target - 1) < DURATION_TOLERANCE
    # The speech itself is time-scaled, not only its length padded or cut.
    spoken_target = speaking_span(original) / speed
    assert abs(speaking_span(output) / spoken_target - 1) < DURATION_TOLERANCE


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("speed", [0.75, 1.25, 1.5])
def test_pitch_is_kept(language: str, speed: float) -> None:
    original = speech(language)
    output = np.concatenate(streamed(original, speed))

    change = median_f0(output, RATE) / median_f0(original, RATE) - 1
    assert abs(change) < PITCH_TOLERANCE, f"median F0 moved {change:+.1%}"


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("speed", [0.75, 1.25, 1.5])
def test_no_clicks_within_frames_or_at_their_joins(language: str, speed: float) -> None:
    original = speech(language)
    pieces = streamed(original, speed)
    output = np.concatenate(pieces)

    steepest = largest_jump(original)
    assert largest_jump(output) <= JUMP_ALLOWANCE * steepest
    joins = np.cumsum([len(piece) for piece in pieces[:-1]])
    joins = joins[(joins > 0) & (joins < len(output))]
    assert len(joins) > len(original) // FRAME // 2
    assert np.abs(output[joins] - output[joins - 1]).max() <= steepest


def test_the_checks_catch_a_chipmunk_and_a_splice() -> None:
    """Speeding speech up by resampling raises its pitch past the tolerance, and cutting
    it into blocks without cross-fades clicks past the allowance."""
    original = speech("en")
    chipmunk = resample_poly(original, 4, 5).astype(np.float32)  # 1.25 times as fast
    assert median_f0(chipmunk, RATE) / median_f0(original, RATE) - 1 > PITCH_TOLERANCE

    block = FRAME // 4
    starts = range(0, len(original) - block, round(block * 1.25))
    spliced = np.concatenate([original[start : start + block] for start in starts])
    assert largest_jump(spliced) > JUMP_ALLOWANCE * largest_jump(original)


def test_speed_one_returns_every_frame_as_it_was() -> None:
    original = speech("en")
    stream = TempoStream(1.0, RATE)
    for start in range(0, len(original), FRAME):
        frame = original[start : start + FRAME]
        returned = stream.push(frame)
        assert returned.dtype == frame.dtype
        assert np.array_equal(returned, frame)
    assert len(stream.flush()) == 0


@pytest.mark.parametrize("speed", [MIN_SPEED, 0.75, 1.25, 1.5, MAX_SPEED])
def test_the_first_frame_yields_audio_and_none_is_held_back(speed: float) -> None:
    """At most one frame's time of the input waits in the stream, from the first."""
    original = speech("en")
    stream = TempoStream(speed, RATE)
    first = stream.push(original[:FRAME])
    assert len(first) > 0
    emitted = len(first)
    for received in range(2 * FRAME, len(original), FRAME):
        emitted += len(stream.push(original[received - FRAME : received]))
        assert received - emitted * speed < FRAME


@pytest.mark.parametrize("speed", [0.75, 1.5])
def test_output_does_not_depend_on_how_the_input_is_cut(speed: float) -> None:
    original = speech("fr")
    by_frames = np.concatenate(streamed(original, speed))
    whole = np.concatenate(streamed(original, speed, frame=len(original)))
    stream = TempoStream(speed, RATE)
    pieces, start = [], 0
    for size in [1, 700, 5, 4000, 333] * 1000:
        if start >= len(original):
            break
        pieces.append(stream.push(original[start : start + size]))
        start += size
    ragged = np.concatenate([*pieces, stream.flush()])

    np.testing.assert_allclose(whole, by_frames, atol=1e-6)
    np.testing.assert_allclose(ragged, by_frames, atol=1e-6)


@pytest.mark.parametrize("speed", [0.75, 1.5])
def test_flush_ends_a_sentence_exactly_and_starts_afresh(speed: float) -> None:
    first, second = speech("en"), speech("fr")
    stream = TempoStream(speed, RATE)
    one = [stream.push(first[i : i + FRAME]) for i in range(0, len(first), FRAME)]
    one.append(stream.flush())
    assert sum(len(piece) for piece in one) == round(len(first) / speed)
    assert len(stream.flush()) == 0  # nothing since the last flush

    # After a flush (and the caller's pause), the next sentence comes out as from a new stream.
    two = [stream.push(second[i : i + FRAME]) for i in range(0, len(second), FRAME)]
    two.append(stream.flush())
    np.testing.assert_array_equal(np.concatenate(two), np.concatenate(streamed(second, speed)))


def test_a_stretch_shorter_than_a_window_keeps_its_length() -> None:
    stream = TempoStream(2.0, RATE)
    short = speech("en")[RATE : RATE + 101]
    assert len(stream.push(short)) == 0
    assert len(stream.flush()) == round(101 / 2.0)


def test_memory_stays_bounded_on_a_long_stream() -> None:
    original = speech("en")
    frames = [original[i : i + FRAME] for i in range(0, len(original) - FRAME, FRAME)]
    stream = TempoStream(1.5, RATE)
    tracemalloc.start()
    try:
        for frame in frames * 2:
            stream.push(frame)
        settled, _ = tracemalloc.get_traced_memory()
        for frame in frames * 10:  # 48 s more
            stream.push(frame)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - settled < FRAME * 4 * 4  # a few frames of float32 at most


@pytest.mark.parametrize("speed", [0.49, 2.01, 0.0, -1.0, float("nan"), float("inf")])
def test_a_speed_out_of_range_is_refused(speed: float) -> None:
    with pytest.raises(ValueError, match=r"speed must be between 0\.5 and 2\.0"):
        TempoStream(speed, RATE)
