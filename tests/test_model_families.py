"""Every model family pocket-tts 4.0.1 ships, against the reference, one config file each.

The configurations are listed from the installed reference package, so a family
added there is tested here without an edit. For each one the reference builds a
random-weight checkpoint (tests/support/reference_model.py) and our engine must
load it strictly, speak the same audio at temperature 0, build the same voice
state from the same audio, stop at the same frame, and use the family's own
defaults (temperature, EOS threshold, text rules).

Builds are tiny (narrow, at the family's real depth) when the fixture's shrink
keeps everything that sets the family apart; otherwise the family is built at its
real size, which for the small families is 2-7M parameters and for a standard-width
one is shortened to a few layers. `family_structure` decides, so a change to the
shrink cannot silently stop a feature from being tested.
"""

from __future__ import annotations

import importlib.resources
import math
from pathlib import Path
from typing import Any

import pytest
import safetensors
import torch
import yaml
from pocket_tts.models.text_chunking import prepare_text_prompt, split_into_best_sentences
from pocket_tts.utils.config import load_config

from tests.support.parity import assert_same_audio, assert_same_voice_state, ours
from tests.support.reference_model import (
    EOS_TEXT,
    FRAME_SAMPLES,
    BuiltModel,
    build_model,
    packaged_config,
    reference_export_voice,
    reference_synthesize,
    reference_tts,
    reference_voice_state,
)
from wyoming_pocket_tts.engine.model.checkpoint import load_checkpoint
from wyoming_pocket_tts.engine.model.config import load_model_config
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS, _Modules
from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

STATE_TOLERANCE = 1e-5
# Frames per chunk in the audio comparison: enough for the small decoders'
# 50-step attention window (16 steps per frame) to fill and slide.
FRAME_CAP = 10
EOS_FRAME = 8
# A crossing before frame 6 that both engines must ignore.
EARLY_CROSSING_FRAME = 3
# Standard-width families built at real size keep only this many FlowLM layers.
SHORTENED_LAYERS = 2
STANDARD_WIDTH = 1024

# Every character some family's text rules replace or delete, semicolons and a
# colon, and enough words for two chunks with the tiny tokenizer.
RULES_TEXT = (
    "\u201cHello,\u201d she said \u2013 it\u2019s 7:30; the \u00abkitchen\u00bb light "
    '(the big one) is on [really] \u2014 and the \u2018door\u2019 is "locked". '
    "\u00bfReady? \u00a1Yes!"
)
SHORT_TEXT = "lights on"


def _config_names() -> list[str]:
    folder = importlib.resources.files("pocket_tts") / "config"
    return sorted(
        entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml")
    )


CONFIG_NAMES = _config_names()


def family_structure(config: dict[str, Any]) -> dict[str, object]:
    """What sets a family apart, independent of its widths and depths."""
    flow_lm, mimi = config["flow_lm"], config["mimi"]
    transformer = flow_lm["transformer"]
    d_model, heads = transformer["d_model"], transformer["num_heads"]
    kv_heads = transformer.get("num_kv_heads") or heads
    ffn = transformer.get("dim_feedforward")
    decoder_seanet = mimi.get("decoder_seanet") or mimi["seanet"]
    decoder_transformer = mimi.get("decoder_transformer") or mimi["transformer"]
    voice_width = mimi.get("inner_dim") or mimi["seanet"]["dimension"]
    return {
        "flow head": flow_lm["flow"].get("type", "lsd"),
        "BOS before the voice": flow_lm.get("insert_bos_before_voice", False),
        "attention width differs from d_model": (transformer.get("attn_dim") or d_model) != d_model,
        "grouped-query attention": kv_heads < heads,
        "a single key/value head": kv_heads == 1,
        "own feed-forward width": ffn is not None and ffn != d_model * transformer["hidden_scale"],
        "low-rank text table": flow_lm["lookup_table"].get("rank") is not None,
        "z projection": flow_lm.get("z_dim") is not None,
        "separate decoder SEANet": mimi.get("decoder_seanet") is not None,
        "decoder kernel size": decoder_seanet["kernel_size"],
        "separate decoder transformer": mimi.get("decoder_transformer") is not None,
        "decoder context": decoder_transformer["context"],
        "voice latents wider than the flow latents": voice_width != mimi["quantizer"]["dimension"],
    }


def _built_structure(model: BuiltModel) -> dict[str, object]:
    return family_structure(yaml.safe_load(model.config_path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module", params=CONFIG_NAMES)
def family(request: pytest.FixtureRequest, models_dir: Path, tokenizer_dir: Path) -> BuiltModel:
    """The smallest build of one config file that still has all of its family's features."""
    name = request.param
    packaged = packaged_config(name)
    wanted = family_structure(packaged)
    transformer = packaged["flow_lm"]["transformer"]
    eos: dict[str, Any] = {
        "eos_at_frame": EOS_FRAME,
        "early_crossing_frame": EARLY_CROSSING_FRAME,
        "tokenizer_dir": tokenizer_dir,
    }
    root = models_dir / "families"
    tiny = build_model(
        root / f"{name}-tiny", base=name, tiny=True, num_layers=transformer["num_layers"], **eos
    )
    if _built_structure(tiny) == wanted:
        return tiny
    layers = SHORTENED_LAYERS if transformer["d_model"] >= STANDARD_WIDTH else None
    real = build_model(root / f"{name}-real", base=name, num_layers=layers, **eos)
    assert _built_structure(real) == wanted
    return real


@pytest.fixture(scope="module")
def engine(family: BuiltModel) -> PocketTTS:
    return PocketTTS.load(family.config_path)


def test_config_names_are_listed_from_the_reference():
    # A guard against an empty parametrisation passing vacuously.
    assert "english" in CONFIG_NAMES and len(CONFIG_NAMES) >= 20


def test_checkpoint_loads_strictly(family: BuiltModel, engine: PocketTTS):
    with safetensors.safe_open(str(family.weights_path), framework="pt") as handle:
        in_file = {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}  # noqa: SIM118 (not a dict)
    # The modules as loaded, before the hot layers take their faster forms.
    with torch.device("meta"):
        modules = _Modules(load_model_config(family.config_path))
    assert not load_checkpoint(modules, family.weights_path)
    loaded = modules.state_dict()
    assert {key: tuple(tensor.shape) for key, tensor in loaded.items()} == in_file
    assert not any(tensor.is_meta for tensor in loaded.values())
    assert engine.has_voice_cloning


def test_audio_equals_reference(family: BuiltModel, engine: PocketTTS, voice_wav: Path):
    # EOS is switched off so that both engines run the full FRAME_CAP on every chunk.
    expected = reference_synthesize(
        family, voice_wav, RULES_TEXT, eos_threshold=math.inf, max_frames=FRAME_CAP
    )
    actual = ours(
        engine, voice_wav, RULES_TEXT, eos_threshold=math.inf, max_frames_per_chunk=FRAME_CAP
    )
    assert_same_audio(actual, expected)


def test_voice_state_equals_reference(family: BuiltModel, engine: PocketTTS, voice_wav: Path):
    expected = reference_voice_state(family, voice_wav)
    assert_same_voice_state(engine.voice_from_audio(voice_wav), expected, STATE_TOLERANCE)


def test_voice_files_cross_load(
    family: BuiltModel, engine: PocketTTS, voice_wav: Path, tmp_path: Path
):
    """Voice files hold the family's key/value heads, and both engines read each other's."""
    from_audio = engine.voice_from_audio(voice_wav)
    theirs = engine.load_voice(
        reference_export_voice(family, voice_wav, tmp_path / "theirs.safetensors")
    )
    torch.testing.assert_close(theirs.keys, from_audio.keys, rtol=0, atol=STATE_TOLERANCE)
    torch.testing.assert_close(theirs.values, from_audio.values, rtol=0, atol=STATE_TOLERANCE)
    mine = tmp_path / "mine.safetensors"
    from_audio.save(mine)
    settings: dict[str, Any] = {"eos_threshold": math.inf, "max_frames": 4}
    assert_same_audio(
        reference_synthesize(family, mine, SHORT_TEXT, **settings),
        reference_synthesize(family, voice_wav, SHORT_TEXT, **settings),
    )


def test_end_of_speech_at_the_same_frame(family: BuiltModel, engine: PocketTTS, voice_wav: Path):
    # Both at the configuration's own EOS threshold and frames-after-EOS rule.
    expected = reference_synthesize(family, voice_wav, EOS_TEXT)
    (chunk,) = Synthesizer(engine).chunks(EOS_TEXT)
    assert expected.shape[0] == (EOS_FRAME + chunk.frames_after_eos) * FRAME_SAMPLES
    assert_same_audio(ours(engine, voice_wav, EOS_TEXT), expected)


def reference_sampler_calls(
    model: BuiltModel, voice: Path, temperature: float, frames: int
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(head input z, noise, sampled latent) of every draw the reference makes while speaking.

    The reference and our engine consume random numbers in different orders (the
    reference also samples after its prompt passes), so sampled audio cannot be
    compared; the sampler itself can, on the reference's own inputs.
    """
    tts = reference_tts(model)
    inputs: list[tuple[torch.Tensor, torch.Tensor]] = []
    latents: list[torch.Tensor] = []
    hooks = [
        # flow_net(z, [times...], x): with one decode step, x is the noise.
        tts.flow_lm.flow_net.register_forward_pre_hook(
            lambda module, args: inputs.append((args[0].clone(), args[-1].clone()))
        ),
        tts.flow_lm.register_forward_hook(
            lambda module, args, output: latents.append(output[0].clone())
        ),
    ]
    try:
        reference_synthesize(
            model,
            voice,
            EOS_TEXT,
            temperature=temperature,
            eos_threshold=math.inf,
            max_frames=frames,
        )
    finally:
        for hook in hooks:
            hook.remove()
    assert len(inputs) == len(latents) > frames
    return [(z, noise, latent) for (z, noise), latent in zip(inputs, latents, strict=True)]


def test_sampler_equals_reference_with_noise(
    family: BuiltModel, engine: PocketTTS, voice_wav: Path
):
    """At temperature 0 a drifting and a pointwise head agree; with noise they must not."""
    frames = 3
    calls = reference_sampler_calls(family, voice_wav, 0.7, frames)
    # The voice prompt's pass runs at temperature 0 (before reference_synthesize's settings).
    assert sum(bool(noise.abs().max() > 0.1) for _, noise, _ in calls) >= frames
    for z, noise, latent in calls:
        with torch.inference_mode():
            sampled = engine.flow_lm.sample(z, noise)
        torch.testing.assert_close(sampled, latent, rtol=0, atol=STATE_TOLERANCE)


@pytest.mark.parametrize("text", [RULES_TEXT, SHORT_TEXT], ids=["rules", "short"])
def test_family_defaults_reach_the_engine(
    family: BuiltModel, engine: PocketTTS, voice_wav: Path, text: str
):
    reference = reference_tts(family)
    utterance = Synthesizer(engine).start(engine.voice_from_audio(voice_wav), text)
    try:
        # reference_tts() pins the reference's temperature to 0; its default comes from here.
        assert utterance.temperature == load_config(family.config_path).default_temperature
        assert utterance.eos_threshold == reference.eos_threshold
        pieces = split_into_best_sentences(
            reference.flow_lm.conditioner.tokenizer,
            text,
            50,
            reference.pad_with_spaces_for_short_inputs,
            remove_semicolons=reference.remove_semicolons,
            append_terminal_punctuation=reference.append_terminal_punctuation,
            capitalize_first_letter=reference.capitalize_first_letter,
            replace_characters=reference.replace_characters,
        )
        expected = []
        for piece in pieces:
            prepared, frames_after_eos_guess = prepare_text_prompt(
                piece,
                reference.pad_with_spaces_for_short_inputs,
                reference.remove_semicolons,
                reference.append_terminal_punctuation,
                reference.capitalize_first_letter,
                reference.replace_characters,
            )
            recommended = reference.model_recommended_frames_after_eos
            after = frames_after_eos_guess + 2 if recommended is None else recommended
            expected.append((prepared, after))
        assert [(chunk.text, chunk.frames_after_eos) for chunk in utterance.chunks] == expected
    finally:
        utterance.close()
