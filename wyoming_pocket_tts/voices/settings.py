"""What a user set for each voice of a folder (today its speaking rate), kept beside
the voices in a small JSON file so that it survives restarts and backups.

Home Assistant passes no rate to a Wyoming server, so a voice that should speak
faster or slower says so itself. The file is read again whenever it changes on disk
and written whole through a temporary file, so a reader never sees half of it; a
damaged file is reported once and read as empty rather than stopping speech.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from pathlib import Path

from ..engine.tempo import check_speed

_LOGGER = logging.getLogger(__name__)

SETTINGS_FILE = ".pocket-tts-settings.json"


class VoiceSettings:
    """The settings of the voices in `folder` (which need not exist yet)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / SETTINGS_FILE
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None  # the file's (mtime, size) when read
        self._speeds: dict[str, float] = {}

    def speed(self, name: str) -> float | None:
        """The voice's own speaking rate, or None (the server's)."""
        return self._read().get(name)

    def speeds(self) -> dict[str, float]:
        return dict(self._read())

    def set_speed(self, name: str, speed: float | None) -> None:
        """Keep a rate for the voice (None: use the server's again)."""
        with self._lock:
            speeds = dict(self._read_locked())
            if speed is None:
                speeds.pop(name, None)
            else:
                speeds[name] = check_speed(speed)
            self._write(speeds)

    def rename(self, old: str, new: str) -> None:
        with self._lock:
            speeds = dict(self._read_locked())
            if old in speeds:
                speeds[new] = speeds.pop(old)
                self._write(speeds)

    def forget(self, name: str) -> None:
        self.set_speed(name, None)

    def _read(self) -> dict[str, float]:
        with self._lock:
            return self._read_locked()

    def _read_locked(self) -> dict[str, float]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._speeds = None, {}
            return self._speeds
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            self._seen, self._speeds = seen, self._parse()
        return self._speeds

    def _parse(self) -> dict[str, float]:
        try:
            voices = json.loads(self.path.read_text(encoding="utf-8"))["voices"]
            return {
                str(name): check_speed(about["speed"])
                for name, about in voices.items() if "speed" in about
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            _LOGGER.warning("Ignoring the voice settings in %s: %s", self.path, err)
            return {}

    def _write(self, speeds: dict[str, float]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        content = {"voices": {name: {"speed": speed} for name, speed in sorted(speeds.items())}}
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".settings-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(content, stream, indent=2)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._seen, self._speeds = None, speeds
