"""A server of the benchmarks' own: `python -m wyoming_pocket_tts` on a loopback port."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 600.0  # a real-size model on a small CPU, its voices encoded first


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_or_kill(process: subprocess.Popen, timeout: float) -> int:
    """The process's exit code, once it has ended by itself or been killed after `timeout`."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


class LocalServer:
    """The server with `arguments` (besides its URI), its output in `log_path`."""

    def __init__(self, arguments: list[str], log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        command = [
            sys.executable, "-m", "wyoming_pocket_tts",
            "--uri", f"tcp://127.0.0.1:{self.port}", *arguments,
        ]  # fmt: skip
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    async def wait_ready(self) -> None:
        """Until the server answers Describe (it listens only once its model and voices
        are loaded)."""
        from wyoming.client import AsyncTcpClient
        from wyoming.info import Describe, Info

        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                async with AsyncTcpClient("127.0.0.1", self.port, connect_timeout=1) as client:
                    await client.write_event(Describe().event())
                    event = await asyncio.wait_for(client.read_event(), timeout=5)
                    if event is not None and Info.is_type(event.type):
                        return
            except (TimeoutError, OSError):
                pass
            await asyncio.sleep(0.5)
        raise SystemExit(f"the server did not answer Describe in {START_TIMEOUT_S:.0f} s")

    def stop(self) -> int:
        """Stop it as its supervisor would (SIGTERM); its exit code."""
        self.process.terminate()
        return wait_or_kill(self.process, timeout=30)
