"""Float32 linear and convolution layers with their weights pre-arranged for oneDNN (x86 CPUs).

PyTorch's float32 `F.linear` calls MKL, whose product with a handful of rows costs
almost as much as one call per row on some x86 CPUs. On the AMD EPYC we measure on,
a FlowLM step for 2 streams took 2x one stream's time and 4 streams 2.4x; with the
weights in oneDNN's blocked layout, 1.3x and 1.6x, the text prompt's pass 30% less
and one row no slower. Those few-row products are our hot ones: FlowLM stepping
concurrent streams, the prompt, and Mimi's transformer (16 positions per frame).
Results equal `F.linear`'s to float rounding (about 1e-6 relative).

Mimi's decoder convolutions get the same treatment (`PackedConv1d`), and with it their
activations stay channels-last ([B, C, T] views of [B, T, C] memory, the decoder
transformer's own layout), so no call converts its input or output. Measured on
the same CPU, each on its real shapes: the decoder's twelve convolutions took
0.42-0.97x torch's time (all together 0.65-0.69x at 8 frames a call, 0.55-0.59x at
one frame), a decoded frame 0.81-0.92x, and a paragraph with int8 FlowLM went from
3.8x to 4.3x real time (two models side by side in one process, alternating).
"""

from __future__ import annotations

import functools
import logging
import platform
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

_LOGGER = logging.getLogger(__name__)

# oneDNN compiles a kernel for each row count it meets (about 1 ms and 0.6 MB each), and
# text prompts come in every length. Above EXACT_ROWS (one row per concurrent stream),
# row counts are padded up to a multiple of ROW_STEP: a few shapes, soon all compiled,
# for at most ROW_STEP - 1 rows of extra work.
EXACT_ROWS = 8
ROW_STEP = 4


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        count = rows.shape[0]
        padded = padded_rows(count)
        if padded != count:
            rows = F.pad(rows, (0, 0, 0, padded - count))
        y = torch.ops.mkldnn._linear_pointwise(rows, self.packed_weight, self.bias, "none", [], "")
        if padded != count:
            y = y[:count]
        return y.view(*x.shape[:-1], self.out_features)


class PackedConv1d(nn.Module):
    """An nn.Conv1d or nn.ConvTranspose1d (no padding) with its weight in oneDNN's layout.

    Takes and returns [B, C, T]; channels-last input (channel stride 1) is the fast
    case, and the output is channels-last, ready for the next such layer. oneDNN
    sees the 1-d convolution as a 2-d one of height 1.
    """

    def __init__(self, conv: nn.Conv1d | nn.ConvTranspose1d):
        super().__init__()
        if conv.padding != (0,) or getattr(conv, "output_padding", (0,)) != (0,):
            raise ValueError("only unpadded convolutions can be packed")
        self.transposed = isinstance(conv, nn.ConvTranspose1d)
        self.stride = [1, conv.stride[0]]
        self.dilation = [1, conv.dilation[0]]
        self.groups = conv.groups
        weight = conv.weight.detach().unsqueeze(2)
        if self.transposed:
            self.packed_weight = torch.ops.mkldnn._reorder_convolution_transpose_weight(
                weight, [0, 0], [0, 0], self.stride, self.dilation, self.groups
            )
        else:
            self.packed_weight = torch.ops.mkldnn._reorder_convolution_weight(
                weight, [0, 0], self.stride, self.dilation, self.groups
            )
        self.bias = conv.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.unsqueeze(2)
        if self.transposed:
            y = torch.ops.mkldnn._convolution_transpose_pointwise(
                x, self.packed_weight, self.bias, [0, 0], [0, 0], self.stride, self.dilation,
                self.groups, "none", [], "",
            )
        else:
            y = torch.ops.mkldnn._convolution_pointwise(
                x, self.packed_weight, self.bias, [0, 0], self.stride, self.dilation, self.groups,
                "none", [], "",
            )
        return y.squeeze(2)


@functools.cache
def packing_supported() -> bool:
    """x86 with oneDNN, and packed layers that agree with torch's own on a small check."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
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
    return _swap(module, (nn.Conv1d, nn.ConvTranspose1d), PackedConv1d)


def _swap(
    module: nn.Module, kinds: tuple[type[nn.Module], ...], packed: Callable[[nn.Module], nn.Module]
) -> list[torch.Tensor]:
    if not packing_supported():
        return []
    replaced = []
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) in kinds:
                replaced.append(child.weight)
                setattr(parent, name, packed(child))
    return replaced

