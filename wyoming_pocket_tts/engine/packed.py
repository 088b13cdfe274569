"""Float32 linear layers with their weights pre-arranged for oneDNN (x86 CPUs).

PyTorch's float32 `F.linear` calls MKL, whose product with a handful of rows costs
almost as much as one call per row on some x86 CPUs. On the AMD EPYC we measure on,
a FlowLM step for 2 streams took 2x one stream's time and 4 streams 2.4x; with the
weights in oneDNN's blocked layout, 1.3x and 1.6x, the text prompt's pass 30% less
and one row no slower. Those few-row products are our hot ones: FlowLM stepping
concurrent streams, the prompt, and Mimi's transformer (16 positions per frame).
Results equal `F.linear`'s to float rounding (about 1e-6 relative).
"""

from __future__ import annotations

import functools
import logging
import platform

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


@functools.cache
def packing_supported() -> bool:
    """x86 with oneDNN, and a packed layer that agrees with F.linear on a small check."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        return False
    try:
        linear = nn.Linear(64, 48)
        x = torch.randn(3, 64)
        with torch.inference_mode():
            agrees = torch.allclose(PackedLinear(linear)(x), linear(x), rtol=1e-4, atol=1e-5)
    except (RuntimeError, AttributeError) as error:  # op missing or unsupported in this build
        _LOGGER.info("oneDNN linear layers unavailable (%s): using float32 F.linear", error)
        return False
    if not agrees:
        _LOGGER.warning("oneDNN linear layers disagree with F.linear: not using them")
    return agrees


def pack_linears(module: nn.Module) -> list[torch.Tensor]:
    """Swap each nn.Linear inside `module` for a PackedLinear; return the replaced weights.

    Returns an empty list (and changes nothing) where packing is unsupported.
    """
    if not packing_supported():
        return []
    replaced = []
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                replaced.append(child.weight)
                setattr(parent, name, PackedLinear(child))
    return replaced

