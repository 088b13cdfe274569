"""Key/value storage for causal attention, allocated once and written by index.

Two shapes of the same idea:

* `LinearKV`: FlowLM's working buffer for one generation slot. It holds the voice
  prompt (copied in from the shared, read-only `VoiceState`), the text tokens and
  every generated frame of one chunk. Its capacity is set for the whole chunk up
  front and grows geometrically on the rare chunk that needs more, never per step.
* `WindowKV`: the Mimi decoder transformer only looks back `context` steps, so it
  keeps a bounded window: when the buffer fills, the last `context - 1` entries are
  moved to its front. Memory stays constant however long the utterance.

Both store keys and values as [layers, batch, heads, capacity, head_dim] so that the
valid prefix of a layer is a plain slice that attention reads without copying.
"""

from __future__ import annotations

import torch

# Debug aid: fill unwritten slots with NaN; any read of one poisons the audio.
POISON_UNWRITTEN = False


def _allocate(
    layers: int, batch: int, heads: int, capacity: int, head_dim: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (layers, batch, heads, capacity, head_dim)
    if POISON_UNWRITTEN:
        return torch.full(shape, float("nan"), dtype=dtype), torch.full(
            shape, float("nan"), dtype=dtype
        )
    return torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)


class LinearKV:
    """Keys/values of positions 0..length-1 of one stream, appended in order."""

    def __init__(
        self, layers: int, heads: int, head_dim: int, capacity: int, batch: int = 1,
        dtype: torch.dtype = torch.float32,
    ):
        self.keys, self.values = _allocate(layers, batch, heads, capacity, head_dim, dtype)
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.keys.shape[3]

    def reset(self, prefix_keys: torch.Tensor, prefix_values: torch.Tensor, capacity: int) -> None:
        """Start a new chunk from a voice prefix ([layers, heads, P, head_dim]).

        The prefix is copied into the front of the buffer; the buffer is reallocated
        only when `capacity` exceeds what it has, and then at least doubled.
        """
        if capacity > self.capacity:
            layers, batch, heads, _, head_dim = self.keys.shape
            new_capacity = max(capacity, 2 * self.capacity)
            self.keys, self.values = _allocate(
                layers, batch, heads, new_capacity, head_dim, self.keys.dtype
            )
        prefix_length = prefix_keys.shape[2]
        self.keys[:, :, :, :prefix_length] = prefix_keys.unsqueeze(1)
        self.values[:, :, :, :prefix_length] = prefix_values.unsqueeze(1)
        self.length = prefix_length

    def reserve(self, steps: int) -> None:
        if self.length + steps > self.capacity:
            raise RuntimeError(
                f"KV buffer overflow: {self.length + steps} positions, capacity {self.capacity}"
            )

    def append(
        self, layer: int, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write a layer's new keys/values ([B, H, T, D]) at the end; return all valid ones.

        The caller advances `length` once all layers have been written (`advance`).
        """
        end = self.length + keys.shape[2]
        self.keys[layer, :, :, self.length : end] = keys
        self.values[layer, :, :, self.length : end] = values
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def advance(self, steps: int) -> None:
        self.length += steps

    @property
    def first_position(self) -> int:
        """Absolute position of the first stored entry (always 0 for a linear buffer)."""
        return 0


class WindowKV:
    """The last `context` positions of a stream, in a fixed buffer compacted when full."""

    def __init__(
        self, layers: int, heads: int, head_dim: int, context: int, batch: int = 1,
        dtype: torch.dtype = torch.float32,
    ):
        self.context = context
        # Room for a few frames beyond the window, so compaction is rare.
        capacity = 2 * context
        self.keys, self.values = _allocate(layers, batch, heads, capacity, head_dim, dtype)
        self.start = 0  # absolute position of buffer slot 0
        self.length = 0  # absolute position one past the newest entry

    def reserve(self, steps: int) -> None:
        """Make room for `steps` new positions, dropping those no query can see any more."""
        used = self.length - self.start
        if used + steps <= self.keys.shape[3]:
            return
        keep = min(self.context - 1, used)
        if keep + steps > self.keys.shape[3]:
            layers, batch, heads, _, head_dim = self.keys.shape
            keys, values = _allocate(layers, batch, heads, keep + steps, head_dim, self.keys.dtype)
        else:
            keys, values = self.keys, self.values
        # Move the newest `keep` entries to the front (clone: source and target may overlap).
        keys[..., :keep, :] = self.keys[..., used - keep : used, :].clone()
        values[..., :keep, :] = self.values[..., used - keep : used, :].clone()
        self.keys, self.values = keys, values
        self.start = self.length - keep

    def append(
        self, layer: int, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        begin = self.length - self.start
        end = begin + keys.shape[2]
        self.keys[layer, :, :, begin:end] = keys
        self.values[layer, :, :, begin:end] = values
        visible = self.first_position - self.start
        return self.keys[layer, :, :, visible:end], self.values[layer, :, :, visible:end]

    def advance(self, steps: int) -> None:
        self.length += steps

    @property
    def first_position(self) -> int:
        """Absolute position of the oldest entry the next queries can see.

        The buffer holds up to twice the window; entries older than the window of the
        first new query are left out of attention altogether rather than masked: the
        Mimi decoder's 16 queries a frame then attend over 265 keys, not 265-500.
        """
        return max(self.start, self.length - self.context + 1)
