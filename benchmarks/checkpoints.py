"""The random-weight model every benchmark builds, stored as the user chooses.

Kyutai's checkpoints store their weights in bfloat16 (every engine computes in
float32), and our engine reads FlowLM's weights from such a file in float16, which
holds them exactly: half the bytes a step. So the benchmarks build their checkpoint
in bfloat16 by default, like the real one; `--weights float32` builds the float32
file the earlier measurements used (FlowLM's weights then stay float32).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.reference_model import BuiltModel

# Names, not torch's dtypes: importing torch here would load it in the benchmarks'
# children before our engine's package has set MKL's and PyTorch's allocation
# settings, which they read as torch loads (engine/cpu/allocator.py).
WEIGHT_DTYPES = ("bfloat16", "float32")


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="english_2026-10", help="pocket-tts config name")
    parser.add_argument(
        "--weights", choices=WEIGHT_DTYPES, default="bfloat16",
        help="how the random checkpoint stores its weights (bfloat16: as Kyutai's do)",
    )
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "wyoming-pocket-tts-bench"
    )


def checkpoint_directory(args: argparse.Namespace, thin: bool = False) -> Path:
    """One directory per build (build_model keeps one model in each)."""
    name = args.model + ("-thin" if thin else "")
    return args.cache / (name if args.weights == "float32" else f"{name}-{args.weights}")


def build_checkpoint(args: argparse.Namespace, thin: bool = False) -> BuiltModel:
    """Build (once; cached) the model `args` names, or its thin twin (benchmarks/limits.py)."""
    import torch

    from tests.support.reference_model import build_model

    return build_model(
        checkpoint_directory(args, thin), base=args.model, thin=thin,
        tokenizer_dir=args.cache / "tokenizers", weights_dtype=getattr(torch, args.weights),
    )
