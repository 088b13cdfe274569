"""Transformer building blocks shared by FlowLM and Mimi: RoPE, attention, layers.

Module and parameter names follow Kyutai's checkpoints (`self_attn.in_proj`,
`norm1`, `linear1`, `layer_scale_1.scale`, ...), so weights load without renaming.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..cpu.packed import PackedLinear
from .kv_cache import LinearKV, WindowKV

KVStore = LinearKV | WindowKV


@dataclass(frozen=True)
class Stream:
    """Where a stream's positions go: its cache, first position and attention mask."""

    cache: KVStore
    position: int
    mask: torch.Tensor | None
    # The rotary embedding of this stream's positions (unit complex numbers [T, D/2]),
    # shared by every layer.
    rotation: torch.Tensor
    # The stream's part of the input [B, T, ...]: all of it, a batch row, or a run of
    # positions of the one row (streams of different lengths side by side).
    rows: slice
    steps: slice


def rotation(first_position: int, count: int, head_dim: int, max_period: float) -> torch.Tensor:
    """The rotary embedding of positions first..first+count-1: e^(i*angle), complex [T, D/2]."""
    half = torch.arange(head_dim // 2, dtype=torch.float32)
    frequencies = torch.exp(half * (-math.log(max_period) * 2 / head_dim))
    positions = torch.arange(count, dtype=torch.float32) + first_position
    angles = positions[:, None] * frequencies
    return torch.complex(torch.cos(angles), torch.sin(angles))


def rotate(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x [..., D], channel pairs (2i, 2i+1) interleaved.

    `rotation` ([T, D/2], see `rotation()`) is broadcast against x's pairs: for x
    [B, T, H, D], pass `rotation[:, None]`.

    Each pair is a complex number turned by its position's angle: one complex product,
    where the same arithmetic on separate real and imaginary halves takes a dozen
    operators, and a FlowLM step's cost is largely its operator calls.
    """
    pairs = torch.view_as_complex(torch.unflatten(x, -1, (-1, 2)).contiguous())
    return torch.view_as_real(pairs * rotation).flatten(-2)


def attention_mask(
    query_start: int, query_count: int, key_start: int, key_count: int, context: int | None
) -> torch.Tensor | None:
    """Which keys each query may see: causal, and within `context` steps if bounded.

    Returns None when every query sees every key (one new step over a linear cache),
    which lets scaled_dot_product_attention take its fastest path.
    """
    query_positions = torch.arange(query_start, query_start + query_count)
    key_positions = torch.arange(key_start, key_start + key_count)
    delta = query_positions[:, None] - key_positions[None, :]
    allowed = delta >= 0
    if context is not None:
        allowed &= delta < context
    if bool(allowed.all()):
        return None
    return allowed


class SelfAttention(nn.Module):
    """Multi-head (optionally grouped-query) causal self-attention with RoPE."""

    def __init__(
        self, embed_dim: int, num_heads: int, max_period: float,
        attn_dim: int | None = None, num_kv_heads: int | None = None,
    ):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads or num_heads
        self.attn_dim = attn_dim or embed_dim
        self.head_dim = self.attn_dim // num_heads
        self.max_period = max_period
        kv_width = 2 * self.num_kv_heads * self.head_dim
        self.in_proj = nn.Linear(embed_dim, self.attn_dim + kv_width, bias=False)
        self.out_proj = nn.Linear(self.attn_dim, embed_dim, bias=False)

    def forward(self, x: torch.Tensor, layer: int, streams: Sequence[Stream]) -> torch.Tensor:
        """x [B, T, embed]; each stream attends within its own part (`Stream.rows/steps`)."""
        batch, steps, _ = x.shape
        # [B, T, heads, D]: the query heads, then the key heads, then the value heads.
        heads = self.in_proj(x).view(batch, steps, -1, self.head_dim)
        rotated = self.num_heads + self.num_kv_heads  # queries and keys, turned together
        out = heads.new_empty(batch, steps, self.num_heads, self.head_dim)
        for stream in streams:
            part = heads[stream.rows, stream.steps]
            turned = rotate(part[:, :, :rotated], stream.rotation[:, None]).transpose(1, 2)
            queries, keys = turned.split_with_sizes((self.num_heads, self.num_kv_heads), dim=1)
            keys, values = stream.cache.append(layer, keys, part[:, :, rotated:].transpose(1, 2))
            out[stream.rows, stream.steps] = F.scaled_dot_product_attention(
                queries, keys, values,
                attn_mask=stream.mask, enable_gqa=self.num_kv_heads != self.num_heads,
            ).transpose(1, 2)
        projected: torch.Tensor = self.out_proj(out.view(batch, steps, self.attn_dim))
        return projected


class LayerScale(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class TransformerLayer(nn.Module):
    """Pre-norm block: attention then a tanh-GELU feed-forward, each residual."""

    def __init__(
        self, d_model: int, num_heads: int, ffn_dim: int, max_period: float,
        layer_scale: bool = False, attn_dim: int | None = None, num_kv_heads: int | None = None,
    ):
        super().__init__()
        self.self_attn = SelfAttention(d_model, num_heads, max_period, attn_dim, num_kv_heads)
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.linear1 = nn.Linear(d_model, ffn_dim, bias=False)
        self.linear2 = nn.Linear(ffn_dim, d_model, bias=False)
        self.layer_scale_1 = LayerScale(d_model) if layer_scale else nn.Identity()
        self.layer_scale_2 = LayerScale(d_model) if layer_scale else nn.Identity()

    def forward(self, x: torch.Tensor, layer: int, streams: Sequence[Stream]) -> torch.Tensor:
        x = x + self.layer_scale_1(self.self_attn(self.norm1(x), layer, streams))
        hidden = self._expand(self.norm2(x))
        update: torch.Tensor = self.layer_scale_2(self.linear2(hidden))
        return x + update

    def _expand(self, x: torch.Tensor) -> torch.Tensor:
        """gelu(linear1(x)), tanh-approximated. Where linear1 is packed for oneDNN
        (Mimi's transformer) the GELU runs inside the product as a post-op, which saves
        a pass over the widest activation of the layer."""
        if isinstance(self.linear1, PackedLinear):
            expanded: torch.Tensor = self.linear1(x, gelu_tanh=True)
            return expanded
        return F.gelu(self.linear1(x), approximate="tanh")


class Transformer(nn.Module):
    """A stack of layers over positions [position, position + T) of one stream."""

    def __init__(self, layers: list[TransformerLayer], context: int | None = None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.context = context
        # What the rotary embedding needs, the same in every layer.
        self.head_dim = layers[0].self_attn.head_dim
        self.max_period = layers[0].self_attn.max_period

    def forward(
        self, x: torch.Tensor, caches: KVStore | Sequence[KVStore],
        lengths: Sequence[int] | None = None,
    ) -> torch.Tensor:
        """Run the stack over x [B, T, d], continuing the streams in `caches`.

        One cache for the whole batch, or one per batch row: then each row continues
        its own stream (batched decoding of concurrent requests: the weights are read
        once for all of them). With `lengths`, x is one row holding each stream's
        positions in turn, as many as its length: streams with different numbers of
        new positions (several text prompts) share each weight read the same way.
        """
        caches = [caches] if isinstance(caches, LinearKV | WindowKV) else list(caches)
        if lengths is None:
            counts = [x.shape[1]] * len(caches)
            parts = [(slice(None), slice(None))] if len(caches) == 1 else [
                (slice(row, row + 1), slice(None)) for row in range(len(caches))
            ]
        else:
            counts = list(lengths)
            starts = itertools.accumulate(counts, initial=0)
            parts = [
                (slice(None), slice(start, start + count))
                for start, count in zip(starts, counts, strict=False)  # starts has one more
            ]
        streams = [
            self._continue(cache, count, rows, steps)
            for cache, count, (rows, steps) in zip(caches, counts, parts, strict=True)
        ]
        for index, layer in enumerate(self.layers):
            x = layer(x, index, streams)
        for stream, count in zip(streams, counts, strict=True):
            stream.cache.advance(count)
        return x

    def _continue(self, cache: KVStore, count: int, rows: slice, steps: slice) -> Stream:
        """The stream of `cache` taking `count` new positions, at `rows`/`steps` of the input."""
        cache.reserve(count)
        position = cache.length
        mask = None
        if count > 1 or self.context is not None:
            key_start = cache.first_position
            mask = attention_mask(
                position, count, key_start, position + count - key_start, self.context
            )
        turns = rotation(position, count, self.head_dim, self.max_period)
        return Stream(cache, position, mask, turns, rows, steps)
