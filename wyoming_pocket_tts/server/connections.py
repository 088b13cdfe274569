"""The open connections: admitted up to a limit, each served by its handler, and all of
them ended together when the server stops.

A connection over the limit gets an `error` naming it and is closed at once, before
anything of it is read: it costs a moment, never a handler. Describe from a health
check is refused the same way, and the check tries again; Home Assistant's own
connections last one request each, so slots come free within a request's time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from wyoming.error import Error

from .handler import PocketTTSEventHandler
from .wire import encode

_LOGGER = logging.getLogger(__name__)


class Connections:
    def __init__(
        self,
        handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], PocketTTSEventHandler],
        limit: int,
    ) -> None:
        self._handler = handler
        self._limit = limit
        self._open: dict[asyncio.Task, PocketTTSEventHandler] = {}
        self._refusing = False  # refusals are said once per spell at the limit
        self._stopping = False

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection to its end (the callback of `asyncio.start_server`)."""
        if self._stopping or len(self._open) >= self._limit:
            self._refuse(writer)
            return
        self._refusing = False
        handler = self._handler(reader, writer)
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = handler
        try:
            await handler.run()
        except asyncio.CancelledError:
            pass  # dropped at shutdown: asyncio would log a cancelled connection as an error
        finally:
            del self._open[task]

    def _refuse(self, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            reason = "the server is stopping"
        else:
            reason = f"the server is at its limit of {self._limit} connections (--max-connections)"
            if not self._refusing:
                _LOGGER.warning("Refusing connections: %s", reason)
                self._refusing = True
        peer = writer.get_extra_info("peername")
        _LOGGER.debug("%s: refused: %s", peer, reason)
        writer.write(encode(Error(text=f"Busy: {reason}", code="busy").event()))
        writer.close()

    async def shut_down(self, grace: float) -> None:
        """End every connection: in-flight audio ends where it is (see
        `PocketTTSEventHandler.shut_down`); a connection still open after `grace`
        seconds (a client that does not read) is dropped."""
        self._stopping = True
        if not self._open:
            return
        _LOGGER.info("Ending %d open connection(s)", len(self._open))
        for handler in self._open.values():
            handler.shut_down()
        _, late = await asyncio.wait(set(self._open), timeout=grace)
        for task in late:
            self._open[task].abort()
        if late:
            _, stuck = await asyncio.wait(late, timeout=grace)
            for task in stuck:
                task.cancel()
            if stuck:
                await asyncio.wait(stuck)
