"""Reads of the log for history: filtered pages (SPEC §8), ranges, moments.

Every query is a seek on an index of ``0004_history`` followed by a walk in position
order: ``(workspace, type, position)``, ``(workspace, stream, position)``, and
``(workspace, recorded_us, position)``, which turns a ``since``/``until`` time into a
position bound (``recorded_us`` follows commit order: it is the committing database's
clock) while the exact time predicate stays in the query.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import msgspec
from sqlalchemy import Connection, Select, select

from eventcoord import errors
from eventcoord.codec import EventMetadata, WireEvent, decode_event, format_time
from eventcoord.history.snapshots import archive_boundary
from eventcoord.store.log import RecordedEvent, read_wire
from eventcoord.store.schema import events

_WIRE = (
    events.c.position,
    events.c.stream,
    events.c.version,
    events.c.type,
    events.c.data,
    events.c.metadata,
    events.c.recorded_us,
)


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """SPEC §8 filters of the log: any combination; none reorders."""

    types: tuple[str, ...] = ()
    stream: str | None = None
    since_us: int | None = None  # inclusive, on recorded_at
    until_us: int | None = None  # exclusive, on recorded_at
    until_position: int | None = None  # inclusive

    @property
    def empty(self) -> bool:
        return not self.types and self.stream is None and self.since_us is None and self.until_us is None and self.until_position is None


def _bounds(conn: Connection, workspace: str | None, f: Filters, after: int) -> tuple[int, int | None] | None:
    """``(after, upto)`` position bounds implied by the time window; None when it is empty."""
    upto = f.until_position
    if workspace is None:
        return after, upto
    if f.since_us is not None:
        first = conn.execute(
            select(events.c.position)
            .where((events.c.workspace == workspace) & (events.c.recorded_us >= f.since_us))
            .order_by(events.c.recorded_us, events.c.position)
            .limit(1)
        ).scalar()
        if first is None:
            return None
        after = max(after, int(first) - 1)
    if f.until_us is not None:
        last = conn.execute(
            select(events.c.position)
            .where((events.c.workspace == workspace) & (events.c.recorded_us < f.until_us))
            .order_by(events.c.recorded_us.desc(), events.c.position.desc())
            .limit(1)
        ).scalar()
        if last is None:
            return None
        upto = int(last) if upto is None else min(upto, int(last))
    return after, upto


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
    bounds = _bounds(conn, workspace, f, after)
    if bounds is None:
        return []
    lo, upto = bounds
    base = _where(select(*_WIRE, events.c.workspace), workspace, f, lo, upto)
    if not f.types:
        return list(conn.execute(base.order_by(events.c.position).limit(limit)))
    # One index walk per type, merged: never a sort of every match.
    pages = [list(conn.execute(base.where(events.c.type == t).order_by(events.c.position).limit(limit))) for t in sorted(set(f.types))]
    return list(heapq.merge(*pages, key=lambda r: r.position))[:limit]


def page(conn: Connection, after: int, limit: int, workspace: str, f: Filters) -> list[WireEvent]:
    """A page of ``/v1/events``; a page starting before an archive is 410 ARCHIVED naming it."""
    archive = archive_boundary(conn)
    if archive is not None and after < archive.before - 1:
        raise errors.archived(after + 1, archive.before, archive.file)
    return read_wire(conn, after, limit, workspace) if f.empty else read_filtered(conn, after, limit, workspace, f)


def read_filtered(conn: Connection, after: int, limit: int, workspace: str | None, f: Filters) -> list[WireEvent]:
    """A page of ``/v1/events`` with SPEC §8 filters, as wire structs."""
    return [_wire(r) for r in rows(conn, after, limit, workspace, f)]


def recorded(r: Any) -> RecordedEvent:
    """An event row decoded to the domain event (projections)."""
    return RecordedEvent(
        position=r.position,
        stream=r.stream,
        version=r.version,
        event=decode_event(r.type, r.data),
        metadata=msgspec.json.decode(r.metadata, type=EventMetadata),
        recorded_us=r.recorded_us,
    )


def read_range(conn: Connection, after: int, upto: int, workspace: str | None = None, batch: int = 5000) -> list[RecordedEvent]:
    """Every event in ``(after, upto]`` (of one workspace, if given), decoded, in position order."""
    out: list[RecordedEvent] = []
    while after < upto:
        stmt = _where(select(*_WIRE, events.c.workspace), workspace, Filters(), after, upto)
        page: Sequence[Any] = list(conn.execute(stmt.order_by(events.c.position).limit(batch)))
        if not page:
            break
        out.extend(recorded(r) for r in page)
        after = page[-1].position
    return out


def recorded_us_of(conn: Connection, position: int) -> int | None:
    """When the event at ``position`` was recorded (None when it is not in the log)."""
    v = conn.execute(select(events.c.recorded_us).where(events.c.position == position)).scalar()
    return None if v is None else int(v)


def position_at(conn: Connection, workspace: str, at_us: int) -> int:
    """The last position of ``workspace`` recorded at or before ``at_us`` (0 when none)."""
    v = conn.execute(
        select(events.c.position)
        .where((events.c.workspace == workspace) & (events.c.recorded_us <= at_us))
        .order_by(events.c.recorded_us.desc(), events.c.position.desc())
        .limit(1)
    ).scalar()
    return 0 if v is None else int(v)
