"""What running the server needs to know, as data: where it listens, what it offers and
the limits it keeps. The command line (commands/serve.py) checks and fills it in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from ..engine.runtime.options import GenerationOptions
from ..normalize.spoken import TextOptions
from ..studio.options import Network

#: Time the open connections get to end their audio at shutdown before they are dropped:
#: s6 (the add-on) kills a service 3 s after asking it to stop, Docker after 10 s.
SHUTDOWN_GRACE_SECONDS = 1.0


@dataclass(frozen=True)
class WarmUp:
    """What is spoken, unheard, before the first request; a short confirmation, the most
    common kind of answer, so its shapes are the ones warmed."""

    text: str = "The living room lights are off."
    frames: int = 3


@dataclass(frozen=True)
class StudioConfig:
    """Where the voice studio listens (None: it does not), whom it answers, and the
    folder it adds voices to; the studio reads these attributes by name."""

    http_uri: tuple[str, int] | None
    http_allow: tuple[Network, ...]
    voices_dir: Path | None


@dataclass(frozen=True)
class ServerConfig:
    uri: str  # tcp://HOST:PORT, unix://PATH or stdio://
    zeroconf: str | None  # None: no announcement; "": under the default name
    voice: str | None  # None: the default language's default voice
    preload_voices: tuple[str, ...]
    max_loaded_voices: int  # of each language
    max_loaded_models: int  # beside the default language's, which stays loaded
    preload_models: tuple[str, ...]  # languages whose models load at start-up
    generation: GenerationOptions
    text: TextOptions  # normalised or not, and the speaking rate
    streaming: bool  # offer synthesize-start/chunk/stop
    max_connections: int
    max_text_chars: int
    idle_timeout: float
    stream_timeout: float
    studio: StudioConfig
    shutdown_grace: float = SHUTDOWN_GRACE_SECONDS
    warm_up: WarmUp = WarmUp()

    @property
    def scheme(self) -> str:
        return urlparse(self.uri).scheme
