"""`wyoming-pocket-tts download`: fetch a model and its voices ahead of time.

Run it once while online; afterwards the server (and this command) work with
`--local-files-only` or `HF_HUB_OFFLINE=1`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from wyoming_pocket_tts.catalog import CatalogError, load_catalog
from wyoming_pocket_tts.commands.options import (
    add_download_arguments,
    add_model_argument,
    download_options,
)
from wyoming_pocket_tts.download import DownloadError, resolve_model_files, resolve_voice_file

HELP = "download a model and its voices now, so the server can run offline"


def configure_logging() -> None:
    """Show this package's messages (the voice-cloning fallback) as plain lines.

    Only our logger: huggingface_hub prints its own retry warnings, and a root handler
    would print them twice.
    """
    logger = logging.getLogger("wyoming_pocket_tts")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_argument(parser, paths=False)
    parser.add_argument(
        "--voice",
        action="append",
        default=[],
        help="predefined voice to fetch (repeatable; default: the model's default voice)",
    )
    parser.add_argument(
        "--no-voice-cloning",
        action="store_true",
        help="fetch only the ungated weights, which cannot clone voices from audio",
    )
    add_download_arguments(parser)


def main(args: argparse.Namespace) -> int:
    configure_logging()
    options = download_options(args, progress=True)
    try:
        catalog = load_catalog()
        entry = catalog.find_model(args.model or catalog.default_model)
        voices = args.voice or [entry.default_voice]
        for voice in voices:
            entry.voice(voice)  # reject a bad name before any download
        files = resolve_model_files(entry, options, want_voice_cloning=not args.no_voice_cloning)
        voice_paths = {voice: resolve_voice_file(entry, voice, options) for voice in voices}
    except (CatalogError, DownloadError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    cloning = "with voice cloning" if files.has_voice_cloning else "without voice cloning"
    print(f"model {entry.name} ({cloning})")
    print(f"  weights    {files.weights_path}")
    print(f"  tokenizer  {files.tokenizer_path}")
    for voice, path in voice_paths.items():
        print(f"  voice {voice:<10} {path}")
    return 0
