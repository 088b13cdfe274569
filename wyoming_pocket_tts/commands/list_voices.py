"""`wyoming-pocket-tts list-voices`: a model's predefined voices, and which are on disk."""

from __future__ import annotations

import argparse
import sys

from wyoming_pocket_tts.catalog import CatalogError, load_catalog
from wyoming_pocket_tts.commands.download import add_download_arguments, download_options
from wyoming_pocket_tts.download import find_local

HELP = "list a model's predefined voices and which are downloaded"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=load_catalog().default_model,
        help="catalog name of the model (default: %(default)s)",
    )
    add_download_arguments(parser)


def main(args: argparse.Namespace) -> int:
    try:
        entry = load_catalog().find_model(args.model)
    except CatalogError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    options = download_options(args)
    width = max(len(name) for name in entry.voice_names)
    print(f"Predefined voices of {entry.name}:")
    for voice in entry.voices:
        state = "installed" if find_local(voice.state, options) else "not downloaded"
        default = " (default)" if voice.name == entry.default_voice else ""
        print(
            f"  {voice.name:<{width}}  {voice.language}  {state:<14}  {voice.description}{default}"
        )
    return 0
