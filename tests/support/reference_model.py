"""Random-weight Pocket TTS models in the official format, and the reference run on them.

Kyutai's weights cannot be downloaded here, so parity tests need checkpoints we
build ourselves. The reference's own random initialisation is useless for that:
its audio is mostly the last Mimi convolution's bias, the voice has no effect
(`speaker_proj_weight` starts at zero) and every norm is the identity, so two
engines could agree while one of them ignores half the model. `build_model`
therefore re-initialises the reference's freshly built modules so that every
tensor measurably moves the audio (tests/test_reference_fixture.py proves it),
keeps the audio in a sane range, and can place the end-of-speech decision at a
chosen frame.

The reference (`pocket_tts`) is imported lazily: importing it calls
`torch.set_num_threads(1)` for the whole process.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.resources
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from tests.support.spm import build_sentencepiece_model
from tests.support.voices_audio import speech_like_signal, write_voice_wav

SAMPLE_RATE = 24000
FRAME_SAMPLES = 1920  # one latent frame: 80 ms at 24 kHz
# The reference ignores the EOS logit on generation steps 0-5.
MIN_FRAMES_BEFORE_EOS = 6

# `eos_at_frame` is solved for this text, spoken at temperature 0 with the voice
# `write_voice_wav(path)` writes with its default arguments.
EOS_TEXT = "The kitchen light is on, and the door is locked."

TINY_VOCAB = 500
REAL_VOCAB = 4000

# Margins of the solved EOS logit around the threshold: wide enough that an
# engine agreeing with the reference to ~1e-4 takes the same decision.
_EOS_LOW = -6.0  # relative to the threshold, on frames that must not fire
_EOS_HIGH = 3.0  # relative to the threshold, on the frame(s) that must fire
_EOS_MARGIN = 1.0
_DISABLED_EOS_BIAS = -30.0


@dataclass(frozen=True)
class BuiltModel:
    """A model on disk in the official layout: YAML config, safetensors weights, tokenizer."""

    config_path: Path
    weights_path: Path
    tokenizer_path: Path


# ---------------------------------------------------------------------------
# Configuration


def packaged_config(base: str) -> dict[str, Any]:
    """The reference's shipped YAML for `base` (e.g. "english_2026-10"), as a dict."""
    source = importlib.resources.files("pocket_tts") / "config" / f"{base}.yaml"
    if not source.is_file():
        raise ValueError(f"pocket-tts has no packaged config named {base!r}")
    return yaml.safe_load(source.read_text(encoding="utf-8"))


def _tiny_transformer(section: dict[str, Any], keep_depth: bool) -> None:
    """Shrink a Mimi transformer section: 32 wide, 1 layer of 4 heads; with `keep_depth`,
    its layers and heads stay, 4 channels each."""
    section.update(dim_feedforward=64, input_dimension=32, output_dimensions=[32])
    if keep_depth:
        section["d_model"] = 4 * section["num_heads"]
    else:
        section.update(d_model=32, num_heads=4, num_layers=1)


def _tiny_seanet(section: dict[str, Any]) -> None:
    section.update(n_filters=8, dimension=32)


def _shrink(config: dict[str, Any], keep_depth: bool = False) -> None:
    """Make every width and depth tiny while keeping the family's structure.

    Optional features of the base (GQA, low-rank table, z projection, a separate
    decoder) stay switched on, just smaller. Ratios and frame rate are untouched,
    so a frame is still 1920 samples. With `keep_depth`, only widths shrink: every
    layer, head and flow block stays, so the model makes the same operator calls
    as the real one for almost no arithmetic (what a frame costs regardless of size).
    """
    flow_lm = config["flow_lm"]
    transformer = flow_lm["transformer"]
    if keep_depth:
        transformer["d_model"] = 4 * transformer["num_heads"]
    else:
        transformer.update(d_model=64, num_heads=4, num_layers=2)
    if transformer.get("dim_feedforward") is not None:
        transformer["dim_feedforward"] = 96
    if transformer.get("attn_dim") is not None:
        transformer["attn_dim"] = transformer["d_model"]
    if transformer.get("num_kv_heads") is not None and not keep_depth:
        transformer["num_kv_heads"] = 2
    flow_lm["flow"].update(dim=32)
    if not keep_depth:
        flow_lm["flow"].update(depth=2)
    flow_lm["lookup_table"].update(dim=transformer["d_model"], n_bins=TINY_VOCAB)
    if flow_lm["lookup_table"].get("rank") is not None:
        flow_lm["lookup_table"]["rank"] = 16
    if flow_lm.get("z_dim") is not None:
        flow_lm["z_dim"] = 16

    mimi = config["mimi"]
    _tiny_seanet(mimi["seanet"])
    _tiny_transformer(mimi["transformer"], keep_depth)
    if mimi.get("decoder_seanet"):
        _tiny_seanet(mimi["decoder_seanet"])
    if mimi.get("decoder_transformer"):
        _tiny_transformer(mimi["decoder_transformer"], keep_depth)
    mimi["quantizer"]["output_dimension"] = 32
    mimi["outer_dim"] = 32
    mimi["inner_dim"] = mimi["quantizer"]["dimension"]


def _model_name(
    base: str,
    num_layers: int | None,
    tiny: bool,
    thin: bool,
    seed: int,
    eos_at_frame: int | None,
    early_crossing_frame: int | None,
) -> str:
    parts = [base]
    if tiny:
        parts.append("tiny")
    if thin:
        parts.append("thin")
    if num_layers is not None:
        parts.append(f"{num_layers}l")
    parts.append(f"seed{seed}")
    if eos_at_frame is not None:
        parts.append(f"eos{eos_at_frame}")
    if early_crossing_frame is not None:
        parts.append(f"early{early_crossing_frame}")
    return "-".join(parts)


# ---------------------------------------------------------------------------
# Sensitivity initialisation


def _is_norm_weight(key: str) -> bool:
    return key.endswith((".alpha",)) or (
        key.endswith(".weight")
        and any(n in key for n in ("norm1.", "norm2.", "out_norm.", "in_ln."))
    )


def _is_norm_bias(key: str) -> bool:
    return key.endswith(".bias") and any(
        n in key for n in ("norm1.", "norm2.", "out_norm.", "in_ln.")
    )


@torch.no_grad()
def _init_mimi_convs(mimi: torch.nn.Module, gain: float) -> None:
    """Variance-preserving convolutions with small biases, so audio follows the latents."""
    for module in mimi.modules():
        if isinstance(module, torch.nn.ConvTranspose1d):
            # Each output sample sums in/groups channels over kernel/stride taps.
            fan_in = (
                module.weight.shape[0] // module.groups * module.kernel_size[0] / module.stride[0]
            )
        elif isinstance(module, torch.nn.Conv1d):
            fan_in = module.weight.shape[1] * module.kernel_size[0]
        else:
            continue
        module.weight.normal_(0.0, gain / math.sqrt(fan_in))
        if module.bias is not None:
            module.bias.normal_(0.0, 0.05)


@torch.no_grad()
def _perturb_constants(tts: Any) -> None:
    """Give every parameter that starts as a constant a distinct, seeded value."""
    for key, tensor in tts.state_dict(keep_vars=True).items():
        if _is_norm_weight(key):
            tensor.copy_(1.0 + 0.15 * torch.randn_like(tensor))
        elif _is_norm_bias(key):
            tensor.normal_(0.0, 0.1)
        elif key.endswith(".scale"):  # Mimi layer scales, 0.01 at init
            tensor.uniform_(0.5, 1.0)
        elif key == "flow_lm.emb_std":
            tensor.uniform_(0.7, 1.3)
        elif key == "flow_lm.emb_mean":
            tensor.normal_(0.0, 0.1)


@contextlib.contextmanager
def _frame_cap(tts: Any, max_frames: int | None) -> Iterator[None]:
    """Make the reference generate at most `max_frames` frames per chunk.

    The reference sizes each generation from the token count; shadowing that
    estimate on the instance is the least intrusive way to bound it.
    """
    if max_frames is None:
        yield
        return
    tts._estimate_max_gen_len = lambda token_count: max_frames
    try:
        yield
    finally:
        del tts._estimate_max_gen_len


@contextlib.contextmanager
def _settings(tts: Any, temperature: float, eos_threshold: float | None) -> Iterator[None]:
    saved = (tts.temp, tts.eos_threshold)
    tts.temp = temperature
    if eos_threshold is not None:
        tts.eos_threshold = eos_threshold
    try:
        yield
    finally:
        tts.temp, tts.eos_threshold = saved


@torch.no_grad()
def _calibrate(tts: Any) -> None:
    """Scale the voice projection and the last decoder conv to sane magnitudes.

    The voice conditioning should be as large as a text embedding (unit
    variance) so that the voice moves the prompt; the audio should peak around
    0.5. Both are linear in the tensor being scaled, so one measurement each suffices.
    """
    voice = torch.from_numpy(
        speech_like_signal(2.0, SAMPLE_RATE, seed=0, trailing_silence=0.3)
    ).float()
    latents = tts.mimi.encode_to_latent(voice[None, None])
    speaker = tts.flow_lm.speaker_proj_weight
    speaker.copy_(torch.randn_like(speaker) / math.sqrt(speaker.shape[1]))
    speaker.mul_(1.0 / float(torch.nn.functional.linear(latents, speaker).std()))

    state = tts.get_state_for_audio_prompt(voice[None])
    with _frame_cap(tts, 12), _settings(tts, 0.0, None):
        audio = tts.generate_audio(state, "Hello there, how are you?", frames_after_eos=0)
    last_conv = tts.mimi.decoder.model[-1].conv
    gain = 0.5 / float(audio.abs().max())
    last_conv.weight.mul_(gain)
    last_conv.bias.mul_(gain)


@torch.no_grad()
def _set_eos(tts: Any, weight: torch.Tensor, bias: float) -> None:
    tts.flow_lm.out_eos.weight.copy_(weight.reshape(tts.flow_lm.out_eos.weight.shape))
    tts.flow_lm.out_eos.bias.fill_(bias)


# ---------------------------------------------------------------------------
# EOS placement


@torch.no_grad()
def _eos_inputs(tts: Any, voice: Path, text: str, frames: int) -> torch.Tensor:
    """The input of `out_eos` on generation steps 0..frames-1 (EOS disabled), [frames, dim]."""
    state = tts.get_state_for_audio_prompt(voice, truncate=True)
    captured: list[torch.Tensor] = []
    hook = tts.flow_lm.out_eos.register_forward_hook(
        lambda module, inputs, output: captured.append(inputs[0].reshape(-1).clone())
    )
    try:
        with _frame_cap(tts, frames), _settings(tts, 0.0, math.inf):
            tts.generate_audio(state, text, frames_after_eos=0)
    finally:
        hook.remove()
    # The first call is the text prompt; one call per generation step follows.
    return torch.stack(captured[1 : frames + 1])


def _check_eos_arguments(eos_at_frame: int | None, early_crossing_frame: int | None) -> None:
    if eos_at_frame is None:
        if early_crossing_frame is not None:
            raise ValueError("early_crossing_frame needs eos_at_frame")
        return
    if eos_at_frame < MIN_FRAMES_BEFORE_EOS:
        raise ValueError(f"eos_at_frame must be >= {MIN_FRAMES_BEFORE_EOS}, got {eos_at_frame}")
    if early_crossing_frame is not None and not 0 <= early_crossing_frame < MIN_FRAMES_BEFORE_EOS:
        raise ValueError(
            f"early_crossing_frame must be in [0, {MIN_FRAMES_BEFORE_EOS}), "
            f"got {early_crossing_frame}"
        )


def _solve_eos(tts: Any, voice: Path, eos_at_frame: int, early_crossing_frame: int | None) -> None:
    """Least-squares `out_eos` so the logit crosses the threshold exactly where asked."""
    threshold = tts.eos_threshold
    inputs = _eos_inputs(tts, voice, EOS_TEXT, eos_at_frame + 1).double()
    target = torch.full((eos_at_frame + 1,), threshold + _EOS_LOW, dtype=torch.float64)
    target[eos_at_frame] = threshold + _EOS_HIGH
    if early_crossing_frame is not None:
        target[early_crossing_frame] = threshold + _EOS_HIGH

    # Ridge regression on centred features keeps the weights small, so that tiny
    # numerical differences between engines cannot move the logit across the margin.
    mean = inputs.mean(dim=0)
    centred = inputs - mean
    ridge = 1e-6 * float(centred.square().sum(dim=1).mean())
    gram = centred @ centred.T + ridge * torch.eye(len(target), dtype=torch.float64)
    weight = centred.T @ torch.linalg.solve(gram, target - target.mean())
    bias = float(target.mean() - mean @ weight)

    logits = inputs @ weight + bias
    fire = target > threshold
    if not (
        bool((logits[fire] > threshold + _EOS_MARGIN).all())
        and bool((logits[~fire] < threshold - _EOS_MARGIN).all())
    ):
        raise RuntimeError(f"could not place EOS at frame {eos_at_frame}: logits {logits.tolist()}")
    _set_eos(tts, weight.float(), bias)


# ---------------------------------------------------------------------------
# Building


def build_model(
    directory: Path,
    base: str = "english_2026-10",
    *,
    num_layers: int | None = None,
    tiny: bool = False,
    thin: bool = False,
    seed: int = 0,
    eos_at_frame: int | None = None,
    early_crossing_frame: int | None = None,
    tokenizer_dir: Path | None = None,
    weights_dtype: torch.dtype = torch.float32,
) -> BuiltModel:
    """Build (once per directory) a sensitivity-initialised model in the official format.

    `eos_at_frame=N` makes the reference's EOS logit first exceed the config's
    threshold on generation step N for `EOS_TEXT` with the default test voice at
    temperature 0; `early_crossing_frame` adds one crossing before step 6, which
    the reference must ignore. Without `eos_at_frame` the EOS logit stays far
    below any threshold. Tokenizers are trained in `tokenizer_dir` (default:
    inside `directory`); share one between builds to save seconds. `tiny` shrinks
    every width and depth (fast tests); `thin` only the widths (benchmarks/limits.py
    measures with it what a frame costs whatever the model's size).
    `weights_dtype=torch.bfloat16` stores the weights as Kyutai's own checkpoints do,
    rounded to bfloat16 (the end of speech is placed before that rounding, within
    its margins).
    """
    _check_eos_arguments(eos_at_frame, early_crossing_frame)
    if tiny and thin:
        raise ValueError("a model is either tiny or thin")
    directory = directory.resolve()
    name = _model_name(base, num_layers, tiny, thin, seed, eos_at_frame, early_crossing_frame)
    if weights_dtype != torch.float32:
        name += "-" + str(weights_dtype).removeprefix("torch.")
    config_path = directory / f"model-{name}.yaml"
    weights_path = directory / "model.safetensors"
    others = [p for p in directory.glob("model-*.yaml") if p != config_path]
    if others:
        raise ValueError(
            f"{directory} already holds another model ({others[0].name}); "
            "use one directory per build"
        )
    config = packaged_config(base)
    if tiny or thin:
        _shrink(config, keep_depth=thin)
    if num_layers is not None:
        config["flow_lm"]["transformer"]["num_layers"] = num_layers
    vocab = config["flow_lm"]["lookup_table"]["n_bins"]
    tokenizer_path = build_sentencepiece_model(
        (tokenizer_dir or directory / "tokenizer").resolve(), vocab
    )
    built = BuiltModel(config_path, weights_path, tokenizer_path)
    if config_path.exists() and weights_path.exists():
        return built

    config.pop("weights_path_without_voice_cloning", None)
    config["weights_path"] = None
    config["flow_lm"].pop("weights_path", None)
    config["mimi"].pop("weights_path", None)
    config["flow_lm"]["lookup_table"].update(
        tokenizer="sentencepiece", tokenizer_path=str(tokenizer_path)
    )

    directory.mkdir(parents=True, exist_ok=True)
    tts = _build_in_memory(config, seed, directory, eos_at_frame, early_crossing_frame)
    import safetensors.torch

    state = {
        k: v.detach().to(weights_dtype if v.is_floating_point() else v.dtype).contiguous()
        for k, v in tts.state_dict().items()
    }
    safetensors.torch.save_file(state, str(weights_path))
    del tts, state
    gc.collect()
    config["weights_path"] = str(weights_path)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return built


def _build_in_memory(
    config: dict[str, Any],
    seed: int,
    directory: Path,
    eos_at_frame: int | None,
    early_crossing_frame: int | None,
) -> Any:
    from pocket_tts.models.tts_model import TTSModel
    from pocket_tts.utils.config import Config

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tts = TTSModel._from_pydantic_config_with_weights(
            Config(**config),
            temp=0.0,
            sampler_decode_steps=1,
            noise_clamp=None,
            eos_threshold=config.get("default_eos_threshold", -4.0),
        )
        tts.eval()
        _perturb_constants(tts)
        _init_mimi_convs(tts.mimi, gain=1.2)
        eos_weight = tts.flow_lm.out_eos.weight
        _set_eos(
            tts, torch.randn_like(eos_weight) / math.sqrt(eos_weight.numel()), _DISABLED_EOS_BIAS
        )
        _calibrate(tts)
        if eos_at_frame is not None:
            voice = write_voice_wav(directory / "eos_voice.wav")
            _solve_eos(tts, voice, eos_at_frame, early_crossing_frame)
    return tts


# ---------------------------------------------------------------------------
# Running the reference on a built model

_LOADED: dict[Path, Any] = {}


def reference_tts(model: BuiltModel) -> Any:
    """The reference's `TTSModel` for `model`, loaded once per config path."""
    if model.config_path not in _LOADED:
        from pocket_tts import TTSModel

        _LOADED[model.config_path] = TTSModel.load_model(config=str(model.config_path), temp=0.0)
    return _LOADED[model.config_path]


def reference_voice_state(model: BuiltModel, voice: Path) -> dict[str, dict[str, torch.Tensor]]:
    """The reference's flow-LM state after the voice prompt (as `export-voice` computes it)."""
    return reference_tts(model).get_state_for_audio_prompt(Path(voice), truncate=True)


def reference_export_voice(model: BuiltModel, audio_path: Path, out_path: Path) -> Path:
    """What `pocket-tts export-voice audio out --config model.yaml` writes."""
    from pocket_tts.models.model_state import export_model_state

    export_model_state(reference_voice_state(model, audio_path), str(out_path))
    return out_path


def reference_synthesize(
    model: BuiltModel,
    voice: Path,
    text: str,
    *,
    temperature: float = 0.0,
    eos_threshold: float | None = None,
    frames_after_eos: int | None = None,
    max_frames: int | None = None,
) -> np.ndarray:
    """The whole audio (float32, 24 kHz) the reference speaks for `text` in `voice`.

    `voice` is an audio file or an exported `.safetensors` state. `max_frames`
    caps the frames generated per text chunk (the reference otherwise derives
    the cap from the token count), which keeps EOS-less runs short.
    """
    tts = reference_tts(model)
    voice = Path(voice)
    state = tts.get_state_for_audio_prompt(voice, truncate=True)
    with _frame_cap(tts, max_frames), _settings(tts, temperature, eos_threshold):
        audio = tts.generate_audio(state, text, frames_after_eos=frames_after_eos)
    return audio.numpy().astype(np.float32)


def reference_eos_logits(model: BuiltModel, voice: Path, text: str, frames: int) -> np.ndarray:
    """The reference's raw EOS logit on generation steps 0..frames-1 at temperature 0."""
    tts = reference_tts(model)
    inputs = _eos_inputs(tts, Path(voice), text, frames)
    with torch.no_grad():
        return tts.flow_lm.out_eos(inputs).reshape(-1).numpy()


def reference_frame_count(model: BuiltModel, voice: Path, text: str, **options: Any) -> int:
    """How many 80 ms frames the reference generates before stopping."""
    audio = reference_synthesize(model, voice, text, **options)
    return audio.shape[-1] // FRAME_SAMPLES
