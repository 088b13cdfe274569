"""`wyoming-pocket-tts download`: fetch a model and its voices ahead of time.

Run it once while online; afterwards the server (and this command) work with
`--local-files-only` or `HF_HUB_OFFLINE=1`. The options shared by every command that
reads model files (`--data-dir`, `--download-dir`, `--local-files-only`) are defined here.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from wyoming_pocket_tts.catalog import CatalogError, load_catalog
from wyoming_pocket_tts.download import (
    DownloadError,
    DownloadOptions,
    resolve_model_files,
    resolve_voice_file,
)

HELP = "download a model and its voices now, so the server can run offline"


def add_download_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        action="append",
        default=[],
        help="folder searched first for model and voice files, as DIR/<owner>/<repo>/<path> "
        "or as a Hugging Face cache (repeatable; never written to)",
    )
    parser.add_argument(
        "--download-dir",
        type=Path,
        default=None,
        help="Hugging Face cache folder that downloads go to (default: HF_HUB_CACHE, "
        "usually ~/.cache/huggingface/hub)",
    )
    parser.add_argument(
        "--local-files-only",
        action="store_true",
        help="never use the network; fail with a clear message when a file is missing "
        "(HF_HUB_OFFLINE=1 does the same)",
    )


def download_options(args: argparse.Namespace, *, progress: bool = False) -> DownloadOptions:
    return DownloadOptions(
        data_dirs=tuple(args.data_dir),
        download_dir=args.download_dir,
        local_files_only=args.local_files_only,
        progress=progress,
    )


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
    parser.add_argument(
        "--model",
        default=load_catalog().default_model,
        help="catalog name of the model (default: %(default)s; `list-models` shows all)",
    )
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
        entry = load_catalog().find_model(args.model)
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
