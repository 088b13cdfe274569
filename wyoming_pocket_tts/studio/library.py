"""The voices as the studio manages them: listing, adding, renaming, deleting, exporting.

Custom voices are files in the voices folder (--voices-dir): the default language's in
the folder itself, another language's in its subfolder named by its code (voices/fr/),
made when its first voice is added. The server rescans them on every request: a file
written here is in Home Assistant's list at its next Describe. A voice is known by the
one name it is served under, so a new name must be free in every language. Every file
is written whole under a hidden temporary name and then linked to its own, so a crash
or a full disk never leaves half a voice, and a name is never taken twice. A voice a
request is speaking with (or loading) is not deleted or renamed under it. Model code
(encoding a recording, checking a voice file) runs on the voice-loading thread; the
event loop only moves small files.

An upload is decoded, and encoded or loaded by its language's model, once, before its
file is written: the voice then goes to that language's voice store as loaded, and a
recording's encoding to its cache, so nothing is read back from the folder.

A voice's own speaking rate is kept in its language's settings (voices/settings.py),
under its name in that language: it follows the voice when renamed, goes when it is
deleted, and travels in its exported file.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from pathlib import Path

from ..engine.errors import VoiceError
from ..engine.model.pocket_tts import PocketTTS
from ..engine.model.voice import VoiceState
from ..languages import Languages
from ..speakers import LoadedLanguage
from ..voices.files import MODEL_KEY, VoiceFiles, model_identity
from ..voices.names import LanguageVoice
from ..voices.settings import VoiceSettings
from ..voices.store import AUDIO_SUFFIXES, STATE_SUFFIX, UnknownVoiceError, VoiceKind
from .served import (
    StudioVoice,
    in_memory,
    language_name,
    loaded_voices,
    served_voices,
    voice_files,
)
from .speeds import file_speed, with_speed
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


def suggest_name(filename: str, taken: set[str]) -> str:
    """A valid, free name from an upload's file name ("My Voice (2).m4a" -> "my_voice_2")."""
    stem = Path(filename).stem.lower()
    base = re.sub(r"[^a-z0-9]+", "_", stem).strip("_")[:40] or "voice"
    name, number = base, 2
    while name in taken:
        name, number = f"{base}_{number}", number + 1
    return name


class VoiceLibrary:
    """The voices of every served language. `folder` is --voices-dir (None: voices can
    be heard but not added); `caches` finds a recording's cached encodings, which any
    model's `VoiceFiles` finds alike, whichever models made them."""

    def __init__(
        self, *, languages: Languages[LoadedLanguage], folder: Path | None,
        caches: VoiceFiles, executor: Executor,
    ) -> None:
        self.languages = languages
        self.folder = folder
        self._caches = caches
        self._executor = executor
        self._changing = asyncio.Lock()  # one add, rename or delete at a time

    def folder_of(self, code: str) -> Path | None:
        folder = self.languages[code].folder
        return folder.resolve() if folder is not None else None

    # -- reading ------------------------------------------------------------------

    async def listing(self) -> list[dict]:
        loaded = await loaded_voices(self.languages)
        return [
            self._describe(voice, loaded)
            for _, voice in sorted(served_voices(self.languages).items())
        ]

    async def describe(self, name: str) -> dict:
        return self._describe(self.lookup(name), await loaded_voices(self.languages))

    def lookup(self, name: str) -> StudioVoice:
        """The voice served as `name`; StudioError (404) if there is none."""
        voices = served_voices(self.languages)
        if name not in voices:
            raise StudioError(str(UnknownVoiceError(name, voices)), 404)
        return voices[name]

    def _describe(self, voice: StudioVoice, loaded: set[LanguageVoice]) -> dict:
        language, source = self.languages[voice.language], voice.source
        return {
            "name": voice.served,
            "language": voice.language,
            "description": source.description,
            "languages": list(language.resolved.description.languages),
            "kind": "predefined" if source.kind is VoiceKind.PREDEFINED else "custom",
            "source": source.kind.value,
            "default": source.name == language.default_voice,
            "loaded": voice.local in loaded,
            "editable": self._editable(voice),
            "speed": self.speed_of(voice),
        }

    def speed_of(self, voice: StudioVoice) -> float | None:
        """The voice's own speaking rate; None: the server's."""
        settings = self.languages[voice.language].settings
        return None if settings is None else settings.speed(voice.source.name)

    def _editable(self, voice: StudioVoice) -> bool:
        """A file of its language's voices folder (not a predefined voice, nor a --voice file)."""
        folder, path = self.folder_of(voice.language), voice.source.path
        return (
            folder is not None
            and voice.source.kind is not VoiceKind.PREDEFINED
            and path is not None
            and path.parent.resolve() == folder.resolve()
        )

    async def export(self, name: str) -> bytes:
        """The voice's state in the reference's .safetensors format, with its own speaking
        rate in its metadata if it has one."""
        voice = self.lookup(name)
        return with_speed(await self._state_file(voice), self.speed_of(voice))

    async def _state_file(self, voice: StudioVoice) -> bytes:
        if voice.source.kind is VoiceKind.STATE:
            return await asyncio.to_thread(voice.source.checked_path().read_bytes)
        try:
            async with (
                self.languages.use(voice.language) as loaded,
                loaded.voices.use(voice.source.name) as state,
            ):
                identity = model_identity(loaded.language.resolved.description.name)
                return await self._on_loader(_state_bytes, state, identity)
        except VoiceError as error:
            raise StudioError(str(error)) from None

    # -- changing -----------------------------------------------------------------

    async def add(
        self, name: str | None, filename: str, data: bytes, language: str | None = None
    ) -> dict:
        """A new voice of `language` (default: the default language's) from a recording
        (cloned) or a voice file (checked), loaded by that language's model; a voice file
        that carries a speaking rate gives it to the voice. The voice as listed, with a
        `warning` if the file's rate was not one and was ignored."""
        code = self._served_code(language)
        folder = self._folder(code)
        kind = sniff(data)
        speed, warning = None, None
        if kind is FileKind.VOICE_STATE:
            try:
                speed = file_speed(data)
            except ValueError as error:
                warning = str(error)
        name = self._new_name(name or suggest_name(filename, set(self._taken())), folder)
        async with self.languages.use(code) as loaded:
            files = voice_files(loaded)
            if kind is FileKind.VOICE_STATE:
                voice = await self._checked_voice_file(files, data)
                path, content = folder / f"{name}{STATE_SUFFIX}", data
            else:
                if not loaded.model.has_voice_cloning:
                    raise StudioError(CLONING_UNAVAILABLE, 409)
                wav = await asyncio.to_thread(lambda: as_wav(prepare(decode(data, kind))))
                voice = await self._encoded(loaded.model, wav.recording)
                path, content = folder / f"{name}.wav", wav.data
            async with self._changing:
                self._new_name(name, folder)  # another upload may have taken it meanwhile
                try:  # a language's subfolder is made for its first voice
                    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
                except OSError as error:
                    raise StudioError(f"Cannot create {folder}: {error.strerror}", 507) from None
                try:
                    await asyncio.to_thread(write_new, path, content)
                except FileExistsError:
                    raise StudioError(f"A voice named {name} exists already.", 409) from None
                except OSError as error:
                    raise StudioError(f"Cannot write {path.name}: {error.strerror}", 507) from None
                loaded.voices.keep(loaded.voices.lookup(name), voice)
                if kind is not FileKind.VOICE_STATE:  # under the lock: no rename or delete yet
                    await asyncio.to_thread(files.cache, path, voice, content)
                # Also clears a rate left under this name by a voice removed by hand.
                await self._keep_speed(code, name, speed)
        described = await self.describe(name)
        return described if warning is None else {**described, "warning": warning}

    async def set_speed(self, name: str, speed: float | None) -> dict:
        """Keep `speed` (checked) as the voice's own speaking rate, None: the server's.
        Any voice can have one, a predefined one too: it is kept in its language's
        voices folder, which the server needs."""
        async with self._changing:
            voice = self.lookup(name)
            await self._keep_speed(voice.language, voice.source.name, speed)
        return await self.describe(name)

    async def rename(self, name: str, new_name: str) -> dict:
        async with self._change(name) as (voice, folder):
            new_name = self._new_name(new_name, folder)
            try:
                for path in self._files_of(voice.source.name, folder):
                    self._drop_caches(path)  # named after the recording
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
            settings = self.languages[voice.language].settings
            if settings is not None:
                await self._write_settings(settings, settings.rename, voice.source.name, new_name)
        async with in_memory(self.languages, voice.language) as loaded:
            if loaded is not None:  # loaded again, as it was
                try:
                    async with loaded.voices.use(new_name):
                        pass
                except VoiceError:
                    pass  # listed all the same: its preview says what is wrong
        return await self.describe(new_name)

    async def delete(self, name: str) -> None:
        async with self._change(name) as (voice, folder):
            try:
                for path in self._files_of(voice.source.name, folder):
                    self._drop_caches(path)
                    path.unlink(missing_ok=True)
            except OSError as error:
                raise StudioError(f"Cannot delete {name}: {error.strerror}", 507) from None
            await self._keep_speed(voice.language, voice.source.name, None)

    @asynccontextmanager
    async def _change(self, name: str) -> AsyncIterator[tuple[StudioVoice, Path]]:
        """The voice served as `name` and its folder, for the block to rename or delete
        its files: one change at a time, and none while a request speaks with it. Its
        language's voice store, if in memory, forgets it once the block succeeds."""
        async with self._changing:
            voice = self.lookup(name)
            async with in_memory(self.languages, voice.language) as loaded:
                self._check_changeable(voice, loaded)
                folder = self.folder_of(voice.language)
                assert folder is not None  # an editable voice is in its folder
                yield voice, folder
                if loaded is not None:
                    loaded.voices.forget(voice.source.name)

    async def _keep_speed(self, code: str, name: str, speed: float | None) -> None:
        """Keep `speed` for the voice `name` of language `code`, writing the settings
        only if that changes them: a folder gets a settings file once a rate is set."""
        if speed is None and self.languages[code].settings is None:
            return  # none kept, none to keep
        settings = self._settings(code)
        if settings.speed(name) != speed:
            await self._write_settings(settings, settings.set_speed, name, speed)

    @staticmethod
    async def _write_settings(
        settings: VoiceSettings, change: Callable[..., None], *args: object
    ) -> None:
        try:
            await asyncio.to_thread(change, *args)
        except OSError as error:
            raise StudioError(
                f"Cannot write {settings.path}: {error.strerror or error}", 507
            ) from None

    def _drop_caches(self, path: Path) -> None:
        """The cached encodings of a recording, for every model."""
        if path.suffix.lower() in AUDIO_SUFFIXES:
            for cached in self._caches.all_cache_files(path):
                cached.unlink(missing_ok=True)

    # -- checks ---------------------------------------------------------------------

    def _served_code(self, language: str | None) -> str:
        if not language:
            return self.languages.default.code
        code = self.languages.served_code(language)
        if code is None:
            raise StudioError(
                f"This server does not speak {language!r}: choose one of "
                f"{', '.join(self.languages.codes)}.", 400,
            )
        return code

    def _folder(self, code: str) -> Path:
        folder = self.folder_of(code)
        if folder is None:
            raise StudioError(
                "This server has no voices folder: start it with --voices-dir FOLDER to add "
                "voices.", 409,
            )
        return folder

    def _settings(self, code: str) -> VoiceSettings:
        settings = self.languages[code].settings
        if settings is None:
            raise StudioError(
                "This server has no voices folder, where a voice's speed is kept: start it "
                "with --voices-dir FOLDER.", 409,
            )
        return settings

    def _taken(self) -> dict[str, str]:
        """Every name a voice has, served or in its own language, with the language of
        the voice served under it, else of one that has it in its own language."""
        voices = served_voices(self.languages)
        taken = {served: voice.language for served, voice in voices.items()}
        for voice in voices.values():
            taken.setdefault(voice.source.name, voice.language)
        return taken

    def _new_name(self, name: str, folder: Path) -> str:
        """`name` if it is valid and no voice of any language has it."""
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise StudioError(f"Invalid voice name {name!r}: use {NAME_RULE}.", 400)
        holder = self._taken().get(name)
        if holder is not None and len(self.languages.codes) > 1:
            raise StudioError(
                f"A voice named {name} exists already, in {language_name(holder)}: a name "
                "is unique across the languages.", 409,
            )
        if holder is not None or self._files_of(name, folder):
            raise StudioError(f"A voice named {name} exists already.", 409)
        return name

    def _check_changeable(self, voice: StudioVoice, loaded: LoadedLanguage | None) -> None:
        name = voice.served
        if not self._editable(voice):
            raise StudioError(
                f"{name} is not a voice of the voices folder: only those can be changed.", 403
            )
        if voice.source.name == self.languages[voice.language].default_voice:
            raise StudioError(f"{name} is the default voice: choose another default first.", 409)
        if loaded is not None and loaded.voices.in_use(voice.source.name):
            raise StudioError(
                f"{name} is speaking right now: try again when the request is done.", 409
            )

    @staticmethod
    def _files_of(name: str, folder: Path) -> list[Path]:
        """The voice files of this name in the folder (a recording and a state may share it)."""
        return [
            folder / f"{name}{suffix}"
            for suffix in (*sorted(AUDIO_SUFFIXES), STATE_SUFFIX)
            if (folder / f"{name}{suffix}").is_file()
        ]

    async def _checked_voice_file(self, files: VoiceFiles, data: bytes) -> VoiceState:
        """The voice of an uploaded voice file, refused unless the model can speak with it
        (made for it, or shaped for it)."""
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"upload{STATE_SUFFIX}"
            await asyncio.to_thread(path.write_bytes, data)
            try:
                return await self._on_loader(files.load_state, path)
            except VoiceError as error:
                message = str(error).replace(str(path), "the file")
                raise StudioError(f"This voice file cannot be used: {message}") from None

    async def _encoded(self, model: PocketTTS, recording: Recording) -> VoiceState:
        try:
            return await self._on_loader(
                model.voice_from_samples, recording.samples, recording.sample_rate
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
