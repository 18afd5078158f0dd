"""Snapshots taken in the background: every ``snapshot_every`` events, off the command path.

The worker polls the head of the log now and then; when it is ``snapshot_every`` or more
past the newest snapshot, it rebuilds the read models at the head in a scratch database
(the nearest snapshot's live rows + replay, in a thread) and stores them
(:func:`snapshots.write`: only changed chunks are new; the history rows' chunks are the
previous snapshot's plus those of the rows that became final since). Every replica may
run one: a snapshot's position is its key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import Connection

from eventcoord import errors
from eventcoord.history import logreads, snapshots
from eventcoord.history.scratch import build
from eventcoord.store import dbclock, log
from eventcoord.store.base import EventStore
from eventcoord.store.log import RecordedEvent

Chunks = dict[str, list[bytes]]

_log = logging.getLogger(__name__)

#: Seconds between looks at the head of the log.
POLL_SECONDS = 2.0


def _gather_after(
    conn: Connection, at: int
) -> tuple[snapshots.Snapshot | None, bool, Chunks, list[RecordedEvent], int]:
    """The nearest snapshot, whether to build on it incrementally, its chunks, the events since, the TTL.

    One read, so the snapshot whose history is reused is the one the scratch is loaded from.
    """
    snap = snapshots.nearest(conn, at)
    incremental = snap is not None and snapshots.keeps_history_apart(snap.manifest)
    archive = snapshots.archive_boundary(conn)
    base = snap.position if snap is not None else 0
    if archive is not None and base < archive.before - 1:
        raise errors.archived(at, archive.before, archive.file)
    chunks = snapshots.load_chunks(conn, snap, None, history=not incremental) if snap is not None else {}
    return snap, incremental, chunks, logreads.read_range(conn, base, at), dbclock.ttl_seconds(conn)


async def take_snapshot(store: EventStore, position: int | None = None) -> int:
    """Store a snapshot of every read model right after ``position`` (default: the head).

    Built on the nearest snapshot: its live rows loaded into a scratch, the events since
    replayed, the result dumped, and its history chunks reused as they are
    (:func:`snapshots.with_history`). Returns the position snapshotted (0 when the log is
    empty: nothing to keep).
    """

    def where(conn: Connection) -> tuple[int, int | None]:
        p = log.head(conn) if position is None else position
        return p, (logreads.recorded_us_of(conn, p) if p > 0 else None)

    at, at_us = await store.query(where)
    if at == 0 or at_us is None:
        return 0
    snap, incremental, chunks, events, ttl = await store.query(lambda c: _gather_after(c, at))
    scratch = await asyncio.to_thread(build, at, at_us, ttl, None, chunks, events)
    try:
        manifest, data = await asyncio.to_thread(scratch.read, snapshots.dump)
    finally:
        scratch.close()
    if incremental and snap is not None:
        manifest = snapshots.with_history(manifest, snap.manifest)
    await store.transact(lambda c: snapshots.write(c, at, at_us, dbclock.read(c)[0], manifest, data))
    return at


class SnapshotWorker:
    """Takes a snapshot whenever the log grew ``every`` events past the newest one."""

    def __init__(self, store: EventStore, every: int, poll_seconds: float = POLL_SECONDS) -> None:
        self.store = store
        self.every = every
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task[None] | None = None

    async def due(self) -> bool:
        """Whether the head is ``every`` or more events past the newest snapshot."""
        head, last = await self.store.query(lambda c: (log.head(c), snapshots.latest_position(c)))
        return head - last >= self.every

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                if await self.due():
                    await take_snapshot(self.store)
            except asyncio.CancelledError:
                raise
            except Exception:  # a loop boundary: the next look tries again
                _log.warning("snapshot failed; retrying later", exc_info=True)

    def start(self) -> None:
        """Start polling (no-op when ``every`` is 0: snapshots off)."""
        if self.every > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="eventcoord-snapshots")

    async def stop(self) -> None:
        """Stop polling (a snapshot being written is abandoned; none is half-stored)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
