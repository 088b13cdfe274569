"""Float32 linear and convolution layers with their weights pre-arranged for oneDNN (x86 CPUs).

PyTorch's float32 `F.linear` calls MKL, whose product with a handful of rows costs
almost as much as one call per row on some x86 CPUs; with the weights in oneDNN's
blocked layout, a step for several streams costs little more than one. Those
few-row products are our hot ones: FlowLM stepping concurrent streams, the prompt,
and Mimi's transformer (16 positions per frame).
Results equal `F.linear`'s to float rounding.

Mimi's decoder convolutions get the same treatment (`PackedConv1d`), and with it their
activations stay channels-last ([B, C, T] views of [B, T, C] memory, the decoder
transformer's own layout), so no call converts its input or output and a frame
decodes faster than with torch's own layers.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import platform
import threading
from collections.abc import Callable
from typing import TypeVar, cast

import torch
from torch import nn
from torch.nn import functional as F

_LOGGER = logging.getLogger(__name__)

# oneDNN compiles and keeps a kernel for each row count it meets, and
# text prompts come in every length. Above EXACT_ROWS (one row per concurrent stream),
# row counts are padded up to a multiple of ROW_STEP: a few shapes, soon all compiled,
# for at most ROW_STEP - 1 rows of extra work.
EXACT_ROWS = 8
ROW_STEP = 4


# The layers that can be packed.
Layer = TypeVar("Layer", nn.Linear, nn.Conv1d | nn.ConvTranspose1d)


def padded_rows(rows: int) -> int:
    """How many rows oneDNN is given for `rows` rows of input."""
    return rows if rows <= EXACT_ROWS else -(-rows // ROW_STEP) * ROW_STEP


class PackedLinear(nn.Module):
    """An nn.Linear whose weight lives in oneDNN's layout (no float copy is kept)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        # A plain attribute: the opaque tensor is not part of any state dict.
        self.packed_weight = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        self.bias = linear.bias

    def forward(self, x: torch.Tensor, gelu_tanh: bool = False) -> torch.Tensor:
        """x @ W.T + b; with `gelu_tanh`, its tanh-approximated GELU, which oneDNN applies
        as the product's results are written (one pass fewer over them)."""
        rows = x.reshape(-1, self.in_features)
        count = rows.shape[0]
        padded = padded_rows(count)
        if padded != count:
            rows = F.pad(rows, (0, 0, 0, padded - count))
        activation, algorithm = ("gelu", "tanh") if gelu_tanh else ("none", "")
        y: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
            rows, self.packed_weight, self.bias, activation, [], algorithm
        )
        if padded != count:
            y = y[:count]
        return y.view(*x.shape[:-1], self.out_features)


class PackedConv1d(nn.Module):
    """An nn.Conv1d or nn.ConvTranspose1d (no padding) with its weight in oneDNN's layouts.

    Takes and returns [B, C, T]; channels-last input (channel stride 1) is the fast
    case, and the output is channels-last, ready for the next such layer. oneDNN
    sees the 1-d convolution as a 2-d one of height 1.

    oneDNN chooses its kernel, and the weight layout that kernel reads, by the input's
    shape, and a weight in any other layout is laid out again on every call (on AVX2
    CPUs, for some frame counts, by a generic reorder far slower than the convolution
    itself). So each input shape gets the layout oneDNN asks for it, made at its first
    call; shapes that ask for the same layout (most do) share one copy, so the
    decoder's shapes need one to three layouts a layer. A new shape's first call
    costs tens of milliseconds more than later ones (the warm-up pays it).
    """

    def __init__(self, conv: nn.Conv1d | nn.ConvTranspose1d):
        super().__init__()
        if conv.padding != (0,) or getattr(conv, "output_padding", (0,)) != (0,):
            raise ValueError("only unpadded convolutions can be packed")
        self.transposed = isinstance(conv, nn.ConvTranspose1d)
        self.stride = [1, conv.stride[0]]
        self.dilation = [1, conv.dilation[0]]
        self.groups = conv.groups
        self.bias = conv.bias
        # Until the first call: a layout for no shape in particular, the source of the
        # others. Only layouts some input shape uses are kept after that.
        self._layouts = [self._laid_out(conv.weight.detach().unsqueeze(2))]
        self._by_shape: dict[torch.Size, torch.Tensor] = {}
        self._lock = threading.Lock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.unsqueeze(2)
        weight = self._by_shape.get(x.shape)
        if weight is None:
            weight = self._add_layout(x.shape)
        y: torch.Tensor
        if self.transposed:
            y = torch.ops.mkldnn._convolution_transpose_pointwise(
                x, weight, self.bias, [0, 0], [0, 0], self.stride, self.dilation,
                self.groups, "none", [], "",
            )
        else:
            y = torch.ops.mkldnn._convolution_pointwise(
                x, weight, self.bias, [0, 0], self.stride, self.dilation, self.groups,
                "none", [], "",
            )
        return y.squeeze(2)

    def _add_layout(self, shape: torch.Size) -> torch.Tensor:
        """The weight laid out as oneDNN wants it for inputs of `shape` ([B, C, 1, T])."""
        with self._lock:
            if shape in self._by_shape:  # the other decoding thread just made it
                return self._by_shape[shape]
            candidate = self._laid_out(self._plain_weight(), shape)
            weight = next(
                (kept for kept in self._layouts if same_layout(kept, candidate)), candidate
            )
            self._by_shape[shape] = weight
            used = {id(layout) for layout in self._by_shape.values()}
            self._layouts = [layout for layout in [*self._layouts, candidate] if id(layout) in used]
            return weight

    def _laid_out(self, plain: torch.Tensor, shape: torch.Size | None = None) -> torch.Tensor:
        sizes = {} if shape is None else {"input_size": list(shape)}
        laid_out: torch.Tensor
        if self.transposed:
            laid_out = torch.ops.mkldnn._reorder_convolution_transpose_weight(
                plain, [0, 0], [0, 0], self.stride, self.dilation, self.groups, **sizes
            )
        else:
            laid_out = torch.ops.mkldnn._reorder_convolution_weight(
                plain, [0, 0], self.stride, self.dilation, self.groups, **sizes
            )
        return laid_out

    def _plain_weight(self) -> torch.Tensor:
        """The weight as torch lays it out ([out, in/groups, 1, k], or [in, out/groups,
        1, k] transposed), read back from a kept layout: no plain copy stays in memory."""
        dense = self._layouts[0].to_dense()
        if not self.transposed:
            return dense
        # oneDNN keeps a transposed convolution's weight as [out, in/groups, ...].
        groups = self.groups
        per_group = torch.unflatten(dense, 0, (groups, dense.shape[0] // groups))
        return per_group.transpose(1, 2).flatten(0, 1).contiguous()


def same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two oneDNN-laid-out copies of one weight share their layout: their bytes
    are then identical (oneDNN offers no other comparison of opaque tensors)."""
    return torch.ops.mkldnn._nbytes(a) == torch.ops.mkldnn._nbytes(b) and torch.equal(
        _bytes_of(a), _bytes_of(b)
    )


def _bytes_of(laid_out: torch.Tensor) -> torch.Tensor:
    """The memory of an opaque oneDNN tensor, seen (not copied) as bytes."""
    size = torch.ops.mkldnn._nbytes(laid_out)
    memory = (ctypes.c_char * size).from_address(torch.ops.mkldnn.data_ptr(laid_out))
    return torch.frombuffer(memory, dtype=torch.uint8)


@functools.cache
def packing_supported() -> bool:
    """x86 with oneDNN, and packed layers that agree with torch's own on a small check."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    if not torch.backends.mkldnn.is_available():
        return False
    linear = nn.Linear(64, 48)
    conv = nn.Conv1d(16, 24, 3, stride=2, dilation=2)
    transposed = nn.ConvTranspose1d(16, 8, 4, stride=2)
    rows, signal = torch.randn(3, 64), torch.randn(2, 16, 20)
    try:
        with torch.inference_mode():
            agrees = all(
                torch.allclose(packed(x), layer(x), rtol=1e-4, atol=1e-5)
                for packed, layer, x in (
                    (PackedLinear(linear), linear, rows),
                    (PackedConv1d(conv), conv, signal),
                    (PackedConv1d(transposed), transposed, signal),
                )
            )
    except (RuntimeError, AttributeError) as error:  # op missing or unsupported in this build
        _LOGGER.info("oneDNN-packed layers unavailable (%s): using torch's float32 layers", error)
        return False
    if not agrees:
        _LOGGER.warning("oneDNN-packed layers disagree with torch's: not using them")
    return agrees


def pack_linears(module: nn.Module) -> list[torch.Tensor]:
    """Swap each nn.Linear inside `module` for a PackedLinear; return the replaced weights.

    Returns an empty list (and changes nothing) where packing is unsupported.
    """
    return _swap(module, (nn.Linear,), PackedLinear)


def pack_convolutions(module: nn.Module) -> list[torch.Tensor]:
    """Swap each nn.Conv1d and nn.ConvTranspose1d inside `module` for a PackedConv1d;
    return the replaced weights (none where packing is unsupported)."""
    kinds: tuple[type[nn.Conv1d | nn.ConvTranspose1d], ...] = (nn.Conv1d, nn.ConvTranspose1d)
    return _swap(module, kinds, PackedConv1d)


def _swap(
    module: nn.Module, kinds: tuple[type[Layer], ...], packed: Callable[[Layer], nn.Module]
) -> list[torch.Tensor]:
    if not packing_supported():
        return []
    replaced = []
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) in kinds:
                layer = cast(Layer, child)  # one of `kinds`
                replaced.append(layer.weight)
                setattr(parent, name, packed(layer))
    return replaced

