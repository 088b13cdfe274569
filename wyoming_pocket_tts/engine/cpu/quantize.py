"""Smaller weights for FlowLM: float16 where it holds the weights exactly; on request
(`--quantize`), an int8 transformer and a float16 flow head.

FlowLM reads its whole weight set once a frame and is bound by memory bandwidth, so
fewer bytes per weight make it faster. Kyutai's checkpoints store their weights in
bfloat16, and every engine computes with them in float32. bfloat16 keeps 8
significant bits, float16 11 over a narrower range, so float16 holds such weights
exactly from 2**-17 to 65504 (below, to within 2**-25, half its smallest step):
fbgemm's float16-weight products, float32 arithmetic, then give the float32 model's
results, to the order of the sums, from half the bytes. `halve_exact_linears` checks
each weight; a checkpoint stored in float32 (random test weights) keeps float32 layers.

int8 weights read a quarter of float32's bytes. Only the transformer's attention and
feed-forward projections are int8, with activations quantized per call (fbgemm on
x86, qnnpack on ARM); PyTorch's int8 weight-only product (`_weight_int8pack_mm`) is
slower than float32 here. Mimi stays in float32 (int8 there is audible as hiss). The
flow head is then a large share of what a step reads, but in int8 it would move the
output latents several times as far from float32 as the int8 transformer does:
float16 weights add almost nothing to that error and still save part of a step.
fbgemm is x86 only: elsewhere the head stays in float32.

The layers are our own (`PrepackedLinear`), and so is their packing: they call the
quantized engine's products and packing operators directly, with torch.ao's
dynamic layers' arithmetic (int8 weights scaled per tensor, symmetric). At one row
per stream, torch.ao's module cost more around the product (its forward's checks,
the operator's dispatch in Python) than a small product itself, and its conversion
(`quantize_dynamic`, deprecated in torch 2.13) packed a dummy weight of each layer's
full size before the real one, doubling an int8 model's loading time.
"""

from __future__ import annotations

import functools
import logging
import platform
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

from .cores import available_cores

_LOGGER = logging.getLogger(__name__)


@functools.cache
def int8_backend() -> str | None:
    """The quantized engine to use here; None (said once in the log) if there is none.

    An engine must pack and multiply a small layer to count: a build can list an
    engine whose operators then fail, and PyTorch deprecates its quantized tensors.
    """
    supported = torch.backends.quantized.supported_engines
    preferred = ("qnnpack",) if platform.machine().lower() in ("aarch64", "arm64") else (
        "fbgemm", "x86", "onednn", "qnnpack"
    )
    backend = next(
        (engine for engine in preferred if engine in supported and _int8_products_work(engine)),
        None,
    )
    if backend is None:
        _LOGGER.warning("int8 quantization is not supported by this PyTorch build: using float32")
    return backend


def _int8_products_work(engine: str) -> bool:
    previous = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = engine
        with torch.inference_mode():
            PrepackedLinear(nn.Linear(16, 8), torch.qint8)(torch.ones(1, 16))
    except (RuntimeError, AttributeError, NotImplementedError) as error:
        _LOGGER.info("the %s engine's int8 products fail here: %s", engine, error)
        return False
    finally:
        torch.backends.quantized.engine = previous
    return True


def quantize_linears(module: nn.Module) -> list[torch.Tensor]:
    """Swap the nn.Linear layers inside `module` for int8 ones in place; return the replaced
    float32 weights (none where int8 is unsupported)."""
    backend = int8_backend()
    if backend is None:
        return []
    torch.backends.quantized.engine = backend
    return _swap_for_dynamic_linears(module, torch.qint8)


def halve_linears(module: nn.Module) -> list[torch.Tensor]:
    """Swap the nn.Linear layers inside `module` for ones with float16 weights (float32
    arithmetic) in place; return the replaced float32 weights (none where unsupported)."""
    if not half_weights_supported():
        return []
    return _swap_for_dynamic_linears(module, torch.float16)


def halve_exact_linears(module: nn.Module) -> list[torch.Tensor]:
    """Like `halve_linears`, but only the layers whose weights float16 holds exactly
    (`float16_holds`): the float32 model's results from half the bytes."""
    if not half_weights_supported():
        return []
    return _swap_for_dynamic_linears(
        module, torch.float16, where=lambda linear: float16_holds(linear.weight)
    )


# Half float16's smallest step (its subnormals are 2**-24 apart): the most rounding
# to the nearest float16 can move a value within float16's range.
FLOAT16_HALF_STEP = 2.0**-25


def float16_holds(weight: torch.Tensor) -> bool:
    """Whether float16 holds every value of `weight` to within `FLOAT16_HALF_STEP`:
    exactly for bfloat16 values from 2**-17 to 65504, and none out of its range."""
    values = weight.detach().float()  # bfloat16 arithmetic here is some 15x slower
    error = (values.half().float() - values).abs().max()
    return bool(error <= FLOAT16_HALF_STEP)  # an infinity or NaN compares False


def _swap_for_dynamic_linears(
    module: nn.Module, dtype: torch.dtype, where: Callable[[nn.Linear], bool] = lambda _: True
) -> list[torch.Tensor]:
    """Swap the nn.Linear layers inside `module` (those `where` accepts) for
    `PrepackedLinear`s with `dtype` weights; return the replaced weights.

    The engine packs a weight on one core, and a large one takes tens of
    milliseconds, so the layers are checked and packed on every core at once.
    (A check is the first read of a weight mapped from the file: its pages come in.)
    """
    places = [
        (parent, name, child)
        for parent in module.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Linear
    ]
    if not places:
        return []
    _products()  # compiled here, not by the packing threads at once

    def convert(linear: nn.Linear) -> PrepackedLinear | None:
        return PrepackedLinear(linear, dtype) if where(linear) else None

    with ThreadPoolExecutor(min(available_cores(), len(places))) as pool:
        converted = list(pool.map(lambda place: convert(place[2]), places))
    replaced = []
    for (parent, name, child), layer in zip(places, converted, strict=True):
        if layer is not None:
            setattr(parent, name, layer)
            replaced.append(child.weight)
    return replaced


def _int8_weight(weight: torch.Tensor) -> torch.Tensor:
    """`weight` in int8, one scale for the whole tensor and zero at zero, as torch.ao's
    dynamic layers quantize it: the largest magnitude maps to 127.5 steps."""
    low, high = torch.aminmax(weight)
    largest = torch.maximum(-low, high)
    scale = (largest / 127.5).clamp(min=torch.finfo(torch.float32).eps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that quantized tensors will go
        return torch.quantize_per_tensor(weight, float(scale), 0, torch.qint8)


# The engine's products as TorchScript functions. Called from Python, an operator first
# asks each argument for `__torch_function__`, and the packed weights (a TorchScript
# object) answer by raising an exception in C++ that Python then clears, on each of a
# step's dozens of calls. A TorchScript function takes its arguments as they come.
_PRODUCTS_SOURCE = """
def int8_product(x: Tensor, packed: __torch__.torch.classes.quantized.LinearPackedParamsBase,
                 reduce_range: bool) -> Tensor:
    return torch.ops.quantized.linear_dynamic(x, packed, reduce_range)

def half_product(x: Tensor,
                 packed: __torch__.torch.classes.quantized.LinearPackedParamsBase) -> Tensor:
    return torch.ops.quantized.linear_dynamic_fp16(x, packed)
"""


@functools.cache
def _products() -> torch.jit.CompilationUnit:
    """`_PRODUCTS_SOURCE` compiled (a few ms), once, when the first layer is packed."""
    return torch.jit.CompilationUnit(_PRODUCTS_SOURCE)


class PrepackedLinear(nn.Module):
    """A linear layer whose weights (and bias) the quantized engine has packed, int8 or
    float16; float32 in and out. The products are the engine's dynamic ones, called
    directly (see the module docstring), through TorchScript (`_PRODUCTS_SOURCE`)
    rather than `torch.ops`, whose Python dispatch costs more than a one-row product.
    """

    def __init__(self, linear: nn.Linear, weight_dtype: torch.dtype):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight_dtype = weight_dtype
        weight = linear.weight.detach().float()
        bias = None if linear.bias is None else linear.bias.detach().float()
        # An opaque object of the engine's: a plain attribute, in no state dict.
        if weight_dtype == torch.qint8:
            self.packed = torch.ops.quantized.linear_prepack(_int8_weight(weight), bias)
            reduce_range = not full_range_activations_exact(torch.backends.quantized.engine)
            self._product = functools.partial(_products().int8_product, reduce_range=reduce_range)
        elif weight_dtype == torch.float16:
            self.packed = torch.ops.quantized.linear_prepack_fp16(weight, bias)
            self._product = _products().half_product
        else:
            raise ValueError(f"no packed linear layer with {weight_dtype} weights")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = self._product(x, self.packed)
        return y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"weights={self.weight_dtype}"
        )


@functools.cache
def full_range_activations_exact(engine: str) -> bool:
    """Whether the quantized engine in use (named `engine`, by which the answer is kept)
    computes int8 products exactly with activations quantized to 8 bits.

    torch.ao's layers quantize activations to 7 bits (`reduce_range`): without VNNI,
    fbgemm sums pairs of 8-bit products in 16 bits, which saturate at full range. CPUs
    with VNNI sum them in 32 bits, and there the eighth bit nearly halves the error
    int8 adds, at the same speed. The worst case tells: 255 times 127 in every pair,
    for one row (a stream) and for several.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that quantized tensors will go
        weights = torch.quantize_per_tensor(torch.ones(64, 256), 1 / 127, 0, torch.qint8)
    packed = torch.ops.quantized.linear_prepack(weights, None)

    def exact_for(rows: int) -> bool:
        inputs = torch.ones(rows, 256)
        outputs = torch.ops.quantized.linear_dynamic(inputs, packed, reduce_range=False)
        return torch.allclose(outputs, torch.full_like(outputs, 256.0))

    exact = exact_for(1) and exact_for(5)
    _LOGGER.debug("int8 activations with the %s engine: %d bits", engine, 8 if exact else 7)
    return exact


@functools.cache
def half_weights_supported() -> bool:
    """Whether the quantized engine in use has float16-weight linear layers (fbgemm's)."""
    try:
        torch.ops.quantized.linear_prepack_fp16(torch.zeros(1, 1), None)
    except RuntimeError:
        _LOGGER.info(
            "float16 weights are not supported by the %s engine: FlowLM's weights stay float32",
            torch.backends.quantized.engine,
        )
        return False
    return True
