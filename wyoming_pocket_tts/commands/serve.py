"""`wyoming-pocket-tts` (no subcommand): the Wyoming text-to-speech server.

Parse, build, hand over: this module reads the options (from the command line or the
environment, commands/options.py), checks them and turns them into a `ServerConfig`,
sets the process up and loads the model, then hands both to `server.running`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from urllib.parse import urlparse

from wyoming_pocket_tts import __version__, resolve, studio
from wyoming_pocket_tts.catalog import CatalogError
from wyoming_pocket_tts.commands.options import (
    ENV_PREFIX,
    add_download_arguments,
    add_models_argument,
    add_quantize_argument,
    add_threads_argument,
    add_voices_dir_argument,
    defaults_from_environment,
    download_options,
)
from wyoming_pocket_tts.engine.cpu.process import prepare_process
from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
from wyoming_pocket_tts.engine.tempo import MAX_SPEED, MIN_SPEED
from wyoming_pocket_tts.normalize.spoken import TextOptions
from wyoming_pocket_tts.server.config import ServerConfig, StudioConfig
from wyoming_pocket_tts.server.running import run_server

_LOGGER = logging.getLogger(__name__)

HELP = "run the Wyoming text-to-speech server (what runs when no subcommand is given)"
DEFAULT_URI = "tcp://0.0.0.0:10200"
#: A longer pause would hold a listener's audio back for nothing.
MAX_SENTENCE_SILENCE = 10.0


# ---------------------------------------------------------------------------
# Options


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--uri",
        default=DEFAULT_URI,
        help="where to listen: tcp://HOST:PORT, unix://PATH or stdio:// (default: %(default)s)",
    )
    add_models_argument(parser)
    parser.add_argument(
        "--language",
        help="the language of a model given as a YAML path without LANG= (default: en)",
    )
    parser.add_argument(
        "--max-loaded-models",
        type=int,
        default=2,
        help="models kept in memory at once; the least recently used language's goes "
        "first, never the first --model's (default: %(default)s)",
    )
    parser.add_argument(
        "--preload-model",
        action="append",
        default=[],
        metavar="LANG",
        help="load this language's model at startup, not on its first request (repeatable)",
    )
    parser.add_argument(
        "--voice",
        help="default voice of the first --model's language: a name (predefined or in "
        "--voices-dir) or an audio / .safetensors file (default: the model's default voice)",
    )
    parser.add_argument(
        "--preload-voice",
        action="append",
        default=[],
        help="load this voice at startup too (repeatable)",
    )
    add_voices_dir_argument(
        parser,
        "folder of custom voices: audio files to clone and .safetensors voice states, "
        "each named by its file name without extension, for the first --model's language "
        "(other languages: in a subfolder named by the language's code, such as fr/); "
        "read again on every request and every Describe",
    )
    add_download_arguments(parser)
    parser.add_argument(
        "--max-loaded-voices",
        type=int,
        default=8,
        help="voices kept in memory at once; the least recently used goes first, never the "
        "default voice (default: %(default)s)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        help="sampling temperature; 0 is deterministic (default: the model's, 0.3)",
    )
    parser.add_argument(
        "--sentence-silence",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="seconds of silence after each sentence (default: %(default)s)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="speaking rate, 0.5 to 2.0, with the voice's pitch kept (default: %(default)s, "
        "the model's own pace)",
    )
    parser.add_argument(
        "--no-normalize",
        action="store_true",
        help="read texts as they are sent: numbers, units, dates and times are not written "
        "out in words first",
    )
    add_quantize_argument(parser)
    add_threads_argument(parser)
    # For tests and experiments: the end-of-speech decision threshold.
    parser.add_argument("--eos-threshold", type=float, help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-streaming",
        action="store_true",
        help="do not offer text streaming (synthesize-start/chunk/stop) to clients",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=32,
        help="connections served at once; over it, a newcomer takes the place of the "
        "connection that has waited longest on its client (silent, half an event, or not "
        "reading its audio); with none, Describe is still answered and anything else gets "
        "an error, then the connection is closed (default: %(default)s)",
    )
    parser.add_argument(
        "--max-text-chars",
        type=int,
        default=10_000,
        help="most characters of text per request, a Synthesize or a whole text stream; "
        "a longer one gets an error and the connection is closed (default: %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        help="seconds a client may take to finish sending an event, and that a connection "
        "with no request in flight may stay silent, before it is closed (default: %(default)s)",
    )
    parser.add_argument(
        "--stream-timeout",
        type=float,
        default=120.0,
        help="seconds an open text stream may send no text once all it sent is spoken, "
        "before the connection is closed (default: %(default)s)",
    )
    parser.add_argument(
        "--zeroconf",
        nargs="?",
        const="",
        metavar="NAME",
        help="announce the server on the local network for Home Assistant to discover "
        "(tcp:// only), optionally under NAME",
    )
    studio.add_arguments(parser)
    parser.add_argument("--debug", action="store_true", help="log DEBUG messages")
    parser.add_argument("--log-format", default=logging.BASIC_FORMAT, help="format of log messages")
    parser.add_argument("--version", action="version", version=__version__)
    parser.epilog = (
        f"Every option --foo-bar can also be set with the environment variable "
        f"{ENV_PREFIX}FOO_BAR (lists separated by commas; flags take 1/0, true/false)."
    )
    defaults_from_environment(parser, os.environ)


# ---------------------------------------------------------------------------
# Checking, loading, handing over


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, format=args.log_format)
    _LOGGER.debug(args)
    if not _options_are_valid(args):
        return 2
    # Before torch is imported or threads start.
    prepare_process(quantized=args.quantize, threads=args.threads)
    base = resolve.ModelOptions(
        quantize=args.quantize, download=download_options(args), voices_dir=args.voices_dir
    )
    try:
        choices = resolve.served_models(args.model, base, yaml_language=args.language or "en")
    except CatalogError as err:
        _LOGGER.error("%s", err)
        return 2
    codes = [options.languages[0] for options in choices]
    unknown = [code for code in args.preload_model if code not in codes]
    if unknown:
        _LOGGER.error(
            "--preload-model %s: not a served language (%s)", unknown[0], ", ".join(codes)
        )
        return 2
    try:
        # Every model's files are found (or downloaded) now, so that a missing one is
        # reported at start-up; only the first model is loaded before serving.
        served = [resolve.resolve_model(options) for options in choices]
        model = resolve.load_model(served[0])
    except resolve.LOAD_ERRORS as err:
        _LOGGER.error("Cannot load the model: %s", err)
        return 1
    return asyncio.run(run_server(server_config(args), served, model))


def _options_are_valid(args: argparse.Namespace) -> bool:
    """Log the first option whose value cannot be served, if any."""
    scheme = urlparse(args.uri).scheme
    if scheme not in ("tcp", "unix", "stdio"):
        _LOGGER.error("--uri %s: expected tcp://HOST:PORT, unix://PATH or stdio://", args.uri)
        return False
    if args.zeroconf is not None and scheme != "tcp":
        _LOGGER.error("--zeroconf needs a tcp:// URI, not %s", args.uri)
        return False
    if not 0 <= args.sentence_silence <= MAX_SENTENCE_SILENCE:
        _LOGGER.error("--sentence-silence must be between 0 and %s seconds", MAX_SENTENCE_SILENCE)
        return False
    if not MIN_SPEED <= args.speed <= MAX_SPEED:  # NaN too
        _LOGGER.error("--speed must be between %s and %s", MIN_SPEED, MAX_SPEED)
        return False
    if args.threads is not None and args.threads <= 0:
        _LOGGER.error("--threads must be above 0")
        return False
    for option in (
        "max_loaded_voices", "max_loaded_models", "max_connections", "max_text_chars",
        "idle_timeout", "stream_timeout",
    ):
        if getattr(args, option) <= 0:
            _LOGGER.error("--%s must be above 0", option.replace("_", "-"))
            return False
    return True


def server_config(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        uri=args.uri,
        zeroconf=args.zeroconf,
        voice=args.voice,
        preload_voices=tuple(args.preload_voice),
        max_loaded_voices=args.max_loaded_voices,
        max_loaded_models=args.max_loaded_models,
        preload_models=tuple(args.preload_model),
        generation=GenerationOptions(
            temperature=args.temperature,
            eos_threshold=args.eos_threshold,
            sentence_silence=args.sentence_silence,
        ),
        text=TextOptions(normalize=not args.no_normalize, speed=args.speed),
        streaming=not args.no_streaming,
        max_connections=args.max_connections,
        max_text_chars=args.max_text_chars,
        idle_timeout=args.idle_timeout,
        stream_timeout=args.stream_timeout,
        studio=StudioConfig(
            http_uri=args.http_uri,
            http_allow=tuple(args.http_allow),
            voices_dir=args.voices_dir,
        ),
    )
