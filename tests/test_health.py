"""The health check against real Wyoming servers started here, and against nothing."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable

import pytest
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer

from wyoming_pocket_tts.server.health import check_health, default_uri, probe_server

ATTRIBUTION = Attribution(name="test", url="https://example.invalid")
TTS_INFO = Info(
    tts=[
        TtsProgram(
            name="pocket-tts",
            attribution=ATTRIBUTION,
            installed=True,
            description=None,
            version="0.1.0",
            voices=[
                TtsVoice(
                    name="alba",
                    attribution=ATTRIBUTION,
                    installed=True,
                    description=None,
                    version=None,
                    languages=["en"],
                )
            ],
        )
    ]
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answering(info: Info | None) -> Callable[..., AsyncEventHandler]:
    """A handler that answers Describe with `info`, or stays silent when None."""

    class Handler(AsyncEventHandler):
        async def handle_event(self, event: Event) -> bool:
            if Describe.is_type(event.type) and info is not None:
                await self.write_event(info.event())
            return True

    return Handler


@contextlib.asynccontextmanager
async def running_server(info: Info | None) -> AsyncIterator[str]:
    uri = f"tcp://127.0.0.1:{free_port()}"
    server = AsyncServer.from_uri(uri)
    await server.start(answering(info))
    try:
        yield uri
    finally:
        await server.stop()


def test_healthy_server_passes() -> None:
    async def scenario() -> tuple[bool, str]:
        async with running_server(TTS_INFO) as uri:
            result = await probe_server(uri, timeout=5)
            return await check_health(uri, timeout=5), result.detail

    healthy, detail = asyncio.run(scenario())
    assert healthy
    assert "pocket-tts" in detail and "1 voice" in detail


def test_closed_port_fails() -> None:
    uri = f"tcp://127.0.0.1:{free_port()}"
    assert asyncio.run(check_health(uri, timeout=5)) is False
    assert "cannot connect" in asyncio.run(probe_server(uri, timeout=5)).detail


def test_silent_server_fails_at_the_timeout() -> None:
    async def scenario():
        async with running_server(None) as uri:
            return await probe_server(uri, timeout=0.3)

    result = asyncio.run(scenario())
    assert not result.healthy
    assert "did not answer" in result.detail


def test_server_without_tts_fails() -> None:
    async def scenario():
        async with running_server(Info()) as uri:
            return await probe_server(uri, timeout=5)

    result = asyncio.run(scenario())
    assert not result.healthy
    assert "no text to speech" in result.detail


@pytest.mark.parametrize("uri", ["http://127.0.0.1:10200", "stdio://", "tcp://127.0.0.1"])
def test_unusable_uri_is_reported_not_raised(uri: str) -> None:
    result = asyncio.run(probe_server(uri, timeout=1))
    assert not result.healthy
    assert result.detail


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        (None, "tcp://127.0.0.1:10200"),
        ("tcp://0.0.0.0:10300", "tcp://127.0.0.1:10300"),
        ("tcp://[::]:10300", "tcp://[::1]:10300"),
        ("tcp://192.0.2.7:10201", "tcp://192.0.2.7:10201"),
        ("unix:///run/pocket.sock", "unix:///run/pocket.sock"),
        ("nonsense", "tcp://127.0.0.1:10200"),
    ],
)
def test_default_uri_follows_the_server_setting(configured: str | None, expected: str) -> None:
    environ = {} if configured is None else {"WYOMING_POCKET_TTS_URI": configured}
    assert default_uri(environ) == expected


async def _run_command(*arguments: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wyoming_pocket_tts",
        "health-check",
        *arguments,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, output.decode()


def test_command_exit_codes() -> None:
    async def scenario():
        async with running_server(TTS_INFO) as uri:
            up = await _run_command("--uri", uri, "--timeout", "5")
        down = await _run_command("--uri", uri, "--timeout", "5")
        return up, down

    (up_code, up_text), (down_code, down_text) = asyncio.run(scenario())
    assert up_code == 0, up_text
    assert up_text.startswith("healthy:")
    assert down_code == 1
    assert down_text.startswith("unhealthy:")
    assert "Traceback" not in down_text


def test_command_rejects_a_bad_timeout() -> None:
    code, text = asyncio.run(_run_command("--timeout", "0"))
    assert code == 2
    assert "more than 0" in text
