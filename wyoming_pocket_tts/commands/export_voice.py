"""`export-voice`: encode an audio prompt once into a voice-state file (reference format)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wyoming_pocket_tts.catalog import CatalogError
from wyoming_pocket_tts.commands.engine_args import add_model_arguments, load_model
from wyoming_pocket_tts.download import DownloadError
from wyoming_pocket_tts.engine.errors import EngineError

HELP = "encode a voice recording into a reusable voice .safetensors file"


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("audio", type=Path, help="voice recording (wav, flac, ogg, mp3, ...)")
    parser.add_argument("output", type=Path, help="voice-state file to write (.safetensors)")


def main(args: argparse.Namespace) -> int:
    if args.output.suffix != ".safetensors":
        print("error: the output file must end in .safetensors", file=sys.stderr)
        return 2
    try:
        model = load_model(args)
        voice = model.voice_from_audio(args.audio)
        voice.save(args.output, metadata={"model": model.config.name})
    except (EngineError, CatalogError, DownloadError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    seconds = voice.num_positions / model.frame_rate
    print(f"wrote {args.output} ({seconds:.1f} s of voice prompt)", file=sys.stderr)
    return 0
