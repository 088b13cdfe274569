"""A server process as Home Assistant sees it: the package run as a subprocess on the
tiny random-weight model, and the client helpers the protocol tests share.

With `SHORT` (`--eos-threshold -1000`) the model ends every chunk right after the
minimum number of frames (short, fast audio); without it the end of speech never
comes and a text runs to its length limit (long audio, for tests about concurrency,
cancellation and shutdown).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.support.reference_model import BuiltModel

REPO = Path(__file__).resolve().parents[2]
FRAME_BYTES = 1920 * 2  # one 80 ms frame of 16-bit mono at 24 kHz
TIMEOUT = 120.0  # generous: the machine may be loaded
SHORT = ["--eos-threshold", "-1000"]
LONG_TEXT = "The quick brown fox jumps over the lazy dog."  # 167 frames without EOS


# ---------------------------------------------------------------------------
# Harness


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class ServerProcess:
    process: subprocess.Popen
    log_path: Path
    port: int | None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.process.poll() is not None:
                pytest.fail(
                    f"server exited ({self.process.returncode}) before {text!r}:\n{self.log()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"no {text!r} in the server log after {timeout} s:\n{self.log()}")
            time.sleep(0.05)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def client(self) -> AsyncTcpClient:
        assert self.port is not None
        return AsyncTcpClient("127.0.0.1", self.port, connect_timeout=TIMEOUT, read_timeout=TIMEOUT)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def on_cores(cores: set[int]) -> tuple[str, ...]:
    """What Python runs for `-m wyoming_pocket_tts`, on `cores` only: the process sets
    its own affinity before anything reads it."""
    script = (
        f"import os, runpy; os.sched_setaffinity(0, {sorted(cores)!r}); "
        "runpy.run_module('wyoming_pocket_tts', run_name='__main__', alter_sys=True)"
    )
    return ("-c", script)


def launch(
    directory: Path,
    model: BuiltModel,
    *args: str,
    env: dict[str, str] | None = None,
    stdio: bool = False,
    wait: bool = True,
    program: tuple[str, ...] = ("-m", "wyoming_pocket_tts"),
) -> ServerProcess:
    """Start the server speaking `model`, unless `args` name models of their own;
    `program` is what Python runs (a script that wraps the server's `run`, to inject
    a fault, or `on_cores`)."""
    directory.mkdir(parents=True, exist_ok=True)
    port = None if stdio else free_port()
    uri = "stdio://" if stdio else f"tcp://127.0.0.1:{port}"
    log_path = directory / "server.log"
    command = [
        sys.executable,
        *program,
        "--uri",
        uri,
        *([] if "--model" in args else ["--model", str(model.config_path)]),
        *args,
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            stderr=log,
            stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdio else subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
    server = ServerProcess(process, log_path, port)
    if wait:
        server.wait_for_log("Ready")
    return server



@dataclass
class AudioStream:
    start: AudioStart
    chunks: list[AudioChunk]
    stop: Event


async def read_audio(client: AsyncTcpClient) -> AudioStream:
    """One AudioStart .. AudioStop, failing on anything else."""
    event = await client.read_event()
    assert event is not None and AudioStart.is_type(event.type), event
    start = AudioStart.from_event(event)
    chunks = []
    while True:
        event = await client.read_event()
        assert event is not None, "connection closed inside an audio stream"
        if AudioChunk.is_type(event.type):
            chunks.append(AudioChunk.from_event(event))
            continue
        assert event.type == "audio-stop", event
        return AudioStream(start, chunks, event)


async def synthesize(server: ServerProcess, text: str, voice: str | None = None) -> AudioStream:
    async with server.client() as client:
        await client.write_event(
            Synthesize(text=text, voice=SynthesizeVoice(name=voice) if voice else None).event()
        )
        return await read_audio(client)


async def served_or_refused(server: ServerProcess, text: str) -> str:
    """One request: 'served' (a whole audio stream) or 'refused' (an error naming the
    connection limit, then the connection closed)."""
    async with server.client() as client:
        await client.write_event(Synthesize(text=text).event())
        event = await client.read_event()
        assert event is not None
        if Error.is_type(event.type):
            assert "--max-connections" in Error.from_event(event).text
            assert await client.read_event() is None
            return "refused"
        assert event.type == "audio-start", event
        while (event := await client.read_event()).type != "audio-stop":
            assert event.type == "audio-chunk", event
        return "served"


async def describe(client: AsyncTcpClient) -> Info:
    await client.write_event(Describe().event())
    event = await client.read_event()
    assert event is not None and Info.is_type(event.type), event
    return Info.from_event(event)


async def event_types_until_close(reader: asyncio.StreamReader) -> list[str]:
    """The types of the events a client reads until the server closes ("reset" last if
    the connection was reset), as Home Assistant reads until then."""
    from wyoming_pocket_tts.server.wire import read_event

    types = []
    try:
        while event := await read_event(reader, idle_timeout=TIMEOUT, partial_timeout=TIMEOUT):
            types.append(event.type)
    except ConnectionError:
        types.append("reset")
    return types


def assert_pcm_frames(stream: AudioStream) -> None:
    assert (stream.start.rate, stream.start.width, stream.start.channels) == (24000, 2, 1)
    assert stream.chunks, "no audio"
    for index, chunk in enumerate(stream.chunks):
        assert (chunk.rate, chunk.width, chunk.channels) == (24000, 2, 1)
        assert len(chunk.audio) == FRAME_BYTES  # one chunk per decoded frame
        assert chunk.timestamp == index * 80
    samples = struct.unpack(f"<{len(stream.chunks[0].audio) // 2}h", stream.chunks[0].audio)
    assert max(abs(sample) for sample in samples) > 0, "silent audio"


def run(coroutine):
    return asyncio.run(coroutine)

