"""A loaded Pocket TTS model: configuration, tokenizer, FlowLM and Mimi weights, voices."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from torch import nn

from ..cpu.allocator import keep_huge_pages_to_the_weights, return_free_heap
from ..cpu.packed import pack_convolutions, pack_linears
from ..cpu.quantize import halve_exact_linears, halve_linears, int8_backend, quantize_linears
from ..errors import ConfigError, VoiceError
from .audio import prepare_prompt, read_audio
from .checkpoint import cast_to_float32, float32_while, load_checkpoint, release_file_pages
from .config import ModelConfig, load_model_config
from .flow_lm import FlowHead, FlowLM
from .kv_cache import LinearKV
from .mimi import Mimi
from .text import TextRules
from .tokenizer import Tokenizer, load_tokenizer
from .voice import VoiceState, load_voice_state

_LOGGER = logging.getLogger(__name__)

ModuleT = TypeVar("ModuleT", bound=nn.Module)


class _Modules(nn.Module):
    """The checkpoint's top level: `flow_lm.*` and `mimi.*`."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        mimi = config.mimi
        self.flow_lm = FlowLM(
            config.flow_lm, mimi.latent_dim, voice_dim=mimi.inner_dim or mimi.seanet.dimension
        )
        self.mimi = Mimi(mimi)


def _local_path(config: ModelConfig, value: str | None, what: str) -> Path:
    if value is None:
        raise ConfigError(f"the model configuration {config.name} names no {what}")
    resolved = config.resolve_path(value)
    if "://" in resolved:
        raise ConfigError(
            f"{what} {value} is remote: download the model first "
            "(`wyoming-pocket-tts download --model NAME`) or give a local path"
        )
    return Path(resolved)


def _convert_hot_layers(modules: _Modules, quantize: bool, weights_path: Path) -> bool:
    """The hot layers in a faster form: FlowLM's transformer in int8 on request, else
    with float16 weights where float16 holds them exactly (a bfloat16 checkpoint; see
    quantize.py) and the rest in float32 laid out for oneDNN where that helps (see
    packed.py); the flow head, with its modulations fused, the same, but in float16
    even where that rounds its weights beside an int8 transformer; Mimi's decoder
    (transformer and convolutions) only ever in the float32 layout (int8 in Mimi is
    audible as hiss).
    The encoder, used only to clone a voice, is left as loaded: its pages are let go
    after each.

    The file's pages each conversion replaced are let go at once, one layer at a
    time, so that loading never holds both forms of the whole model; the layers that
    take a narrower form take it from the file's dtype, before the rest is cast to
    float32 (a float32 copy of the whole model first would raise the peak), and the C
    heap gives back the pages its conversions freed. Returns whether FlowLM's
    transformer is in int8.
    """

    def convert(conversion: Callable[[ModuleT], list[torch.Tensor]], module: ModuleT) -> bool:
        replaced = conversion(module)
        release_file_pages(replaced, weights_path)
        return_free_heap()
        return bool(replaced)

    flow_layers = modules.flow_lm.transformer.layers
    quantized = quantize and all(convert(quantize_linears, layer) for layer in flow_layers)
    if quantized:
        _LOGGER.info("FlowLM transformer weights quantized to int8 (%s)", int8_backend())
    head = modules.flow_lm.flow_net
    convert(FlowHead.fuse_modulations, head)
    float_parts = [head] if quantized else [*flow_layers, head]
    halve = halve_linears if quantized else halve_exact_linears
    halved = [convert(halve, part) for part in float_parts]
    if any(halved) and not quantized:
        _LOGGER.info("FlowLM weights held in float16, which holds them exactly")
    # The rest, stored narrower, to float32; the voice encoder only while it encodes,
    # the text's lookup table never (its rows are cast as they are looked up).
    stored = [*modules.mimi.voice_encoder_parts(), modules.flow_lm.conditioner.embed]
    cast_to_float32(modules, weights_path, besides=stored)
    for part in float_parts:
        convert(pack_linears, part)  # the layers still in float32, in oneDNN's layout
    mimi = modules.mimi
    convert(pack_linears, mimi.decoder_transformer)
    for part in (mimi.quantizer, mimi.upsample, mimi.decoder):
        convert(pack_convolutions, part)
    return quantized


class PocketTTS:
    """Everything needed to turn text into audio with one model, shared by all requests."""

    def __init__(self, config: ModelConfig, modules: _Modules, tokenizer: Tokenizer,
                 has_voice_cloning: bool, weights_path: Path, quantized: bool = False):
        self.config = config
        self.quantized = quantized  # FlowLM's transformer weights are int8
        self.flow_lm = modules.flow_lm
        self.mimi = modules.mimi
        self.tokenizer = tokenizer
        self.has_voice_cloning = has_voice_cloning
        self.weights_path = weights_path
        self._encoding = threading.Lock()  # one voice at a time: see float32_while
        self.text_rules = TextRules(
            replace_characters=dict(config.replace_characters),
            remove_semicolons=config.remove_semicolons,
            capitalize_first_letter=config.capitalize_first_letter,
            append_terminal_punctuation=config.append_terminal_punctuation,
            pad_with_spaces_for_short_inputs=config.pad_with_spaces_for_short_inputs,
        )

    @classmethod
    def load(
        cls, config: ModelConfig | Path | str, weights_path: Path | None = None,
        tokenizer_path: Path | None = None, quantize: bool = False,
    ) -> PocketTTS:
        """Build the model from a configuration; paths override those in the YAML.

        `quantize` stores FlowLM's transformer weights in int8 and its flow head's in
        float16 (faster, slightly different audio; see `quantize.py`).
        """
        if not isinstance(config, ModelConfig):
            config = load_model_config(config)
        started = time.monotonic()
        weights_path = weights_path or _local_path(config, config.weights_path, "weights file")
        lookup = config.flow_lm.lookup_table
        tokenizer = load_tokenizer(
            tokenizer_path or _local_path(config, lookup.tokenizer_path, "tokenizer"),
            lookup.tokenizer, lookup.n_bins,
        )
        if config.flow_lm.dtype != "float32" or config.mimi.dtype != "float32":
            raise ConfigError("only float32 models are supported")
        with torch.device("meta"):
            modules = _Modules(config)
        missing = load_checkpoint(modules, weights_path)
        if missing:
            _LOGGER.warning(
                "%s has no voice-cloning weights: predefined voices work, "
                "cloning from audio does not",
                weights_path,
            )
        modules.eval().requires_grad_(False)
        quantized = _convert_hot_layers(modules, quantize, weights_path)
        keep_huge_pages_to_the_weights()
        _LOGGER.info("loaded %s in %.2f s", weights_path, time.monotonic() - started)
        return cls(
            config, modules, tokenizer, has_voice_cloning=not missing, weights_path=weights_path,
            quantized=quantized,
        )

    @property
    def sample_rate(self) -> int:
        return self.config.mimi.sample_rate

    @property
    def samples_per_frame(self) -> int:
        return self.config.mimi.samples_per_frame

    @property
    def frame_rate(self) -> float:
        return self.config.mimi.frame_rate

    def new_cache(self, capacity: int) -> LinearKV:
        transformer = self.config.flow_lm.transformer
        return LinearKV(
            transformer.num_layers, transformer.kv_heads, transformer.head_dim, capacity
        )

    @torch.inference_mode()
    def voice_from_samples(self, samples: np.ndarray, sample_rate: int) -> VoiceState:
        """Encode a voice prompt (mono float samples at any rate) into a voice state."""
        if not self.has_voice_cloning:
            raise VoiceError(
                "this model was loaded without its voice-cloning weights: use a predefined "
                "voice, or accept the terms of kyutai/pocket-tts on Hugging Face, set HF_TOKEN "
                "and download again"
            )
        if samples.shape[0] < sample_rate / self.frame_rate:
            raise VoiceError("the voice audio is shorter than one frame (80 ms): use a few seconds")
        audio = prepare_prompt(samples, sample_rate, self.sample_rate)
        encoder = self.mimi.voice_encoder_parts()
        with self._encoding, float32_while(encoder, self.weights_path):
            prompt = self.flow_lm.voice_prompt(self.mimi.encode(audio))
        # The encoder is idle until the next voice: let its pages go (tens of MB); a
        # later voice reads them from the file again.
        release_file_pages([t for part in encoder for t in part.parameters()], self.weights_path)
        cache = self.new_cache(prompt.shape[1])
        self.flow_lm.prefill(prompt, cache)
        # The buffer holds exactly the prompt and nothing else refers to it: the voice
        # takes it over instead of a copy, which would raise the peak.
        return VoiceState(cache.keys[:, 0], cache.values[:, 0])

    def voice_from_audio(self, path: Path) -> VoiceState:
        samples, sample_rate = read_audio(path)
        return self.voice_from_samples(samples, sample_rate)

    def load_voice(self, path: Path) -> VoiceState:
        """Read a voice-state file and check that it was made for a model of this shape."""
        voice = load_voice_state(path)
        transformer = self.config.flow_lm.transformer
        expected = (transformer.num_layers, transformer.kv_heads, transformer.head_dim)
        found = (voice.num_layers, voice.keys.shape[1], voice.keys.shape[3])
        if found != expected:
            raise VoiceError(
                f"{path} was made for another model (layers, heads, head size {found}; "
                f"this model has {expected})"
            )
        return voice

    def voice(self, path: Path) -> VoiceState:
        """A voice from either kind of file: a voice state (.safetensors) or audio."""
        if path.suffix == ".safetensors":
            return self.load_voice(path)
        return self.voice_from_audio(path)

