"""Which models and predefined voices exist, and where their files are on the hub.

The catalog is data (`data/catalog.yaml` and the pocket-tts model configs in
`data/models/`); this module only reads it into typed, immutable entries. It never
touches the disk beyond the package or the network: finding or fetching the files is
`download.py`'s job.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

HF_URL_PREFIX = "hf://"


class CatalogError(ValueError):
    """A name or location the catalog cannot resolve; the message is fit for a user."""


@dataclass(frozen=True)
class HubFile:
    """One file of a hub repository at a pinned revision (a commit hash in the catalog)."""

    repo_id: str
    path: str
    revision: str

    @property
    def url(self) -> str:
        return f"{HF_URL_PREFIX}{self.repo_id}/{self.path}@{self.revision}"

    def __str__(self) -> str:
        return self.url


def parse_hf_url(url: str) -> HubFile:
    """Parse `hf://owner/repo/path/in/repo@revision`, the form pocket-tts configs use.

    The revision is required: an unpinned file could change under a cached voice state
    or a tested configuration.
    """
    if not url.startswith(HF_URL_PREFIX):
        raise CatalogError(f"{url!r} is not an hf:// URL (hf://owner/repo/path@revision)")
    location, at, revision = url[len(HF_URL_PREFIX) :].rpartition("@")
    parts = location.split("/")
    if not at or not revision or len(parts) < 3 or not all(parts):
        raise CatalogError(f"{url!r} is not of the form hf://owner/repo/path@revision")
    return HubFile(repo_id="/".join(parts[:2]), path="/".join(parts[2:]), revision=revision)


@dataclass(frozen=True)
class VoiceEntry:
    """A predefined voice of one model: its voice state was computed with that model's weights."""

    name: str
    language: str
    description: str
    state: HubFile


@dataclass(frozen=True)
class ModelEntry:
    name: str
    language: str
    description: str
    config_path: Path
    """The model's pocket-tts YAML configuration, shipped in this package."""
    weights: HubFile
    """Weights with the Mimi encoder's projection needed to clone voices from audio (gated repo)."""
    weights_without_cloning: HubFile
    """The same model without voice cloning (ungated): predefined voices and voice states only."""
    tokenizer: HubFile
    default_voice: str
    voices: tuple[VoiceEntry, ...]
    same_as: str | None = None
    """Another catalog name with identical weights, for aliases such as `english`."""

    @property
    def voice_names(self) -> tuple[str, ...]:
        return tuple(voice.name for voice in self.voices)

    def voice(self, name: str) -> VoiceEntry:
        for voice in self.voices:
            if voice.name == name:
                return voice
        raise CatalogError(
            _unknown_message(f"model {self.name!r} has no predefined voice", name, self.voice_names)
            + "; `list-voices` shows them all"
        )


@dataclass(frozen=True)
class Catalog:
    default_model: str
    models: tuple[ModelEntry, ...]
    languages: dict[str, str]  # code ("fr") to name ("French"), in the catalog's order

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(model.name for model in self.models)

    def find_model(self, name: str) -> ModelEntry:
        for model in self.models:
            if model.name == name:
                return model
        raise CatalogError(
            _unknown_message("unknown model", name, self.model_names)
            + "; `list-models` shows them all"
        )


def _unknown_message(what: str, name: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, known, n=4, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"{what} {name!r}{hint}"


def _data_dir() -> Path:
    return Path(str(resources.files("wyoming_pocket_tts") / "data"))


def _read_yaml(path: Path) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open(encoding="utf-8") as stream:
        return yaml.load(stream, Loader=loader)


def _model_entry(
    name: str, spec: dict[str, Any], data: dict[str, Any], models_dir: Path
) -> ModelEntry:
    config_path = models_dir / f"{name}.yaml"
    if not config_path.is_file():
        raise CatalogError(f"the catalog lists model {name!r} but {config_path} is missing")
    config = _read_yaml(config_path)
    language = spec["language"]
    states = data["voice_states"]
    voices = tuple(
        VoiceEntry(
            name=voice,
            language=about["language"],
            description=about["description"],
            state=HubFile(
                repo_id=states["repo_id"],
                path=states["path"].format(model=name, voice=voice),
                revision=states["revision"],
            ),
        )
        for voice, about in data["voices"].items()
    )
    return ModelEntry(
        name=name,
        language=language,
        description=spec["description"],
        config_path=config_path,
        weights=parse_hf_url(config["weights_path"]),
        weights_without_cloning=parse_hf_url(config["weights_path_without_voice_cloning"]),
        tokenizer=parse_hf_url(config["flow_lm"]["lookup_table"]["tokenizer_path"]),
        default_voice=data["languages"][language]["default_voice"],
        voices=voices,
        same_as=spec.get("same_as"),
    )


@functools.cache
def load_catalog() -> Catalog:
    """Read the catalog shipped in the package (once per process)."""
    data_dir = _data_dir()
    data = _read_yaml(data_dir / "catalog.yaml")
    models = tuple(
        _model_entry(name, spec, data, data_dir / "models") for name, spec in data["models"].items()
    )
    languages = {code: about["name"] for code, about in data["languages"].items()}
    return Catalog(default_model=data["default_model"], models=models, languages=languages)


def find_model(name: str) -> ModelEntry:
    """The catalog entry called `name`; a `CatalogError` naming close matches otherwise."""
    return load_catalog().find_model(name)
