"""`synthesize`: speak a text into a WAV file, written frame by frame as it is generated."""

from __future__ import annotations

import argparse
import logging
import sys
import time
import wave
from pathlib import Path
from typing import TYPE_CHECKING

from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.commands.options import (
    add_model_arguments,
    add_voices_dir_argument,
    model_options,
)
from wyoming_pocket_tts.engine.cpu.process import prepare_process
from wyoming_pocket_tts.engine.pcm import pcm16

if TYPE_CHECKING:
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

HELP = "speak a text into a WAV file"
_LOGGER = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--voice", required=True,
                        help="audio file to clone, voice .safetensors, or the name of a "
                        "predefined voice or of one in --voices-dir")
    add_voices_dir_argument(parser, "folder of custom voices, as the server's --voices-dir")
    parser.add_argument("--text", required=True, help="the text to speak; - reads standard input")
    parser.add_argument("--output", type=Path, required=True, help="WAV file to write")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature (default: the model's, 0.3); 0 is deterministic")
    parser.add_argument("--eos-threshold", type=float, default=None,
                        help="end-of-speech logit threshold (default: the model's)")
    parser.add_argument("--frames-after-eos", type=int, default=None,
                        help="80 ms frames spoken after end of speech (default: by text length)")
    parser.add_argument("--seed", type=int, default=None, help="random seed for reproducible audio")
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def _write(args: argparse.Namespace, synthesizer: Synthesizer, voice, text: str) -> float:
    """Stream the audio into the file; return its duration in seconds."""
    from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    options = GenerationOptions(
        temperature=args.temperature, eos_threshold=args.eos_threshold,
        frames_after_eos=args.frames_after_eos, seed=args.seed,
    )
    sample_rate = synthesizer.model.sample_rate
    progress = not args.quiet and len(synthesizer.chunks(text, options)) > 1
    started = last_report = time.monotonic()
    samples = 0
    partial = args.output.with_name(args.output.name + ".partial")
    try:
        with wave.open(str(partial), "wb") as wav, SynthesisWorker(synthesizer) as worker:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            for frame in worker.stream(voice, text, options):
                wav.writeframes(pcm16(frame))
                samples += frame.shape[0]
                if progress and time.monotonic() - last_report > 0.5:
                    last_report = time.monotonic()
                    seconds = samples / sample_rate
                    speed = seconds / (time.monotonic() - started)
                    print(f"\r{seconds:6.1f} s of audio, {speed:.1f}x real time", end="",
                          file=sys.stderr, flush=True)
        partial.replace(args.output)
    finally:
        partial.unlink(missing_ok=True)
        if progress:
            print(file=sys.stderr)
    return samples / sample_rate


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    prepare_process(quantized=args.quantize)  # before torch is imported or threads start
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer

    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        resolved = resolve.resolve_model(model_options(args, voices_dir=args.voices_dir))
        model = resolve.load_model(resolved)
        voice = resolve.load_voice(model, resolved, args.voice)
        seconds = _write(args, Synthesizer(model), voice, text)
    except resolve.LOAD_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"wrote {seconds:.2f} s of audio to {args.output}", file=sys.stderr)
    return 0
