"""Snapshots taken in the background: every ``snapshot_every`` events, off the command path.

The worker polls the head of the log now and then; when it is ``snapshot_every`` or more
past the newest snapshot, it rebuilds the read models at the head in a scratch database
(the nearest snapshot's live rows + replay, in a thread) and stores them
(:func:`snapshots.write`: only changed chunks are new; a snapshot names the one it extends
and the chunks of the history rows that became final since). Every replica may
run one: a snapshot's position is its key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import Connection

from eventcoord import errors
from eventcoord.history import logreads, snapshots
from eventcoord.history.scratch import Scratch, build
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
    incremental = snap is not None and snap.keeps_history_apart
    archive = snapshots.archive_boundary(conn)
    base = snap.position if snap is not None else 0
    if archive is not None and base < archive.before - 1:
        raise errors.archived(at, archive.before, archive.file)
    chunks = snapshots.load_chunks(conn, snap, None, history=not incremental) if snap is not None else {}
    if snap is not None and snapshots.path_counts.name not in snap.manifest:
        chunks[str(snapshots.path_counts.name)] = [snapshots.counted_upto(conn, snap.position)]
    return snap, incremental, chunks, logreads.read_range(conn, base, at), dbclock.ttl_seconds(conn)


def _events_after(conn: Connection, kept: int, at: int) -> list[RecordedEvent] | None:
    """The events in ``(kept, at]``; None when an archive took some of them from the log."""
    archive = snapshots.archive_boundary(conn)
    if archive is not None and kept < archive.before - 1:
        return None
    return logreads.read_range(conn, kept, at)


def _hashes(manifest: snapshots.Manifest) -> set[str]:
    return {h for per_ws in manifest.values() for hs in per_ws.values() for h in hs}


class _Kept:
    """The scratch of the last snapshot taken and the layout of its live rows' chunks.

    Its history rows are deleted once stored, so it holds the live read models only (what
    replay needs), and it notes every row the replay since changes.
    """

    def __init__(self, scratch: Scratch, layout: snapshots.Layout) -> None:
        self.scratch = scratch
        self.layout = layout


class _Taken:
    """A snapshot built, to store: its dump, and the snapshot whose history it extends."""

    def __init__(self, kept: _Kept, dump: snapshots.Dump, base: int | None) -> None:
        self.kept = kept
        self.dump = dump
        self.base = base


class Snapshotter:
    """Takes snapshots of one store, each built on the previous one it took.

    The first loads the nearest stored snapshot's live rows into a scratch and replays the
    events since; the scratch is then kept, and every later snapshot only replays the
    events since the last one into it and re-cuts the chunks of the rows they changed
    (``snapshots.dump_changed``). A snapshot then costs the events since and the rows they
    touched, not every live row (an ``issues`` row for every issue ever claimed).
    """

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._kept: _Kept | None = None

    async def take(self, position: int | None = None) -> int:
        """Store a snapshot of every read model right after ``position`` (default: the head).

        Returns the position snapshotted (0 when the log is empty: nothing to keep).
        """

        def where(conn: Connection) -> tuple[int, int | None]:
            p = log.head(conn) if position is None else position
            return p, (logreads.recorded_us_of(conn, p) if p > 0 else None)

        at, at_us = await self.store.query(where)
        if at == 0 or at_us is None:
            return 0
        kept, self._kept = self._kept, None
        try:
            taken = await self._build_on(kept, at) if kept is not None else None
            if taken is None:
                if kept is not None:
                    kept.scratch.close()
                taken = await self._build_fresh(at, at_us)
            kept = taken.kept
            dump, base = taken.dump, taken.base
            await self.store.transact(
                lambda c: snapshots.write(c, at, at_us, dbclock.read(c)[0], dump.manifest, dump.chunks, base)
            )
            await asyncio.to_thread(self._forget_history, kept.scratch)
        except BaseException:
            if kept is not None:
                kept.scratch.close()
            raise
        self._kept = kept
        return at

    async def _build_on(self, kept: _Kept, at: int) -> _Taken | None:
        """The snapshot at ``at`` from the kept one; None if it cannot be (``at`` before it, archived)."""
        base = kept.scratch.position
        if base > at:
            return None
        events = await self.store.query(lambda c: _events_after(c, base, at))
        if events is None:
            return None
        dump = await asyncio.to_thread(self._advance, kept.scratch, events, kept.layout)
        kept.scratch.position = at
        return _Taken(_Kept(kept.scratch, dump.layout), dump, base)

    async def _build_fresh(self, at: int, at_us: int) -> _Taken:
        """The snapshot at ``at`` from the nearest stored one (its live rows) and the events since."""
        snap, incremental, chunks, events, ttl = await self.store.query(lambda c: _gather_after(c, at))
        scratch = await asyncio.to_thread(lambda: build(at, at_us, ttl, None, chunks, events, counting=True))
        try:
            known = _hashes(snap.manifest) if snap is not None else set()
            dump = await asyncio.to_thread(scratch.read, lambda c: snapshots.dump(c, known))
            await asyncio.to_thread(scratch.track_changes)
        except BaseException:
            scratch.close()
            raise
        # Loaded without its history, the scratch's history rows are those final since the snapshot.
        base = snap.position if incremental and snap is not None else None
        return _Taken(_Kept(scratch, dump.layout), dump, base)

    @staticmethod
    def _advance(scratch: Scratch, events: list[RecordedEvent], layout: snapshots.Layout) -> snapshots.Dump:
        scratch.replay(events)
        changed = scratch.take_changes()
        return scratch.read(lambda c: snapshots.dump_changed(c, layout, changed, ()))

    @staticmethod
    def _forget_history(scratch: Scratch) -> None:
        # Stored now, and final: the next snapshot's history is the rows that become final after.
        scratch.drop_history()
        scratch.take_changes()

    def close(self) -> None:
        """Drop the kept scratch."""
        if self._kept is not None:
            self._kept.scratch.close()
            self._kept = None


async def take_snapshot(store: EventStore, position: int | None = None) -> int:
    """Store one snapshot of every read model right after ``position`` (default: the head).

    Built on the nearest stored snapshot (:class:`Snapshotter`, nothing kept after).
    Returns the position snapshotted (0 when the log is empty: nothing to keep).
    """
    snapshotter = Snapshotter(store)
    try:
        return await snapshotter.take(position)
    finally:
        snapshotter.close()


async def snapshot_due(store: EventStore, every: int) -> bool:
    """Whether the head of ``store`` is ``every`` or more events past its newest snapshot."""
    head, last = await store.query(lambda c: (log.head(c), snapshots.latest_position(c)))
    return head - last >= every


class SnapshotWorker:
    """Takes a snapshot whenever the log grew ``every`` events past the newest one."""

    def __init__(self, store: EventStore, every: int, poll_seconds: float = POLL_SECONDS) -> None:
        self.store = store
        self.every = every
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task[None] | None = None
        self._snapshotter = Snapshotter(store)

    async def due(self) -> bool:
        """Whether the head is ``every`` or more events past the newest snapshot."""
        return await snapshot_due(self.store, self.every)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                if await self.due():
                    await self._snapshotter.take()
            except asyncio.CancelledError:
                raise
            except errors.StoreUnavailable:  # an outage, logged once by the store
                pass
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
        self._snapshotter.close()
