"""The voices as the studio manages them: listing, adding, renaming, deleting, exporting.

Custom voices are files in the voices folder (--voices-dir), which the server rescans
on every request: a file written here is in Home Assistant's list at its next
Describe. Every file is written whole under a hidden temporary name and then linked
to its own, so a crash or a full disk never leaves half a voice, and a name is never
taken twice. A voice a request is speaking with (or loading) is not deleted or
renamed under it. Model code (encoding a recording, checking a voice file) runs on
the voice-loading thread; the event loop only moves small files.

An upload is decoded, and encoded or loaded, once, before its file is written: the
voice then goes to the voice store as loaded, and a recording's encoding to its cache,
so nothing is read back from the folder.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from ..engine.errors import VoiceError
from ..engine.model.pocket_tts import PocketTTS
from ..engine.model.voice import VoiceState
from ..voices.files import MODEL_KEY, VoiceFiles, model_identity
from ..voices.store import (
    AUDIO_SUFFIXES,
    STATE_SUFFIX,
    UnknownVoiceError,
    VoiceKind,
    VoiceSource,
    VoiceStore,
)
from .uploads import FileKind, Recording, StudioError, as_wav, decode, prepare, sniff

#: A new voice's name: what Home Assistant shows and sends back, and a file name. The
#: page's name field takes it as its `pattern`, which browsers read with the `v` flag:
#: there a class's "-" must be escaped.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,47}")
NAME_RULE = "1 to 48 letters, digits, '_' or '-', starting with a letter or digit"
#: A voice file as any file the user copies into the folder: others may read it.
NEW_FILE_MODE = 0o644
CLONING_UNAVAILABLE = (
    "This model was loaded without its voice-cloning weights, which Kyutai offers only "
    "after accepting their terms on Hugging Face (kyutai/pocket-tts): set HF_TOKEN to a "
    "token of an account that accepted them and download the model again. Voice files "
    "(.safetensors) can still be imported."
)


@dataclass(frozen=True)
class Model:
    """What the studio says about the model being served."""

    engine: PocketTTS
    name: str
    languages: tuple[str, ...]


def suggest_name(filename: str, taken: set[str]) -> str:
    """A valid, free name from an upload's file name ("My Voice (2).m4a" -> "my_voice_2")."""
    stem = Path(filename).stem.lower()
    base = re.sub(r"[^a-z0-9]+", "_", stem).strip("_")[:40] or "voice"
    name, number = base, 2
    while name in taken:
        name, number = f"{base}_{number}", number + 1
    return name


class VoiceLibrary:
    def __init__(
        self, *, voices: VoiceStore, files: VoiceFiles, model: Model, folder: Path | None,
        executor: Executor,
    ) -> None:
        self.voices = voices
        self.model = model
        self.folder = folder
        self._files = files
        self._executor = executor
        self._changing = asyncio.Lock()  # one add, rename or delete at a time

    # -- reading ------------------------------------------------------------------

    def listing(self) -> list[dict]:
        loaded = set(self.voices.loaded)
        return [
            self._describe(source, loaded) for _, source in sorted(self.voices.available().items())
        ]

    def describe(self, name: str) -> dict:
        return self._describe(self._lookup(name), set(self.voices.loaded))

    def _describe(self, source: VoiceSource, loaded: set[str]) -> dict:
        return {
            "name": source.name,
            "description": source.description,
            "languages": list(self.model.languages),
            "kind": "predefined" if source.kind is VoiceKind.PREDEFINED else "custom",
            "source": source.kind.value,
            "default": source.name == self.voices.default_voice,
            "loaded": source.name in loaded,
            "editable": self._editable(source),
        }

    def _lookup(self, name: str) -> VoiceSource:
        try:
            return self.voices.lookup(name)
        except UnknownVoiceError as error:
            raise StudioError(str(error), 404) from None

    def _editable(self, source: VoiceSource) -> bool:
        """A file of the voices folder (not a predefined voice, nor a --voice file)."""
        return (
            self.folder is not None
            and source.path is not None
            and source.path.parent == self.folder
        )

    async def export(self, name: str) -> bytes:
        """The voice's state in the reference's .safetensors format."""
        source = self._lookup(name)
        if source.kind is VoiceKind.STATE:
            return await asyncio.to_thread(source.checked_path().read_bytes)
        try:
            async with self.voices.use(name) as state:
                return await self._on_loader(_state_bytes, state, model_identity(self.model.name))
        except VoiceError as error:
            raise StudioError(str(error)) from None

    # -- changing -----------------------------------------------------------------

    async def add(self, name: str | None, filename: str, data: bytes) -> dict:
        """A new voice from a recording (cloned) or a voice file (checked), loaded."""
        folder = self._writable_folder()
        kind = sniff(data)
        if kind is not FileKind.VOICE_STATE and not self.model.engine.has_voice_cloning:
            raise StudioError(CLONING_UNAVAILABLE, 409)
        name = self._new_name(name or suggest_name(filename, set(self.voices.available())))
        if kind is FileKind.VOICE_STATE:
            voice = await self._checked_voice_file(data)
            path, content = folder / f"{name}{STATE_SUFFIX}", data
        else:
            wav = await asyncio.to_thread(lambda: as_wav(prepare(decode(data, kind))))
            voice = await self._encoded(wav.recording)
            path, content = folder / f"{name}.wav", wav.data
        async with self._changing:
            self._new_name(name)  # another upload may have taken it meanwhile
            try:
                await asyncio.to_thread(write_new, path, content)
            except FileExistsError:
                raise StudioError(f"A voice named {name} exists already.", 409) from None
            except OSError as error:
                raise StudioError(f"Cannot write {path.name}: {error.strerror}", 507) from None
            self.voices.keep(self._lookup(name), voice)
            if kind is not FileKind.VOICE_STATE:  # under the lock: no rename or delete yet
                await asyncio.to_thread(self._files.cache, path, voice, content)
        return self.describe(name)

    async def rename(self, name: str, new_name: str) -> dict:
        async with self._changing:
            source = self._changeable(name)
            new_name = self._new_name(new_name)
            try:
                for path in self._files_of(name):
                    if path.suffix.lower() in AUDIO_SUFFIXES:  # its cache is named after it
                        self._unlink(*self._files.all_cache_files(path))
                    target = path.with_name(new_name + path.suffix)
                    try:
                        os.link(path, target)  # never replaces a file that appeared meanwhile
                    except FileExistsError:
                        raise StudioError(
                            f"A voice named {new_name} exists already.", 409
                        ) from None
                    path.unlink()
            except OSError as error:
                raise StudioError(f"Cannot rename {name}: {error.strerror}", 507) from None
            self.voices.forget(source.name)
        try:
            async with self.voices.use(new_name):
                pass
        except VoiceError:
            pass  # listed all the same: its preview says what is wrong
        return self.describe(new_name)

    async def delete(self, name: str) -> None:
        async with self._changing:
            source = self._changeable(name)
            try:
                self._remove(name, source)
            except OSError as error:
                raise StudioError(f"Cannot delete {name}: {error.strerror}", 507) from None

    def _remove(self, name: str, source: VoiceSource) -> None:
        for path in self._files_of(name):
            if path.suffix.lower() in AUDIO_SUFFIXES:
                self._unlink(*self._files.all_cache_files(path))
            self._unlink(path)
        self.voices.forget(source.name)

    # -- checks ---------------------------------------------------------------------

    def _writable_folder(self) -> Path:
        if self.folder is None:
            raise StudioError(
                "This server has no voices folder: start it with --voices-dir FOLDER to add "
                "voices.", 409,
            )
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StudioError(f"Cannot create {self.folder}: {error.strerror}", 507) from None
        return self.folder

    def _new_name(self, name: str) -> str:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise StudioError(f"Invalid voice name {name!r}: use {NAME_RULE}.", 400)
        if name in self.voices.available() or (
            self.folder is not None and self._files_of(name)
        ):
            raise StudioError(f"A voice named {name} exists already.", 409)
        return name

    def _changeable(self, name: str) -> VoiceSource:
        source = self._lookup(name)
        if not self._editable(source):
            raise StudioError(
                f"{name} is not a voice of the voices folder: only those can be changed.", 403
            )
        if name == self.voices.default_voice:
            raise StudioError(f"{name} is the default voice: choose another default first.", 409)
        if self.voices.in_use(name):
            raise StudioError(
                f"{name} is speaking right now: try again when the request is done.", 409
            )
        return source

    def _files_of(self, name: str) -> list[Path]:
        """The voice files of this name in the folder (a recording and a state may share it)."""
        assert self.folder is not None
        return [
            self.folder / f"{name}{suffix}"
            for suffix in (*sorted(AUDIO_SUFFIXES), STATE_SUFFIX)
            if (self.folder / f"{name}{suffix}").is_file()
        ]

    @staticmethod
    def _unlink(*paths: Path) -> None:
        for path in paths:
            path.unlink(missing_ok=True)

    async def _checked_voice_file(self, data: bytes) -> VoiceState:
        """The voice of an uploaded voice file, refused unless this model can speak with it
        (made for it, or shaped for it)."""
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"upload{STATE_SUFFIX}"
            await asyncio.to_thread(path.write_bytes, data)
            try:
                return await self._on_loader(self._files.load_state, path)
            except VoiceError as error:
                message = str(error).replace(str(path), "the file")
                raise StudioError(f"This voice file cannot be used: {message}") from None

    async def _encoded(self, recording: Recording) -> VoiceState:
        try:
            return await self._on_loader(
                self.model.engine.voice_from_samples, recording.samples, recording.sample_rate
            )
        except VoiceError as error:
            raise StudioError(f"Cannot make a voice of this recording: {error}") from None

    async def _on_loader(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)


def _state_bytes(state: VoiceState, identity: str) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"voice{STATE_SUFFIX}"
        state.save(path, metadata={MODEL_KEY: identity})
        return path.read_bytes()


def write_new(path: Path, data: bytes) -> None:
    """Create `path` holding `data`, whole or not at all, never replacing a file.

    Written under a hidden temporary name beside it (the voice scan skips it), synced,
    then linked to its name: FileExistsError if the name was taken meanwhile.
    """
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(handle, NEW_FILE_MODE)  # mkstemp's is private to this user
        with open(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.link(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
