"""Optional int8 weights for FlowLM's transformer (`--quantize`).

Per frame, FlowLM reads its whole weight set, so with float32 weights it is bound by
memory bandwidth; int8 weights read a quarter of the bytes. We use PyTorch's dynamic
int8 linear layers (fbgemm on x86, qnnpack on ARM), chosen by measurement: about 4x
faster than float32 per layer on one core, while the int8 weight-only matmul kernel
(`_weight_int8pack_mm`) was several times *slower* than float32 on the same CPU.
Only the transformer's attention and feed-forward projections are quantized: Mimi
stays in float32 (int8 there is audible as hiss), and so do the small heads.
"""

from __future__ import annotations

import functools
import logging
import platform
import warnings

import torch
from torch import nn

_LOGGER = logging.getLogger(__name__)


@functools.cache
def int8_backend() -> str | None:
    """The quantized engine to use here; None (said once in the log) if there is none."""
    supported = torch.backends.quantized.supported_engines
    preferred = ("qnnpack",) if platform.machine().lower() in ("aarch64", "arm64") else (
        "fbgemm", "x86", "onednn", "qnnpack"
    )
    backend = next((engine for engine in preferred if engine in supported), None)
    if backend is None:
        _LOGGER.warning("int8 quantization is not supported by this PyTorch build: using float32")
    return backend


def quantize_linears(module: nn.Module) -> list[torch.Tensor]:
    """Swap the nn.Linear layers inside `module` for int8 ones in place; return the replaced
    float32 weights (none where int8 is unsupported)."""
    backend = int8_backend()
    if backend is None:
        return []
    replaced = [child.weight for child in module.modules() if type(child) is nn.Linear]
    torch.backends.quantized.engine = backend
    with warnings.catch_warnings():
        # The eager-mode quantization API is deprecated in favour of torchao, which has
        # no faster CPU path for this case yet.
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(module, {nn.Linear}, dtype=torch.qint8, inplace=True)
    return replaced
