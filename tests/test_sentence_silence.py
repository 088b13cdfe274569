"""Sentence silence: a pause after every chunk of text, whichever path speaks it."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from tests.support.studio_server import start_studio_server
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

FRAMES_PER_CHUNK = 10  # the tiny model never ends speech by itself: every chunk hits the cap
PLAIN = GenerationOptions(temperature=0.0, max_frames_per_chunk=FRAMES_PER_CHUNK)
SENTENCES = ["The first sentence is short.", "And this one comes after it."]
TWO_SENTENCES = " ".join(SENTENCES)


def spoken_apart(synthesizer: Synthesizer, voice) -> list[np.ndarray]:
    """Each sentence as a text of its own, without pauses."""
    return [frame for sentence in SENTENCES for frame in synthesizer.stream(voice, sentence, PLAIN)]


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


def test_each_sentence_is_followed_by_the_pause(model, voice):
    synthesizer = Synthesizer(model)
    # Short sentences share a chunk, unless each is to end with a pause.
    assert len(synthesizer.start(voice, TWO_SENTENCES, PLAIN).chunks) == 1
    chunks = len(synthesizer.start(voice, TWO_SENTENCES, with_silence(0.25)).chunks)
    assert chunks == 2
    plain = spoken_apart(synthesizer, voice)
    paused = np.concatenate(list(synthesizer.stream(voice, TWO_SENTENCES, with_silence(0.25))))
    pause = round(0.25 * model.sample_rate)
    np.testing.assert_array_equal(paused, expected_with_pauses(plain, chunks, pause))


@pytest.mark.parametrize("take_turns", [True, False])
def test_worker_delivers_the_pause_in_order(model, voice, take_turns):
    """Both ways the worker shares the cores pass the silence on between the frames."""
    synthesizer = Synthesizer(model)
    plain = spoken_apart(synthesizer, voice)
    pause = round(0.4 * model.sample_rate)
    with SynthesisWorker(synthesizer, take_turns=take_turns) as worker:
        paused = np.concatenate(list(worker.stream(voice, TWO_SENTENCES, with_silence(0.4))))
        # A single sentence, as a streaming client sends them: the pause follows it too.
        one = list(worker.stream(voice, SENTENCES[1], with_silence(0.4)))
    expected = expected_with_pauses(plain, 2, pause)
    assert paused.shape == expected.shape
    # Batched decoding rounds differently; the pauses are exact zeros all the same.
    np.testing.assert_allclose(paused, expected, atol=1e-4, rtol=0)
    assert not paused[expected == 0].any()
    assert len(one[-1]) == pause and not one[-1].any()
    assert all(len(frame) == model.samples_per_frame for frame in one[:-1])


def test_both_wyoming_paths_end_each_sentence_with_the_pause(tmp_path, tiny_model, voice_wav):
    """A plain Synthesize and a text stream: every sentence's audio ends in the pause."""
    server = start_studio_server(
        tmp_path, tiny_model.config_path, "--voice", str(voice_wav),
        "--eos-threshold", "-1000", "--sentence-silence", "0.5",
    )
    pause = 12000  # 0.5 s at 24 kHz

    async def speak(events: list) -> list[np.ndarray]:
        """The audio of each AudioStart..AudioStop, until the request ends."""
        streams: list[list[bytes]] = []
        async with AsyncTcpClient("127.0.0.1", server.wyoming_port) as client:
            for event in events:
                await client.write_event(event.event())
            while (event := await client.read_event()) is not None:
                if AudioStart.is_type(event.type):
                    streams.append([])
                elif AudioChunk.is_type(event.type):
                    streams[-1].append(AudioChunk.from_event(event).audio)
                elif event.type == "synthesize-stopped" or (
                    AudioStop.is_type(event.type) and isinstance(events[0], Synthesize)
                ):
                    break
        return [np.frombuffer(b"".join(chunks), dtype="<i2") for chunks in streams]

    text = "The first sentence is here. And the second one follows it."
    try:
        (whole,) = asyncio.run(speak([Synthesize(text)]))
        sentences = asyncio.run(speak([
            SynthesizeStart(), SynthesizeChunk(text), SynthesizeStop(),
        ]))
    finally:
        server.stop()
    assert len(sentences) == 2
    for audio in [whole, *sentences]:
        assert not audio[-pause:].any() and audio[-pause - 1920 : -pause].any()
    # In the whole text, the first sentence's pause is followed by the second's speech:
    # as long as when streamed (the model ends each after its minimum of frames).
    first = len(sentences[0])
    assert len(whole) == first + len(sentences[1])
    assert not whole[first - pause : first].any() and whole[first : first + 1920].any()


def test_a_negative_pause_is_refused(tiny_model):
    result = subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", "--model", str(tiny_model.config_path),
         "--sentence-silence", "-1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 2 and "--sentence-silence" in result.stderr
