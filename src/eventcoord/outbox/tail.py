"""One tail of the log per server process, fanned out to every Server-Sent Events stream.

A single task (:class:`LogTail`) reads the log after the last position it saw — woken by
this process's commits, or every ``poll_interval`` for other replicas' — and keeps the
newest events in a window in memory. Each open stream (:meth:`LogTail.follow`) reads that
window at its own pace, filtered by workspace, and the store for what lies before it: N idle
streams cost one query per poll, and a slow client blocks nobody. Why nothing is skipped:
docs/architecture.md#the-outbox-relay-and-the-log-tail.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Final

import msgspec
from sqlalchemy import Connection

from eventcoord.codec import WireEvent
from eventcoord.errors import StoreUnavailable
from eventcoord.store import log as store_log
from eventcoord.store.base import EventStore

log = logging.getLogger("eventcoord.outbox.tail")

#: How often the tail re-reads the log without a signal (commits of other replicas).
POLL_INTERVAL: Final = 0.2
#: Events kept in memory for streams to read without a query.
CAPACITY: Final = 10_000
#: Events read per query.
PAGE: Final = 500
#: Seconds between ``: keep-alive`` comments on a stream that sent nothing else.
KEEPALIVE_INTERVAL: Final = 15.0
#: After a failed read, the tail retries after this many seconds (doubling, capped).
RETRY_MAX: Final = 2.0


class KeepAlive:
    """Yielded by :meth:`LogTail.follow` when a stream has been quiet for the keep-alive interval."""


KEEP_ALIVE: Final = KeepAlive()


class LogTail:
    """The process's one reader of the log's head; streams follow it with :meth:`follow`."""

    def __init__(
        self,
        store: EventStore,
        *,
        poll_interval: float = POLL_INTERVAL,
        capacity: int = CAPACITY,
        keepalive_interval: float = KEEPALIVE_INTERVAL,
    ) -> None:
        self.store = store
        self.poll_interval = poll_interval
        self.capacity = max(PAGE, capacity)
        self.keepalive_interval = keepalive_interval
        #: The window: newest events, contiguous by position; ``_positions`` mirrors it for bisect.
        self._events: list[WireEvent] = []
        self._positions: list[int] = []
        self._workspaces: list[str | None] = []
        #: Every event up to this position has been read into the window (or was before it).
        self.position = 0
        self._changed = asyncio.Event()  # pulsed when the window grows
        self._wake = asyncio.Event()  # set by notify(): a local commit
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        #: Streams following now (tests and /metrics).
        self.followers = 0
        #: Queries the tail ran (the benchmark checks idle streams cost none of their own).
        self.reads = 0
        #: Nobody followed when the log last grew, so the window was not kept: the next
        #: follower makes the tail start again from the head (older events from the store).
        self._stale = False

    async def start(self) -> None:
        """Start reading from the current head (older events come from the store on demand)."""
        if self._task is None:
            self.position = await self.store.head()
            self._started.set()
            self._task = asyncio.create_task(self._run(), name="eventcoord-log-tail")

    async def stop(self) -> None:
        """Stop the reader; open streams stop waiting for it at their next wake-up."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._changed.set()

    def notify(self) -> None:
        """A commit happened in this process: read now instead of at the next poll."""
        self._wake.set()

    async def _run(self) -> None:
        delay = self.poll_interval
        while True:
            self._wake.clear()
            if self.followers == 0:
                # No stream to feed: a command's commit costs no read here. The window is
                # dropped; whoever follows next reads what it lacks from the store.
                self._stale = True
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await self._wake.wait()
                continue
            try:
                if self._stale:
                    await self._restart_at_head()
                grew = await self._read_new()
                delay = self.poll_interval
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the store is unreachable: keep the streams, retry
                if not isinstance(e, StoreUnavailable):  # an outage is logged once, by the store
                    log.warning("log tail read failed (%s); retrying", e)
                grew = False
                delay = min(delay * 2, RETRY_MAX)
            if grew:
                continue  # a full page: there may be more right now
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def _restart_at_head(self) -> None:
        """Begin the window again at the head (nobody followed while the log grew)."""
        self.position = await self.store.head()
        self._events.clear()
        self._positions.clear()
        self._workspaces.clear()
        self._stale = False
        self._changed.set()  # followers waiting for the old position look again
        self._changed.clear()

    async def _read_new(self) -> bool:
        """Read what was committed after ``position`` into the window; True if a full page came."""
        self.reads += 1
        batch = await self.store.read(after=self.position, limit=PAGE)
        if not batch:
            return False
        self._events.extend(batch)
        self._positions.extend(ev.position for ev in batch)
        self._workspaces.extend(_workspace_of(ev) for ev in batch)
        self.position = batch[-1].position
        excess = len(self._events) - self.capacity
        if excess > self.capacity // 2:  # trim in chunks: amortised O(1) per event
            del self._events[:excess]
            del self._positions[:excess]
            del self._workspaces[:excess]
        self._changed.set()
        self._changed.clear()
        return len(batch) == PAGE

    def _window_after(self, scanned: int, workspace: str | None) -> tuple[list[WireEvent], int] | None:
        """The window's events after ``scanned`` (of ``workspace``) and the position scanned
        through, or None if the window no longer reaches back to ``scanned``."""
        if not self._positions or self._positions[0] > scanned + 1:
            return None
        i = bisect.bisect_right(self._positions, scanned)
        if workspace is None:
            events = self._events[i:]
        else:
            ws = self._workspaces
            events = [self._events[j] for j in range(i, len(ws)) if ws[j] == workspace]
        return events, self._positions[-1]

    async def follow(
        self, after: int, workspace: str | None, types: frozenset[str] | None = None
    ) -> AsyncIterator[WireEvent | KeepAlive]:
        """Every event with position > ``after`` (of ``workspace`` and of ``types``, if
        given), then live.

        Yields :data:`KEEP_ALIVE` whenever nothing was yielded for the keep-alive interval.
        """
        await self._started.wait()
        self.followers += 1
        if self._stale:
            self._wake.set()  # the tail stopped reading while nobody followed
        try:
            scanned = after
            quiet_since = time.monotonic()
            while True:
                if scanned < self.position:
                    window = self._window_after(scanned, workspace)
                    if window is None:
                        events, scanned = await self._read_store(scanned, workspace)
                    else:
                        events, scanned = window
                    if types:
                        events = [ev for ev in events if ev.type in types]
                    for ev in events:
                        yield ev
                    if events:
                        quiet_since = time.monotonic()
                    continue
                left = quiet_since + self.keepalive_interval - time.monotonic()
                if left <= 0:
                    yield KEEP_ALIVE
                    quiet_since = time.monotonic()
                    continue
                if self._task is None:
                    return  # the tail stopped (server shutting down)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._changed.wait()
        finally:
            self.followers -= 1

    async def _read_store(self, scanned: int, workspace: str | None) -> tuple[list[WireEvent], int]:
        """Events after ``scanned`` from the store (before the window); the new scanned position."""

        def run(conn: Connection) -> tuple[list[WireEvent], int]:
            head = store_log.head(conn)  # first: every position up to it is committed
            return store_log.read_wire(conn, scanned, PAGE, workspace), head

        events, head = await self.store.query(run)
        if len(events) == PAGE:
            return events, events[-1].position
        # Everything of this workspace up to head was returned; the window may take over.
        return events, max(scanned, head, events[-1].position if events else 0)


class _Meta(msgspec.Struct):
    workspace: str | None = None


_meta_decoder = msgspec.json.Decoder(_Meta)


def _workspace_of(ev: WireEvent) -> str | None:
    """The workspace in an event's metadata (the wire metadata is raw JSON)."""
    return _meta_decoder.decode(ev.metadata).workspace
