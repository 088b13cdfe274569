"""The open connections: admitted up to a limit, each served by its handler, and all of
them ended together when the server stops.

A device that holds connections open without using them must not lock Home Assistant
out. A newcomer over the limit has a second to send its first event (one that sends
nothing is refused and displaces no one); once it has, a connection that waits on its
client is closed at once to make room for it: one with no request in progress that has
sent nothing for a second (silent, or stalled in the middle of an event), else one
whose request has waited `STALLED_SECONDS` for its client to take its audio or to send
a text stream's next text; of those, the one that has waited longest. A connection the
server is working for, or whose client keeps reading, is never closed for another.

When no connection can make room, the newcomer may still ask Describe, which costs
nothing to answer: health checks and Home Assistant's own Describe keep working under
load. Anything else it sends, or silence for a second, gets an `error` naming the
limit, then the connection is closed: its first event is read first, so that the close
is not a reset that would lose the error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator

from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info

from .handler import PocketTTSEventHandler
from .wire import BadEvent, Idle, ProtocolError, encode, read_event

_LOGGER = logging.getLogger(__name__)

#: How long a newcomer over the limit has to send its first event, and how long a
#: connection with nothing in progress keeps its place after its last one: until then
#: its request may be on its way (a burst of clients must not close one another).
FIRST_EVENT_SECONDS = 1.0
#: How long a request may wait on its client before its place may be given away: a
#: client that plays its audio as it reads takes some every second or so (the send
#: buffers hold about a second of it), one that has taken none for this long is not
#: playing it.
STALLED_SECONDS = 5.0
#: Newcomers over the limit that may wait for their first event at once: this many
#: times the limit, and at least the minimum. Beyond them a connection is closed
#: unread, and a client that has already written gets a reset instead of the error.
WAITING_FACTOR = 4
WAITING_MIN = 64


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
        self._open: dict[asyncio.Task[None], PocketTTSEventHandler] = {}
        self._evicted: set[asyncio.Task[None]] = set()  # closed to make room, not yet ended
        self._waiting = 0  # newcomers over the limit waiting for their first event
        self._warned: set[str] = set()  # each warning is said once per spell at the limit
        self._stopping = False

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection to its end (the callback of `asyncio.start_server`)."""
        if self._stopping:
            self._refuse(writer, "the server is stopping")
        elif self._has_room():
            self._warned.clear()
            await self._serve(reader, writer)
        elif self._waiting < max(WAITING_FACTOR * self._limit, WAITING_MIN):
            self._waiting += 1
            try:
                first = await self._first_event(reader)
            finally:
                self._waiting -= 1
            await self._serve_over_limit(reader, writer, first)
        else:
            self._refuse(writer, self._busy())

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: Event | None = None
    ) -> None:
        handler = self._handler(reader, writer)
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = handler
        try:
            await handler.run(first)
        except asyncio.CancelledError:
            pass  # dropped at shutdown: asyncio would log a cancelled connection as an error
        finally:
            del self._open[task]
            self._evicted.discard(task)

    async def _first_event(self, reader: asyncio.StreamReader) -> Event | None:
        try:
            return await read_event(
                reader, idle_timeout=FIRST_EVENT_SECONDS, partial_timeout=FIRST_EVENT_SECONDS
            )
        except (Idle, BadEvent, ProtocolError, ConnectionError):
            return None

    async def _serve_over_limit(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: Event | None
    ) -> None:
        if first is None:
            self._refuse(writer, self._busy())
        elif self._stopping:
            self._refuse(writer, "the server is stopping")
        elif self._has_room() or self._make_room():
            await self._serve(reader, writer, first)
        elif Describe.is_type(first.type):
            writer.write(encode(self._info().event()))
            writer.close()
        else:
            self._refuse(writer, self._busy())

    def _has_room(self) -> bool:
        return len(self._open) - len(self._evicted) < self._limit

    def _make_room(self) -> bool:
        """Close the connection that has waited longest on its client, if one may be
        closed (see the module's docstring); whether one was."""
        chosen = min(self._closable(), key=lambda entry: entry[:2], default=None)
        if chosen is None:
            return False
        working, since, task = chosen
        handler = self._open[task]
        self._warn_once(
            "Closing idle or stalled connections to make room: the server is at its limit "
            f"of {self._limit} connections (--max-connections)"
        )
        _LOGGER.debug(
            "%s: closed to make room: %s for %.1f s", handler.peer,
            "its request waited on the client" if working else "idle", time.monotonic() - since,
        )
        self._evicted.add(task)
        handler.abort()  # at once: a client that does not read would hold a graceful close
        return True

    def _closable(self) -> Iterator[tuple[bool, float, asyncio.Task[None]]]:
        """The connections that may be closed to make room: whether each has a request
        in progress (one without goes first: closing it loses nothing), and since when
        it has waited on its client."""
        now = time.monotonic()
        for task, handler in self._open.items():
            since = handler.waiting_since()
            if since is None or task in self._evicted:
                continue
            working = handler.has_work()
            if now - since >= (STALLED_SECONDS if working else FIRST_EVENT_SECONDS):
                yield working, since, task

    def _busy(self) -> str:
        reason = f"the server is at its limit of {self._limit} connections (--max-connections)"
        self._warn_once(f"Refusing requests: {reason}")
        return reason

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            _LOGGER.warning("%s", message)
            self._warned.add(message)

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
