"""Finding a catalog file on disk, or fetching it from the hub at its pinned revision.

Where files are looked for, in order:

1. each `--data-dir`, read-only, in one of two layouts: the hub's own layout
   `DATA_DIR/<owner>/<repo>/<path in repo>` (what `hf download REPO --local-dir
   DATA_DIR/REPO` produces; the revision is the user's business there), or a
   huggingface_hub cache (`DATA_DIR/models--<owner>--<repo>/snapshots/<revision>/...`),
   so an existing cache can be shared;
2. the download directory, a huggingface_hub cache (`--download-dir`, by default the
   hub's own cache, `HF_HUB_CACHE`); files are downloaded there, into a temporary file
   renamed in place when complete, so nothing half-written is ever found under its name.

Every file found is checked before use (a safetensors header that does not match the
file size, a JSON or SentencePiece file that does not parse): a damaged download is
deleted and fetched again, a damaged file in a data directory is skipped with a warning
(those folders are the user's; we never write to them). With `local_files_only` or
`HF_HUB_OFFLINE=1` nothing touches the network, and a missing file is an error that says
how to fetch it.
"""

from __future__ import annotations

import errno
import json
import logging
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import constants as hub_constants
from huggingface_hub import get_token, hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from tqdm import tqdm

from .catalog import HubFile, ModelEntry

_LOGGER = logging.getLogger(__name__)

DOWNLOAD_COMMAND = "wyoming-pocket-tts download"

# A safetensors header is a JSON table of tensors; far larger than any real one means
# the length prefix itself is garbage.
_MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
_NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_ACCESS_DENIED_STATUSES = (401, 403)


class DownloadError(Exception):
    """A file could not be found or fetched; the message says what and how to fix it."""


class MissingFileError(DownloadError):
    """A file is not on disk and downloads are off (local-files-only or HF_HUB_OFFLINE)."""


class AccessDeniedError(DownloadError):
    """The hub refused the file: a gated or private repository without a valid token."""


class DiskFullError(DownloadError):
    """The download directory ran out of space; the partial file has been removed."""


@dataclass(frozen=True)
class DownloadOptions:
    data_dirs: tuple[Path, ...] = ()
    download_dir: Path | None = None
    """A huggingface_hub cache folder; None means the hub's default (`HF_HUB_CACHE`)."""
    local_files_only: bool = False
    progress: bool = False
    """Show huggingface_hub's progress bars (the `download` subcommand does)."""

    @property
    def offline(self) -> bool:
        return self.local_files_only or hub_constants.is_offline_mode()

    @property
    def cache_dir(self) -> Path:
        return self.download_dir or Path(hub_constants.HF_HUB_CACHE)

    def places(self) -> str:
        return ", ".join(str(path) for path in (*self.data_dirs, self.cache_dir))


@dataclass(frozen=True)
class ModelFiles:
    """Local paths of everything a model needs (the config's own hf:// paths are superseded)."""

    config_path: Path
    weights_path: Path
    tokenizer_path: Path
    has_voice_cloning: bool
    """False when only the weights without voice cloning were available."""


def file_problem(path: Path) -> str | None:
    """Why `path` is not a usable copy of its kind of file, or None when it looks whole.

    Cheap enough for every start: a safetensors file is checked against its own header
    (which records where the last tensor ends), not read in full.
    """
    try:
        size = path.stat().st_size
        if size == 0:
            return "the file is empty"
        if path.suffix == ".safetensors":
            return _safetensors_problem(path, size)
        if path.suffix == ".json":
            json.loads(path.read_bytes())
        elif path.suffix == ".model":
            return _sentencepiece_problem(path)
    except (OSError, ValueError) as error:
        return f"it cannot be read ({error})"
    return None


def _safetensors_problem(path: Path, size: int) -> str | None:
    with path.open("rb") as stream:
        prefix = stream.read(8)
        if len(prefix) < 8:
            return "the safetensors header is cut short"
        (header_size,) = struct.unpack("<Q", prefix)
        if header_size > min(size - 8, _MAX_SAFETENSORS_HEADER):
            return "the safetensors header length runs past the end of the file"
        header = json.loads(stream.read(header_size))
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    expected = 8 + header_size + max(ends, default=0)
    if expected != size:
        return f"it holds {size} bytes where its safetensors header describes {expected}"
    return None


def _sentencepiece_problem(path: Path) -> str | None:
    import sentencepiece

    try:
        sentencepiece.SentencePieceProcessor().LoadFromSerializedProto(path.read_bytes())
    except RuntimeError:
        return "it is not a SentencePiece model"
    return None


def _candidates(hub_file: HubFile, options: DownloadOptions) -> Iterator[tuple[Path, bool]]:
    """Existing local copies in search order, each with whether it is ours to delete."""
    for data_dir in options.data_dirs:
        plain = data_dir / hub_file.repo_id / hub_file.path
        if plain.is_file():
            yield plain, False
        cached = _in_hub_cache(hub_file, data_dir)
        if cached is not None:
            yield cached, False
    cached = _in_hub_cache(hub_file, options.cache_dir)
    if cached is not None:
        yield cached, True


def _in_hub_cache(hub_file: HubFile, cache_dir: Path) -> Path | None:
    found = try_to_load_from_cache(
        hub_file.repo_id, hub_file.path, cache_dir=cache_dir, revision=hub_file.revision
    )
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def find_local(hub_file: HubFile, options: DownloadOptions) -> Path | None:
    """The first sound local copy of `hub_file`; no network, nothing written or deleted."""
    for path, _ in _candidates(hub_file, options):
        if file_problem(path) is None:
            return path
    return None


def _delete_damaged(pointer: Path, problem: str) -> None:
    """Remove a hub-cache entry: the snapshot link and the blob it points to.

    Both go: huggingface_hub would otherwise link the damaged blob again.
    """
    try:
        blob = pointer.resolve()
        pointer.unlink(missing_ok=True)
        if blob != pointer:
            blob.unlink(missing_ok=True)
    except OSError as error:
        raise DownloadError(
            f"{pointer} is damaged ({problem}) and cannot be deleted: {error.strerror}"
        ) from None


def fetch(hub_file: HubFile, options: DownloadOptions) -> Path:
    """A local path to `hub_file`: found on disk, or downloaded at its pinned revision."""
    for path, ours in _candidates(hub_file, options):
        problem = file_problem(path)
        if problem is None:
            return path
        if ours:
            _LOGGER.warning("%s is damaged (%s): deleting it to download it again", path, problem)
            _delete_damaged(path, problem)
        else:
            _LOGGER.warning("Skipping %s: %s", path, problem)
    if options.offline:
        raise MissingFileError(
            f"{hub_file} is not on disk (searched {options.places()}) and downloads are off "
            "(--local-files-only or HF_HUB_OFFLINE=1)"
        )
    path = _download(hub_file, options)
    problem = file_problem(path)
    if problem is not None:
        _delete_damaged(path, problem)
        raise DownloadError(f"{hub_file} arrived damaged ({problem}); it was deleted, try again")
    return path


class _NoProgress(tqdm):
    """huggingface_hub draws bars with any tqdm class it is given; this one draws none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        super().__init__(*args, **kwargs)


def _log_hub_messages_once() -> None:
    """huggingface_hub prints its messages (each retry of a failed request, say) through
    a handler of its own and passes them on to the application's as well: every one
    would be printed twice. The application's handler, with its format, is left."""
    logging.getLogger("huggingface_hub").handlers.clear()


def _download(hub_file: HubFile, options: DownloadOptions) -> Path:
    _LOGGER.info("Downloading %s", hub_file)
    _log_hub_messages_once()
    try:
        return Path(
            hf_hub_download(
                hub_file.repo_id,
                hub_file.path,
                revision=hub_file.revision,
                cache_dir=options.cache_dir,
                tqdm_class=None if options.progress else _NoProgress,
            )
        )
    except (GatedRepoError, RepositoryNotFoundError) as error:
        raise _access_denied(hub_file, error) from None
    except RevisionNotFoundError:
        raise DownloadError(
            f"the hub has no revision {hub_file.revision} of {hub_file.repo_id}"
        ) from None
    except LocalEntryNotFoundError as error:
        raise _explain_unreachable(hub_file, error) from None
    except EntryNotFoundError:
        raise DownloadError(f"the hub has no {hub_file}") from None
    except HfHubHTTPError as error:
        if error.response is not None and error.response.status_code in _ACCESS_DENIED_STATUSES:
            raise _access_denied(hub_file, error) from None
        raise DownloadError(f"cannot download {hub_file}: {_first_line(error)}") from None
    except OSError as error:
        if error.errno in _NO_SPACE_ERRNOS:
            raise DiskFullError(
                f"not enough disk space in {options.cache_dir} to download {hub_file}: "
                "free some space or choose another --download-dir"
            ) from None
        raise DownloadError(
            f"cannot download {hub_file} into {options.cache_dir}: {error}"
        ) from None
    # What is left are the transport errors of whichever HTTP client huggingface_hub uses
    # (it retries them itself first); they have no common public type.
    except Exception as error:  # noqa: BLE001
        raise DownloadError(
            f"downloading {hub_file} failed: {type(error).__name__}: {_first_line(error)}"
        ) from None


def _explain_unreachable(hub_file: HubFile, error: LocalEntryNotFoundError) -> DownloadError:
    """huggingface_hub folds refusals and network failures into one error; tell them apart."""
    cause = error.__cause__
    if (
        isinstance(cause, HfHubHTTPError)
        and cause.response is not None
        and cause.response.status_code in _ACCESS_DENIED_STATUSES
    ):
        return _access_denied(hub_file, cause)
    reason = _first_line(cause) if cause is not None else "no connection"
    return DownloadError(
        f"cannot reach the hub at {hub_constants.ENDPOINT} to download {hub_file} ({reason}); "
        "check the network, or copy the file into a --data-dir"
    )


def _access_denied(hub_file: HubFile, error: Exception) -> AccessDeniedError:
    token = "the token in HF_TOKEN" if get_token() else "no token (set HF_TOKEN)"
    return AccessDeniedError(
        f"the hub refused {hub_file} with {token}: it is gated, accept its terms at "
        f"{hub_constants.ENDPOINT}/{hub_file.repo_id} with the token's account "
        f"({_first_line(error)})"
    )


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _with_hint(error: MissingFileError, command: str) -> MissingFileError:
    return MissingFileError(f"{error}; fetch it while online with: {command}")


def resolve_model_files(
    entry: ModelEntry, options: DownloadOptions, *, want_voice_cloning: bool = True
) -> ModelFiles:
    """Local paths of a model's config, weights and tokenizer, fetching what is missing.

    With `want_voice_cloning` the gated weights (which can encode voices from audio) are
    preferred; when they cannot be had, the ungated weights are used and one log line
    says that cloning from audio is unavailable.
    """
    command = f"{DOWNLOAD_COMMAND} --model {entry.name}"
    weights, has_cloning = None, False
    if want_voice_cloning:
        weights = _voice_cloning_weights(entry, options)
        has_cloning = weights is not None
    try:
        if weights is None:
            weights = fetch(entry.weights_without_cloning, options)
        tokenizer = fetch(entry.tokenizer, options)
    except MissingFileError as error:
        raise _with_hint(error, command) from None
    return ModelFiles(
        config_path=entry.config_path,
        weights_path=weights,
        tokenizer_path=tokenizer,
        has_voice_cloning=has_cloning,
    )


def _voice_cloning_weights(entry: ModelEntry, options: DownloadOptions) -> Path | None:
    """The gated weights if on disk or obtainable, else None after saying why, once."""
    local = find_local(entry.weights, options)
    if local is not None:
        return local
    if options.offline:
        reason = "they are not on disk and downloads are off"
    elif get_token() is None:
        # Anonymous requests to a gated repository always fail: do not ask.
        reason = (
            f"no Hugging Face token (accept the terms of {entry.weights.repo_id}, "
            "then set HF_TOKEN)"
        )
    else:
        try:
            return fetch(entry.weights, options)
        except DiskFullError:
            raise
        except DownloadError as error:
            reason = str(error)
    _LOGGER.warning(
        "Voice-cloning weights %s unavailable: %s. Using %s instead: cloning voices from "
        "audio is unavailable; predefined voices and voice-state files still work",
        entry.weights.repo_id,
        reason,
        entry.weights_without_cloning.repo_id,
    )
    return None


def resolve_voice_file(entry: ModelEntry, voice: str, options: DownloadOptions) -> Path:
    """Local path of a predefined voice's state file for this model, fetching it if missing."""
    hub_file = entry.voice(voice).state
    try:
        return fetch(hub_file, options)
    except MissingFileError as error:
        raise _with_hint(
            error, f"{DOWNLOAD_COMMAND} --model {entry.name} --voice {voice}"
        ) from None


def installed(hub_files: Sequence[HubFile], options: DownloadOptions) -> bool:
    """Whether every one of `hub_files` has a sound local copy (no network)."""
    return all(find_local(hub_file, options) is not None for hub_file in hub_files)
