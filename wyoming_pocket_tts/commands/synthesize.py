"""`synthesize`: speak a text into a WAV file, written frame by frame as it is generated."""

from __future__ import annotations

import argparse
import logging
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from wyoming_pocket_tts import resolve
from wyoming_pocket_tts.commands.options import (
    add_model_arguments,
    add_voices_dir_argument,
    model_options,
)
from wyoming_pocket_tts.engine.cpu.process import prepare_process
from wyoming_pocket_tts.engine.pcm import pcm16
from wyoming_pocket_tts.engine.tempo import MAX_SPEED, MIN_SPEED, TempoStream
from wyoming_pocket_tts.normalize.spoken import (
    Silence,
    SpokenRequest,
    SpokenText,
    TextOptions,
    spoken,
)

if TYPE_CHECKING:
    from wyoming_pocket_tts.engine.model.voice import VoiceState
    from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

HELP = "speak a text into a WAV file"
_LOGGER = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--voice", required=True,
                        help="audio file to clone, voice .safetensors, or the name of a "
                        "predefined voice or of one in --voices-dir")
    add_voices_dir_argument(parser, "folder of custom voices, as the server's --voices-dir")
    parser.add_argument("--text", required=True, help="the text to speak; - reads standard input")
    parser.add_argument("--ssml", action="store_true", help="the text is SSML markup")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="speaking rate, 0.5 to 2.0, the voice's pitch kept (default: 1.0)")
    parser.add_argument("--no-normalize", action="store_true",
                        help="read the text as it is: numbers, units, dates and times are not "
                        "written out in words first")
    parser.add_argument("--output", type=Path, required=True, help="WAV file to write")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature (default: the model's, 0.3); 0 is deterministic")
    parser.add_argument("--eos-threshold", type=float, default=None,
                        help="end-of-speech logit threshold (default: the model's)")
    parser.add_argument("--frames-after-eos", type=int, default=None,
                        help="80 ms frames spoken after end of speech (default: by text length)")
    parser.add_argument("--seed", type=int, default=None, help="random seed for reproducible audio")
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def _frames(
    worker: SynthesisWorker, voice: VoiceState, request: SpokenRequest, options: GenerationOptions
) -> Iterator[np.ndarray]:
    """The request's audio: each text at its rate, each silence as zeros."""
    sample_rate = worker.synthesizer.model.sample_rate
    for piece in request.pieces:
        if isinstance(piece, Silence):
            yield np.zeros(round(piece.seconds * sample_rate), dtype=np.float32)
        elif piece.rate == 1.0:
            yield from worker.stream(voice, piece.text, options)
        else:
            tempo = TempoStream(piece.rate, sample_rate)
            for frame in worker.stream(voice, piece.text, options):
                yield tempo.push(frame)
            yield tempo.flush()


def _write(
    args: argparse.Namespace, synthesizer: Synthesizer, voice: VoiceState, request: SpokenRequest
) -> float:
    """Stream the audio into the file; return its duration in seconds."""
    from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    options = GenerationOptions(
        temperature=args.temperature, eos_threshold=args.eos_threshold,
        frames_after_eos=args.frames_after_eos, seed=args.seed,
    )
    sample_rate = synthesizer.model.sample_rate
    texts = [piece.text for piece in request.pieces if isinstance(piece, SpokenText)]
    progress = not args.quiet and sum(len(synthesizer.chunks(t, options)) for t in texts) > 1
    started = last_report = time.monotonic()
    samples = 0
    partial = args.output.with_name(args.output.name + ".partial")
    try:
        with wave.open(str(partial), "wb") as wav, SynthesisWorker(synthesizer) as worker:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            for frame in _frames(worker, voice, request, options):
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
    if not MIN_SPEED <= args.speed <= MAX_SPEED:  # NaN too
        print(f"error: --speed must be between {MIN_SPEED} and {MAX_SPEED}", file=sys.stderr)
        return 2
    try:
        resolved = resolve.resolve_model(model_options(args, voices_dir=args.voices_dir))
        language = resolved.description.languages[0]
        request = spoken(
            text, language, TextOptions(not args.no_normalize, args.speed), ssml=args.ssml
        )
        if request.warning:
            _LOGGER.warning("%s", request.warning)
        model = resolve.load_model(resolved)
        voice = resolve.load_voice(model, resolved, args.voice)
        seconds = _write(args, Synthesizer(model), voice, request)
    except resolve.LOAD_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"wrote {seconds:.2f} s of audio to {args.output}", file=sys.stderr)
    return 0
