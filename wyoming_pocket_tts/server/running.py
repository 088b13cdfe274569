"""Running the server around its loaded default model: the served languages (the
others' models load on first use), the synthesis worker, the startup voices, a
warm-up, then connections (listening.py) and the studio until the process is asked
to stop or the worker dies.

Nothing here loads torch at import time: the command that calls `run_server` sets the
process up first, then loads the model, and only then are the engine's runtime
modules imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import time
from collections.abc import Coroutine, Generator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from wyoming.info import Info

from .. import resolve, studio
from ..engine.errors import EngineError
from ..languages import Language, Languages
from ..normalize.spoken import spoken
from ..recent import RecentRequests
from ..speakers import LoadedLanguage, Speakers
from ..voices.settings import VoiceSettings
from ..voices.store import UnknownVoiceError, VoiceKind, VoiceSource, VoiceStore
from .config import ServerConfig, WarmUp
from .connections import Connections
from .handler import HandlerSettings, PocketTTSEventHandler
from .info import build_info
from .listening import listen

if TYPE_CHECKING:
    from ..engine.model.pocket_tts import PocketTTS
    from ..engine.runtime.synthesizer import Synthesizer
    from ..engine.runtime.worker import SynthesisWorker

_LOGGER = logging.getLogger(__name__)


async def run_server(
    config: ServerConfig, served: Sequence[resolve.ResolvedModel], model: PocketTTS
) -> int:
    """Serve the `served` models, one per language (the first, the default, loaded as
    `model`), until asked to stop (0), or fail to start or lose the synthesis worker
    (1, with the reason logged)."""
    from ..engine.cpu.contention import CoreContention
    from ..engine.cpu.threads import OwnThreadExecutor
    from ..engine.runtime.synthesizer import Synthesizer
    from ..engine.runtime.worker import SynthesisWorker

    # A recording is encoded on every core (one while other programs use them), on a
    # thread that ends with it (see engine/cpu/threads.py); voice files are read on one
    # core each meanwhile, so a cached voice never waits for another one's encoding.
    contention = CoreContention()
    voice_encoder = OwnThreadExecutor("voice-encoder", contention=contention)
    voice_readers = OwnThreadExecutor("voice-loader", cores=1)
    loop, worker_died = asyncio.get_running_loop(), asyncio.Event()
    synthesizer = Synthesizer(model)
    worker = SynthesisWorker(
        synthesizer, on_failure=lambda _: loop.call_soon_threadsafe(worker_died.set),
        contention=contention,
    )
    worker.start()
    try:
        try:
            languages = Languages(
                [_language(resolved, config, first=index == 0)
                 for index, resolved in enumerate(served)],
                load=_LanguageLoader(
                    served[0], synthesizer, config.max_loaded_voices, voice_encoder, voice_readers
                ),
                max_loaded=config.max_loaded_models,
                native=partial(_native, _speaker_languages(served)),
            )
            for code in dict.fromkeys([languages.default.code, *config.preload_models]):
                await languages.preload(code)
            speakers = Speakers(languages)
            async with languages.use(languages.default.code) as default:
                await _preload_voices(languages, default.voices, config)
        except (UnknownVoiceError, *resolve.LOAD_ERRORS) as err:
            _LOGGER.error("Cannot load a startup voice: %s", err)
            return 1
        try:
            await _warm_up(worker, default.voices, config.warm_up)
            _read_once(languages.codes, config)
        except EngineError as err:
            _LOGGER.error("Cannot synthesize with this model: %s", err)
            return 1
        frozen = freeze_start_up_objects()
        _LOGGER.debug("%d start-up objects kept out of garbage collection", frozen)
        settings = HandlerSettings(
            sample_rate=model.sample_rate,
            options=config.generation,
            text=config.text,
            streaming=config.streaming,
            finish_on_eof=config.scheme == "stdio",
            quantized=model.quantized,
            max_text_chars=config.max_text_chars,
            idle_timeout=config.idle_timeout,
            stream_timeout=config.stream_timeout,
            silence_samples=model.samples_per_frame,
        )

        descriptions = [resolved.description for resolved in served]

        def info() -> Info:
            return build_info(
                descriptions, languages.voice_sources(), streaming=settings.streaming
            )

        recent = RecentRequests()  # what the studio's page shows
        handler = partial(
            PocketTTSEventHandler, info=info, speakers=speakers, worker=worker,
            settings=settings, recent=recent,
        )
        connections = Connections(handler, info, config.max_connections)
        async with studio.serving(
            config.studio, languages=languages, worker=worker, options=settings.options,
            text=settings.text, recent=recent, executor=voice_encoder,
        ):
            if not await _unless_worker_dies(
                listen(config, connections, default.voices.default_voice), worker_died
            ):
                _LOGGER.error("The synthesis worker stopped: exiting, to be restarted")
                return 1
        return 0
    finally:
        worker.close()
        voice_readers.shutdown(wait=False, cancel_futures=True)
        voice_encoder.shutdown(wait=False, cancel_futures=True)


def _language(resolved: resolve.ResolvedModel, config: ServerConfig, first: bool) -> Language:
    """A served language: the first has the voices of `--voices-dir` and `--voice`, the
    others those of the folder's subfolder named by their code (voices/fr/)."""
    code = resolved.description.languages[0]
    folder = resolved.options.voices_dir
    if folder is not None and not first:
        folder = folder / code
    explicit = resolve.voice_argument(config.voice) if first and config.voice else None
    sources = resolve.voice_sources(resolved.entry, folder, explicit)
    default_voice = resolve.default_voice(config.voice if first else None, resolved, sources())
    settings = VoiceSettings(folder) if folder is not None else None
    return Language(code, resolved, sources, default_voice, folder, settings)


def _speaker_languages(served: Sequence[resolve.ResolvedModel]) -> dict[str, str]:
    """The language each predefined voice's speaker speaks, from the catalog."""
    return {
        voice.name: voice.language
        for resolved in served if resolved.entry is not None
        for voice in resolved.entry.voices
    }


def _native(speaker_languages: dict[str, str], code: str, source: VoiceSource) -> bool:
    """Whether a voice belongs to language `code`: any custom voice of its folder, or a
    predefined voice whose speaker speaks it."""
    return source.kind is not VoiceKind.PREDEFINED or speaker_languages.get(source.name) == code


@dataclass(frozen=True)
class _LanguageLoader:
    """Loads a language's model (the default one's is loaded before serving, with its
    synthesizer, which the worker speaks by default) and makes its voice store; runs
    off the event loop."""

    default: resolve.ResolvedModel
    default_synthesizer: Synthesizer
    max_loaded_voices: int
    encoder: Executor
    readers: Executor

    def __call__(self, language: Language) -> LoadedLanguage:
        from ..engine.runtime.synthesizer import Synthesizer

        resolved = language.resolved
        if resolved is self.default:
            synthesizer = self.default_synthesizer
        else:
            synthesizer = Synthesizer(resolve.load_model(resolved))
        model = synthesizer.model
        voices: VoiceStore[Any] = VoiceStore(
            sources=language.voices,
            load=resolve.voice_loader(model, resolved, self.encoder),
            default_voice=language.default_voice,
            max_loaded=self.max_loaded_voices,
            executor=self.readers,
        )
        return LoadedLanguage(language, model, synthesizer, voices)


async def _preload_voices(
    languages: Languages[LoadedLanguage], default: VoiceStore[Any], config: ServerConfig
) -> None:
    """The default voice and `--preload-voice`s (served names, of any language)."""
    await default.preload([default.default_voice])
    for name in config.preload_voices:
        choice = languages.choose(name, None, "")
        async with languages.use(choice.language) as loaded:
            await loaded.voices.preload([choice.name])
    if len(config.preload_voices) + 1 > config.max_loaded_voices:
        _LOGGER.warning("More startup voices than --max-loaded-voices: some will be unloaded")


async def _unless_worker_dies(serving: Coroutine[Any, Any, None], died: asyncio.Event) -> bool:
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


async def _warm_up(
    worker: SynthesisWorker, voices: VoiceStore[Any], warm_up: WarmUp
) -> None:
    """Synthesize the start of a typical answer, unheard, before serving.

    The first request of a process otherwise pays for what is done once: the
    synthesis thread's OpenMP workers, oneDNN's kernels for the prompt's and the
    decoder's shapes, a working buffer of the usual size: without this, the first
    answer starts noticeably later than the ones after it.
    """
    started = time.monotonic()
    async with voices.use(voices.default_voice) as voice:
        frames = worker.stream(voice, warm_up.text)
        await asyncio.to_thread(_speak_unheard, frames, warm_up.frames)
    _LOGGER.debug("Warmed up in %.2f s", time.monotonic() - started)


def _read_once(codes: Sequence[str], config: ServerConfig) -> None:
    """Normalise the warm-up text in every served language: each language's patterns
    are compiled on its first text (milliseconds), which a request would wait for."""
    for code in codes:
        spoken(config.warm_up.text, code, config.text)


def _speak_unheard(frames: Generator[np.ndarray, None, None], count: int) -> None:
    """Take the first `count` frames, then close the stream, which stops its job."""
    with contextlib.closing(frames):
        for _ in itertools.islice(frames, count):
            pass


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
