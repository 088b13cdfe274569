"""Loading Kyutai's single-file safetensors checkpoints into our modules.

Our module tree is named like the checkpoint, so loading is a strict key match:
a missing, unexpected or misshaped tensor is an error that names it. Modules are
built on the `meta` device and the file's tensors are assigned to them directly,
so start-up never holds a random initialisation and the weights at the same time.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import safetensors
import torch
from torch import nn

from ..errors import CheckpointError

# Tensors only voice cloning needs: the ungated checkpoints may leave them out.
VOICE_CLONING_PREFIXES = (
    "mimi.encoder.",
    "mimi.encoder_transformer.",
    "mimi.downsample.",
    "flow_lm.speaker_proj_weight",
)


def _describe(keys: Iterable[str], limit: int = 5) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:limit])
    return shown + (f" (and {len(keys) - limit} more)" if len(keys) > limit else "")


def load_checkpoint(model: nn.Module, path: Path) -> set[str]:
    """Assign the tensors of `path` to `model` (built on `meta`); return missing optional keys.

    Tensors keep the file's dtype (Kyutai's store bfloat16), still mapped from the
    file: the caller makes each layer's working form from them, then casts what is
    left to float32 (`cast_to_float32`). Only tensors under VOICE_CLONING_PREFIXES may
    be missing; they are then left on `meta` and their names returned, so the caller
    can disable voice cloning.
    """
    expected = model.state_dict()
    try:
        handle = safetensors.safe_open(str(path), framework="pt", device="cpu")
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except Exception as error:  # safetensors raises its own error types for bad headers
        raise CheckpointError(f"{path} is not a readable safetensors file: {error}") from error
    with handle:
        present = set(handle.keys())
        unexpected = present - expected.keys()
        missing = expected.keys() - present
        if unexpected:
            raise CheckpointError(
                f"{path} has tensors this model configuration does not: {_describe(unexpected)}; "
                "is the model configuration the one these weights were made for?"
            )
        required_missing = {k for k in missing if not k.startswith(VOICE_CLONING_PREFIXES)}
        if required_missing:
            raise CheckpointError(f"{path} lacks required tensors: {_describe(required_missing)}")
        loaded: dict[str, torch.Tensor] = {}
        for key in present:
            tensor = handle.get_tensor(key)
            if tensor.shape != expected[key].shape:
                raise CheckpointError(
                    f"{path}: tensor {key} has shape {tuple(tensor.shape)}, "
                    f"the model configuration expects {tuple(expected[key].shape)}"
                )
            loaded[key] = tensor
    model.load_state_dict(loaded, strict=False, assign=True)
    return missing


def cast_to_float32(module: nn.Module, path: Path, besides: Iterable[nn.Module] = ()) -> None:
    """Cast `module`'s floating tensors stored narrower in `path` (bfloat16) to float32,
    the engine's arithmetic, and let the file's pages behind them go; not those of the
    modules `besides` (see `float32_while`)."""
    kept = {id(tensor) for part in besides for tensor in _tensors(part)}
    narrower = [
        (owner, table, name, tensor) for owner, table, name, tensor in _narrower_tensors(module)
        if id(tensor) not in kept
    ]
    _assign_float32(narrower)
    release_file_pages([tensor for *_, tensor in narrower], path)


@contextlib.contextmanager
def float32_while(modules: Iterable[nn.Module], path: Path) -> Iterator[None]:
    """`modules` compute in float32 inside the block, their weights kept as `path`
    stores them between uses.

    For the voice encoder, used once per voice: from a bfloat16 file its weights take
    half the memory between voices (and none of it once their pages are let go after
    each voice), instead of a float32 copy kept for good. Not thread-safe: one block
    at a time per module.
    """
    narrower = [entry for module in modules for entry in _narrower_tensors(module)]
    _assign_float32(narrower)
    try:
        yield
    finally:
        for owner, table, name, tensor in narrower:
            getattr(owner, table)[name] = tensor


def _tensors(module: nn.Module) -> Iterator[torch.Tensor]:
    yield from module.parameters()
    yield from module.buffers()


def _narrower_tensors(module: nn.Module) -> list[tuple[nn.Module, str, str, torch.Tensor]]:
    """(owner, "_parameters" or "_buffers", name, tensor) of every floating tensor of
    `module` that is not float32."""
    return [
        (owner, table, name, tensor)
        for owner in module.modules()
        for table in ("_parameters", "_buffers")
        for name, tensor in getattr(owner, table).items()
        if tensor is not None and tensor.is_floating_point() and tensor.dtype != torch.float32
    ]


def _assign_float32(entries: list[tuple[nn.Module, str, str, torch.Tensor]]) -> None:
    for owner, table, name, tensor in entries:
        cast = tensor.detach().float()
        getattr(owner, table)[name] = nn.Parameter(cast, False) if table == "_parameters" else cast


def release_file_pages(tensors: Iterable[torch.Tensor], path: Path) -> int:
    """Drop the resident checkpoint pages behind weights that were converted; bytes dropped.

    The checkpoint is mapped into memory, so a float32 weight replaced by an int8 or
    re-laid-out copy leaves the pages it was read from counted in the process's
    memory for as long as the file stays mapped. Those pages are clean copies of the
    file: telling the kernel it may drop them (MADV_DONTNEED) loses nothing, and a
    later read would fetch them from the file again. Only whole pages inside the
    file's own mappings are touched. Linux only; elsewhere nothing happens.
    """
    mapped = _mapped_ranges(path)
    madvise = _madvise()
    if not mapped or madvise is None:
        return 0
    page = mmap.PAGESIZE
    released = 0
    for tensor in tensors:
        first = tensor.data_ptr()
        last = first + tensor.numel() * tensor.element_size()
        if not any(low <= first and last <= high for low, high in mapped):
            continue  # not read from the file (e.g. cast from bfloat16): not ours to drop
        start, end = -(-first // page) * page, last // page * page
        if end <= start:
            continue
        if madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED) == 0:
            released += end - start
    return released


_MADV_DONTNEED = 4


def _mapped_ranges(path: Path) -> list[tuple[int, int]]:
    """Address ranges where this process maps `path` (from /proc/self/maps)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    target = str(Path(path).resolve())
    ranges = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == target:
            low, high = fields[0].split("-")
            ranges.append((int(low, 16), int(high, 16)))
    return ranges


def _madvise() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function
