"""Sentence silence: a pause after every chunk of text, whichever path speaks it."""

from __future__ import annotations

import numpy as np
import pytest

from wyoming_pocket_tts.engine.runtime.scheduler import SynthesisWorker
from wyoming_pocket_tts.engine.runtime.synthesizer import GenerationOptions, Synthesizer

FRAMES_PER_CHUNK = 10  # the tiny model never ends speech by itself: every chunk hits the cap
PLAIN = GenerationOptions(temperature=0.0, max_frames_per_chunk=FRAMES_PER_CHUNK)
TWO_SENTENCES = (
    "This first sentence is long enough to fill one chunk of text all by itself, "
    "which it does with quite a few words to spare. And this one comes after it."
)


def with_silence(seconds: float) -> GenerationOptions:
    return GenerationOptions(
        temperature=0.0, max_frames_per_chunk=FRAMES_PER_CHUNK, sentence_silence=seconds
    )


def expected_with_pauses(frames: list[np.ndarray], chunks: int, pause: int) -> np.ndarray:
    assert len(frames) == chunks * FRAMES_PER_CHUNK
    pieces = []
    for start in range(0, len(frames), FRAMES_PER_CHUNK):
        pieces.extend(frames[start : start + FRAMES_PER_CHUNK])
        pieces.append(np.zeros(pause, dtype=np.float32))
    return np.concatenate(pieces)


def test_each_chunk_is_followed_by_the_pause(model, voice):
    synthesizer = Synthesizer(model)
    chunks = len(synthesizer.start(voice, TWO_SENTENCES, PLAIN).chunks)
    assert chunks == 2
    plain = list(synthesizer.stream(voice, TWO_SENTENCES, PLAIN))
    paused = np.concatenate(list(synthesizer.stream(voice, TWO_SENTENCES, with_silence(0.25))))
    pause = round(0.25 * model.sample_rate)
    np.testing.assert_array_equal(paused, expected_with_pauses(plain, chunks, pause))


def test_no_silence_by_default(model, voice):
    synthesizer = Synthesizer(model)
    plain = list(synthesizer.stream(voice, TWO_SENTENCES, PLAIN))
    assert len(plain) == 2 * FRAMES_PER_CHUNK


@pytest.mark.parametrize("take_turns", [True, False])
def test_worker_delivers_the_pause_in_order(model, voice, take_turns):
    """Both ways the worker shares the cores pass the silence on between the frames."""
    synthesizer = Synthesizer(model)
    plain = list(synthesizer.stream(voice, TWO_SENTENCES, PLAIN))
    pause = round(0.4 * model.sample_rate)
    with SynthesisWorker(synthesizer, take_turns=take_turns) as worker:
        paused = np.concatenate(list(worker.stream(voice, TWO_SENTENCES, with_silence(0.4))))
        # A single sentence, as a streaming client sends them: the pause follows it too.
        one = list(worker.stream(voice, "And this one comes after it.", with_silence(0.4)))
    expected = expected_with_pauses(plain, 2, pause)
    assert paused.shape == expected.shape
    # Batched decoding rounds differently; the pauses are exact zeros all the same.
    np.testing.assert_allclose(paused, expected, atol=1e-4, rtol=0)
    assert not paused[expected == 0].any()
    assert len(one[-1]) == pause and not one[-1].any()
    assert all(len(frame) == model.samples_per_frame for frame in one[:-1])
