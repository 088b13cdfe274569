"""`wyoming-pocket-tts list-voices`: the voices a server would offer, and which are on disk."""

from __future__ import annotations

import argparse
import sys

from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.commands.options import (
    add_download_arguments,
    add_model_argument,
    add_voices_dir_argument,
    download_options,
)
from wyoming_pocket_tts.download import find_local
from wyoming_pocket_tts.voices.store import VoiceKind

HELP = "list a model's predefined voices and which are downloaded, and the custom voices"


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_argument(parser)
    add_voices_dir_argument(
        parser, "folder of custom voices, as the server's --voices-dir: listed too"
    )
    add_download_arguments(parser)


def main(args: argparse.Namespace) -> int:
    options = resolve.ModelOptions(
        model=args.model, download=download_options(args), voices_dir=args.voices_dir
    )
    try:
        entry = resolve.catalog_entry(options)
    except resolve.LOAD_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    sources = resolve.voice_sources(entry, args.voices_dir)()
    if entry is None:
        print(f"No predefined voices: {args.model} is not a catalog model")
    else:
        width = max(len(name) for name in entry.voice_names)
        print(f"Predefined voices of {entry.name}:")
        for voice in entry.voices:
            state = "installed" if find_local(voice.state, options.download) else "not downloaded"
            default = " (default)" if voice.name == entry.default_voice else ""
            replaced = "" if sources[voice.name].kind is VoiceKind.PREDEFINED else " (replaced)"
            print(
                f"  {voice.name:<{width}}  {voice.language}  {state:<14}  "
                f"{voice.description}{default}{replaced}"
            )
    custom = {name: s for name, s in sources.items() if s.kind is not VoiceKind.PREDEFINED}
    if args.voices_dir is not None:
        folder = args.voices_dir
        print(f"Custom voices in {folder}:" if custom else f"No voices in {folder}")
        width = max((len(name) for name in custom), default=0)
        for name in sorted(custom):
            print(f"  {name:<{width}}  {custom[name].description}")
    return 0
