"""A real server process with the voice studio on, for the studio's API and browser tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.support.reference_model import BuiltModel, build_model
from tests.support.server import REPO, TIMEOUT, ServerProcess, free_port


@dataclass
class StudioServer(ServerProcess):
    """A server process with its studio on `http_port`."""

    http_port: int = 0

    @property
    def wyoming_port(self) -> int:
        assert self.port is not None
        return self.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/"

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(method, self.url + path, timeout=TIMEOUT, **kwargs)


def start_studio_server(directory: Path, config_path: Path, *args: str) -> StudioServer:
    """Start the server on free ports with the studio on, speaking the model at
    `config_path` unless `args` name models of their own; returns once it is ready."""
    directory.mkdir(parents=True, exist_ok=True)
    wyoming_port, http_port = free_port(), free_port()
    log_path = directory / "server.log"
    command = [
        sys.executable, "-m", "wyoming_pocket_tts",
        "--uri", f"tcp://127.0.0.1:{wyoming_port}",
        "--http-uri", f"tcp://127.0.0.1:{http_port}",
        *([] if "--model" in args else ["--model", str(config_path)]),
        *args,
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=REPO, stderr=log, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            env=dict(os.environ),
        )
    server = StudioServer(process, log_path, wyoming_port, http_port)
    deadline = time.monotonic() + TIMEOUT
    while "Ready" not in server.log():
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"the server did not start:\n{server.log()}")
        time.sleep(0.05)
    return server


def french_model(models_dir: Path, tokenizer_dir: Path) -> BuiltModel:
    """A tiny random-weight French model, built once per session's models folder."""
    return build_model(
        models_dir / "tiny_fr", base="french", tiny=True, seed=1, tokenizer_dir=tokenizer_dir
    )


def start_bilingual_studio(
    directory: Path, english: BuiltModel, french: BuiltModel, *args: str
) -> StudioServer:
    """A studio server speaking English (the default) and French."""
    return start_studio_server(
        directory, english.config_path,
        "--model", f"en={english.config_path}", "--model", f"fr={french.config_path}", *args,
    )
