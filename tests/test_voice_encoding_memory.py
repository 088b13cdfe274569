"""Voice prompts are encoded in bounded chunks: the same latents, memory independent of length.

Encoding a whole prompt at once held activations in proportion to the clip (about
800 MB for a 30 s clip with the real-size model). These tests pin down the chunking
itself, which an RSS threshold could only do flakily: the encoder never sees more
than one chunk, its transformer window is never reallocated, FlowLM takes the
prompt in pieces too, and the result is that of one pass over the whole prompt.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from tests.support.parity import assert_same_voice_state
from tests.support.reference_model import FRAME_SAMPLES, reference_tts, reference_voice_state
from tests.support.voices_audio import write_voice_wav
from wyoming_pocket_tts.engine.model.audio import prepare_prompt, read_audio
from wyoming_pocket_tts.engine.model.flow_lm import PREFILL_POSITIONS
from wyoming_pocket_tts.engine.model.mimi import ENCODE_CHUNK_FRAMES


@pytest.fixture(scope="module")
def long_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12.3 s: several times the encoder transformer's 250-step (1.25 s) context,
    and a length that is a whole number of neither chunks nor frames."""
    return write_voice_wav(tmp_path_factory.mktemp("voices") / "long.wav", seconds=12.3, seed=2)


@pytest.fixture(scope="module")
def long_prompt(model, long_wav: Path) -> torch.Tensor:
    samples, sample_rate = read_audio(long_wav)
    return prepare_prompt(samples, sample_rate, model.sample_rate)


@pytest.mark.parametrize("chunk_frames", [1, 5, ENCODE_CHUNK_FRAMES, 10_000])
def test_chunked_encoding_equals_whole_prompt_encoding(
    model, tiny_model, long_prompt, chunk_frames
):
    assert long_prompt.shape[-1] % FRAME_SAMPLES != 0
    with torch.inference_mode():
        whole = reference_tts(tiny_model).mimi.encode_to_latent(long_prompt)
        chunked = model.mimi.encode(long_prompt, chunk_frames)
    torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=0)


def test_long_voice_state_equals_reference(model, tiny_model, long_wav):
    assert_same_voice_state(
        model.voice_from_audio(long_wav), reference_voice_state(tiny_model, long_wav)
    )


def test_encoder_never_sees_more_than_one_chunk(model, long_wav, long_prompt) -> None:
    mimi = model.mimi
    audio_lengths: list[int] = []
    transformer_steps: list[int] = []
    window_sizes: list[int] = []

    def record_audio(module, args, output):
        audio_lengths.append(args[0].shape[-1])

    def record_transformer(module, args, output):
        features, window = args
        transformer_steps.append(features.shape[-1])
        window_sizes.append(window.keys.shape[3])

    hooks = [
        mimi.encoder.model[0].register_forward_hook(record_audio),
        mimi.encoder_transformer.register_forward_hook(record_transformer),
    ]
    try:
        model.voice_from_audio(long_wav)
    finally:
        for hook in hooks:
            hook.remove()

    frames = math.ceil(long_prompt.shape[-1] / FRAME_SAMPLES)
    assert len(audio_lengths) == math.ceil(frames / ENCODE_CHUNK_FRAMES) > 1
    assert max(audio_lengths) == ENCODE_CHUNK_FRAMES * FRAME_SAMPLES
    assert sum(audio_lengths) == frames * FRAME_SAMPLES
    hop = model.config.mimi.seanet.hop_length
    assert max(transformer_steps) == ENCODE_CHUNK_FRAMES * FRAME_SAMPLES // hop
    # The window keeps its first buffer: a chunk plus the context fits it.
    assert set(window_sizes) == {2 * model.config.mimi.transformer.context}


def test_flow_lm_takes_a_long_prompt_in_pieces(model, long_wav) -> None:
    pieces: list[int] = []
    hook = model.flow_lm.transformer.register_forward_hook(
        lambda module, args, output: pieces.append(args[0].shape[1])
    )
    try:
        voice = model.voice_from_audio(long_wav)
    finally:
        hook.remove()
    assert voice.num_positions > 2 * PREFILL_POSITIONS
    assert max(pieces) == PREFILL_POSITIONS
    assert sum(pieces) == voice.num_positions
