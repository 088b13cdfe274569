"""A voice's own speaking rate as the studio reads it from a request and carries it in a
voice file, so that an exported voice speaks at its pace wherever it is imported.

The rate goes in the file's safetensors metadata (text, key `speed`), which the header
holds in JSON before the tensors: it is read and written there without loading them.
"""

from __future__ import annotations

import json

from ..engine.tempo import MAX_SPEED, MIN_SPEED, check_speed
from .uploads import StudioError

SPEED_KEY = "speed"
SPEED_RULE = (
    f"`speed` is a number from {MIN_SPEED} to {MAX_SPEED} (1.0: the model's pace), or null "
    "for the server's speed"
)
_METADATA = "__metadata__"
_HEADER_SIZE_BYTES = 8
_HEADER_ALIGNMENT = 8  # safetensors pads its header with spaces to this


def requested_speed(value: object) -> float | None:
    """A speed as a request's JSON gives it; StudioError (400) for anything but a number
    within range or null."""
    if value is None:
        return None
    # JSON's true is a Python int, and its NaN a float: neither is a rate.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StudioError(f"{SPEED_RULE}, not {json.dumps(value)}.", 400)
    try:
        return check_speed(value)
    except ValueError:
        raise StudioError(f"{SPEED_RULE}, not {value}.", 400) from None


def file_speed(data: bytes) -> float | None:
    """The speaking rate a voice file carries (None: none, or no readable header, which
    loading the file reports); ValueError if what it carries is not a rate."""
    header = _header(data)
    metadata = header.get(_METADATA) if header is not None else None
    if not isinstance(metadata, dict) or SPEED_KEY not in metadata:
        return None
    value = metadata[SPEED_KEY]
    try:
        return check_speed(float(value))
    except (TypeError, ValueError):
        raise ValueError(
            f"The file's speed {value!r} is not a speaking rate from {MIN_SPEED} to "
            f"{MAX_SPEED}: it was ignored, the voice speaks at the server's speed."
        ) from None


def with_speed(data: bytes, speed: float | None) -> bytes:
    """A voice file's bytes carrying `speed` (None: carrying none); the same bytes when
    they already do, or when their header cannot be read."""
    header = _header(data)
    if header is None:
        return data
    old = header.get(_METADATA) or {}
    if not isinstance(old, dict):
        return data
    metadata = {key: value for key, value in old.items() if key != SPEED_KEY}
    if speed is not None:
        metadata[SPEED_KEY] = str(speed)
    if metadata == old:
        return data
    header.pop(_METADATA, None)
    if metadata:
        header = {_METADATA: metadata, **header}
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % _HEADER_ALIGNMENT)
    tensors = data[_HEADER_SIZE_BYTES + _header_length(data):]
    return len(encoded).to_bytes(_HEADER_SIZE_BYTES, "little") + encoded + tensors


def _header_length(data: bytes) -> int:
    return int.from_bytes(data[:_HEADER_SIZE_BYTES], "little")


def _header(data: bytes) -> dict | None:
    length = _header_length(data)
    if len(data) < _HEADER_SIZE_BYTES or length > len(data) - _HEADER_SIZE_BYTES:
        return None
    try:
        header = json.loads(data[_HEADER_SIZE_BYTES:_HEADER_SIZE_BYTES + length])
    except ValueError:  # UnicodeDecodeError is one
        return None
    return header if isinstance(header, dict) else None
