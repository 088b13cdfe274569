"""The Mimi codec: a streaming decoder from latents to 24 kHz audio, and an encoder.

Both directions are streamed: each convolution keeps the last input samples it
needs, each transposed convolution keeps the overlap it has not emitted yet, and
each transformer keeps a bounded window of keys/values. All of it lives in a
`StreamState` owned by one stream (a `DecoderState` for synthesis, an
`EncoderState` for a voice prompt); the modules themselves hold only weights.
Running N frames in one call or a few at a time gives the same result.

The encoder is streamed for memory, not latency: its first layers run at 24 kHz
on 64 channels and its transformer attends over 200 steps a second, so a whole
30 s prompt at once would take hundreds of MB of activations; chunks of half a
second take a few tens of megabytes, however long the prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from .config import MimiConfig, MimiTransformerConfig, SEANetConfig
from .kv_cache import WindowKV
from .layers import Transformer, TransformerLayer

# Frames (1920 samples each) the encoder takes per step: 0.48 s of audio. Larger
# steps only raise the peak memory of encoding a voice, smaller ones do not lower it,
# and the time is that of one pass. 96 encoder-transformer steps plus the 250-step
# context fit the window's buffer, which is then never reallocated.
ENCODE_CHUNK_FRAMES = 6
# Frames of each stream the decoder's convolutions take per pass. Their last stage
# runs at 24 kHz on 64 channels, so a long run makes large transients per call whose
# holes the C allocator keeps (and oneDNN a kernel per frame count): pieces of four
# lower the peak memory at the same speed. Concurrent streams get four frames each,
# not four frame-rows in all: a wider batch costs less per row.
DECODER_FRAMES_PER_PIECE = 4


@dataclass
class StreamState:
    """Everything one stream through the encoder or the decoder remembers between calls.

    `conv_history[i]` belongs to the convolution whose `state_slot` is i; slots are
    numbered separately for each direction, which is why the two get their own types.
    """

    transformer_window: WindowKV
    conv_history: list[torch.Tensor | None] = field(default_factory=list)

    def history(
        self, slot: int, x: torch.Tensor, fresh: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """What a module kept from the last call, or `fresh(x)` on the stream's first one."""
        kept = self.conv_history[slot]
        return fresh(x) if kept is None else kept

    def keep(self, slot: int, tail: torch.Tensor) -> None:
        self.conv_history[slot] = tail.clone()


class DecoderState(StreamState):
    """A synthesis stream: latents in, audio out."""


class EncoderState(StreamState):
    """A voice prompt being encoded: audio in, latents out."""


class DecoderBatch:
    """Several streams decoded in one call, one batch row each (concurrent requests).

    Convolutions over a batch cost much less per row than one call per stream. Each
    module's history is gathered from the rows' states before it runs and written
    back to them after, so every stream keeps its own `DecoderState`; the decoder
    transformer continues each row in its own window.
    """

    def __init__(self, states: Sequence[DecoderState]):
        self.states = list(states)

    @property
    def transformer_window(self) -> list[WindowKV]:
        return [state.transformer_window for state in self.states]

    def history(
        self, slot: int, x: torch.Tensor, fresh: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        kept = [state.conv_history[slot] for state in self.states]
        if all(row is None for row in kept):
            return fresh(x)
        return torch.cat([
            fresh(x[i : i + 1]) if row is None else row for i, row in enumerate(kept)
        ])

    def keep(self, slot: int, tail: torch.Tensor) -> None:
        for state, row in zip(self.states, torch.split(tail, 1), strict=True):
            state.conv_history[slot] = row.clone()


# What the streaming modules read their history from: one stream, or a batch of decoder streams.
Streams = StreamState | DecoderBatch


class ELU(nn.Module):
    """ELU (alpha 1), by PyTorch's kernel or as max(x, exp(min(x, 0)) - 1).

    The ELUs are a noticeable share of a decoded frame's time. PyTorch's kernel
    computes expm1, which with its AVX2 kernels costs twice an exp, so there the second
    form (the same values to float rounding) is faster; with its AVX-512 kernels
    PyTorch's own is as fast or faster. `from_exp`: which form (default: the faster
    one on this CPU). Either allocates one tensor, and with `inplace` PyTorch's
    allocates none: the result overwrites x, for ELUs whose input nothing reads after
    them (the output of the layer before), which saves large transients.
    """

    def __init__(self, from_exp: bool | None = None, inplace: bool = False):
        super().__init__()
        self.from_exp = _exp_form_preferred() if from_exp is None else from_exp
        self.inplace = inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.from_exp:
            return F.elu(x, inplace=self.inplace)
        # exp(x) - 1 >= x for x <= 0, and exp(0) - 1 = 0 < x for x > 0.
        y = torch.clamp(x, max=0).exp_().sub_(1)
        return torch.maximum(y, x, out=x if self.inplace else y)


@functools.cache
def _exp_form_preferred() -> bool:
    """Whether the exp form is the ELU to use here: not where PyTorch runs its AVX-512
    kernels; elsewhere (AVX2, and ARM, where the two forms have not been compared)
    it stays."""
    return torch.backends.cpu.get_cpu_capability() != "AVX512"


def _join_in_time(history: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[history, x] along time ([B, C, T]), in x's memory layout.

    The decoder's activations are channels-last when its convolutions are packed
    (see cpu/packed.py); torch.cat of 3-d tensors would return them channels-first, and
    the next convolution would have to convert them back.
    """
    if x.stride(1) == 1 and x.shape[1] > 1:
        return torch.cat([history.transpose(1, 2), x.transpose(1, 2)], dim=1).transpose(1, 2)
    return torch.cat([history, x], dim=-1)


class CausalConv1d(nn.Module):
    """Conv1d that sees only the past: left context comes from history or padding."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
        dilation: int = 1, groups: int = 1, bias: bool = True, pad_mode: str = "constant",
    ):
        super().__init__()
        if pad_mode not in ("constant", "replicate"):
            raise ValueError(f"unsupported pad mode {pad_mode!r}")
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, stride, dilation=dilation, groups=groups,
            bias=bias,
        )
        self.pad_mode = pad_mode
        self.history_length = (kernel_size - 1) * dilation + 1 - stride
        self.state_slot = -1  # index into StreamState.conv_history, set by Mimi

    def forward(self, x: torch.Tensor, state: Streams | None = None) -> torch.Tensor:
        if self.history_length <= 0:
            unpadded: torch.Tensor = self.conv(x)
            return unpadded
        if state is None:
            history = self._fresh_history(x)
        else:
            history = state.history(self.state_slot, x, self._fresh_history)
        padded = _join_in_time(history, x)
        if state is not None:
            state.keep(self.state_slot, padded[..., -self.history_length :])
        y: torch.Tensor = self.conv(padded)
        return y

    def _fresh_history(self, x: torch.Tensor) -> torch.Tensor:
        """A stream's first call: zeros, or the first sample repeated for `replicate`."""
        if self.pad_mode == "replicate":
            return x[..., :1].expand(-1, -1, self.history_length)
        return x.new_zeros(x.shape[0], x.shape[1], self.history_length)


class CausalConvTranspose1d(nn.Module):
    """ConvTranspose1d that emits only finished samples and keeps the overlap for later.

    A call over several frames transforms each frame on its own (the frames as a batch)
    and adds the overlaps between them here, as between two calls. Summed inside the
    kernel instead, they would be rounded otherwise than across calls, and the audio
    would depend on how many frames a call decodes, which follows the load. Needs an
    overlap no longer than a frame's output (Mimi's kernels are twice their stride).
    """

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int,
        groups: int = 1, bias: bool = True,
    ):
        super().__init__()
        self.convtr = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride, groups=groups, bias=bias
        )
        self.stride = stride
        self.overlap = kernel_size - stride
        if self.overlap > stride:
            raise ValueError("a streaming transposed convolution's overlap exceeds its stride")
        self.steps_per_frame = 1  # input steps a frame of audio has here, set by Mimi
        self.state_slot = -1

    def forward(self, x: torch.Tensor, state: Streams | None = None) -> torch.Tensor:
        batch, _, steps = x.shape
        frames = steps // self.steps_per_frame
        # [B, C, T] as B*F inputs of a frame each, and the output as [B, F, time, C].
        by_frame = torch.unflatten(x.transpose(1, 2), 1, (frames, -1))  # [B, F, time, C]
        per_frame = by_frame.flatten(0, 1).transpose(1, 2)
        y = torch.unflatten(self.convtr(per_frame), 0, (batch, frames)).transpose(2, 3)
        length = y.shape[2] - self.overlap
        heads, tails = y[:, :, :length], y[:, :, length:]
        bias = self.convtr.bias
        if bias is not None:  # every frame's output carries it, and the sum only once
            tails = tails - bias
        if state is None:
            pending = tails.new_zeros(batch, self.overlap, tails.shape[-1])
        else:
            pending = state.history(self.state_slot, tails[:, 0], torch.zeros_like)
            state.keep(self.state_slot, tails[:, -1])
        # The start of frame f: its own output plus the end of frame f - 1's.
        heads[:, :, : self.overlap] += torch.cat([pending.unsqueeze(1), tails[:, :-1]], dim=1)
        return heads.flatten(1, 2).transpose(1, 2)


class ResidualUnit(nn.Module):
    """x + conv1x1(elu(conv_k(elu(x)))): indices match the checkpoint's `block.N`."""

    def __init__(self, dim: int, kernel_size: int, dilation: int, compress: int, pad_mode: str):
        super().__init__()
        hidden = dim // compress
        self.block = nn.ModuleList([
            ELU(),  # not in place: x is the residual's too
            CausalConv1d(dim, hidden, kernel_size, dilation=dilation, pad_mode=pad_mode),
            ELU(inplace=True),
            CausalConv1d(hidden, dim, 1, pad_mode=pad_mode),
        ])

    def forward(self, x: torch.Tensor, state: Streams | None = None) -> torch.Tensor:
        y = x
        for layer in self.block:
            y = layer(y, state) if isinstance(layer, CausalConv1d) else layer(y)
        return y.add_(x)  # y is the last convolution's own output


def _residual_units(config: SEANetConfig, dim: int) -> list[nn.Module]:
    return [
        ResidualUnit(
            dim, config.residual_kernel_size, config.dilation_base**j, config.compress,
            config.pad_mode,
        )
        for j in range(config.n_residual_layers)
    ]


class SEANet(nn.Module):
    """A sequence of convolutions, ELUs and residual units (`model.N` in checkpoints).

    Each starts with a convolution, and every ELU of the sequence follows another
    layer, whose fresh output it may overwrite (`ELU(inplace=True)`).
    """

    def __init__(self, layers: list[nn.Module]):
        super().__init__()
        self.model = nn.ModuleList(layers)

    def forward(
        self, x: torch.Tensor, state: Streams | None = None, layers: slice = slice(None)
    ) -> torch.Tensor:
        """Run the sequence, or only its `layers` (a decode split between threads)."""
        for layer in self.model[layers]:
            x = layer(x) if isinstance(layer, ELU) else layer(x, state)
        return x


def build_seanet_encoder(config: SEANetConfig) -> SEANet:
    width = config.n_filters
    layers: list[nn.Module] = [
        CausalConv1d(config.channels, width, config.kernel_size, pad_mode=config.pad_mode)
    ]
    for ratio in reversed(config.ratios):
        layers += _residual_units(config, width)
        layers += [
            ELU(inplace=True),
            CausalConv1d(width, 2 * width, 2 * ratio, stride=ratio, pad_mode=config.pad_mode),
        ]
        width *= 2
    layers += [
        ELU(inplace=True),
        CausalConv1d(width, config.dimension, config.last_kernel_size, pad_mode=config.pad_mode),
    ]
    return SEANet(layers)


def build_seanet_decoder(config: SEANetConfig) -> SEANet:
    width = config.n_filters * 2 ** len(config.ratios)
    layers: list[nn.Module] = [
        CausalConv1d(config.dimension, width, config.kernel_size, pad_mode=config.pad_mode)
    ]
    for ratio in config.ratios:
        layers += [
            ELU(inplace=True),
            CausalConvTranspose1d(width, width // 2, 2 * ratio, stride=ratio),
        ]
        width //= 2
        layers += _residual_units(config, width)
    layers += [
        ELU(inplace=True),
        CausalConv1d(width, config.channels, config.last_kernel_size, pad_mode=config.pad_mode),
    ]
    return SEANet(layers)


def _numbered_convs(modules: list[nn.Module]) -> list[CausalConv1d | CausalConvTranspose1d]:
    """The streaming convolutions among `modules`, each told its slot in a StreamState."""
    convs = [m for m in modules if isinstance(m, (CausalConv1d, CausalConvTranspose1d))]
    for slot, conv in enumerate(convs):
        conv.state_slot = slot
    return convs


class ProjectedTransformer(nn.Module):
    """Mimi's transformer over [B, C, T] features, with projections where widths differ."""

    def __init__(self, config: MimiTransformerConfig):
        super().__init__()
        layers = [
            TransformerLayer(
                config.d_model, config.num_heads, config.dim_feedforward, config.max_period,
                layer_scale=True,
            )
            for _ in range(config.num_layers)
        ]
        self.transformer = Transformer(layers, context=config.context)
        self.input_proj = (
            nn.Linear(config.input_dimension, config.d_model, bias=False)
            if config.input_dimension != config.d_model
            else None
        )
        (output_dimension,) = config.output_dimensions
        self.output_projs = nn.ModuleList([
            nn.Linear(config.d_model, output_dimension, bias=False)
            if output_dimension != config.d_model
            else nn.Identity()
        ])
        self.config = config

    def new_window(self, batch: int) -> WindowKV:
        config = self.config
        return WindowKV(
            config.num_layers, config.num_heads, config.d_model // config.num_heads,
            config.context, batch,
        )

    def forward(self, x: torch.Tensor, window: WindowKV | list[WindowKV]) -> torch.Tensor:
        x = x.transpose(1, 2)
        if self.input_proj is not None:
            x = self.input_proj(x)
        x = self.transformer(x, window)
        x = self.output_projs[0](x)
        return x.transpose(1, 2)


class Quantizer(nn.Module):
    """Only the output projection of Mimi's quantizer is used: latents are continuous."""

    def __init__(self, dimension: int, output_dimension: int):
        super().__init__()
        self.output_proj = nn.Conv1d(dimension, output_dimension, 1, bias=False)


class Downsample(nn.Module):
    """A container: the checkpoint names its convolution `downsample.conv.conv`."""

    def __init__(self, conv: CausalConv1d):
        super().__init__()
        self.conv = conv


class Upsample(nn.Module):
    """A container: the checkpoint names its convolution `upsample.convtr.convtr`."""

    def __init__(self, convtr: CausalConvTranspose1d):
        super().__init__()
        self.convtr = convtr


class Mimi(nn.Module):
    def __init__(self, config: MimiConfig):
        super().__init__()
        self.config = config
        seanet, decoder_seanet = config.seanet, config.decoder_seanet_config
        stride = int(config.encoder_frame_rate / config.frame_rate)
        self.encoder = build_seanet_encoder(seanet)
        self.decoder = build_seanet_decoder(decoder_seanet)
        self.encoder_transformer = ProjectedTransformer(config.transformer)
        self.decoder_transformer = ProjectedTransformer(config.decoder_transformer_config)
        self.quantizer = Quantizer(config.quantizer.dimension, config.quantizer.output_dimension)
        self.downsample = Downsample(CausalConv1d(
            seanet.dimension, config.inner_dim or seanet.dimension, 2 * stride, stride=stride,
            bias=False, pad_mode="replicate",
        ))
        upsample_width = decoder_seanet.dimension
        self.upsample = Upsample(CausalConvTranspose1d(
            config.outer_dim or upsample_width, upsample_width, 2 * stride, stride,
            groups=upsample_width, bias=False,
        ))
        self._decoder_convs = _numbered_convs([self.upsample.convtr, *self.decoder.modules()])
        steps = 1  # a latent frame is one step at the upsampling's input
        for convtr in self._decoder_convs:
            if isinstance(convtr, CausalConvTranspose1d):
                convtr.steps_per_frame = steps
                steps *= convtr.stride
        self._encoder_convs = _numbered_convs([*self.encoder.modules(), self.downsample.conv])

    def new_decoder_state(self, batch: int = 1) -> DecoderState:
        return DecoderState(
            conv_history=[None] * len(self._decoder_convs),
            transformer_window=self.decoder_transformer.new_window(batch),
        )

    def decode(self, latents: torch.Tensor, state: Streams) -> torch.Tensor:
        """Latents [B, T, latent_dim] (denormalised) -> audio [B, channels, T * 1920].

        One stream (`DecoderState`, B = 1), or one stream per row (`DecoderBatch`).
        """
        return self.decode_tail(self.decode_head(latents, state), state)

    def decode_head(
        self, latents: torch.Tensor, state: Streams, tail_layers: int = 0
    ) -> list[torch.Tensor]:
        """`decode` but for the decoder's last `tail_layers` layers: its activations
        there, in pieces of `DECODER_FRAMES_PER_PIECE` frames, for `decode_tail`.

        The two halves touch different parts of a stream's state, so one thread can
        run a call's tail while another runs the next call's head, as long as the
        tails come in order.
        """
        x = self.quantizer.output_proj(latents.transpose(1, 2))
        x = self.upsample.convtr(x, state)
        x = self.decoder_transformer(x, state.transformer_window)
        piece = DECODER_FRAMES_PER_PIECE * (x.shape[-1] // latents.shape[1])
        head = slice(len(self.decoder.model) - tail_layers)
        # The convolutions carry their past from piece to piece, as from call to call.
        return [self.decoder(part, state, head) for part in x.split(piece, dim=-1)]

    def decode_tail(
        self, pieces: list[torch.Tensor], state: Streams, tail_layers: int = 0
    ) -> torch.Tensor:
        """The decoder's last `tail_layers` layers over `decode_head`'s pieces -> audio."""
        tail = slice(len(self.decoder.model) - tail_layers, None)
        audio = [self.decoder(piece, state, tail) for piece in pieces]
        return audio[0] if len(audio) == 1 else torch.cat(audio, dim=-1)

    def voice_encoder_parts(self) -> list[nn.Module]:
        """The modules only `encode` uses (voice cloning)."""
        return [self.encoder, self.encoder_transformer, self.downsample]

    def new_encoder_state(self, batch: int = 1) -> EncoderState:
        return EncoderState(
            conv_history=[None] * len(self._encoder_convs),
            transformer_window=self.encoder_transformer.new_window(batch),
        )

    def encode(self, audio: torch.Tensor, chunk_frames: int = ENCODE_CHUNK_FRAMES) -> torch.Tensor:
        """Audio [B, channels, samples] -> latents [B, frames, latent_dim], a chunk at a time.

        Every stage is causal and carries its past across chunks, so the latents are
        those of one pass over the whole prompt, within float rounding; the memory
        is that of `chunk_frames` frames, whatever the prompt's length.
        """
        frame = self.config.samples_per_frame
        audio = F.pad(audio, (0, -audio.shape[-1] % frame))
        state = self.new_encoder_state(audio.shape[0])
        step = chunk_frames * frame
        return torch.cat([
            self.encode_chunk(audio[..., start : start + step], state)
            for start in range(0, audio.shape[-1], step)
        ], dim=1)

    def encode_chunk(self, audio: torch.Tensor, state: EncoderState) -> torch.Tensor:
        """Audio [B, channels, k * 1920] continuing `state`'s stream -> latents
        [B, k, latent_dim]."""
        x = self.encoder(audio, state)
        x = self.encoder_transformer(x, state.transformer_window)
        latents: torch.Tensor = self.downsample.conv(x, state)
        return latents.transpose(1, 2)
