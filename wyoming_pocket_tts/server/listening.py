"""Taking connections on the configured transport until the process is asked to stop,
then stopping gracefully: no new connections, the announcement withdrawn, the open
ones given a moment to end their audio."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from urllib.parse import urlparse

from wyoming.event import async_get_stdin

from .config import ServerConfig
from .connections import Connections

_LOGGER = logging.getLogger(__name__)


async def listen(config: ServerConfig, connections: Connections, default_voice: str) -> None:
    """Serve until SIGTERM/SIGINT (or, on stdio, until the input ends), then stop taking
    connections, withdraw the announcement and end the open connections."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    stopping = asyncio.create_task(stop.wait())
    if config.scheme == "stdio":
        serving = asyncio.create_task(_serve_stdio(connections))
        _LOGGER.info("Ready: serving on stdio with default voice %s", default_voice)
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await connections.shut_down(config.shutdown_grace)
        serving.cancel()  # a no-op once its connection has ended
        await asyncio.wait({serving})
        return

    uri = urlparse(config.uri)
    if uri.scheme == "unix":
        server = await asyncio.start_unix_server(connections.serve, uri.path)
    else:
        server = await asyncio.start_server(connections.serve, uri.hostname, uri.port)
    announcement = None
    if config.zeroconf is not None:
        from .discovery import register_zeroconf

        # The port bound, which is the URI's whenever it names one.
        port = server.sockets[0].getsockname()[1]
        announcement = await register_zeroconf(config.zeroconf or None, uri.hostname or "", port)
    _LOGGER.info("Ready: serving on %s with default voice %s", config.uri, default_voice)
    try:
        await stopping
    finally:
        _LOGGER.info("Stopping")
        server.close()
        if announcement is not None:
            from .discovery import unregister_zeroconf

            withdrawing = asyncio.create_task(unregister_zeroconf(announcement))
        await connections.shut_down(config.shutdown_grace)
        if announcement is not None:
            await withdrawing
        if uri.scheme == "unix":
            Path(uri.path).unlink(missing_ok=True)


async def _serve_stdio(connections: Connections) -> None:
    """One connection over stdin/stdout. The protocol gets a private copy of stdout and
    the process's stdout becomes stderr, so a stray print from any library lands in the
    log instead of corrupting the event stream."""
    protocol_fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    loop = asyncio.get_running_loop()
    reader = await async_get_stdin()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    await connections.serve(reader, writer)
