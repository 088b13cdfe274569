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

from ..errors import VoiceError

_KEY = re.compile(r"transformer\.layers\.(\d+)\.self_attn/(cache|offset|pad|current_end)")


@dataclass(frozen=True)
class VoiceState:
    """Per-layer keys and values of the voice prompt: [layers, kv_heads, positions, head_dim]."""

    keys: torch.Tensor
    values: torch.Tensor

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
    """Read a voice file written by us or by `pocket-tts export-voice`."""
    try:
        handle = safetensors.safe_open(str(path), framework="pt", device="cpu")
    except FileNotFoundError:
        raise VoiceError(f"voice file not found: {path}") from None
    except Exception as error:
        raise VoiceError(f"{path} is not a readable voice file: {error}") from error
    layers: dict[int, dict[str, torch.Tensor]] = {}
    with handle:
        for key in handle.keys():
            match = _KEY.fullmatch(key)
            if match is None:
                raise VoiceError(f"{path} is not a Pocket TTS voice file (unexpected tensor {key})")
            layers.setdefault(int(match[1]), {})[match[2]] = handle.get_tensor(key)
    if not layers or sorted(layers) != list(range(len(layers))):
        raise VoiceError(f"{path} is not a Pocket TTS voice file (no complete layer set)")
    keys, values = [], []
    for index in range(len(layers)):
        entry = layers[index]
        if "cache" not in entry:
            raise VoiceError(f"{path}: layer {index} has no cache tensor")
        cache = entry["cache"]
        if cache.dim() != 5 or cache.shape[0] != 2 or cache.shape[1] != 1:
            raise VoiceError(f"{path}: layer {index} cache has shape {tuple(cache.shape)}")
        if "offset" in entry:
            length = int(entry["offset"].view(-1)[0])
        elif "current_end" in entry:  # older files stored the length as a tensor's size
            length = entry["current_end"].shape[0]
        else:
            length = cache.shape[2]
        if not 0 < length <= cache.shape[2]:
            raise VoiceError(f"{path}: layer {index} has an invalid length {length}")
        cache = cache[:, 0, :length].transpose(1, 2).float()  # [2, heads, positions, head_dim]
        keys.append(cache[0])
        values.append(cache[1])
    try:
        return VoiceState(torch.stack(keys).contiguous(), torch.stack(values).contiguous())
    except RuntimeError:
        raise VoiceError(f"{path}: layers disagree in shape") from None
