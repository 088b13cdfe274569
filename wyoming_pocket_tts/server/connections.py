"""The open connections: admitted up to a limit, each served by its handler, and all of
them ended together when the server stops.

Over the limit a connection may still ask Describe, which costs nothing to answer:
health checks and Home Assistant's own Describe keep working under load. Anything else
it sends, or silence for a second, gets an `error` naming the limit, then the
connection is closed: its first event is read first, so that the close is not a reset
that would lose the error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from wyoming.error import Error
from wyoming.info import Describe, Info

from .handler import PocketTTSEventHandler
from .wire import BadEvent, Idle, ProtocolError, encode, read_event

_LOGGER = logging.getLogger(__name__)

#: How long a connection over the limit has to ask Describe.
DESCRIBE_ONLY_SECONDS = 1.0
#: Connections over the limit that may wait for their first event at once: this many
#: times the limit, and at least the minimum. Beyond them a connection is closed
#: unread, and a client that has already written gets a reset instead of the error.
DESCRIBE_ONLY_FACTOR = 4
DESCRIBE_ONLY_MIN = 64


class Connections:
    def __init__(
        self,
        handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], PocketTTSEventHandler],
        info: Callable[[], Info],
        limit: int,
    ) -> None:
        self._handler = handler
        self._info = info
        self._limit = limit
        self._open: dict[asyncio.Task, PocketTTSEventHandler] = {}
        self._describe_only = 0  # connections over the limit, which may only ask Describe
        self._at_limit = False  # refusals are said once per spell at the limit
        self._stopping = False

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection to its end (the callback of `asyncio.start_server`)."""
        if self._stopping:
            self._refuse(writer, "the server is stopping")
        elif len(self._open) < self._limit:
            self._at_limit = False
            await self._serve(reader, writer)
        elif self._describe_only < max(DESCRIBE_ONLY_FACTOR * self._limit, DESCRIBE_ONLY_MIN):
            self._describe_only += 1
            try:
                await self._answer_describe_only(reader, writer)
            finally:
                self._describe_only -= 1
        else:
            self._refuse(writer, self._busy())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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

    async def _answer_describe_only(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            event = await read_event(
                reader, idle_timeout=DESCRIBE_ONLY_SECONDS, partial_timeout=DESCRIBE_ONLY_SECONDS
            )
        except (Idle, BadEvent, ProtocolError, ConnectionError):
            event = None
        if event is not None and Describe.is_type(event.type):
            writer.write(encode(self._info().event()))
            writer.close()
        else:
            self._refuse(writer, self._busy())

    def _busy(self) -> str:
        reason = f"the server is at its limit of {self._limit} connections (--max-connections)"
        if not self._at_limit:
            _LOGGER.warning("Refusing requests: %s", reason)
            self._at_limit = True
        return reason

    def _refuse(self, writer: asyncio.StreamWriter, reason: str) -> None:
        _LOGGER.debug("%s: refused: %s", writer.get_extra_info("peername"), reason)
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
