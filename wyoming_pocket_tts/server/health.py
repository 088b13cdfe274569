"""Is the server answering? A Describe/Info round trip, for container health checks.

An open port is not enough: the server must read an event and answer it, and must
offer text to speech. This module imports nothing heavy (no torch), because Docker,
Kubernetes and the add-on's discovery service run it every few seconds.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from wyoming.client import AsyncClient
from wyoming.info import Describe, Info

DEFAULT_PORT = 10200
# The server's own address, settable from the environment like its other options.
URI_VARIABLE = "WYOMING_POCKET_TTS_URI"
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "*")


@dataclass(frozen=True)
class HealthResult:
    healthy: bool
    detail: str  # one line for logs: what answered, or why nothing did


def default_uri(environ: Mapping[str, str] = os.environ) -> str:
    """Where to look for the server when no URI is given.

    A container sets the server's listening address with WYOMING_POCKET_TTS_URI; the
    health check runs in the same container, so it follows that setting, connecting
    to the loopback address where the server listens on all interfaces.
    """
    configured = environ.get(URI_VARIABLE, "").strip()
    parsed = urlparse(configured)
    if parsed.scheme == "unix":
        return configured
    if parsed.scheme == "tcp":
        try:
            port = parsed.port or DEFAULT_PORT
        except ValueError:  # a malformed port: the check will report the default one
            port = DEFAULT_PORT
        host = parsed.hostname or ""
        if host in _WILDCARD_HOSTS:
            host = "127.0.0.1" if host != "::" else "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"tcp://{host}:{port}"
    return f"tcp://127.0.0.1:{DEFAULT_PORT}"


def _client(uri: str, timeout: float) -> AsyncClient:
    scheme = urlparse(uri).scheme
    if scheme not in ("tcp", "unix"):
        raise ValueError(f"unsupported URI {uri!r}: expected tcp://HOST:PORT or unix://PATH")
    return AsyncClient.from_uri(uri, connect_timeout=timeout, read_timeout=timeout)


async def _describe(uri: str, timeout: float) -> HealthResult:
    async with _client(uri, timeout) as client:
        await client.write_event(Describe().event())
        while True:
            event = await client.read_event()
            if event is None:
                return HealthResult(False, f"{uri} closed the connection without an answer")
            if Info.is_type(event.type):
                break
    info = Info.from_event(event)
    if not info.tts:
        return HealthResult(False, f"{uri} answered but offers no text to speech")
    names = ", ".join(program.name for program in info.tts)
    voices = sum(len(program.voices) for program in info.tts)
    return HealthResult(True, f"{uri} answered: {names} with {voices} voice(s)")


async def probe_server(uri: str, timeout: float) -> HealthResult:
    """Describe/Info round trip against `uri`, all of it within `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            return await _describe(uri, timeout)
    except TimeoutError:
        return HealthResult(False, f"{uri} did not answer within {timeout:g} s")
    except ValueError as err:
        return HealthResult(False, str(err))
    except OSError as err:
        reason = err.strerror or str(err) or type(err).__name__
        return HealthResult(False, f"cannot connect to {uri}: {reason}")


async def check_health(uri: str, timeout: float) -> bool:
    """True when the server at `uri` answers Describe with an Info offering TTS."""
    return (await probe_server(uri, timeout)).healthy
