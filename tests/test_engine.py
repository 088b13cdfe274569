"""The engine's own design on a tiny random model: streaming, buffers, state, options."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import torch

from tests.support.parity import assert_same_voice_state
from tests.support.reference_model import (
    FRAME_SAMPLES,
    reference_synthesize,
    reference_tts,
    reference_voice_state,
)
from tests.support.voices_audio import write_voice_wav
from wyoming_pocket_tts.engine.model import kv_cache
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.runtime.synthesizer import LatentFrame, Synthesizer

DETERMINISTIC = GenerationOptions(temperature=0.0, max_frames_per_chunk=10)
LONG_TEXT = (
    "This is the first sentence of a longer text. Here comes a second one, with a comma; "
    "and a third clause: long enough. The fourth sentence makes sure that the text is split "
    "into several chunks of at most fifty tokens each, as the model was trained."
)


def speak(model, voice, text, options=DETERMINISTIC) -> list[np.ndarray]:
    return list(Synthesizer(model).stream(voice, text, options))


def test_tiny_audio_equals_reference(model, voice, tiny_model, voice_wav):
    expected = reference_synthesize(tiny_model, voice_wav, LONG_TEXT, max_frames=10)
    actual = np.concatenate(speak(model, voice, LONG_TEXT))
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)


def test_first_audio_comes_after_one_frame(model, voice):
    utterance = Synthesizer(model).start(voice, "Turn on the kitchen light.", DETERMINISTIC)
    first = utterance.next_frame()
    assert first is not None and first.shape == (FRAME_SAMPLES,)
    tokens = utterance.chunks[0].tokens.shape[1]
    # Only the voice, the text and one generated position are in the buffer.
    assert utterance.cache.length == voice.num_positions + tokens + 1
    assert first[0] == 0.0  # the chunk starts faded in
    utterance.close()


def test_working_buffer_is_reused_and_voice_left_untouched(model, voice):
    keys_before = voice.keys.clone()
    synthesizer = Synthesizer(model)
    utterance = synthesizer.start(voice, LONG_TEXT, DETERMINISTIC)
    assert len(utterance.chunks) > 1
    storages = set()
    while utterance.next_frame() is not None:
        storages.add(utterance.cache.keys.data_ptr())
    assert len(storages) == 1, "the working buffer was reallocated during generation"
    assert torch.equal(voice.keys, keys_before)
    # A later utterance reuses the pooled buffer instead of allocating one.
    again = synthesizer.start(voice, "Again.", DETERMINISTIC)
    again.next_frame()
    assert again.cache.keys.data_ptr() in storages
    again.close()


def test_unwritten_buffer_slots_are_never_read(model, voice, monkeypatch):
    clean = np.concatenate(speak(model, voice, LONG_TEXT))
    monkeypatch.setattr(kv_cache, "POISON_UNWRITTEN", True)
    poisoned = np.concatenate(speak(model, voice, LONG_TEXT))
    assert np.isfinite(poisoned).all()
    np.testing.assert_array_equal(poisoned, clean)


def test_decoder_window_is_bounded_and_exact(model, tiny_model):
    """Decoding frame by frame through a bounded window equals the reference's full cache."""
    from pocket_tts.modules.stateful_module import init_states

    frames = 60  # 960 decoder steps: several times the 250-step context
    latents = torch.randn(
        1, frames, model.config.mimi.latent_dim, generator=torch.Generator().manual_seed(0)
    )
    reference = reference_tts(tiny_model)
    with torch.no_grad():
        expected = reference.mimi.decode_from_latent(
            latents, init_states(reference.mimi, 1, frames * 16)
        )
        state = model.mimi.new_decoder_state()
        sizes, pieces = set(), []
        for i in range(frames):
            pieces.append(model.mimi.decode(latents[:, i : i + 1], state))
            sizes.add(state.transformer_window.keys.shape[3])
        several = model.mimi.new_decoder_state()
        in_blocks = torch.cat(
            [model.mimi.decode(latents[:, i : i + 7], several) for i in range(0, frames, 7)], -1
        )
    assert sizes == {2 * model.config.mimi.decoder_transformer_config.context}
    torch.testing.assert_close(torch.cat(pieces, -1), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(in_blocks, expected, atol=1e-5, rtol=0)


def test_window_hands_attention_only_the_keys_its_queries_can_see():
    """However full the buffer, a call's keys start where its first query's window does."""
    context, steps = 10, 3
    window = kv_cache.WindowKV(layers=1, heads=1, head_dim=1, context=context)
    for _ in range(20):  # 60 positions: the buffer (20) compacts several times
        window.reserve(steps)
        first = window.first_position
        positions = torch.arange(window.length, window.length + steps, dtype=torch.float32)
        keys, _ = window.append(0, positions.view(1, 1, steps, 1), positions.view(1, 1, steps, 1))
        seen = keys.flatten().tolist()
        assert seen == list(range(max(0, window.length - context + 1), window.length + steps))
        assert seen[0] == first
        window.advance(steps)


def test_decoder_convolutions_take_a_few_frames_per_call(model) -> None:
    """A long run, of one stream or several, reaches the 24 kHz convolutions in pieces of
    a few frames a stream (their activations are the decoder's largest), with the audio
    of one pass."""
    from wyoming_pocket_tts.engine.model.mimi import DECODER_FRAMES_PER_PIECE, DecoderBatch

    mimi_config = model.config.mimi  # the convolutions' input: encoder_frame_rate steps a second
    steps_per_frame = int(mimi_config.encoder_frame_rate / mimi_config.frame_rate)
    pieces: list[tuple[int, int]] = []  # (streams, frames of each)

    def count_rows(_, inputs):
        layers = inputs[2] if len(inputs) > 2 else slice(None)
        if not layers.start:  # the calls that begin at the decoder's input, not its tail's
            pieces.append((inputs[0].shape[0], inputs[0].shape[-1] // steps_per_frame))

    hook = model.mimi.decoder.register_forward_pre_hook(count_rows)
    mimi, generator = model.mimi, torch.Generator().manual_seed(5)
    latents = torch.randn(3, 9, model.config.mimi.latent_dim, generator=generator)
    try:
        with torch.inference_mode():
            one_run = mimi.decode(latents[:1], mimi.new_decoder_state())
            batched = mimi.decode(
                latents, DecoderBatch([mimi.new_decoder_state() for _ in range(3)])
            )
            frame_by_frame = []
            for row in latents.split(1):
                state = mimi.new_decoder_state()
                frames = [mimi.decode(row[:, i : i + 1], state) for i in range(9)]
                frame_by_frame.append(torch.cat(frames, -1))
    finally:
        hook.remove()
    assert max(frames for _, frames in pieces) == DECODER_FRAMES_PER_PIECE < 9
    assert sum(streams * frames for streams, frames in pieces) == 9 + 27 + 27  # each once
    torch.testing.assert_close(one_run, frame_by_frame[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(batched, torch.cat(frame_by_frame), atol=1e-5, rtol=0)


def test_how_frames_are_grouped_into_calls_changes_no_sample(model):
    """A stream's audio is the same to the bit whether its frames are decoded one a call,
    several a call or beside other streams: the worker groups them by the load of the
    moment, and a text must still give the same samples. On one thread: oneDNN may
    split the sums of a layer this small between threads."""
    from wyoming_pocket_tts.engine.model.mimi import DecoderBatch

    mimi = model.mimi
    latents = torch.randn(
        3, 9, model.config.mimi.latent_dim, generator=torch.Generator().manual_seed(4)
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            state = mimi.new_decoder_state()
            one_a_call = torch.cat(
                [mimi.decode(latents[:1, i : i + 1], state) for i in range(9)], -1
            )
            state = mimi.new_decoder_state()
            uneven = torch.cat(
                [mimi.decode(latents[:1, a:b], state) for a, b in ((0, 2), (2, 7), (7, 9))], -1
            )
            together = mimi.decode(
                latents, DecoderBatch([mimi.new_decoder_state() for _ in range(3)])
            )
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(uneven, one_a_call)
    assert torch.equal(together[:1], one_a_call)


def test_a_mimi_call_finished_after_the_next_one_began_sounds_the_same(model):
    """The worker's generator thread runs the decoder's last layers of a call while the
    decoder thread starts the next one: the halves share no state, so the audio is
    one pass's."""
    from wyoming_pocket_tts.engine.model.mimi import DecoderBatch

    mimi = model.mimi
    latents = torch.randn(
        2, 8, model.config.mimi.latent_dim, generator=torch.Generator().manual_seed(9)
    )
    with torch.inference_mode():
        whole = mimi.decode(latents, DecoderBatch([mimi.new_decoder_state() for _ in range(2)]))
        streams = DecoderBatch([mimi.new_decoder_state() for _ in range(2)])
        first = mimi.decode_head(latents[:, :3], streams, tail_layers=2)
        second = mimi.decode_head(latents[:, 3:], streams, tail_layers=2)
        split = torch.cat([
            mimi.decode_tail(first, streams, tail_layers=2),
            mimi.decode_tail(second, streams, tail_layers=2),
        ], dim=-1)
    torch.testing.assert_close(split, whole, atol=1e-5, rtol=0)


def test_streams_decoded_together_sound_as_if_alone(model) -> None:
    """One Mimi call for frames of several streams (batched, uneven runs) changes no stream."""
    frames, dim = 30, model.config.mimi.latent_dim
    latents = torch.randn(3, frames, dim, generator=torch.Generator().manual_seed(3))

    def stream_frames(row: int) -> list[LatentFrame]:
        decoder = model.mimi.new_decoder_state()
        return [LatentFrame(latents[row, i : i + 1], decoder, i == 0) for i in range(frames)]

    synthesizer = Synthesizer(model)
    alone = [np.concatenate(synthesizer.decode(stream_frames(row))) for row in range(3)]
    queues = [stream_frames(row) for row in range(3)]
    together: list[list[np.ndarray]] = [[], [], []]
    tick = 0
    while any(queues):
        # Stream 1 joins late, stream 0 sometimes hands over two frames, stream 2 three.
        wanted = [1 + tick % 2, 1 if tick >= 4 else 0, 3]
        batch = [
            (row, queues[row].pop(0))
            for row in range(3)
            for _ in range(min(wanted[row], len(queues[row])))
        ]
        audios = synthesizer.decode([frame for _, frame in batch])
        for (row, _), audio in zip(batch, audios, strict=True):
            together[row].append(audio)
        tick += 1
    for expected, pieces in zip(alone, together, strict=True):
        np.testing.assert_allclose(np.concatenate(pieces), expected, atol=1e-5, rtol=0)


def test_texts_starting_together_share_a_pass_and_sound_as_if_alone(model, voice, other_voice_wav):
    """Several chunks' first steps (their text prompts, of different lengths) in one pass
    give each stream the latents it would get alone, and so do the steps after it."""
    texts = ["Hello there.", "The kitchen light is on, and the door is locked.", "Yes."]
    voices = [voice, model.voice_from_audio(other_voice_wav), voice]
    synthesizer = Synthesizer(model)

    def latents(utterances) -> list[list[torch.Tensor]]:
        steps = [synthesizer.advance(utterances) for _ in range(4)]
        return [[frames[i].latent for frames in steps] for i in range(len(utterances))]

    pairs = list(zip(voices, texts, strict=True))
    alone = [latents([synthesizer.start(v, t, DETERMINISTIC)])[0] for v, t in pairs]
    together = latents([synthesizer.start(v, t, DETERMINISTIC) for v, t in pairs])
    assert len({len(synthesizer.chunks(text)[0].tokens[0]) for text in texts}) == 3
    for expected, got in zip(alone, together, strict=True):
        torch.testing.assert_close(torch.cat(got), torch.cat(expected), atol=1e-5, rtol=1e-5)


def test_cancellation_stops_between_frames(model, voice):
    cancel = threading.Event()
    produced = []
    for frame in Synthesizer(model).stream(voice, LONG_TEXT, DETERMINISTIC, cancel=cancel):
        produced.append(frame)
        if len(produced) == 3:
            cancel.set()
    assert len(produced) == 3


def test_seed_makes_sampling_reproducible(model, voice):
    def sampled(seed):
        options = GenerationOptions(temperature=0.5, seed=seed, max_frames_per_chunk=8)
        return np.concatenate(speak(model, voice, "Good morning.", options))

    np.testing.assert_array_equal(sampled(1), sampled(1))
    assert not np.allclose(sampled(1), sampled(2))


def test_noise_clamp_and_deterministic_temperature(model, voice):
    zero = np.concatenate(speak(model, voice, "Good morning."))
    clamped = GenerationOptions(temperature=0.5, seed=3, noise_clamp=0.1, max_frames_per_chunk=10)
    assert np.isfinite(np.concatenate(speak(model, voice, "Good morning.", clamped))).all()
    np.testing.assert_array_equal(zero, np.concatenate(speak(model, voice, "Good morning.")))


def test_eos_threshold_and_frames_after_eos_options(model, voice):
    # The tiny model's EOS logit sits far below -4; a threshold below it ends speech at
    # frame 6, the first frame EOS may count, plus the frames after it.
    options = GenerationOptions(temperature=0.0, eos_threshold=-1e9, frames_after_eos=2)
    assert len(speak(model, voice, "Stop early.", options)) == 6 + 2


def test_resampled_stereo_voice_matches_reference(model, tiny_model, tmp_path):
    path = write_voice_wav(tmp_path / "stereo.wav", sample_rate=44100, channels=2, seed=4)
    expected = reference_voice_state(tiny_model, path)
    assert_same_voice_state(model.voice_from_audio(path), expected)


def test_server_loads_scipy_only_for_a_voice_that_needs_resampling(tmp_path):
    """scipy.signal is 65 MB of memory and a second of start-up that most servers never use."""
    path = write_voice_wav(tmp_path / "voice.wav", sample_rate=24000)
    code = (
        "import sys; from pathlib import Path\n"
        "import wyoming_pocket_tts.__main__, wyoming_pocket_tts.commands.serve\n"
        "from wyoming_pocket_tts.engine.model.audio import prepare_prompt, read_audio\n"
        f"prepare_prompt(*read_audio(Path({str(path)!r})), 24000)\n"
        "print('scipy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


def test_voice_prompt_is_cut_to_30_seconds(model, tmp_path):
    path = write_voice_wav(tmp_path / "long.wav", seconds=40.0, seed=5, trailing_silence=0.0)
    voice = model.voice_from_audio(path)
    # 30 s plus the 80 ms pause at 12.5 frames/s, plus BOS-before-voice.
    assert voice.num_positions <= 30 * 12.5 + 2 + 1


def test_long_text_streams(model, voice):
    text = " ".join(["The quick brown fox jumps over the lazy dog."] * 450)  # ~20,000 characters
    assert len(text) > 20_000
    utterance = Synthesizer(model).start(voice, text, DETERMINISTIC)
    assert len(utterance.chunks) > 100
    assert utterance.next_frame() is not None
    utterance.close()


def test_unusual_characters_are_spoken(model, voice):
    frames = speak(model, voice, "Héllo 👋 — “quoted” 東京 ½ ∞?")
    assert frames and all(np.isfinite(f).all() for f in frames)


def test_voice_state_round_trip(model, voice, tmp_path: Path):
    path = tmp_path / "voice.safetensors"
    voice.save(path)
    loaded = model.load_voice(path)
    assert torch.equal(loaded.keys, voice.keys) and torch.equal(loaded.values, voice.values)
    assert [p.name for p in tmp_path.iterdir()] == ["voice.safetensors"]
