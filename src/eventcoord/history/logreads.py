"""Reads of the log for history: filtered pages (docs/protocol.md#history), ranges, moments.

Every filtered read is a seek followed by a walk in position order, adding as little as
possible to what an append maintains (each index on ``events`` is paid by every command):
``type`` uses the one index 0004_history adds, ``(workspace, type, position)``; ``stream``
the unique ``(workspace, stream, version)`` (version order is position order within a
stream); times a binary search over the primary key, since ``recorded_us`` follows commit
order (the exact time predicate stays in the query).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from sqlalchemy import Connection, Select, select

from eventcoord import errors
from eventcoord.codec import WireEvent, format_time
from eventcoord.history import chain
from eventcoord.history.snapshots import archive_boundary
from eventcoord.store.log import WIRE_COLUMNS, RecordedEvent, read_wire, recorded_of
from eventcoord.store.schema import events, store_head, stream_heads

_WIRE = WIRE_COLUMNS  # the wire columns, as the log reads them (store/log.py)


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """The filters of the log (docs/protocol.md#history): any combination; none reorders."""

    types: tuple[str, ...] = ()
    stream: str | None = None
    since_us: int | None = None  # inclusive, on recorded_at
    until_us: int | None = None  # exclusive, on recorded_at
    until_position: int | None = None  # inclusive

    @property
    def empty(self) -> bool:
        return (
            not self.types
            and self.stream is None
            and self.since_us is None
            and self.until_us is None
            and self.until_position is None
        )


def _first(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The smallest ``n`` in ``[lo, hi]`` with ``ok(n)`` (``ok`` monotonic), or ``hi + 1``."""
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid - 1
        else:
            lo = mid + 1
    return lo


def _time_at(conn: Connection, position: int) -> int | None:
    return conn.execute(select(events.c.recorded_us).where(events.c.position == position)).scalar()


def first_position_at_or_after(conn: Connection, at_us: int) -> int:
    """The first position recorded at or after ``at_us`` (head + 1 when none).

    A binary search over the primary key: ``recorded_us`` follows commit order (it is the
    committing database's clock), so no index on it is needed (none slows the appends).
    Positions no longer in the log (archived) count as earlier than any time.
    """
    head = int(conn.execute(select(store_head.c.position).where(store_head.c.id == 1)).scalar_one())

    def ok(n: int) -> bool:
        t = _time_at(conn, n)
        return t is not None and t >= at_us

    return _first(1, head, ok)


class _Bounds(msgspec.Struct, frozen=True):
    after: int
    upto: int | None
    min_version: int | None  # with a stream filter: its first version after ``after``


def _bounds(conn: Connection, workspace: str | None, f: Filters, after: int) -> _Bounds | None:
    """Position (and stream version) bounds of a filtered read; None when nothing can match."""
    upto = f.until_position
    if f.since_us is not None:
        after = max(after, first_position_at_or_after(conn, f.since_us) - 1)
    if f.until_us is not None:
        last = first_position_at_or_after(conn, f.until_us) - 1
        upto = last if upto is None else min(upto, last)
    if upto is not None and upto <= after:
        return None
    if f.stream is None or workspace is None:
        return _Bounds(after, upto, None)
    if after <= 0:
        return _Bounds(after, upto, 1)
    # Seek into the stream: its versions rise with position (uq_events_stream_version).
    stream = f.stream

    def version_pos(v: int) -> int | None:
        return conn.execute(
            select(events.c.position).where(
                (events.c.workspace == workspace) & (events.c.stream == stream) & (events.c.version == v)
            )
        ).scalar()

    top = conn.execute(
        select(stream_heads.c.version).where(
            (stream_heads.c.workspace == workspace) & (stream_heads.c.stream == stream)
        )
    ).scalar()
    if top is None:
        return None
    return _Bounds(after, upto, _first(1, int(top), lambda n: (version_pos(n) or 0) > after))


def _where(stmt: Select[Any], workspace: str | None, f: Filters, after: int, upto: int | None) -> Select[Any]:
    stmt = stmt.where(events.c.position > after)
    if workspace is not None:
        stmt = stmt.where(events.c.workspace == workspace)
    if upto is not None:
        stmt = stmt.where(events.c.position <= upto)
    if f.stream is not None:
        stmt = stmt.where(events.c.stream == f.stream)
    if f.since_us is not None:
        stmt = stmt.where(events.c.recorded_us >= f.since_us)
    if f.until_us is not None:
        stmt = stmt.where(events.c.recorded_us < f.until_us)
    return stmt


def _wire(r: Any) -> WireEvent:
    return WireEvent(
        position=r.position,
        stream=r.stream,
        version=r.version,
        type=r.type,
        data=msgspec.Raw(r.data.encode()),
        metadata=msgspec.Raw(r.metadata.encode()),
        recorded_at=format_time(r.recorded_us),
    )


def rows(conn: Connection, after: int, limit: int, workspace: str | None, f: Filters) -> list[Any]:
    """Raw event rows matching ``f`` with position > ``after``, in position order."""
    b = _bounds(conn, workspace, f, after)
    if b is None:
        return []
    base = _where(select(*_WIRE, events.c.workspace), workspace, f, b.after, b.upto)
    # Within one stream, version order is position order, and the stream's unique index
    # (workspace, stream, version) walks it from the first version after ``after``.
    order = events.c.position
    if b.min_version is not None:
        base = base.where(events.c.version >= b.min_version)
        order = events.c.version
    if not f.types:
        return list(conn.execute(base.order_by(order).limit(limit)))
    # One index walk per type, merged: never a sort of every match.
    pages = [
        list(conn.execute(base.where(events.c.type == t).order_by(order).limit(limit))) for t in sorted(set(f.types))
    ]
    return list(heapq.merge(*pages, key=lambda r: r.position))[:limit]


def page(conn: Connection, after: int, limit: int, workspace: str, f: Filters) -> list[WireEvent]:
    """A page of ``/v1/events``, each event with its ``hash`` (docs/protocol.md#the-hash-chain);
    a page starting before an archive is 410 ARCHIVED naming it."""
    archive = archive_boundary(conn)
    if archive is not None and after < archive.before - 1:
        raise errors.archived(after + 1, archive.before, archive.file)
    found = read_wire(conn, after, limit, workspace) if f.empty else read_filtered(conn, after, limit, workspace, f)
    return chain.with_hashes(conn, found)


def read_filtered(conn: Connection, after: int, limit: int, workspace: str | None, f: Filters) -> list[WireEvent]:
    """A page of ``/v1/events`` with its filters, as wire structs."""
    return [_wire(r) for r in rows(conn, after, limit, workspace, f)]


def read_range(
    conn: Connection, after: int, upto: int, workspace: str | None = None, batch: int = 5000
) -> list[RecordedEvent]:
    """Every event in ``(after, upto]`` (of one workspace, if given), decoded, in position order."""
    out: list[RecordedEvent] = []
    while after < upto:
        stmt = _where(select(*_WIRE, events.c.workspace), workspace, Filters(), after, upto)
        page: Sequence[Any] = list(conn.execute(stmt.order_by(events.c.position).limit(batch)))
        if not page:
            break
        out.extend(recorded_of(r) for r in page)
        after = page[-1].position
    return out


def stream_upto(conn: Connection, workspace: str, stream: str, upto: int) -> list[RecordedEvent]:
    """Every event of one stream up to ``upto``, decoded, in order.

    The stream's unique index walks it in version order, which is position order. The
    bound is applied here, not in SQL: given ``position <= ?`` as a parameter, SQLite's
    planner walks ``ix_events_workspace_position`` instead (every event up to there).
    """
    stmt = select(*_WIRE).where((events.c.workspace == workspace) & (events.c.stream == stream))
    out: list[RecordedEvent] = []
    for r in conn.execute(stmt.order_by(events.c.version)):
        if r[0] > upto:
            break
        out.append(recorded_of(r))
    return out


def recorded_us_of(conn: Connection, position: int) -> int | None:
    """When the event at ``position`` was recorded (None when it is not in the log)."""
    v = conn.execute(select(events.c.recorded_us).where(events.c.position == position)).scalar()
    return None if v is None else int(v)


def position_at(conn: Connection, at_us: int) -> int:
    """The last position recorded at or before ``at_us`` (0 when none)."""
    return first_position_at_or_after(conn, at_us + 1) - 1
