"""A small stand-in for the model hub, served over real HTTP on 127.0.0.1.

It answers `HEAD`/`GET /{owner}/{repo}/resolve/{revision}/{path}` the way the hub does
for what `huggingface_hub.hf_hub_download` reads: `X-Repo-Commit`, `ETag` and
`X-Linked-Etag` (the sha256 of the content, as for LFS files), `X-Linked-Size`,
`Content-Length`, byte ranges (`206` with `Content-Range`, how an interrupted download
resumes) and the hub's error codes (`X-Error-Code: GatedRepo` with 401 without a token
and 403 with a token that was not granted; `RepoNotFound`, `RevisionNotFound`,
`EntryNotFound`). Every request is recorded, so tests can assert what went over the wire,
and a file can be set to drop the connection mid-body once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import unquote, urlsplit

import numpy as np
from safetensors.numpy import save

from wyoming_pocket_tts.catalog import HubFile, ModelEntry


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]

    @property
    def revision(self) -> str | None:
        parts = self.path.split("/")
        return parts[4] if len(parts) > 4 and parts[3] == "resolve" else None


@dataclass
class _Repo:
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    granted_tokens: set[str] | None = None  # None: not gated


class FakeHub:
    """A threaded HTTP server holding files by (repo, commit, path); use it as a context manager."""

    def __init__(self) -> None:
        self._repos: dict[str, _Repo] = {}
        self._cuts: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def add(self, hub_file: HubFile, content: bytes) -> None:
        repo = self._repos.setdefault(hub_file.repo_id, _Repo())
        repo.commits.setdefault(hub_file.revision, {})[hub_file.path] = content

    def gate(self, repo_id: str, granted_tokens: tuple[str, ...] = ()) -> None:
        """Make a repository gated: only these tokens may read it."""
        self._repos.setdefault(repo_id, _Repo()).granted_tokens = set(granted_tokens)

    def cut_once(self, hub_file: HubFile, after_bytes: int) -> None:
        """The next full GET of this file sends `after_bytes` of the body, then hangs up."""
        self._cuts[(hub_file.repo_id, hub_file.revision, hub_file.path)] = after_bytes

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _take_cut(self, key: tuple[str, str, str]) -> int | None:
        with self._lock:
            return self._cuts.pop(key, None)


def _handler_for(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output clean

        def do_HEAD(self) -> None:
            self._serve(send_body=False)

        def do_GET(self) -> None:
            self._serve(send_body=True)

        def _error(self, status: int, code: str, commit: str | None = None) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", code)
            if commit is not None:
                self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _serve(self, send_body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub._record(Request(self.command, path, dict(self.headers.items())))
            parts = path.lstrip("/").split("/", 4)
            if len(parts) < 5 or parts[2] != "resolve":
                return self._error(404, "RepoNotFound")
            repo_id, revision, file_path = f"{parts[0]}/{parts[1]}", parts[3], parts[4]
            repo = hub._repos.get(repo_id)
            if repo is None:
                return self._error(404, "RepoNotFound")
            if repo.granted_tokens is not None:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                if not token:
                    return self._error(401, "GatedRepo")
                if token not in repo.granted_tokens:
                    return self._error(403, "GatedRepo")
            files = repo.commits.get(revision)
            if files is None:
                return self._error(404, "RevisionNotFound")
            content = files.get(file_path)
            if content is None:
                return self._error(404, "EntryNotFound", commit=revision)
            self._send_file(content, revision, send_body, (repo_id, revision, file_path))

        def _send_file(
            self, content: bytes, revision: str, send_body: bool, key: tuple[str, str, str]
        ) -> None:
            start = _range_start(self.headers.get("Range"))
            etag = f'"{hashlib.sha256(content).hexdigest()}"'
            if start is not None and send_body:
                self.send_response(206)
                self.send_header(
                    "Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}"
                )
                body = content[start:]
            else:
                self.send_response(200)
                body = content
            self.send_header("X-Repo-Commit", revision)
            self.send_header("ETag", etag)
            self.send_header("X-Linked-Etag", etag)
            self.send_header("X-Linked-Size", str(len(content)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not send_body:
                return
            cut = hub._take_cut(key) if start is None else None
            if cut is None:
                self.wfile.write(body)
                return
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True

    return Handler


def _range_start(header: str | None) -> int | None:
    if not header or not header.startswith("bytes="):
        return None
    first = header.removeprefix("bytes=").split(",")[0]
    return int(first.split("-")[0])


def tiny_safetensors(seed: int, floats: int = 64) -> bytes:
    """A small, valid safetensors file whose content depends on `seed`."""
    rng = np.random.default_rng(seed)
    return save({"weight": rng.standard_normal(floats).astype(np.float32)})


def tiny_tokenizer_json(seed: int) -> bytes:
    return json.dumps({"version": "1.0", "model": {"type": "Unigram", "seed": seed}}).encode()


@dataclass(frozen=True)
class PublishedModel:
    """What `publish_model` put on the fake hub, to compare downloads against."""

    weights: bytes
    weights_without_cloning: bytes
    tokenizer: bytes
    voices: dict[str, bytes]


def publish_model(
    hub: FakeHub,
    entry: ModelEntry,
    voices: tuple[str, ...] = (),
    *,
    gated: bool = True,
    granted_tokens: tuple[str, ...] = (),
    weight_floats: int = 64,
) -> PublishedModel:
    """Put a catalog model's files on the hub, at the paths and revisions the catalog pins."""
    published = PublishedModel(
        weights=tiny_safetensors(1, weight_floats),
        weights_without_cloning=tiny_safetensors(2, weight_floats),
        tokenizer=tiny_tokenizer_json(3),
        voices={name: tiny_safetensors(10 + index) for index, name in enumerate(voices)},
    )
    hub.add(entry.weights, published.weights)
    hub.add(entry.weights_without_cloning, published.weights_without_cloning)
    hub.add(entry.tokenizer, published.tokenizer)
    for name, content in published.voices.items():
        hub.add(entry.voice(name).state, content)
    if gated:
        hub.gate(entry.weights.repo_id, granted_tokens)
    return published


def truncated(content: bytes) -> bytes:
    """The first half of a file, as an interrupted copy would leave it."""
    return content[: len(content) // 2]
