"""Voice files on disk for one model: voice states checked against the model, and
recordings encoded once, their states cached for the next load.

Encoding a recording runs the Mimi encoder and the transformer over up to 30 s of audio
(seconds on a small CPU), so its result is kept in a hidden folder beside it:
`<voices folder>/.pocket-tts-cache/<stem>.<model>.safetensors`. That name never
collides with a voice state the user put in the folder (`<stem>.safetensors`), and one
recording gets one cache file per model. The file's metadata records the model and
the SHA-256 of the audio it was made from; it is reused while both match, so editing
or replacing the recording re-encodes it, while a copy or `touch` that leaves the
content alone does not. When the voices folder is read-only (a Home Assistant share
can be) the cache goes to a fallback folder instead, one subfolder per voices folder.
The engine writes a state to a temporary file and renames it, so a cache file is
whole or absent.

Our own voice states carry `{"model": name}` metadata; a state made for another model
is refused by name, before its shape is even looked at. The reference writes no
metadata: its files are accepted whenever their shapes fit the model.
"""

from __future__ import annotations

import glob
import hashlib
import logging
from concurrent.futures import Executor
from pathlib import Path

from safetensors import SafetensorError

from ..catalog import load_catalog
from ..engine.errors import VoiceError
from ..engine.model.pocket_tts import PocketTTS
from ..engine.model.voice import VoiceState, read_voice_metadata
from .store import is_inside

_LOGGER = logging.getLogger(__name__)

CACHE_FOLDER = ".pocket-tts-cache"
MODEL_KEY = "model"
AUDIO_DIGEST_KEY = "audio_sha256"
AUDIO_NAME_KEY = "audio"
_READ_BLOCK = 1 << 20


def model_identity(name: str) -> str:
    """The name a model's voices are made for: a catalog alias (`english`) stands for the
    model whose weights it shares (`english_2026-10`), so their voices are interchangeable."""
    for entry in load_catalog().models:
        if entry.name == name and entry.same_as:
            return entry.same_as
    return name


def _metadata(path: Path) -> dict[str, str]:
    """The file's metadata; empty when unreadable (loading it then says what is wrong)."""
    try:
        return read_voice_metadata(path)
    except Exception:  # noqa: BLE001 - safetensors has no common error type
        return {}


def audio_digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while block := stream.read(_READ_BLOCK):
                digest.update(block)
    except OSError as error:
        raise VoiceError(f"cannot read {path.name}: {error.strerror or error}") from None
    return digest.hexdigest()


class VoiceFiles:
    """Turns voice files into voice states for `model`, which is called `model_name`.

    `fallback_dir` holds the caches of recordings whose folder cannot be written; None
    means such recordings are encoded on every load. Recordings are encoded on
    `encoder` (None: on the calling thread), so that a server can read cached voices
    on other threads while one is encoded.
    """

    def __init__(
        self, model: PocketTTS, model_name: str, fallback_dir: Path | None,
        encoder: Executor | None = None,
    ) -> None:
        self._model = model
        self.model_name = model_name
        self._identity = model_identity(model_name)
        self._fallback_dir = fallback_dir
        self._encoder = encoder

    def load_state(self, path: Path) -> VoiceState:
        """A voice-state file (ours or the reference's), refused if made for another model."""
        made_for = _metadata(path).get(MODEL_KEY)
        if made_for is not None and model_identity(made_for) != self._identity:
            raise VoiceError(
                f"{path.name} was made for the model {made_for}, but this server runs "
                f"{self.model_name}: export the voice again with --model {self.model_name}"
            )
        return self._model.load_voice(path)

    def load_audio(self, path: Path) -> VoiceState:
        """The voice state of a recording: from its cache when that was made from the same
        audio with this model, else encoded now and cached."""
        digest = audio_digest(path)
        places = self._cache_files(path)
        for cached in places:
            voice = self._reuse(cached, digest)
            if voice is not None:
                _LOGGER.debug("Voice %s: reusing %s", path.name, cached)
                return voice
        if self._encoder is None:
            voice = self._model.voice_from_audio(path)
        else:
            voice = self._encoder.submit(self._model.voice_from_audio, path).result()
        self._store(voice, places, digest, path)
        return voice

    def cache(self, audio: Path, voice: VoiceState, content: bytes) -> None:
        """Cache a voice encoded elsewhere from the recording just written to `audio` as
        `content`: hashed from memory, so that the file is not read back."""
        self._store(voice, self._cache_files(audio), hashlib.sha256(content).hexdigest(), audio)

    def all_cache_files(self, audio: Path) -> list[Path]:
        """The cached states of a recording for every model, in every place they may be:
        what deleting the recording leaves behind unless these go too."""
        return sorted(
            cached
            for place in self._cache_files(audio)
            for cached in place.parent.glob(f"{glob.escape(audio.stem)}.*.safetensors")
            if _metadata(cached).get(AUDIO_NAME_KEY) == audio.name
        )

    def _cache_files(self, audio: Path) -> list[Path]:
        """Where the cache of `audio` may be, in order of preference. A cache folder that
        is a link out of the voices folder is not used: nothing outside is read."""
        name = f"{audio.stem}.{self._identity}.safetensors"
        folder = audio.parent
        places = []
        beside = folder / CACHE_FOLDER
        if not beside.exists() or (beside.is_dir() and is_inside(beside, folder)):
            places.append(beside / name)
        if self._fallback_dir is not None:
            key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
            places.append(self._fallback_dir / key / name)
        return places

    def _reuse(self, cached: Path, digest: str) -> VoiceState | None:
        if not cached.is_file() or not is_inside(cached, cached.parent):
            return None
        metadata = _metadata(cached)
        if metadata.get(MODEL_KEY) != self._identity or metadata.get(AUDIO_DIGEST_KEY) != digest:
            return None
        try:
            return self._model.load_voice(cached)
        except VoiceError as error:  # damaged: encoding again overwrites it
            _LOGGER.warning("Ignoring the voice cache %s: %s", cached, error)
            return None

    def _store(self, voice: VoiceState, places: list[Path], digest: str, audio: Path) -> None:
        """Write the cache to the first place that takes it; a voice that cannot be cached
        still works, it is only encoded again next time."""
        metadata = {MODEL_KEY: self._identity, AUDIO_DIGEST_KEY: digest, AUDIO_NAME_KEY: audio.name}
        problems = []
        for cached in places:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                voice.save(cached, metadata=metadata)
            except OSError as error:
                problems.append(f"{cached.parent}: {error.strerror or error}")
                continue
            except SafetensorError as error:  # how safetensors reports a failed write
                problems.append(f"{cached.parent}: {error}")
                continue
            _LOGGER.info("Voice %s encoded and cached in %s", audio.name, cached)
            return
        _LOGGER.warning(
            "Cannot cache the voice %s (%s): it will be encoded again on its next load",
            audio.name,
            "; ".join(problems) or "no cache folder",
        )
