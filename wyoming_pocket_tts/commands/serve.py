"""`wyoming-pocket-tts` (no subcommand): the Wyoming text-to-speech server.

Parse, build, hand over: this module reads the options (from the command line or the
environment, commands/options.py), loads the model and the startup voices, and serves
connections with `handler.PocketTTSEventHandler`.
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
from collections.abc import Coroutine, Generator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import numpy as np
from wyoming.event import async_get_stdin
from wyoming.info import Info

from wyoming_pocket_tts import __version__, resolve, studio
from wyoming_pocket_tts.commands.options import (
    ENV_PREFIX,
    add_download_arguments,
    add_model_argument,
    add_quantize_argument,
    add_threads_argument,
    add_voices_dir_argument,
    defaults_from_environment,
    model_options,
)
from wyoming_pocket_tts.engine.cpu.process import prepare_process
from wyoming_pocket_tts.engine.errors import EngineError
from wyoming_pocket_tts.recent import RecentRequests
from wyoming_pocket_tts.server.connections import Connections
from wyoming_pocket_tts.server.handler import HandlerSettings, PocketTTSEventHandler
from wyoming_pocket_tts.server.info import build_info
from wyoming_pocket_tts.voices.store import UnknownVoiceError, VoiceStore

if TYPE_CHECKING:
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

_LOGGER = logging.getLogger(__name__)

HELP = "run the Wyoming text-to-speech server (what runs when no subcommand is given)"
DEFAULT_URI = "tcp://0.0.0.0:10200"
# A short confirmation, the most common kind of answer, so its shapes are the ones warmed.
WARM_UP_TEXT = "The living room lights are off."
WARM_UP_FRAMES = 3
#: Time the open connections get to end their audio at shutdown before they are dropped:
#: s6 (the add-on) kills a service 3 s after asking it to stop, Docker after 10 s.
SHUTDOWN_GRACE_SECONDS = 1.0
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
    add_model_argument(parser)
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
    add_voices_dir_argument(
        parser,
        "folder of custom voices: audio files to clone and .safetensors voice states, "
        "each named by its file name without extension; read again on every request and "
        "every Describe",
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
    if args.threads is not None and args.threads <= 0:
        _LOGGER.error("--threads must be above 0")
        return 2
    for option in (
        "max_loaded_voices", "max_connections", "max_text_chars", "idle_timeout", "stream_timeout"
    ):
        if getattr(args, option) <= 0:
            _LOGGER.error("--%s must be above 0", option.replace("_", "-"))
            return 2
    # Before torch is imported or threads start.
    prepare_process(quantized=args.quantize, threads=args.threads)
    try:
        served = resolve.resolve_model(
            model_options(args, languages=args.language, voices_dir=args.voices_dir)
        )
        model = resolve.load_model(served)
    except resolve.LOAD_ERRORS as err:
        _LOGGER.error("Cannot load the model: %s", err)
        return 1
    return asyncio.run(_serve(args, served, model))


async def _serve(
    args: argparse.Namespace, served: resolve.ResolvedModel, model: PocketTTS
) -> int:
    # Imported after the process set-up (see `main`): they import torch.
    from wyoming_pocket_tts.engine.cpu.contention import CoreContention
    from wyoming_pocket_tts.engine.cpu.threads import OwnThreadExecutor
    from wyoming_pocket_tts.engine.runtime.options import GenerationOptions
    from wyoming_pocket_tts.engine.runtime.synthesizer import Synthesizer
    from wyoming_pocket_tts.engine.runtime.worker import SynthesisWorker

    # A recording is encoded on every core (one while other programs use them), on a
    # thread that ends with it (see engine/cpu/threads.py); voice files are read on one
    # core each meanwhile, so a cached voice never waits for another one's encoding.
    contention = CoreContention()
    voice_encoder = OwnThreadExecutor("voice-encoder", contention=contention)
    voice_readers = OwnThreadExecutor("voice-loader", cores=1)
    loop, worker_died = asyncio.get_running_loop(), asyncio.Event()
    worker = SynthesisWorker(
        Synthesizer(model), on_failure=lambda _: loop.call_soon_threadsafe(worker_died.set),
        contention=contention,
    )
    worker.start()
    try:
        try:
            explicit = resolve.voice_argument(args.voice) if args.voice else None
            sources = resolve.voice_sources(served.entry, served.options.voices_dir, explicit)
            voices = VoiceStore(
                sources=sources,
                load=resolve.voice_loader(model, served, voice_encoder),
                default_voice=resolve.default_voice(args.voice, served, sources()),
                max_loaded=args.max_loaded_voices,
                executor=voice_readers,
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
            max_text_chars=args.max_text_chars,
            idle_timeout=args.idle_timeout,
            stream_timeout=args.stream_timeout,
            silence_samples=model.samples_per_frame,
        )
        def info() -> Info:
            return build_info(served.description, voices.available(), streaming=settings.streaming)

        recent = RecentRequests()  # what the studio's page shows
        handler = partial(
            PocketTTSEventHandler, info=info, voices=voices, worker=worker, settings=settings,
            recent=recent,
        )
        connections = Connections(handler, info, args.max_connections)
        async with studio.serving(
            args, model=model, model_name=served.description.name,
            languages=served.description.languages, voices=voices,
            files=resolve.voice_files(model, served),
            worker=worker, options=settings.options, recent=recent, executor=voice_encoder,
        ):
            if not await _unless_worker_dies(
                _run_server(args, connections, voices.default_voice), worker_died
            ):
                _LOGGER.error("The synthesis worker stopped: exiting, to be restarted")
                return 1
        return 0
    finally:
        worker.close()
        voice_readers.shutdown(wait=False, cancel_futures=True)
        voice_encoder.shutdown(wait=False, cancel_futures=True)


async def _unless_worker_dies(serving: Coroutine, died: asyncio.Event) -> bool:
    """Run `serving` to its end, or stop it once the synthesis worker has died (False):
    a server that only answers Describe must exit so that its supervisor restarts it."""
    server, death = asyncio.create_task(serving), asyncio.create_task(died.wait())
    await asyncio.wait({server, death}, return_when=asyncio.FIRST_COMPLETED)
    death.cancel()
    if died.is_set():
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server
        return False
    await server
    return True


async def _warm_up(worker: SynthesisWorker, voices: VoiceStore) -> None:
    """Synthesize the start of a typical answer, unheard, before serving.

    The first request of a process otherwise pays for what is done once: the
    synthesis thread's OpenMP workers, oneDNN's kernels for the prompt's and the
    decoder's shapes, a working buffer of the usual size: without this, the first
    answer starts noticeably later than the ones after it.
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
    long as the process: one full collection takes several times a short answer's
    time to first audio, and Python starts one whenever enough new objects have
    outlived the younger generations: during a request, it holds that request's audio
    back by as much. Frozen, they are never walked again. What refcounting frees is
    freed as before; cyclic garbage made before this point is collected first, once.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _speak_unheard(frames: Generator[np.ndarray, None, None]) -> None:
    """Take the first `WARM_UP_FRAMES` frames, then close the stream, which stops its job."""
    with contextlib.closing(frames):
        for _ in itertools.islice(frames, WARM_UP_FRAMES):
            pass


async def _run_server(
    args: argparse.Namespace, connections: Connections, default_voice: str
) -> None:
    """Serve until SIGTERM/SIGINT (or, on stdio, until the input ends), then stop taking
    connections, withdraw the announcement and end the open connections."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    stopping = asyncio.create_task(stop.wait())
    if args.uri.startswith("stdio"):
        serving = asyncio.create_task(_serve_stdio(connections))
        _LOGGER.info("Ready: serving on stdio with default voice %s", default_voice)
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await connections.shut_down(SHUTDOWN_GRACE_SECONDS)
        serving.cancel()  # a no-op once its connection has ended
        await asyncio.wait({serving})
        return

    uri = urlparse(args.uri)
    if uri.scheme == "unix":
        server = await asyncio.start_unix_server(connections.serve, uri.path)
    else:
        server = await asyncio.start_server(connections.serve, uri.hostname, uri.port)
    announcement = None
    if args.zeroconf is not None:
        from wyoming_pocket_tts.server.discovery import register_zeroconf

        announcement = await register_zeroconf(args.zeroconf or None, uri.hostname, uri.port)
    _LOGGER.info("Ready: serving on %s with default voice %s", args.uri, default_voice)
    try:
        await stopping
    finally:
        _LOGGER.info("Stopping")
        server.close()
        if announcement is not None:
            from wyoming_pocket_tts.server.discovery import unregister_zeroconf

            withdrawing = asyncio.create_task(unregister_zeroconf(announcement))
        await connections.shut_down(SHUTDOWN_GRACE_SECONDS)
        if announcement is not None:
            await withdrawing
        if uri.scheme == "unix":
            Path(uri.path).unlink(missing_ok=True)


async def _serve_stdio(connections: Connections) -> None:
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
    await connections.serve(reader, writer)
