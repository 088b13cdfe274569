"""FlowLM: a causal transformer over [voice prompt, text, latents] plus a one-step flow head.

Each step reads the previous latent frame (or the learnt BOS latent first), runs one
position through the transformer against the cached keys/values, and asks two heads
for the next frame: an EOS logit, and a small MLP conditioned on the transformer
output that maps Gaussian noise to the next continuous latent (12.5 frames/s).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from .config import FlowLMConfig
from .kv_cache import LinearKV
from .layers import Transformer, TransformerLayer

# Prompt positions fed through the transformer per pass (5 s of voice at 12.5 frames/s).
PREFILL_POSITIONS = 64


class TextEmbedding(nn.Module):
    """Token lookup table, optionally low-rank with a projection (`conditioner.*`)."""

    def __init__(self, n_bins: int, dim: int, rank: int | None):
        super().__init__()
        # One extra row: the padding token of the training setup. The table is given
        # uninitialised (the checkpoint fills it): random init costs start-up time.
        width = rank or dim
        self.embed = nn.Embedding(n_bins + 1, width, _weight=torch.empty(n_bins + 1, width))
        self.proj = nn.Linear(rank, dim, bias=False) if rank else None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # The table may keep the file's bfloat16 (only the rows looked up are read):
        # their float32 values are exact.
        x: torch.Tensor = self.embed(tokens).float()
        if self.proj is not None:
            x = self.proj(x)
        return x


class _RMSNorm(nn.Module):
    """RMS-style norm of the time embedder; it divides by the unbiased variance, as trained."""

    def __init__(self, dim: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (self.alpha * torch.rsqrt(x.var(dim=-1, keepdim=True) + 1e-5))


class TimeEmbedding(nn.Module):
    """Sinusoidal features of a flow time t in [0, 1], through a small MLP."""

    freqs: torch.Tensor

    def __init__(self, dim: int, frequencies: int = 256):
        super().__init__()
        # exp(-ln(max_period) * i / half) for i < half; stored in the checkpoint, so
        # left uninitialised here (computing it on the meta device costs start-up time).
        self.register_buffer("freqs", torch.empty(frequencies // 2))
        self.mlp = nn.Sequential(
            nn.Linear(frequencies, dim), nn.SiLU(), nn.Linear(dim, dim), _RMSNorm(dim)
        )

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        angles = t * self.freqs
        features = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
        embedding: torch.Tensor = self.mlp(features)
        return embedding


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x * (1 + scale) + shift, in two operators (the head runs 7 per frame)."""
    return torch.addcmul(shift, x, 1 + scale)


class ResidualBlock(nn.Module):
    """An MLP block whose normalisation is shifted, scaled and gated by the condition."""

    def __init__(self, dim: int):
        super().__init__()
        self.in_ln = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 3 * dim))

    def forward(self, x: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        shift, scale, gate = modulation.chunk(3, dim=-1)
        return torch.addcmul(x, gate, self.mlp(_modulate(self.in_ln(x), shift, scale)))


class FinalLayer(nn.Module):
    def __init__(self, dim: int, out_dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, out_dim)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))

    def forward(self, x: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        shift, scale = modulation.chunk(2, dim=-1)
        x = F.layer_norm(x, x.shape[-1:], eps=1e-6)
        y: torch.Tensor = self.linear(_modulate(x, shift, scale))
        return y


class FlowHead(nn.Module):
    """MLP with adaptive layer norm predicting a latent from noise (`flow_net.*`).

    Run once per frame on one row per stream, after the transformer has pushed its
    weights out of the caches, so it is paid in bytes read and calls made: the
    embeddings of the flow times, the same for every frame, are computed once per
    set of times, and after `fuse_modulations()` the shifts, scales and gates of all
    blocks (more than half of the head's weights) come from one product.
    """

    def __init__(self, latent_dim: int, dim: int, depth: int, cond_dim: int, time_conditions: int):
        super().__init__()
        self.time_embed = nn.ModuleList([TimeEmbedding(dim) for _ in range(time_conditions)])
        self.cond_embed = nn.Linear(cond_dim, dim)
        self.input_proj = nn.Linear(latent_dim, dim)
        self.res_blocks = nn.ModuleList([ResidualBlock(dim) for _ in range(depth)])
        self.final_layer = FinalLayer(dim, latent_dim)
        self.fused_modulation: nn.Module | None = None
        self._modulation_widths: list[int] = []  # of each layer's part of the fused product
        self._time_conditions: dict[tuple[float, ...], torch.Tensor] = {}

    def forward(
        self, condition: torch.Tensor, x: torch.Tensor, times: tuple[float, ...] = ()
    ) -> torch.Tensor:
        """condition [B, cond_dim], x [B, latent_dim]; `times`: one flow time per time embedding."""
        y = self.cond_embed(condition)
        if times:
            y = y + self._time_condition(times)
        x = self.input_proj(x)
        *block_modulations, final_modulation = self._modulations(y)
        for block, modulation in zip(self.res_blocks, block_modulations, strict=True):
            x = block(x, modulation)
        latent: torch.Tensor = self.final_layer(x, final_modulation)
        return latent

    def _time_condition(self, times: tuple[float, ...]) -> torch.Tensor:
        """The mean embedding of `times` [1, dim], kept: a decode step always asks the same."""
        cached = self._time_conditions.get(times)
        if cached is None:
            # An ordinary tensor, even when first asked for in inference mode.
            with torch.inference_mode(False), torch.no_grad():
                embeddings = [
                    embed(torch.tensor([[t]]))
                    for embed, t in zip(self.time_embed, times, strict=True)
                ]
                cached = sum(embeddings) / len(times)
            self._time_conditions[times] = cached
        return cached

    def _modulations(self, y: torch.Tensor) -> list[torch.Tensor]:
        """The shift/scale(/gate) inputs of every residual block, then of the final layer."""
        if self.fused_modulation is None:
            layers = [*self.res_blocks, self.final_layer]
            return [layer.adaLN_modulation(y) for layer in layers]
        return list(self.fused_modulation(F.silu(y)).split(self._modulation_widths, dim=-1))

    def fuse_modulations(self) -> list[torch.Tensor]:
        """Stack every layer's modulation weights into one product; return the replaced weights.

        The per-layer modules are dropped (they only ever see the same input, silu(y)).
        """
        linears = [layer.adaLN_modulation[1] for layer in (*self.res_blocks, self.final_layer)]
        fused = nn.Linear(linears[0].in_features, sum(linear.out_features for linear in linears))
        fused.weight = nn.Parameter(torch.cat([linear.weight for linear in linears]), False)
        fused.bias = nn.Parameter(torch.cat([linear.bias for linear in linears]), False)
        self.fused_modulation = fused
        self._modulation_widths = [linear.out_features for linear in linears]
        for layer in (*self.res_blocks, self.final_layer):
            del layer.adaLN_modulation
        return [tensor for linear in linears for tensor in (linear.weight, linear.bias)]


class FlowLM(nn.Module):
    emb_std: torch.Tensor
    emb_mean: torch.Tensor

    def __init__(self, config: FlowLMConfig, latent_dim: int, voice_dim: int):
        super().__init__()
        tcfg = config.transformer
        d_model = tcfg.d_model
        self.config = config
        self.latent_dim = latent_dim
        self.conditioner = TextEmbedding(
            config.lookup_table.n_bins, config.lookup_table.dim, config.lookup_table.rank
        )
        self.register_buffer("emb_std", torch.ones(latent_dim))
        self.register_buffer("emb_mean", torch.zeros(latent_dim))
        self.bos_emb = nn.Parameter(torch.zeros(latent_dim))
        if config.insert_bos_before_voice:
            self.bos_before_voice = nn.Parameter(torch.zeros(1, 1, d_model))
        self.speaker_proj_weight = nn.Parameter(torch.zeros(d_model, voice_dim))
        self.input_linear = nn.Linear(latent_dim, d_model, bias=False)
        self.transformer = Transformer([
            TransformerLayer(
                d_model, tcfg.num_heads, tcfg.ffn_dim, tcfg.max_period,
                attn_dim=tcfg.attn_dim, num_kv_heads=tcfg.num_kv_heads,
            )
            for _ in range(tcfg.num_layers)
        ])
        self.out_norm = nn.LayerNorm(d_model, eps=1e-5)
        self.z_proj = nn.Linear(d_model, config.z_dim, bias=False) if config.z_dim else None
        head_input = config.z_dim or d_model
        self.out_eos = nn.Linear(head_input, 1)
        self.flow_net = FlowHead(
            latent_dim, config.flow.dim, config.flow.depth, head_input,
            config.flow.num_time_conditions,
        )

    def voice_prompt(self, voice_latents: torch.Tensor) -> torch.Tensor:
        """Mimi latents of a voice [B, T, latent_dim] -> transformer inputs [B, T(+1), d_model]."""
        prompt = F.linear(voice_latents, self.speaker_proj_weight)
        if self.config.insert_bos_before_voice:
            prompt = torch.cat([self.bos_before_voice.expand(prompt.shape[0], -1, -1), prompt], 1)
        return prompt

    def prefill(self, inputs: torch.Tensor, cache: LinearKV) -> None:
        """Feed prompt positions (voice or text embeddings) into the cache; no output needed.

        In pieces of PREFILL_POSITIONS: the keys/values are the same, but the
        activations (feed-forward, attention scores) stay those of one piece, so a
        long voice prompt does not raise the peak memory.
        """
        for piece in torch.split(inputs, PREFILL_POSITIONS, dim=1):
            self.transformer(piece, cache)

    def step(
        self, latents: torch.Tensor, caches: Sequence[LinearKV],
        prefixes: Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """One position per stream: previous latents [B, latent_dim] -> head inputs [B, z].

        Each batch row continues the stream in its own cache. `prefixes` (one per
        stream, [1, T, d_model], e.g. the texts) are fed in the same pass, each before
        its stream's latent: one read of the weights instead of two, which is what the
        first frame's latency is made of, and one for all the streams starting at once.
        """
        x: torch.Tensor = self.input_linear(latents)[:, None]
        if prefixes is None:
            x = self.transformer(x, caches)[:, -1]
        else:
            pieces = [
                torch.cat([prefix, row[None]], dim=1)
                for prefix, row in zip(prefixes, x, strict=True)
            ]
            lengths = [piece.shape[1] for piece in pieces]
            outputs = self.transformer(torch.cat(pieces, dim=1), caches, lengths)[0]
            x = outputs[[end - 1 for end in itertools.accumulate(lengths)]]
        x = self.out_norm(x)
        if self.z_proj is not None:
            x = self.z_proj(x)
        return x

    def eos_logit(self, z: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.out_eos(z)
        return logits[:, 0]

    def sample(self, z: torch.Tensor, noise: torch.Tensor, steps: int = 1) -> torch.Tensor:
        """Map noise [B, latent_dim] to the next latent, conditioned on z."""
        kind = self.config.flow.type
        if kind == "drifting":
            latent: torch.Tensor = self.flow_net(z, noise)
            return latent
        if kind == "pointwise":
            residual: torch.Tensor = self.flow_net(z, noise)
            return noise + residual
        x = noise
        for i in range(steps):
            # lsd: from one flow time to the next; flow_matching: Euler steps along the
            # learnt velocity at each time.
            times = (i / steps, (i + 1) / steps) if kind == "lsd" else (i / steps,)
            x = x + self.flow_net(z, x, times) / steps
        return x
