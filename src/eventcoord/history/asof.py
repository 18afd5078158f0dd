"""Point-in-time reads (``as_of``, docs/protocol.md#history): a read answered as it was right after a position.

``as_of`` is a position (an integer) or an RFC 3339 time (the last position
recorded at or before it). The read models at that position are rebuilt
in a scratch database (:mod:`.scratch`): the nearest snapshot at or before it, then the log
replayed from there through the projections. The read's own query then runs on the scratch
with the clock pinned to the position's ``recorded_at``, so liveness is judged at that
moment. Scratches are kept for a few recent moments (a dashboard asks every view for the
same one), built once per moment even when asked concurrently, and always in a thread:
nothing here runs on the event loop that decides commands.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any, TypeVar

import msgspec
from sqlalchemy import Connection, Table

from eventcoord import errors, projections
from eventcoord.codec import format_time, parse_time
from eventcoord.history import logreads, snapshots
from eventcoord.history.scratch import Scratch, build, plan
from eventcoord.store import dbclock, log
from eventcoord.store.base import EventStore
from eventcoord.store.log import RecordedEvent

T = TypeVar("T")

_POSITION = re.compile(r"[0-9]{1,19}")
#: Scratches kept for recent moments (workspace, position).
CACHE_SIZE = 4


class Moment(msgspec.Struct, frozen=True):
    """The moment a point-in-time answer describes: ``as_of: {position, at}``."""

    position: int
    at: str | None

    @classmethod
    def of(cls, position: int, at_us: int | None) -> Moment:
        """The moment of ``position``, recorded at ``at_us`` (None: before the first event)."""
        return cls(position, format_time(at_us) if at_us is not None else None)


def resolve(conn: Connection, workspace: str, raw: str) -> tuple[int, int | None]:
    """``as_of`` text to ``(position, recorded_us)``; 422 past the head, 410 before an archive.

    A time is the last position (of the whole log) recorded at or before it.
    """
    head = log.head(conn)
    text = raw.strip()
    at = 0
    if _POSITION.fullmatch(text):
        position = int(text)
        if position > head:
            raise errors.invalid("as_of", f"as_of {position} is past the head of the log ({head})")
    else:
        try:
            at = parse_time(text)
        except (ValueError, OverflowError):
            raise errors.invalid("as_of", f"as_of must be a position or an RFC 3339 time, got {raw!r}") from None
        position = logreads.position_at(conn, at)
    if position == 0:
        return 0, None
    archive = snapshots.archive_boundary(conn)
    if archive is not None and position < archive.before - 1:
        raise errors.archived(position, archive.before, archive.file)
    if archive is not None and position == archive.before - 1 and not _POSITION.fullmatch(text):
        # A time maps to the archive's last position only if that event is not after it.
        snap = snapshots.nearest(conn, position)
        if snap is None or snap.recorded_us > at:
            raise errors.archived(position, archive.before, archive.file)
    at_us = logreads.recorded_us_of(conn, position)
    if at_us is None:  # the last archived event: its snapshot knows its time
        snap = snapshots.nearest(conn, position)
        at_us = snap.recorded_us if snap is not None else None
    return position, at_us


def gather(
    conn: Connection,
    workspace: str | None,
    position: int,
    *,
    history: bool = True,
    tables: Collection[str] | None = None,
) -> tuple[dict[str, list[bytes]], list[RecordedEvent], int]:
    """What a scratch at ``position`` needs: the nearest snapshot's chunks, the events after it, the TTL.

    ``history=False``: without the snapshot's history rows (``snapshots.CLOSED``), for reads
    of live state only. ``tables``: only those tables' chunks (a scratch's ``tables``).
    """
    snap = snapshots.nearest(conn, position) if position > 0 else None
    archive = snapshots.archive_boundary(conn)
    base = snap.position if snap is not None else 0
    if archive is not None and base < archive.before - 1:
        raise errors.archived(position, archive.before, archive.file)
    chunks = snapshots.load_chunks(conn, snap, workspace, history=history, tables=tables) if snap is not None else {}
    return chunks, logreads.read_range(conn, base, position, workspace), dbclock.ttl_seconds(conn)


_Key = tuple[str, int, bool, frozenset[str]]


class History:
    """Point-in-time reads over one store, with a small cache of scratches."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._cache: OrderedDict[_Key, Scratch] = OrderedDict()
        self._building: dict[_Key, asyncio.Future[Scratch]] = {}

    def _cached(self, key: _Key) -> Scratch | None:
        """A kept scratch that answers ``key``: same moment, with as much history and tables."""
        workspace, position, history, tables = key
        for (w, p, h, t), s in self._cache.items():
            if w == workspace and p == position and h >= history and t >= tables:
                self._cache.move_to_end((w, p, h, t))
                return s
        return None

    async def scratch(
        self,
        workspace: str,
        position: int,
        at_us: int | None,
        *,
        history: bool = True,
        tables: Collection[str] | None = None,
    ) -> Scratch:
        """The read models of ``workspace`` at ``position`` (built once, kept a while).

        ``history=False`` leaves out history rows (released leases and claims, finished
        items, the append-only logs; see ``snapshots.CLOSED``) that the snapshot keeps apart.
        ``tables``: only what reads of those tables need (``scratch.plan``); None: all.
        """
        _, load = plan(tables)
        key = (workspace, position, history, load)
        hit = self._cached(key)
        if hit is not None:
            return hit
        pending = self._building.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Scratch] = asyncio.get_running_loop().create_future()
        self._building[key] = future
        try:
            chunks, events, ttl = await self.store.query(
                lambda c: gather(c, workspace, position, history=history, tables=load)
            )
            s = await asyncio.to_thread(build, position, at_us, ttl, workspace, chunks, events, tables)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            self._building.pop(key, None)
        future.set_result(s)
        self._cache[key] = s
        while len(self._cache) > CACHE_SIZE:
            _, old = self._cache.popitem(last=False)
            old.close()
        return s

    async def read(
        self,
        workspace: str,
        raw: str,
        fn: Callable[[Connection], T],
        *,
        history: bool = True,
        tables: Collection[Table] | None = None,
    ) -> tuple[T, Moment]:
        """Run the read ``fn`` as of ``raw``; the answer and its moment.

        ``history=False`` for a read that sees only live rows (unreleased leases and claims,
        sessions, unfinished items): its scratch loads no history rows, so its cost does not
        grow with the log. ``tables``: the read-model tables ``fn`` reads; its scratch loads and
        replays only what keeps those right (a read of any other table then fails).
        """
        position, at_us = await self.store.query(lambda c: resolve(c, workspace, raw))
        return await self._read_at(workspace, position, at_us, fn, history=history, tables=tables)

    async def _read_at(
        self,
        workspace: str,
        position: int,
        at_us: int | None,
        fn: Callable[[Connection], T],
        *,
        history: bool,
        tables: Collection[Table] | None,
    ) -> tuple[T, Moment]:
        names = None if tables is None else frozenset(str(t.name) for t in tables)
        s = await self.scratch(workspace, position, at_us, history=history, tables=names)
        return await asyncio.to_thread(s.read, fn), Moment.of(position, at_us)

    async def read_about(
        self,
        workspace: str,
        raw: str,
        fn: Callable[[Connection], T],
        *,
        stream: str,
        projection: str,
        tables: Collection[Table],
    ) -> tuple[T, Moment]:
        """A read about one thing (``stream``: an issue's), as of ``raw``.

        ``projection``'s tables hold only that thing's rows, rebuilt from its stream up to
        the moment (not the snapshot's every issue); the other ``tables`` the read needs
        come from the snapshot and the replay since, live rows only, as in :meth:`read`.
        After an archive the stream may begin in the archive: then it is :meth:`read`.
        """
        position, at_us = await self.store.query(lambda c: resolve(c, workspace, raw))
        rest = [str(t.name) for t in tables if t not in projections.OWNED[projection]]

        def gather_about(c: Connection) -> Any:
            if snapshots.archive_boundary(c) is not None:
                return None
            return gather(c, workspace, position, history=False, tables=plan(rest)[1]), logreads.stream_upto(
                c, workspace, stream, position
            )

        got = await self.store.query(gather_about)
        if got is None:
            return await self._read_at(workspace, position, at_us, fn, history=False, tables=tables)
        (chunks, events, ttl), own = got

        def build_about() -> Scratch:
            s = build(position, at_us, ttl, workspace, chunks, events, rest)
            s.replay_stream(own, projection)
            return s

        s = await asyncio.to_thread(build_about)
        try:
            result = await asyncio.to_thread(s.read, fn)
        finally:
            s.close()
        return result, Moment.of(position, at_us)

    async def read_upto(self, workspace: str, raw: str, fn: Callable[[Connection, int], T]) -> tuple[T, Moment]:
        """Run ``fn(conn, position)`` on the live store, for reads whose rows up to a position
        are the read model at that position (rows keyed by the event that made them, whose
        read columns never change: the heatmap's claims and conflicts). No scratch, no replay.
        """
        position, at_us = await self.store.query(lambda c: resolve(c, workspace, raw))
        result = await self.store.query(lambda c: fn(c, position))
        return result, Moment.of(position, at_us)

    def close(self) -> None:
        """Drop every cached scratch."""
        for s in self._cache.values():
            s.close()
        self._cache.clear()
