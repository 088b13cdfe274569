"""Which voices exist, and which are loaded: a bounded cache of encoded voice states.

A voice state is the model's cache after it has read a voice prompt; building one from
an audio file runs the Mimi encoder and the transformer (seconds on a small CPU), and
each one holds megabytes. So voices load on first use, off the event loop, at most once
however many requests ask for them at the same moment, and only `max_loaded` stay in
memory: the least recently used one goes first, but never the default voice and never
one that a request is speaking with.

Everything here runs on the event loop thread except the loader itself, so the
bookkeeping needs no locks.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from ..engine.errors import VoiceError

_LOGGER = logging.getLogger(__name__)

#: Audio files a voice can be cloned from (whatever the engine's audio reader opens).
AUDIO_SUFFIXES = frozenset({".wav", ".flac", ".ogg", ".mp3"})
#: A voice state exported in the reference's safetensors format.
STATE_SUFFIX = ".safetensors"

V = TypeVar("V")


class VoiceKind(enum.Enum):
    AUDIO = "audio"  # a recording to clone: encoded on load
    STATE = "state"  # an exported voice state: read on load
    PREDEFINED = "predefined"  # a catalog voice: its state file is fetched on load


@dataclass(frozen=True)
class VoiceSource:
    """Where a voice comes from. `mtime_ns` makes an edited file a different source, so
    replacing a file in --voices-dir takes effect without a restart."""

    name: str
    path: Path | None  # None for a predefined voice not fetched yet
    kind: VoiceKind
    description: str
    mtime_ns: int = 0
    #: The configured folder the file was found in; it must still be inside it when read.
    folder: Path | None = None

    def checked_path(self) -> Path:
        """The file to read, resolved, after making sure it has not left its folder since
        it was listed (a file swapped for a link to elsewhere is refused)."""
        assert self.path is not None
        resolved = self.path.resolve()
        if self.folder is not None and not is_inside(resolved, self.folder):
            raise VoiceError(f"voice {self.name}: {self.path.name} points outside {self.folder}")
        return resolved


class UnknownVoiceError(LookupError):
    """A request named a voice that does not exist; the message lists those that do."""

    def __init__(self, name: str, available: Iterable[str], problem: str = "Unknown voice") -> None:
        self.name = name
        self.available = sorted(available)
        listing = ", ".join(self.available) if self.available else "none"
        super().__init__(f"{problem} '{name}'. Available voices: {listing}")


class InvalidVoiceNameError(UnknownVoiceError):
    """A request gave a path where a voice name belongs. Names are only ever looked up
    among the voices found, never joined onto a folder, but saying so is clearer than
    "unknown voice"."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        super().__init__(name, available, "Voice names are plain names, not paths:")


def is_plain_name(name: str) -> bool:
    """No folder part, no backslash (a separator elsewhere), no NUL, not "." or ".."."""
    return name not in ("", ".", "..") and not any(character in name for character in "/\\\0")


def is_inside(path: Path, folder: Path) -> bool:
    """Whether `path`, links followed, is `folder` or somewhere below it."""
    return path.resolve().is_relative_to(folder.resolve())


def voice_from_file(path: Path, folder: Path | None = None) -> VoiceSource | None:
    """The voice a file provides (named by its stem), or None if it is not a voice file.
    `folder` is where it was found, which it must not point out of."""
    suffix = path.suffix.lower()
    if suffix in AUDIO_SUFFIXES:
        kind, description = VoiceKind.AUDIO, f"Custom voice cloned from {path.name}"
    elif suffix == STATE_SUFFIX:
        kind, description = VoiceKind.STATE, f"Custom voice ({path.name})"
    else:
        return None
    try:
        mtime_ns = path.stat().st_mtime_ns
    except OSError:  # removed while we looked
        return None
    return VoiceSource(path.stem, path, kind, description, mtime_ns, folder)


@functools.cache
def _warn_once(message: str) -> None:
    """The folder is rescanned on every request: say each thing once, not every time."""
    _LOGGER.warning(message)


def scan_voices_dir(directory: Path) -> dict[str, VoiceSource]:
    """Voices in a folder. A voice state wins over a recording with the same name,
    since it is what exporting that recording produces. A link to a file outside the
    folder is left out: nothing is read from places the user did not configure."""
    try:
        paths = sorted(directory.iterdir())
    except FileNotFoundError:
        return {}
    except OSError as err:  # unreadable: serve the other voices, say why
        _LOGGER.warning("Cannot read the voices folder %s: %s", directory, err)
        return {}
    found: dict[str, VoiceSource] = {}
    for path in paths:
        source = voice_from_file(path, directory) if path.is_file() else None
        if source is None or source.name.startswith("."):
            continue
        if not is_inside(path, directory):
            _warn_once(
                f"Ignoring voice {path.name}: it links to {path.resolve()}, outside {directory}"
            )
            continue
        existing = found.get(source.name)
        if existing is None or source.kind is VoiceKind.STATE:
            found[source.name] = source
    return found


@dataclass(eq=False)
class _Loaded(Generic[V]):
    source: VoiceSource
    voice: V
    users: int = 0


class VoiceStore(Generic[V]):
    """Loaded voices, bounded in number, shared by all connections.

    `sources` is asked for the available voices on every lookup (it rescans folders,
    so a file added at run time is usable at once); `load` turns a source into a
    voice state and runs on `executor`, never on the event loop.
    """

    def __init__(
        self,
        *,
        sources: Callable[[], Mapping[str, VoiceSource]],
        load: Callable[[VoiceSource], V],
        default_voice: str,
        max_loaded: int,
        executor: Executor | None = None,
    ) -> None:
        if max_loaded < 1:
            raise ValueError("max_loaded must be at least 1")
        self._sources = sources
        self._load = load
        self.default_voice = default_voice
        self._max_loaded = max_loaded
        self._executor = executor
        self._loaded: OrderedDict[str, _Loaded[V]] = OrderedDict()  # least recent first
        self._loading: dict[VoiceSource, asyncio.Future[V]] = {}

    def available(self) -> dict[str, VoiceSource]:
        return dict(self._sources())

    @property
    def loaded(self) -> list[str]:
        """Names of the voices in memory, least recently used first."""
        return list(self._loaded)

    def in_use(self, name: str) -> bool:
        """Whether a request is speaking with the voice, or waiting for it to load."""
        entry = self._loaded.get(name)
        return (entry is not None and entry.users > 0) or any(
            source.name == name and not loading.done()
            for source, loading in self._loading.items()
        )

    def keep(self, source: VoiceSource, voice: V) -> None:
        """Hold a voice loaded elsewhere as `source`'s, as if loaded here: the studio has a
        new voice in hand when it writes its file, and reading that back would load it twice."""
        self._loaded[source.name] = _Loaded(source, voice)  # replaces a stale version, if any
        self._loaded.move_to_end(source.name)
        self._evict()

    def forget(self, name: str) -> None:
        """Drop a voice nobody uses from memory: its file was deleted or renamed."""
        entry = self._loaded.get(name)
        if entry is not None and entry.users == 0:
            del self._loaded[name]

    def lookup(self, name: str | None) -> VoiceSource:
        """The source of a voice (the default one for None), or UnknownVoiceError."""
        name = name or self.default_voice
        available = self._sources()
        if not is_plain_name(name):
            raise InvalidVoiceNameError(name, available)
        if name not in available:
            raise UnknownVoiceError(name, available)
        return available[name]

    @asynccontextmanager
    async def use(self, name: str | None) -> AsyncIterator[V]:
        """The loaded voice, kept in memory until the block exits."""
        entry = await self._acquire(self.lookup(name))
        try:
            yield entry.voice
        finally:
            entry.users -= 1
            self._evict()

    async def preload(self, names: Iterable[str]) -> None:
        """Load voices now (at startup, so the first request does not wait)."""
        for name in names:
            async with self.use(name):
                pass

    async def _acquire(self, source: VoiceSource) -> _Loaded[V]:
        entry = self._loaded.get(source.name)
        if entry is None or entry.source != source:
            voice = await self._load_once(source)
            entry = self._loaded.get(source.name)
            if entry is None or entry.source != source:
                entry = _Loaded(source, voice)
                self._loaded[source.name] = entry  # replaces a stale version, if any
        # No await between here and the lookup above: nothing can evict it meanwhile.
        entry.users += 1
        self._loaded.move_to_end(source.name)
        self._evict()
        return entry

    async def _load_once(self, source: VoiceSource) -> V:
        """Load `source`, or wait for the load another request already started."""
        loading = self._loading.get(source)
        if loading is None:
            loading = asyncio.ensure_future(self._run_loader(source))
            self._loading[source] = loading
            loading.add_done_callback(functools.partial(self._loaded_or_failed, source))
        # Shielded: one waiter's disconnect must not cancel the load for the others.
        return await asyncio.shield(loading)

    def _loaded_or_failed(self, source: VoiceSource, loading: asyncio.Future[V]) -> None:
        """Forget a finished load at once, whether or not anyone still waits for it: a
        voice whose requests all hung up must not stay in memory outside the LRU, and a
        failed load is tried again by the next request. Its exception is retrieved here
        so that a load nobody waited for does not warn "exception never retrieved"."""
        if self._loading.get(source) is loading:
            del self._loading[source]
        if not loading.cancelled():
            loading.exception()

    async def _run_loader(self, source: VoiceSource) -> V:
        _LOGGER.info("Loading voice %s (%s)", source.name, source.path or source.description)
        loop = asyncio.get_running_loop()
        started = loop.time()
        voice = await loop.run_in_executor(self._executor, self._load, source)
        _LOGGER.info("Loaded voice %s in %.2f s", source.name, loop.time() - started)
        return voice

    def _evict(self) -> None:
        excess = len(self._loaded) - self._max_loaded
        for name, entry in list(self._loaded.items()):
            if excess <= 0:
                return
            if entry.users == 0 and name != self.default_voice:
                del self._loaded[name]
                excess -= 1
                _LOGGER.debug("Unloaded voice %s (least recently used)", name)
