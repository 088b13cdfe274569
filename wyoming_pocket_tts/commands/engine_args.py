"""Arguments shared by the commands that run the engine (the server, synthesize,
export-voice), and the typed options they become."""

from __future__ import annotations

import argparse
from pathlib import Path

from wyoming_pocket_tts.catalog import load_catalog
from wyoming_pocket_tts.commands.download import add_download_arguments, download_options
from wyoming_pocket_tts.resolve import ModelOptions


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help=f"a catalog model name (default: {load_catalog().default_model}) "
        "or a pocket-tts YAML config path",
    )
    add_quantize_argument(parser)
    add_download_arguments(parser)


def add_quantize_argument(parser: argparse.ArgumentParser) -> None:
    """`--quantize`, for the server and the engine's own subcommands alike."""
    parser.add_argument(
        "--quantize", action="store_true",
        help="int8 weights for FlowLM's transformer (float16 for its flow head on x86): "
        "faster; the audio differs slightly (the transformer's outputs by about 1%%)",
    )


def model_options(
    args: argparse.Namespace,
    *,
    languages: list[str] | None = None,
    voices_dir: Path | None = None,
) -> ModelOptions:
    """The options of `add_model_arguments` (or the server's own), typed; `languages` and
    `voices_dir` for the commands that offer them."""
    return ModelOptions(
        model=args.model,
        languages=tuple(languages or ()),
        quantize=args.quantize,
        download=download_options(args),
        voices_dir=voices_dir,
    )
