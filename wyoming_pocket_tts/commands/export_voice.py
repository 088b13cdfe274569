"""`export-voice`: encode an audio prompt once into a voice-state file (reference format)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.commands.options import add_model_arguments, model_options
from wyoming_pocket_tts.engine.cpu.process import prepare_process

HELP = "encode a voice recording into a reusable voice .safetensors file"


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument(
        "audio", type=Path,
        help="voice recording (wav, flac, ogg, mp3, ...): 5 to 30 s of clear speech; "
        "only the first 30 s are used",
    )
    parser.add_argument("output", type=Path, help="voice-state file to write (.safetensors)")


def main(args: argparse.Namespace) -> int:
    if args.output.suffix != ".safetensors":
        print("error: the output file must end in .safetensors", file=sys.stderr)
        return 2
    prepare_process(quantized=args.quantize)  # before torch is imported or threads start
    try:
        model = resolve.load_model(resolve.resolve_model(model_options(args)))
        voice = model.voice_from_audio(args.audio)
        voice.save(args.output, metadata={"model": model.config.name})
    except resolve.LOAD_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    seconds = voice.num_positions / model.frame_rate
    print(f"wrote {args.output} ({seconds:.1f} s of voice prompt)", file=sys.stderr)
    return 0
