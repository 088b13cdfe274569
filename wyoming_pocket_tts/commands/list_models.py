"""`wyoming-pocket-tts list-models`: every catalog model, and which are on disk."""

from __future__ import annotations

import argparse

from wyoming_pocket_tts.catalog import load_catalog
from wyoming_pocket_tts.commands.options import add_download_arguments, download_options
from wyoming_pocket_tts.download import installed

HELP = "list the models this server can run and which are downloaded"


def configure(parser: argparse.ArgumentParser) -> None:
    add_download_arguments(parser)


def main(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    options = download_options(args)
    width = max(len(name) for name in catalog.model_names)
    for entry in catalog.models:
        if installed([entry.weights, entry.tokenizer], options):
            state = "installed, voice cloning"
        elif installed([entry.weights_without_cloning, entry.tokenizer], options):
            state = "installed"
        else:
            state = "not downloaded"
        default = " (default)" if entry.name == catalog.default_model else ""
        print(f"{entry.name:<{width}}  {entry.language}  {state:<24}  {entry.description}{default}")
    return 0
