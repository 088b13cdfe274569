"""Arguments and model loading shared by the engine's own subcommands (synthesize, export-voice)."""

from __future__ import annotations

import argparse
from pathlib import Path

from wyoming_pocket_tts.catalog import load_catalog
from wyoming_pocket_tts.commands.download import add_download_arguments, download_options
from wyoming_pocket_tts.download import resolve_model_files, resolve_voice_file
from wyoming_pocket_tts.engine.cpu.allocator import choose_arenas
from wyoming_pocket_tts.engine.cpu.threads import run_on_own_thread
from wyoming_pocket_tts.engine.errors import VoiceError
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.model.voice import VoiceState


def _is_config_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or Path(name).is_file()


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help="a catalog model name (default: english) or a pocket-tts YAML config path",
    )
    add_quantize_argument(parser)
    add_download_arguments(parser)


def add_quantize_argument(parser: argparse.ArgumentParser) -> None:
    """`--quantize`, for the server and the engine's own subcommands alike."""
    parser.add_argument(
        "--quantize", action="store_true",
        help="int8 weights for FlowLM's transformer (float16 for its flow head): faster, "
        "slightly different audio",
    )


def load_model(args: argparse.Namespace) -> PocketTTS:
    """The model named by --model: a YAML with local paths, or a catalog entry's files.

    Downloads run here (Ctrl-C stops them); the load itself on a thread of its own
    with every core, so no long-lived thread keeps OpenMP workers (engine/cpu/threads.py).
    """
    choose_arenas(args.quantize)  # before downloads or loading start threads
    name = args.model or load_catalog().default_model
    if _is_config_path(name):
        return run_on_own_thread(PocketTTS.load, Path(name), quantize=args.quantize)
    files = resolve_model_files(load_catalog().find_model(name), download_options(args))
    return run_on_own_thread(
        PocketTTS.load,
        files.config_path, files.weights_path, files.tokenizer_path, quantize=args.quantize,
    )


def load_voice(model: PocketTTS, voice: str, args: argparse.Namespace) -> VoiceState:
    """A voice given as an audio file, a voice .safetensors, or a predefined voice name
    (loaded like the model, see `load_model`)."""
    path = Path(voice)
    if path.is_file():
        return run_on_own_thread(model.voice, path)
    if path.suffix or "/" in voice:
        raise VoiceError(f"voice file not found: {voice}")
    if _is_config_path(args.model or ""):
        raise VoiceError(
            f"{voice!r} is not a file; predefined voices need a catalog model (--model english)"
        )
    entry = load_catalog().find_model(args.model or load_catalog().default_model)
    return run_on_own_thread(
        model.load_voice, resolve_voice_file(entry, voice, download_options(args))
    )
