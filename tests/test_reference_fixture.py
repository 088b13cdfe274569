"""The random-weight fixtures make the reference sensitive to everything parity tests compare.

A parity test between our engine and the reference only means something if a
mistake in any tensor, the text or the voice would show in the audio. These
tests prove that on the reference itself: a 1 % change to any single tensor
moves its temperature-0 audio by far more than the parity tolerance (1e-4),
while re-running unchanged stays well inside it. They also check that
`eos_at_frame` puts the reference's stop exactly where the parity tests expect.
"""

from __future__ import annotations

import contextlib
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.support.reference_model import (
    EOS_TEXT,
    FRAME_SAMPLES,
    MIN_FRAMES_BEFORE_EOS,
    BuiltModel,
    build_model,
    packaged_config,
    reference_eos_logits,
    reference_export_voice,
    reference_frame_count,
    reference_synthesize,
    reference_tts,
    reference_voice_state,
)
from tests.support.voices_audio import write_voice_wav

PARITY_TOLERANCE = 1e-4
# "Far more than the parity tolerance": every change must be at least this large.
SENSITIVITY_FLOOR = 10 * PARITY_TOLERANCE
KEYS_FILE = Path(__file__).parent / "data" / "english_checkpoint_keys.txt"
TEXT = "Hello there."
FRAMES = 6

# Tensors that cannot reach the audio of a temperature-0, EOS-less run, and why.
AUDIO_BLIND = {
    # Only the stop decision reads it; test_out_eos_moves_the_eos_logit covers it.
    "flow_lm.out_eos.weight",
    "flow_lm.out_eos.bias",
    # One-step LSD decoding evaluates the first time embedding at s = 0 only,
    # where cos/sin of 0 * freqs ignore the frequencies.
    "flow_lm.flow_net.time_embed.0.freqs",
    # It multiplies the sampling noise, which is zero at temperature 0;
    # test_flow_input_projection_matters_with_noise covers it.
    "flow_lm.flow_net.input_proj.weight",
}
# Tensors that only encode the voice prompt: their effect is checked on the
# voice state (the KV cache parity tests compare) rather than on the audio.
ENCODER_PREFIXES = ("mimi.encoder.", "mimi.encoder_transformer.", "mimi.downsample.")


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a - b).max())


@contextlib.contextmanager
def _perturbed(model: BuiltModel, key: str, seed: int = 0) -> Iterator[None]:
    """Add noise of 10 % of one tensor's RMS (at least 0.02) to the loaded reference."""
    tensor = reference_tts(model).state_dict()[key]
    original = tensor.clone()
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(tensor.shape, generator=generator)
    with torch.no_grad():
        tensor.add_(max(0.1 * float(tensor.square().mean().sqrt()), 0.02) * noise)
    try:
        yield
    finally:
        with torch.no_grad():
            tensor.copy_(original)


def _insensitive_keys(model: BuiltModel, voice: Path, keys: list[str]) -> dict[str, float]:
    """The keys whose perturbation moves the audio less than SENSITIVITY_FLOOR."""
    baseline = reference_synthesize(model, voice, TEXT, max_frames=FRAMES)
    weak = {}
    for key in keys:
        with _perturbed(model, key):
            audio = reference_synthesize(model, voice, TEXT, max_frames=FRAMES)
        change = _max_abs(audio, baseline)
        if not change > SENSITIVITY_FLOOR:
            weak[key] = change
    # Restoring must give the baseline back, or later keys were measured on a changed model.
    assert _max_abs(reference_synthesize(model, voice, TEXT, max_frames=FRAMES), baseline) < 1e-5
    return weak


def _assert_sane(audio: np.ndarray) -> None:
    assert audio.dtype == np.float32
    assert np.isfinite(audio).all()
    assert np.quantile(np.abs(audio), 0.99) < 1.0 and np.abs(audio).max() < 1.5
    assert audio.std() > 0.02, "audio is (nearly) constant"
    assert abs(float(audio.mean())) < audio.std(), "audio is mostly a DC offset"
    per_frame = audio[: audio.size // FRAME_SAMPLES * FRAME_SAMPLES].reshape(-1, FRAME_SAMPLES)
    assert (per_frame.std(axis=1) > 0.01).all(), "a frame is silent or constant"


# ---------------------------------------------------------------------------
# Voices


def test_voice_wav_is_deterministic_speech_like_and_seeds_differ(tmp_path: Path) -> None:
    def read(path: Path) -> tuple[np.ndarray, wave._wave_params]:
        with wave.open(str(path), "rb") as wav:
            params = wav.getparams()
            frames = wav.readframes(params.nframes)
        return np.frombuffer(frames, "<i2").reshape(-1, params.nchannels) / 32768, params

    first, params = read(write_voice_wav(tmp_path / "a.wav", seconds=1.0, trailing_silence=0.25))
    again, _ = read(write_voice_wav(tmp_path / "b.wav", seconds=1.0, trailing_silence=0.25))
    other, _ = read(write_voice_wav(tmp_path / "c.wav", seconds=1.0, trailing_silence=0.25, seed=1))
    stereo, stereo_params = read(write_voice_wav(tmp_path / "d.wav", channels=2, sample_rate=16000))

    assert (params.nchannels, params.sampwidth, params.framerate) == (1, 2, 24000)
    assert params.nframes == 30000
    assert np.array_equal(first, again)
    assert np.abs(first - other).max() > 0.3
    assert np.abs(first[-6000:]).max() == 0  # trailing silence
    # Syllables: the 20 ms energy rises and falls instead of staying flat.
    energy = np.sqrt((first[:24000, 0].reshape(-1, 480) ** 2).mean(axis=1))
    assert energy.max() > 0.1 and energy.min() < 0.3 * energy.max()
    assert (stereo_params.nchannels, stereo_params.framerate) == (2, 16000)
    assert not np.array_equal(stereo[:, 0], stereo[:, 1])


# ---------------------------------------------------------------------------
# Files in the official format


def _check_yaml(model: BuiltModel) -> dict:
    assert model.config_path.name.startswith("model-") and model.config_path.suffix == ".yaml"
    text = model.config_path.read_text(encoding="utf-8")
    assert "hf://" not in text
    config = yaml.safe_load(text)
    assert "weights_path_without_voice_cloning" not in config
    assert Path(config["weights_path"]) == model.weights_path and model.weights_path.is_absolute()
    table = config["flow_lm"]["lookup_table"]
    assert table["tokenizer"] == "sentencepiece"
    assert Path(table["tokenizer_path"]) == model.tokenizer_path and model.tokenizer_path.is_file()
    return config


def test_tiny_model_is_small_and_keeps_the_frame_size(tiny_model: BuiltModel) -> None:
    config = _check_yaml(tiny_model)
    assert config["flow_lm"]["transformer"]["d_model"] == 64
    assert config["mimi"]["seanet"]["ratios"] == [6, 5, 4]
    assert config["mimi"]["frame_rate"] == 12.5
    assert tiny_model.weights_path.stat().st_size < 5_000_000


def test_thin_model_keeps_every_layer_and_head_at_tiny_widths(
    models_dir: Path, tokenizer_dir: Path, voice_wav: Path
) -> None:
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

    thin = build_model(models_dir / "thin", thin=True, tokenizer_dir=tokenizer_dir)
    config, base = _check_yaml(thin), packaged_config("english_2026-10")
    for section in ("flow_lm", "mimi"):
        ours, theirs = config[section], base[section]
        if section == "flow_lm":
            ours, theirs = ours["transformer"], theirs["transformer"]
            assert config["flow_lm"]["flow"]["depth"] == base["flow_lm"]["flow"]["depth"]
        else:
            ours, theirs = ours["transformer"], theirs["transformer"]
        assert (ours["num_layers"], ours["num_heads"]) == (
            theirs["num_layers"],
            theirs["num_heads"],
        )
        assert ours["d_model"] < theirs["d_model"] // 8
    assert thin.weights_path.stat().st_size < 5_000_000
    with pytest.raises(ValueError, match="either tiny or thin"):
        build_model(models_dir / "neither", tiny=True, thin=True, tokenizer_dir=tokenizer_dir)
    model = PocketTTS.load(thin.config_path)
    audio = list(Synthesizer(model).stream(
        model.voice_from_audio(voice_wav), "Hello.", GenerationOptions(max_frames_per_chunk=3)
    ))
    assert len(audio) == 3 and all(frame.shape == (1920,) for frame in audio)


def test_build_is_cached_and_one_directory_holds_one_model(
    tiny_model: BuiltModel, tokenizer_dir: Path
) -> None:
    stamp = tiny_model.weights_path.stat().st_mtime_ns
    again = build_model(tiny_model.config_path.parent, tiny=True, tokenizer_dir=tokenizer_dir)
    assert again == tiny_model and tiny_model.weights_path.stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="another model"):
        build_model(tiny_model.config_path.parent, tiny=True, seed=1, tokenizer_dir=tokenizer_dir)


@pytest.mark.slow
def test_english_checkpoint_has_the_official_keys_and_shapes(english_model: BuiltModel) -> None:
    """tests/data/english_checkpoint_keys.txt is the key list of the official English
    checkpoint (each key with its shape and dtype, as the reference loads it)."""
    from safetensors import safe_open

    _check_yaml(english_model)
    expected = {}
    for line in KEYS_FILE.read_text().splitlines():
        key, rest = line.split(" ", 1)
        expected[key] = tuple(int(n) for n in rest.rsplit(" ", 1)[0].strip("(,)").split(","))
    with safe_open(str(english_model.weights_path), "pt") as weights:
        got = {key: tuple(weights.get_slice(key).get_shape()) for key in weights.keys()}  # noqa: SIM118 (safe_open is not iterable)
    assert got == expected


# ---------------------------------------------------------------------------
# Sensitivity, tiny model: every tensor


def test_tiny_audio_is_sane_and_deterministic(tiny_model: BuiltModel, voice_wav: Path) -> None:
    audio = reference_synthesize(tiny_model, voice_wav, EOS_TEXT)
    _assert_sane(audio)
    assert _max_abs(reference_synthesize(tiny_model, voice_wav, EOS_TEXT), audio) < 1e-5


def test_tiny_text_and_voice_change_the_audio(
    tiny_model: BuiltModel, voice_wav: Path, other_voice_wav: Path
) -> None:
    def speak(voice: Path, text: str) -> np.ndarray:
        return reference_synthesize(tiny_model, voice, text, max_frames=FRAMES)

    baseline = speak(voice_wav, TEXT)
    assert _max_abs(speak(voice_wav, "Hello where."), baseline) > SENSITIVITY_FLOOR
    assert _max_abs(speak(other_voice_wav, TEXT), baseline) > SENSITIVITY_FLOOR


def test_every_tiny_tensor_changes_the_audio(tiny_model: BuiltModel, voice_wav: Path) -> None:
    keys = [
        k
        for k in reference_tts(tiny_model).state_dict()
        if k not in AUDIO_BLIND and not k.startswith(ENCODER_PREFIXES)
    ]
    assert len(keys) > 80
    assert _insensitive_keys(tiny_model, voice_wav, keys) == {}


def _voice_insensitive_keys(model: BuiltModel, voice: Path, keys: list[str]) -> dict[str, float]:
    """The keys whose perturbation moves the voice's KV cache less than SENSITIVITY_FLOOR."""

    def cache(state: dict) -> torch.Tensor:
        return state["transformer.layers.0.self_attn"]["cache"]

    baseline = cache(reference_voice_state(model, voice))
    weak = {}
    for key in keys:
        with _perturbed(model, key):
            change = float((cache(reference_voice_state(model, voice)) - baseline).abs().max())
        if not change > SENSITIVITY_FLOOR:
            weak[key] = change
    return weak


def test_every_tiny_encoder_tensor_changes_the_voice_state(
    tiny_model: BuiltModel, voice_wav: Path
) -> None:
    keys = [k for k in reference_tts(tiny_model).state_dict() if k.startswith(ENCODER_PREFIXES)]
    assert len(keys) > 20
    assert _voice_insensitive_keys(tiny_model, voice_wav, keys) == {}


def test_flow_input_projection_matters_with_noise(tiny_model: BuiltModel, voice_wav: Path) -> None:
    def speak() -> np.ndarray:
        torch.manual_seed(0)  # the reference draws its noise from torch's global generator
        return reference_synthesize(tiny_model, voice_wav, TEXT, temperature=0.3, max_frames=FRAMES)

    baseline = speak()
    assert _max_abs(speak(), baseline) < 1e-5
    with _perturbed(tiny_model, "flow_lm.flow_net.input_proj.weight"):
        assert _max_abs(speak(), baseline) > SENSITIVITY_FLOOR


def test_out_eos_moves_the_eos_logit(tiny_model: BuiltModel, voice_wav: Path) -> None:
    baseline = reference_eos_logits(tiny_model, voice_wav, TEXT, FRAMES)
    assert (baseline < -20).all(), "EOS must stay far below any threshold by default"
    for key in ("flow_lm.out_eos.weight", "flow_lm.out_eos.bias"):
        with _perturbed(tiny_model, key):
            changed = reference_eos_logits(tiny_model, voice_wav, TEXT, FRAMES)
        assert np.abs(changed - baseline).max() > SENSITIVITY_FLOOR, key


def test_exported_voice_speaks_like_the_audio_prompt(
    tiny_model: BuiltModel, voice_wav: Path, tmp_path: Path
) -> None:
    exported = reference_export_voice(tiny_model, voice_wav, tmp_path / "voice.safetensors")
    from_audio = reference_synthesize(tiny_model, voice_wav, TEXT, max_frames=FRAMES)
    from_state = reference_synthesize(tiny_model, exported, TEXT, max_frames=FRAMES)
    assert _max_abs(from_state, from_audio) < 1e-5


@pytest.mark.parametrize("base", ["english_18m_2026-10", "english_2m_2026-10"])
def test_small_families_build_and_respond_to_the_voice(
    base: str,
    models_dir: Path,
    tokenizer_dir: Path,
    voice_wav: Path,
    other_voice_wav: Path,
) -> None:
    model = build_model(models_dir / f"tiny-{base}", base, tiny=True, tokenizer_dir=tokenizer_dir)
    audio = reference_synthesize(model, voice_wav, EOS_TEXT, max_frames=12)
    _assert_sane(audio)
    other = reference_synthesize(model, other_voice_wav, EOS_TEXT, max_frames=12)
    assert _max_abs(other, audio) > SENSITIVITY_FLOOR


# ---------------------------------------------------------------------------
# EOS placement


@pytest.fixture(scope="module")
def eos_model(models_dir: Path, tokenizer_dir: Path) -> BuiltModel:
    return build_model(
        models_dir / "eos11", tiny=True, eos_at_frame=11, tokenizer_dir=tokenizer_dir
    )


def test_eos_logit_crosses_first_at_the_chosen_frame(
    eos_model: BuiltModel, voice_wav: Path
) -> None:
    threshold = reference_tts(eos_model).eos_threshold
    logits = reference_eos_logits(eos_model, voice_wav, EOS_TEXT, 12)
    assert (logits[:11] < threshold - 1).all() and logits[11] > threshold + 1


@pytest.mark.parametrize("frames_after_eos, expected", [(0, 11), (1, 12), (4, 15), (None, 14)])
def test_eos_at_frame_stops_the_reference_there(
    eos_model: BuiltModel, voice_wav: Path, frames_after_eos: int | None, expected: int
) -> None:
    # The reference stops frames_after_eos frames after the crossing; left to
    # itself it guesses 1 for a text of more than four words, plus 2.
    audio = reference_synthesize(eos_model, voice_wav, EOS_TEXT, frames_after_eos=frames_after_eos)
    assert audio.size == expected * FRAME_SAMPLES
    _assert_sane(audio)


def test_a_raised_threshold_ignores_the_solved_eos(eos_model: BuiltModel, voice_wav: Path) -> None:
    capped = reference_frame_count(
        eos_model, voice_wav, EOS_TEXT, eos_threshold=1e9, frames_after_eos=0, max_frames=20
    )
    assert capped == 20


def test_a_crossing_before_frame_6_is_ignored(
    models_dir: Path, tokenizer_dir: Path, voice_wav: Path
) -> None:
    model = build_model(
        models_dir / "eos9-early3",
        tiny=True,
        eos_at_frame=9,
        early_crossing_frame=3,
        tokenizer_dir=tokenizer_dir,
    )
    threshold = reference_tts(model).eos_threshold
    logits = reference_eos_logits(model, voice_wav, EOS_TEXT, 10)
    crossings = np.flatnonzero(logits > threshold).tolist()
    assert crossings == [3, 9] and MIN_FRAMES_BEFORE_EOS > 3
    assert reference_frame_count(model, voice_wav, EOS_TEXT, frames_after_eos=1) == 10


def test_eos_arguments_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="eos_at_frame"):
        build_model(tmp_path / "a", tiny=True, eos_at_frame=5)
    with pytest.raises(ValueError, match="early_crossing_frame"):
        build_model(tmp_path / "b", tiny=True, eos_at_frame=9, early_crossing_frame=6)


# ---------------------------------------------------------------------------
# Sensitivity, real size: one tensor of every module family

ENGLISH_FAMILY_KEYS = [
    "flow_lm.bos_emb",
    "flow_lm.bos_before_voice",
    "flow_lm.speaker_proj_weight",
    "flow_lm.emb_std",
    "flow_lm.emb_mean",
    "flow_lm.conditioner.embed.weight",
    "flow_lm.input_linear.weight",
    "flow_lm.transformer.layers.0.self_attn.in_proj.weight",
    "flow_lm.transformer.layers.5.self_attn.out_proj.weight",
    "flow_lm.transformer.layers.2.norm1.weight",
    "flow_lm.transformer.layers.3.norm2.bias",
    "flow_lm.transformer.layers.4.linear1.weight",
    "flow_lm.transformer.layers.5.linear2.weight",
    "flow_lm.out_norm.weight",
    "flow_lm.out_norm.bias",
    "flow_lm.flow_net.time_embed.1.freqs",
    "flow_lm.flow_net.time_embed.0.mlp.0.bias",
    "flow_lm.flow_net.time_embed.1.mlp.3.alpha",
    "flow_lm.flow_net.cond_embed.weight",
    "flow_lm.flow_net.input_proj.bias",
    "flow_lm.flow_net.res_blocks.0.in_ln.weight",
    "flow_lm.flow_net.res_blocks.5.mlp.2.weight",
    "flow_lm.flow_net.res_blocks.3.adaLN_modulation.1.bias",
    "flow_lm.flow_net.final_layer.linear.weight",
    "flow_lm.flow_net.final_layer.adaLN_modulation.1.weight",
    "mimi.quantizer.output_proj.weight",
    "mimi.upsample.convtr.convtr.weight",
    "mimi.decoder_transformer.transformer.layers.0.self_attn.in_proj.weight",
    "mimi.decoder_transformer.transformer.layers.1.norm2.weight",
    "mimi.decoder_transformer.transformer.layers.1.linear2.weight",
    "mimi.decoder_transformer.transformer.layers.0.layer_scale_1.scale",
    "mimi.decoder.model.0.conv.weight",
    "mimi.decoder.model.2.convtr.weight",
    "mimi.decoder.model.3.block.1.conv.bias",
    "mimi.decoder.model.5.convtr.bias",
    "mimi.decoder.model.9.block.3.conv.weight",
    "mimi.decoder.model.11.conv.bias",
]


ENGLISH_ENCODER_KEYS = [
    "mimi.encoder.model.0.conv.weight",
    "mimi.encoder.model.4.block.1.conv.bias",
    "mimi.encoder.model.11.conv.weight",
    "mimi.encoder_transformer.transformer.layers.0.self_attn.in_proj.weight",
    "mimi.encoder_transformer.transformer.layers.1.norm2.bias",
    "mimi.encoder_transformer.transformer.layers.1.layer_scale_2.scale",
    "mimi.downsample.conv.conv.weight",
]


@pytest.fixture(scope="module")
def short_voice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 0.6 s prompt: the real-size checks re-encode the voice once per tensor."""
    path = tmp_path_factory.mktemp("short-voice") / "short.wav"
    return write_voice_wav(path, seconds=0.6, trailing_silence=0.1, seed=2)


@pytest.mark.slow
def test_english_audio_is_sane_and_follows_text_and_voice(
    english_model: BuiltModel, voice_wav: Path, other_voice_wav: Path
) -> None:
    baseline = reference_synthesize(english_model, voice_wav, TEXT, max_frames=12)
    _assert_sane(baseline)
    again = reference_synthesize(english_model, voice_wav, TEXT, max_frames=12)
    assert _max_abs(again, baseline) < 1e-5
    other_text = reference_synthesize(english_model, voice_wav, "Hello where.", max_frames=12)
    assert _max_abs(other_text, baseline) > SENSITIVITY_FLOOR
    other_voice = reference_synthesize(english_model, other_voice_wav, TEXT, max_frames=12)
    assert _max_abs(other_voice, baseline) > SENSITIVITY_FLOOR


@pytest.mark.slow
def test_every_english_module_family_changes_the_audio(
    english_model: BuiltModel, short_voice: Path
) -> None:
    state = reference_tts(english_model).state_dict()
    assert set(ENGLISH_FAMILY_KEYS) <= set(state)
    assert _insensitive_keys(english_model, short_voice, ENGLISH_FAMILY_KEYS) == {}


@pytest.mark.slow
def test_every_english_encoder_family_changes_the_voice_state(
    english_model: BuiltModel, short_voice: Path
) -> None:
    assert _voice_insensitive_keys(english_model, short_voice, ENGLISH_ENCODER_KEYS) == {}
