"""`wyoming-pocket-tts` (no subcommand): the Wyoming text-to-speech server.

Parse, build, hand over: this module reads the options (from the command line or the
environment), loads the model and the startup voices, and serves connections with
`handler.PocketTTSEventHandler`. Every option `--foo-bar` can also be set with the
environment variable `WYOMING_POCKET_TTS_FOO_BAR`, so a container needs no wrapper
script; a flag on the command line wins over its variable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
from wyoming.event import async_get_stdin
from wyoming.server import AsyncServer, AsyncTcpServer

from wyoming_pocket_tts import __version__, studio
from wyoming_pocket_tts.catalog import CatalogError, ModelEntry, load_catalog
from wyoming_pocket_tts.commands.download import add_download_arguments, download_options
from wyoming_pocket_tts.commands.engine_args import add_quantize_argument
from wyoming_pocket_tts.download import DownloadError, resolve_model_files, resolve_voice_file
from wyoming_pocket_tts.engine.cpu.allocator import choose_arenas
from wyoming_pocket_tts.engine.cpu.threads import OwnThreadExecutor, run_on_own_thread
from wyoming_pocket_tts.engine.errors import EngineError, VoiceError
from wyoming_pocket_tts.engine.model.config import ModelConfig, load_model_config
from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
from wyoming_pocket_tts.engine.model.voice import VoiceState
from wyoming_pocket_tts.engine.runtime.scheduler import SynthesisWorker
from wyoming_pocket_tts.engine.runtime.synthesizer import GenerationOptions, Synthesizer
from wyoming_pocket_tts.server.handler import HandlerSettings, PocketTTSEventHandler
from wyoming_pocket_tts.server.info import ModelDescription, build_info
from wyoming_pocket_tts.voices.files import VoiceFiles
from wyoming_pocket_tts.voices.store import (
    UnknownVoiceError,
    VoiceKind,
    VoiceSource,
    VoiceStore,
    scan_voices_dir,
    voice_from_file,
)

_LOGGER = logging.getLogger(__name__)

HELP = "run the Wyoming text-to-speech server (what runs when no subcommand is given)"
ENV_PREFIX = "WYOMING_POCKET_TTS_"
DEFAULT_URI = "tcp://0.0.0.0:10200"
# A short confirmation, the most common kind of answer, so its shapes are the ones warmed.
WARM_UP_TEXT = "The living room lights are off."
WARM_UP_FRAMES = 3
#: Folder in the download directory for the encoded states of recordings whose own
#: folder is read-only (see voices/files.py).
VOICE_CACHE_FOLDER = "wyoming-pocket-tts-voices"
#: A longer pause would hold a listener's audio back for nothing.
MAX_SENTENCE_SILENCE = 10.0
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


# ---------------------------------------------------------------------------
# Options


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--uri",
        default=DEFAULT_URI,
        help="where to listen: tcp://HOST:PORT, unix://PATH or stdio:// (default: %(default)s)",
    )
    parser.add_argument(
        "--model",
        help="catalog name of the model (default: "
        f"{load_catalog().default_model}) or the path of a pocket-tts YAML configuration",
    )
    parser.add_argument(
        "--language",
        action="append",
        help="language code(s) to advertise for a model given as a YAML path (default: en)",
    )
    parser.add_argument(
        "--voice",
        help="default voice: a name (predefined or in --voices-dir) or an audio / "
        ".safetensors file (default: the model's default voice)",
    )
    parser.add_argument(
        "--preload-voice",
        action="append",
        default=[],
        help="load this voice at startup too (repeatable)",
    )
    parser.add_argument(
        "--voices-dir",
        type=Path,
        help="folder of custom voices: audio files to clone and .safetensors voice states, "
        "each named by its file name without extension; rescanned on every request",
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
    add_quantize_argument(parser)
    # For tests and experiments: the end-of-speech decision threshold.
    parser.add_argument("--eos-threshold", type=float, help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-streaming",
        action="store_true",
        help="do not offer text streaming (synthesize-start/chunk/stop) to clients",
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
    _defaults_from_environment(parser, os.environ)


def _defaults_from_environment(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    """Make each option's variable its default, so the command line still wins.

    Walks the parser's actions (argparse has no public way to list them) so that options
    defined elsewhere, such as the download ones, get their variables too.
    """
    defaults = {}
    for action in parser._actions:
        variable = ENV_PREFIX + action.dest.upper()
        if (
            not action.option_strings
            or action.dest in ("help", "version")
            or variable not in environ
        ):
            continue
        value = environ[variable].strip()
        if isinstance(action, argparse._StoreTrueAction):
            if value.lower() not in _TRUE + _FALSE:
                parser.error(
                    f"{variable}={value!r}: expected one of {', '.join(_TRUE + _FALSE[:-1])}"
                )
            defaults[action.dest] = value.lower() in _TRUE
        elif isinstance(action, argparse._AppendAction):
            convert = action.type or str
            defaults[action.dest] = [
                convert(item.strip()) for item in value.split(",") if item.strip()
            ]
        elif action.dest == "zeroconf":
            defaults[action.dest] = (
                None if value.lower() in _FALSE else ("" if value.lower() in _TRUE else value)
            )
        elif value:
            defaults[action.dest] = value  # a string default: argparse converts and checks it
    parser.set_defaults(**defaults)


# ---------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class ServedModel:
    """The model to load and what the server says about it."""

    config: ModelConfig
    weights_path: Path | None  # None: the path in the config is local already
    tokenizer_path: Path | None
    description: ModelDescription
    entry: ModelEntry | None  # the catalog entry, which offers predefined voices


def resolve_model(args: argparse.Namespace) -> ServedModel:
    """The model named by --model: a catalog name (files found or downloaded) or a YAML path."""
    name = args.model or load_catalog().default_model
    if name.endswith((".yaml", ".yml")) or Path(name).is_file():
        config = load_model_config(name)
        languages = tuple(args.language or ("en",))
        return ServedModel(config, None, None, ModelDescription(config.name, languages), None)
    entry = load_catalog().find_model(name)
    files = resolve_model_files(entry, download_options(args))
    return ServedModel(
        config=load_model_config(files.config_path),
        weights_path=files.weights_path,
        tokenizer_path=files.tokenizer_path,
        description=ModelDescription(entry.name, (entry.language,)),
        entry=entry,
    )


# ---------------------------------------------------------------------------
# Voices


def _voice_sources(
    served: ServedModel, voices_dir: Path | None, explicit: VoiceSource | None
) -> Callable[[], dict[str, VoiceSource]]:
    """All voices, rescanned per call: predefined, then custom (a custom voice with a
    predefined voice's name replaces it), then a --voice given as a file."""
    predefined = {
        voice.name: VoiceSource(voice.name, None, VoiceKind.PREDEFINED, voice.description)
        for voice in (served.entry.voices if served.entry else ())
    }

    def sources() -> dict[str, VoiceSource]:
        found = dict(predefined)
        if voices_dir is not None:
            found.update(scan_voices_dir(voices_dir))
        if explicit is not None:
            found[explicit.name] = explicit
        return found

    return sources


def _voice_loader(
    model: PocketTTS, served: ServedModel, args: argparse.Namespace
) -> Callable[[VoiceSource], VoiceState]:
    """Runs on the voice-loading thread: fetching a predefined voice may download, and a
    recording is encoded (once: its state is cached, see voices/files.py)."""
    options = download_options(args)
    files = VoiceFiles(model, served.description.name, options.cache_dir / VOICE_CACHE_FOLDER)

    def load(source: VoiceSource) -> VoiceState:
        if source.kind is VoiceKind.PREDEFINED:
            assert served.entry is not None
            try:
                path = resolve_voice_file(served.entry, source.name, options)
            except DownloadError as err:  # reported to the client like any unusable voice
                raise VoiceError(f"voice {source.name} is unavailable: {err}") from err
            return files.load_state(path)
        path = source.checked_path()
        try:
            if source.kind is VoiceKind.STATE:
                return files.load_state(path)
            return files.load_audio(path)
        except VoiceError as err:  # say which voice: some reasons do not name the file
            raise VoiceError(f"voice {source.name} ({source.path.name}): {err}") from err

    return load


def _default_voice(
    args: argparse.Namespace, served: ServedModel, available: Mapping[str, VoiceSource]
) -> str:
    if args.voice:
        return Path(args.voice).stem if Path(args.voice).is_file() else args.voice
    if served.entry is not None:
        return served.entry.default_voice
    if available:
        return min(available)
    raise UnknownVoiceError("(none given)", available)


# ---------------------------------------------------------------------------
# Serving


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, format=args.log_format)
    _LOGGER.debug(args)
    scheme = urlparse(args.uri).scheme
    if scheme not in ("tcp", "unix", "stdio"):
        _LOGGER.error("--uri %s: expected tcp://HOST:PORT, unix://PATH or stdio://", args.uri)
        return 2
    if args.zeroconf is not None and scheme != "tcp":
        _LOGGER.error("--zeroconf needs a tcp:// URI, not %s", args.uri)
        return 2
    if not 0 <= args.sentence_silence <= MAX_SENTENCE_SILENCE:
        _LOGGER.error("--sentence-silence must be between 0 and %s seconds", MAX_SENTENCE_SILENCE)
        return 2
    if args.max_loaded_voices < 1:
        _LOGGER.error("--max-loaded-voices must be at least 1")
        return 2
    choose_arenas(args.quantize)  # before downloads or loading start threads
    try:
        served = resolve_model(args)
        model = run_on_own_thread(
            PocketTTS.load,
            served.config, served.weights_path, served.tokenizer_path, quantize=args.quantize,
        )
    except (EngineError, CatalogError, DownloadError) as err:
        _LOGGER.error("Cannot load the model: %s", err)
        return 1
    return asyncio.run(_serve(args, served, model))


async def _serve(args: argparse.Namespace, served: ServedModel, model: PocketTTS) -> int:
    explicit = (
        voice_from_file(Path(args.voice)) if args.voice and Path(args.voice).is_file() else None
    )
    sources = _voice_sources(served, args.voices_dir, explicit)
    # A voice is encoded on every core, on a thread that ends with it (see engine/cpu/threads.py).
    voice_loader = OwnThreadExecutor("voice-loader")
    worker = SynthesisWorker(Synthesizer(model))
    worker.start()
    try:
        try:
            voices = VoiceStore(
                sources=sources,
                load=_voice_loader(model, served, args),
                default_voice=_default_voice(args, served, sources()),
                max_loaded=args.max_loaded_voices,
                executor=voice_loader,
            )
            startup = list(dict.fromkeys([voices.default_voice, *args.preload_voice]))
            if len(startup) > args.max_loaded_voices:
                _LOGGER.warning(
                    "More startup voices than --max-loaded-voices: some will be unloaded"
                )
            await voices.preload(startup)
        except (UnknownVoiceError, EngineError, OSError) as err:
            _LOGGER.error("Cannot load a startup voice: %s", err)
            return 1
        try:
            await _warm_up(worker, voices)
        except EngineError as err:
            _LOGGER.error("Cannot synthesize with this model: %s", err)
            return 1
        frozen = freeze_start_up_objects()
        _LOGGER.debug("%d start-up objects kept out of garbage collection", frozen)
        settings = HandlerSettings(
            sample_rate=model.sample_rate,
            options=GenerationOptions(
                temperature=args.temperature,
                eos_threshold=args.eos_threshold,
                sentence_silence=args.sentence_silence,
            ),
            streaming=not args.no_streaming,
            finish_on_eof=args.uri.startswith("stdio"),
            quantized=model.quantized,
        )
        handler = partial(
            PocketTTSEventHandler,
            info=lambda: build_info(
                served.description, voices.available(), streaming=settings.streaming
            ),
            voices=voices,
            worker=worker,
            settings=settings,
        )
        async with studio.serving(
            args, model=model, model_name=served.description.name,
            languages=served.description.languages, voices=voices,
            files=VoiceFiles(
                model, served.description.name,
                download_options(args).cache_dir / VOICE_CACHE_FOLDER,
            ),
            worker=worker, options=settings.options, executor=voice_loader,
        ):
            await _run_server(args, handler, voices.default_voice)
        return 0
    finally:
        worker.close()
        voice_loader.shutdown(wait=False, cancel_futures=True)


async def _warm_up(worker: SynthesisWorker, voices: VoiceStore) -> None:
    """Synthesize the start of a typical answer, unheard, before serving.

    The first request of a process otherwise pays for what is done once: the
    synthesis thread's OpenMP workers, oneDNN's kernels for the prompt's and the
    decoder's shapes, a working buffer of the usual size. Measured on two cores over
    four server starts each: the first request's audio started 108 ms after it was
    sent against 67 ms for the next three without this; 90 against 86 ms with it.
    """
    started = time.monotonic()
    async with voices.use(voices.default_voice) as voice:
        await asyncio.to_thread(_speak_unheard, worker.stream(voice, WARM_UP_TEXT))
    _LOGGER.debug("Warmed up in %.2f s", time.monotonic() - started)


def freeze_start_up_objects() -> int:
    """Leave what start-up made out of every later garbage collection; return how many.

    A full collection walks every object Python tracks, holding its lock, so every
    thread of the process stops meanwhile. Once the server is up there are about
    190,000, nearly all of them torch's modules, classes and functions, which live as
    long as the process: one full collection took 92-105 ms on two cores (AMD EPYC),
    five times a short answer's time to first audio, and Python starts one whenever
    enough new objects have outlived the younger generations, whenever that is: during
    a request, it holds that request's audio back by as much. Frozen, they are never
    walked again: the full collection at the end of a served run took 8 ms. What
    refcounting frees is freed as before; cyclic garbage made before this point is
    collected first (about 0.1 s, once).
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _speak_unheard(frames: Iterator[np.ndarray]) -> None:
    """Take the first `WARM_UP_FRAMES` frames, then close the stream, which stops its job."""
    with contextlib.closing(frames):
        for _ in itertools.islice(frames, WARM_UP_FRAMES):
            pass


async def _run_server(args: argparse.Namespace, handler: Callable, default_voice: str) -> None:
    """Serve until SIGTERM/SIGINT (or, on stdio, until the input ends)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    stopping = asyncio.create_task(stop.wait())
    if args.uri.startswith("stdio"):
        serving = asyncio.create_task(_serve_stdio(handler))
        _LOGGER.info("Ready: serving on stdio with default voice %s", default_voice)
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        serving.cancel()
        stopping.cancel()
        return

    server = AsyncServer.from_uri(args.uri)
    await server.start(handler)
    announcement = None
    if args.zeroconf is not None:
        from wyoming_pocket_tts.server.discovery import register_zeroconf

        assert isinstance(server, AsyncTcpServer)
        announcement = await register_zeroconf(args.zeroconf or None, server.host, server.port)
    _LOGGER.info("Ready: serving on %s with default voice %s", args.uri, default_voice)
    try:
        await stopping
    finally:
        _LOGGER.info("Stopping")
        if announcement is not None:
            from wyoming_pocket_tts.server.discovery import unregister_zeroconf

            await unregister_zeroconf(announcement)
        await server.stop()


async def _serve_stdio(handler: Callable) -> None:
    """One connection over stdin/stdout. The protocol gets a private copy of stdout and
    the process's stdout becomes stderr, so a stray print from any library lands in the
    log instead of corrupting the event stream."""
    protocol_fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    loop = asyncio.get_running_loop()
    reader = await async_get_stdin()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    await handler(reader, writer).run()
