"""From a command's options to a loaded model and its voices.

The server and every subcommand take this one path, so a model or a voice is found,
checked, cached and refused the same way whichever command names it. Options come
as a typed `ModelOptions`, never as an argparse namespace (commands/options.py
builds one from the command line).

Importing this module does not import torch, so a command can build its options
before its process set-up (`engine.cpu.process.prepare_process`, which must come
first); the functions that load import the engine when called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from wyoming_pocket_tts.catalog import CatalogError, ModelEntry, load_catalog
from wyoming_pocket_tts.download import (
    DownloadError,
    DownloadOptions,
    resolve_model_files,
    resolve_voice_file,
)
from wyoming_pocket_tts.engine.errors import EngineError, VoiceError
from wyoming_pocket_tts.engine.model.config import ModelConfig, load_model_config
from wyoming_pocket_tts.voices.store import (
    AUDIO_SUFFIXES,
    STATE_SUFFIX,
    UnknownVoiceError,
    VoiceKind,
    VoiceSource,
    scan_voices_dir,
    voice_from_file,
)

if TYPE_CHECKING:
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS
    from wyoming_pocket_tts.engine.model.voice import VoiceState
    from wyoming_pocket_tts.voices.files import VoiceFiles

#: Folder in the download directory for the encoded states of recordings whose own
#: folder is read-only (see voices/files.py).
VOICE_CACHE_FOLDER = "wyoming-pocket-tts-voices"

#: What a bad model or voice (a name, a file, a download) raises: each is reported as
#: one line naming what is wrong, never as a traceback.
LOAD_ERRORS = (CatalogError, DownloadError, EngineError, UnknownVoiceError, OSError)


@dataclass(frozen=True)
class ModelDescription:
    """What a server says about the model it serves."""

    name: str
    languages: tuple[str, ...]  # codes as Home Assistant matches them: "en", "fr"


@dataclass(frozen=True)
class ModelOptions:
    """Which model to run, where its files and voices come from."""

    model: str | None = None  # a catalog name or a pocket-tts YAML path; None: the default
    languages: tuple[str, ...] = ()  # what a YAML model speaks (default: en)
    quantize: bool = False
    download: DownloadOptions = field(default_factory=DownloadOptions)
    voices_dir: Path | None = None  # custom voices, rescanned whenever voices are listed


@dataclass(frozen=True)
class ResolvedModel:
    """The model's files, found or downloaded, and what it is called."""

    options: ModelOptions
    config: ModelConfig
    weights_path: Path | None  # None: the paths in the config are local already
    tokenizer_path: Path | None
    description: ModelDescription  # its name and languages, as a server advertises them
    entry: ModelEntry | None  # the catalog entry, which offers predefined voices


def is_config_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or Path(name).is_file()


def model_name(options: ModelOptions) -> str:
    """The catalog name or YAML path the options name (the catalog's default if none)."""
    return options.model or load_catalog().default_model


def catalog_entry(options: ModelOptions) -> ModelEntry | None:
    """The catalog entry of the options' model, without fetching anything; None for a
    model given as a YAML path."""
    name = model_name(options)
    return None if is_config_path(name) else load_catalog().find_model(name)


def served_models(
    choices: Sequence[str], base: ModelOptions, yaml_language: str = "en"
) -> tuple[ModelOptions, ...]:
    """The models a server speaks, one per language, from `--model` values of the form
    `[LANG=]NAME|PATH`; the first is the default language, none means the catalog's
    default model. A catalog model speaks its own language; a YAML path speaks `LANG`,
    else `yaml_language`."""
    catalog = load_catalog()
    served: dict[str, ModelOptions] = {}
    for choice in choices or [catalog.default_model]:
        language, equals, model = choice.partition("=")
        if not equals or not language.isalpha():  # a path may hold "=" too
            language, model = "", choice
        language = language.lower()
        if language and language not in catalog.languages:
            raise CatalogError(
                f"--model {choice}: unknown language {language!r} "
                f"(the models speak {', '.join(catalog.languages)})"
            )
        if not model:
            raise CatalogError(f"--model {choice}: no model after {language}=")
        if is_config_path(model):
            language = language or yaml_language
        else:
            spoken = catalog.find_model(model).language
            if language and language != spoken:
                raise CatalogError(
                    f"--model {choice}: model {model!r} speaks {spoken}, not {language}"
                )
            language = spoken
        if language in served:
            raise CatalogError(
                f"--model {choice}: {language} is already spoken by {served[language].model}; "
                "one model per language"
            )
        served[language] = replace(base, model=model, languages=(language,))
    return tuple(served.values())


def resolve_model(options: ModelOptions) -> ResolvedModel:
    """The model named by the options: a YAML path, or a catalog name whose files are
    found or downloaded here (Ctrl-C stops a download)."""
    entry = catalog_entry(options)
    if entry is None:
        config = load_model_config(model_name(options))
        languages = options.languages or ("en",)
        description = ModelDescription(config.name, languages)
        return ResolvedModel(options, config, None, None, description, None)
    files = resolve_model_files(entry, options.download)
    return ResolvedModel(
        options=options,
        config=load_model_config(files.config_path),
        weights_path=files.weights_path,
        tokenizer_path=files.tokenizer_path,
        description=ModelDescription(entry.name, (entry.language,)),
        entry=entry,
    )


def load_model(resolved: ResolvedModel) -> PocketTTS:
    """Load on a thread of its own with every core, so that no long-lived thread keeps
    OpenMP workers (see engine/cpu/threads.py)."""
    from wyoming_pocket_tts.engine.cpu.threads import run_on_own_thread
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS

    return run_on_own_thread(
        PocketTTS.load,
        resolved.config, resolved.weights_path, resolved.tokenizer_path,
        quantize=resolved.options.quantize,
    )


# ---------------------------------------------------------------------------
# Voices


def voice_argument(voice: str) -> VoiceSource | None:
    """The voice file a `--voice` value names, or None when it is a voice's name.

    A value that looks like a file (a folder part or a voice file's extension) but is
    none is refused here, rather than reported as an unknown name.
    """
    path = Path(voice)
    if path.is_file():
        source = voice_from_file(path)
        if source is None:
            raise VoiceError(
                f"{voice} is not a voice file (audio: {', '.join(sorted(AUDIO_SUFFIXES))}; "
                f"voice state: {STATE_SUFFIX})"
            )
        return source
    if "/" in voice or path.suffix.lower() in (*AUDIO_SUFFIXES, STATE_SUFFIX):
        raise VoiceError(f"voice file not found: {voice}")
    return None


def voice_sources(
    entry: ModelEntry | None, voices_dir: Path | None, explicit: VoiceSource | None = None
) -> Callable[[], dict[str, VoiceSource]]:
    """All voices, rescanned per call: the catalog entry's predefined ones, then those in
    `voices_dir` (a custom voice with a predefined voice's name replaces it), then a
    `--voice` given as a file."""
    predefined = {
        voice.name: VoiceSource(voice.name, None, VoiceKind.PREDEFINED, voice.description)
        for voice in (entry.voices if entry else ())
    }

    def sources() -> dict[str, VoiceSource]:
        found = dict(predefined)
        if voices_dir is not None:
            found.update(scan_voices_dir(voices_dir))
        if explicit is not None:
            found[explicit.name] = explicit
        return found

    return sources


def default_voice(
    voice: str | None, resolved: ResolvedModel, available: Mapping[str, VoiceSource]
) -> str:
    """The voice to use when a request names none: `--voice`, else the model's."""
    if voice:
        return Path(voice).stem if Path(voice).is_file() else voice
    if resolved.entry is not None:
        return resolved.entry.default_voice
    if available:
        return min(available)
    raise UnknownVoiceError("(none given)", available)


def voice_files(
    model: PocketTTS, resolved: ResolvedModel, encoder: Executor | None = None
) -> VoiceFiles:
    """The model's voice files: recordings' encodings cached beside them, or in the
    download folder when theirs is read-only; recordings are encoded on `encoder`
    (None: on the calling thread)."""
    from wyoming_pocket_tts.voices.files import VoiceFiles

    fallback = resolved.options.download.cache_dir / VOICE_CACHE_FOLDER
    return VoiceFiles(model, resolved.description.name, fallback, encoder)


def voice_loader(
    model: PocketTTS, resolved: ResolvedModel, encoder: Executor | None = None
) -> Callable[[VoiceSource], VoiceState]:
    """Loads a voice on the calling thread: fetching a predefined voice may download,
    and a recording is encoded once, on `encoder` if given (its state is cached, see
    voices/files.py)."""
    download = resolved.options.download
    files = voice_files(model, resolved, encoder)

    def load(source: VoiceSource) -> VoiceState:
        if source.kind is VoiceKind.PREDEFINED:
            assert resolved.entry is not None
            try:
                path = resolve_voice_file(resolved.entry, source.name, download)
            except DownloadError as err:  # reported like any unusable voice
                raise VoiceError(f"voice {source.name} is unavailable: {err}") from err
            return files.load_state(path)
        assert source.path is not None  # a voice that is not predefined is a file
        path = source.checked_path()
        try:
            if source.kind is VoiceKind.STATE:
                return files.load_state(path)
            return files.load_audio(path)
        except VoiceError as err:  # say which voice: some reasons do not name the file
            raise VoiceError(f"voice {source.name} ({source.path.name}): {err}") from err

    return load


def load_voice(model: PocketTTS, resolved: ResolvedModel, voice: str) -> VoiceState:
    """The voice a `--voice` value names, found and loaded as the server would: a file,
    or a predefined or `voices_dir` voice's name (on a thread of its own, like the model)."""
    from wyoming_pocket_tts.engine.cpu.threads import run_on_own_thread

    explicit = voice_argument(voice)
    available = voice_sources(resolved.entry, resolved.options.voices_dir, explicit)()
    name = explicit.name if explicit is not None else voice
    if name not in available:
        raise UnknownVoiceError(name, available)
    return run_on_own_thread(voice_loader(model, resolved), available[name])
