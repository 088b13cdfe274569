"""The languages a server speaks: one model each, loaded on first use.

Every served language is known from the start (its model's files are found or
downloaded before serving, so a missing file is reported at once) and its voices can
be listed without its model in memory. A model loads when a request first needs it,
off the event loop and once however many requests wait for it; beyond `max_loaded`
models the least recently used one is unloaded with its voices, but never the default
language's and never one that a request is speaking with.

Which language speaks a request: the named voice's; where none is named, the
language the client asks for if it is served, else the one the text is written in.

Everything here runs on the event loop thread except the loader itself, so the
bookkeeping needs no locks.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from .language_detection import LanguageDetector
from .resolve import ResolvedModel
from .voices.names import LanguageVoice, name_voices
from .voices.settings import VoiceSettings
from .voices.store import InvalidVoiceNameError, UnknownVoiceError, VoiceSource, is_plain_name

_LOGGER = logging.getLogger(__name__)

L = TypeVar("L")


@dataclass(frozen=True)
class Language:
    """A served language, whether or not its model is in memory."""

    code: str  # as Home Assistant matches it: "en", "fr"
    resolved: ResolvedModel
    voices: Callable[[], Mapping[str, VoiceSource]]  # rescanned on every call
    default_voice: str
    # Its custom voices' folder: the default language's is --voices-dir itself, another's
    # the subfolder named by its code (voices/fr/); None: it has none.
    folder: Path | None = None
    settings: VoiceSettings | None = None  # what the user set per voice, in that folder


@dataclass(eq=False)
class _Loaded(Generic[L]):
    loaded: L
    users: int = 0


class Languages(Generic[L]):
    """The served languages (the first is the default) and their models in memory.

    `load` turns a language into whatever a request needs to speak it (its model, its
    voices), and runs on `executor`, never on the event loop; `native(code, source)`
    tells whether a voice belongs to a language (see voices/names.py).
    """

    def __init__(
        self,
        languages: Sequence[Language],
        *,
        load: Callable[[Language], L],
        max_loaded: int,
        native: Callable[[str, VoiceSource], bool],
        detector: LanguageDetector | None = None,
        executor: Executor | None = None,
    ) -> None:
        if not languages:
            raise ValueError("a server speaks at least one language")
        if max_loaded < 1:
            raise ValueError("max_loaded must be at least 1")
        self._languages = {language.code: language for language in languages}
        self.default = languages[0]
        self._load = load
        self._max_loaded = max_loaded
        self._native = native
        self._detector = detector or LanguageDetector(list(self._languages), self.default.code)
        self._executor = executor
        self._loaded: OrderedDict[str, _Loaded[L]] = OrderedDict()  # least recent first
        self._loading: dict[str, asyncio.Future[L]] = {}

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(self._languages)

    def __getitem__(self, code: str) -> Language:
        return self._languages[code]

    @property
    def loaded(self) -> list[str]:
        """Languages whose model is in memory, least recently used first."""
        return list(self._loaded)

    def voices(self) -> dict[str, LanguageVoice]:
        """Every voice by the one name it is served under (see voices/names.py)."""
        return {name: voice for name, (voice, _) in self.voice_sources().items()}

    def voice_sources(self) -> dict[str, tuple[LanguageVoice, VoiceSource]]:
        """`voices()` with where each comes from, from one scan of the folders."""
        available = {code: language.voices() for code, language in self._languages.items()}
        return {
            name: (voice, available[voice.language][voice.name])
            for name, voice in name_voices(available, self._native).items()
        }

    def choose(self, voice: str | None, language: str | None, text: str) -> LanguageVoice:
        """The voice that speaks a request: the one named, else the default voice of the
        language asked for (if served) or of the text's language."""
        if voice is not None:
            voices = self.voices()
            if not is_plain_name(voice):
                raise InvalidVoiceNameError(voice, voices)
            if voice not in voices:
                raise UnknownVoiceError(voice, voices)
            return voices[voice]
        code = self.served_code(language) or self._detector.detect(text)
        return LanguageVoice(code, self._languages[code].default_voice)

    def served_code(self, language: str | None) -> str | None:
        """The served language a client's language tag ("fr", "fr-CA", "nl_BE") names."""
        if not language:
            return None
        code = language.replace("_", "-").split("-")[0].lower()
        return code if code in self._languages else None

    @asynccontextmanager
    async def use(self, code: str) -> AsyncIterator[L]:
        """The language's model (loaded if need be), kept in memory until the block exits."""
        entry = await self._acquire(code)
        try:
            yield entry.loaded
        finally:
            entry.users -= 1
            self._evict()

    async def preload(self, code: str) -> None:
        async with self.use(code):
            pass

    async def _acquire(self, code: str) -> _Loaded[L]:
        entry = self._loaded.get(code)
        if entry is None:
            loaded = await self._load_once(code)
            entry = self._loaded.get(code)
            if entry is None:
                entry = self._loaded[code] = _Loaded(loaded)
        # No await between here and the lookup above: nothing can evict it meanwhile.
        entry.users += 1
        self._loaded.move_to_end(code)
        self._evict()
        return entry

    async def _load_once(self, code: str) -> L:
        """Load the language's model, or wait for the load another request started."""
        loading = self._loading.get(code)
        if loading is None:
            loading = asyncio.ensure_future(self._run_loader(self._languages[code]))
            self._loading[code] = loading
            loading.add_done_callback(functools.partial(self._loaded_or_failed, code))
        # Shielded: one waiter's disconnect must not cancel the load for the others.
        return await asyncio.shield(loading)

    def _loaded_or_failed(self, code: str, loading: asyncio.Future[L]) -> None:
        """Forget a finished load: a load whose requests all hung up is kept (it cost
        seconds, and the next request in that language would redo it), a failed one is
        tried again by the next request."""
        if self._loading.get(code) is loading:
            del self._loading[code]
        if loading.cancelled() or loading.exception() is not None:
            return
        if code not in self._loaded:
            self._loaded[code] = _Loaded(loading.result())
            self._evict()

    async def _run_loader(self, language: Language) -> L:
        name = language.resolved.description.name
        _LOGGER.info("Loading the %s model (%s)", language.code, name)
        loop = asyncio.get_running_loop()
        started = loop.time()
        loaded = await loop.run_in_executor(self._executor, self._load, language)
        _LOGGER.info("Loaded the %s model in %.2f s", language.code, loop.time() - started)
        return loaded

    def _evict(self) -> None:
        excess = len(self._loaded) - self._max_loaded
        for code, entry in list(self._loaded.items()):
            if excess <= 0:
                return
            if entry.users == 0 and code != self.default.code:
                del self._loaded[code]
                excess -= 1
                _LOGGER.info("Unloaded the %s model (least recently used)", code)
