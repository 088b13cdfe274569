"""Voice states: the transformer's keys/values for a voice prompt, computed once.

A `VoiceState` is immutable and shared by every request that speaks with the voice:
a generation copies it into its own working buffer, never deep-copies or mutates it.

Files use the reference's format (`pocket-tts export-voice`), so voices move freely
between the two: one tensor group per attention layer named
`transformer.layers.<i>.self_attn/{cache,offset,pad}`, the cache shaped
[2 (keys, values), batch 1, positions, heads, head_dim].
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import safetensors
import safetensors.torch
import torch

from ..cpu.threads import intra_op_threads
from ..errors import VoiceError

_KEY = re.compile(r"transformer\.layers\.(\d+)\.self_attn/(cache|offset|pad|current_end)")


@dataclass(frozen=True)
class VoiceState:
    """Per-layer keys and values of the voice prompt: [layers, kv_heads, positions, head_dim]."""

    keys: torch.Tensor
    values: torch.Tensor

    def __post_init__(self) -> None:
        """Refuse a state no model can speak with. One NaN or infinity in a voice's keys
        or values spreads through attention into every frame: the audio comes out
        silent, with no error, for every request that uses the voice."""
        if self.keys.dim() != 4 or self.keys.shape != self.values.shape:
            raise VoiceError(
                f"the voice's keys and values are shaped {tuple(self.keys.shape)} and "
                f"{tuple(self.values.shape)}, not [layers, heads, positions, head size]"
            )
        if self.keys.dtype != torch.float32 or self.values.dtype != torch.float32:
            raise VoiceError(f"the voice is stored as {self.keys.dtype}, not float32")
        if self.keys.numel() == 0:
            raise VoiceError(f"the voice is empty (shape {tuple(self.keys.shape)})")
        # The extremes are NaN if any value is, infinite if any is: one cheap pass each.
        extremes = torch.stack([*torch.aminmax(self.keys), *torch.aminmax(self.values)])
        if not torch.isfinite(extremes).all():
            raise VoiceError("the voice contains invalid (NaN or infinite) values")

    @property
    def num_positions(self) -> int:
        return self.keys.shape[2]

    @property
    def num_layers(self) -> int:
        return self.keys.shape[0]

    @property
    def nbytes(self) -> int:
        return 2 * self.keys.numel() * self.keys.element_size()

    def save(self, path: Path, metadata: dict[str, str] | None = None) -> None:
        """Write in the reference's format; written to a temporary file, then renamed."""
        tensors: dict[str, torch.Tensor] = {}
        for layer in range(self.num_layers):
            prefix = f"transformer.layers.{layer}.self_attn"
            cache = torch.stack([self.keys[layer], self.values[layer]]).transpose(1, 2)
            tensors[f"{prefix}/cache"] = cache.unsqueeze(1).contiguous()
            tensors[f"{prefix}/offset"] = torch.tensor([self.num_positions], dtype=torch.long)
            tensors[f"{prefix}/pad"] = torch.zeros(1, dtype=torch.long)
        # A unique temporary name beside the target: concurrent writers never collide,
        # and a reader never sees a half-written file.
        handle, partial_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(handle)
        partial = Path(partial_name)
        try:
            safetensors.torch.save_file(tensors, partial_name, metadata=metadata)
            partial.replace(path)
        except safetensors.SafetensorError as error:
            raise OSError(f"cannot write {path}: {error}") from error
        finally:
            partial.unlink(missing_ok=True)


def read_voice_metadata(path: Path) -> dict[str, str]:
    """The text metadata of a voice file (ours name the model; the reference's have none)."""
    try:
        with safetensors.safe_open(str(path), framework="pt") as handle:
            return handle.metadata() or {}
    except FileNotFoundError:
        raise VoiceError(f"voice file not found: {path}") from None
    except Exception as error:  # safetensors raises its own types for bad headers
        raise VoiceError(f"{path} is not a readable voice file: {error}") from error


def load_voice_state(path: Path) -> VoiceState:
    """Read a voice file written by us or by `pocket-tts export-voice`; VoiceError, naming
    the file, for anything that is not a whole, usable voice state.

    On one core: reading is a copy of a few megabytes, which takes milliseconds on one
    thread, while torch's workers on every core would wait for the cores the synthesis
    is using, for a time slice at each operator. An evicted voice is read back this way
    while other requests are being spoken.
    """
    try:
        with intra_op_threads(1):
            return _read_voice_state(path)
    except FileNotFoundError:
        raise VoiceError(f"voice file not found: {path}") from None
    except VoiceError as error:
        raise VoiceError(f"{path}: {error}") from None
    except Exception as error:  # safetensors raises its own types for bad headers and data
        raise VoiceError(f"{path} is not a readable voice file: {error}") from error


def _read_voice_state(path: Path) -> VoiceState:
    layers: dict[int, dict[str, torch.Tensor]] = {}
    with safetensors.safe_open(str(path), framework="pt", device="cpu") as handle:
        for key in handle.keys():  # noqa: SIM118 - safe_open is not iterable
            match = _KEY.fullmatch(key)
            if match is None:
                raise VoiceError(f"not a Pocket TTS voice file (unexpected tensor {key})")
            layers.setdefault(int(match[1]), {})[match[2]] = handle.get_tensor(key)
    if not layers or sorted(layers) != list(range(len(layers))):
        raise VoiceError("not a Pocket TTS voice file (no complete layer set)")
    caches = []
    for index in range(len(layers)):
        try:
            caches.append(_layer_cache(layers[index]))
        except VoiceError as error:
            raise VoiceError(f"layer {index}: {error}") from None
    if any(cache.shape != caches[0].shape for cache in caches):
        raise VoiceError("layers disagree in shape")
    # Keys and values in one buffer, each layer copied (and cast) into place once.
    state = torch.empty(2, len(caches), *caches[0].shape[1:], dtype=torch.float32)
    for index, cache in enumerate(caches):
        state[:, index].copy_(cache)
    return VoiceState(state[0], state[1])


def _layer_cache(entry: dict[str, torch.Tensor]) -> torch.Tensor:
    """A view of one layer's keys and values: [2, heads, positions, head_dim]."""
    if "cache" not in entry:
        raise VoiceError("no cache tensor")
    cache = entry["cache"]
    if cache.dim() != 5 or cache.shape[0] != 2 or cache.shape[1] != 1:
        raise VoiceError(f"the cache has shape {tuple(cache.shape)}")
    if not cache.is_floating_point():
        raise VoiceError(f"the cache holds {cache.dtype}, not floating-point numbers")
    if "offset" in entry:
        offset = entry["offset"]
        if offset.numel() == 0 or offset.is_floating_point():
            raise VoiceError(
                f"the offset is not a length ({offset.dtype}, {offset.numel()} values)"
            )
        length = int(offset.view(-1)[0])
    elif "current_end" in entry:  # older files stored the length as a tensor's size
        length = entry["current_end"].shape[0]
    else:
        length = cache.shape[2]
    if not 0 < length <= cache.shape[2]:
        raise VoiceError(f"invalid length {length} for a cache of {cache.shape[2]} positions")
    return cache[:, 0, :length].transpose(1, 2)
