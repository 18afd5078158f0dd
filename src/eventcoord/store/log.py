"""Backend-neutral SQL over the log: append with expected versions, read by position.

Plain SQLAlchemy Core on a synchronous ``Connection``: the SQLite writer calls it directly
on the event loop, PostgreSQL through ``AsyncConnection.run_sync``; one implementation, two
backends.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import msgspec
from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import Executable

from eventcoord.codec import (
    EventMetadata,
    WireEvent,
    encode,
    encode_event_data,
    event_type,
    format_time,
)
from eventcoord.errors import ConcurrencyError
from eventcoord.events import Event
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import events, settings, store_head, stream_heads


def _upsert_stream_head(dialect: str) -> Executable:
    ins = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(stream_heads)
    return (
        ins.values(workspace=bindparam("ws"), stream=bindparam("stream"), version=bindparam("n"))
        .on_conflict_do_update(
            index_elements=[stream_heads.c.workspace, stream_heads.c.stream],
            set_={"version": stream_heads.c.version + bindparam("n2")},
        )
        .returning(stream_heads.c.version)
    )


_UPSERT_STREAM_HEAD = Prepared(_upsert_stream_head)
_ADVANCE_HEAD = Prepared(
    lambda d: update(store_head)
    .where(store_head.c.id == 1)
    .values(position=store_head.c.position + bindparam("n"))
    .returning(store_head.c.position)
)
_INSERT_EVENT = Prepared(lambda d: events.insert())


class NewEvent(msgspec.Struct, frozen=True):
    """An event about to be appended to ``stream``."""

    stream: str
    event: Event
    metadata: EventMetadata


class RecordedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event as stored: the domain event plus its place in the log."""

    position: int
    stream: str
    version: int
    event: Event
    metadata: EventMetadata
    recorded_us: int

    @property
    def type(self) -> str:
        """The event's stable tag."""
        return event_type(self.event)


#: Expected stream version: ``None`` appends at whatever the head is (the caller holds the
#: guard that serialises it), an int demands exactly that version (optimistic concurrency).
Expected = int | None


#: How long a process trusts the TTL it read from ``settings`` (replicas pick up a
#: change made by another replica's ``serve --ttl-seconds`` within this many seconds).
TTL_REFRESH_SECONDS = 2.0
#: Where the TTL is cached: on the database connection it was read through
#: (``Connection.info``), so it lives and dies with that connection to that database.
_TTL_KEY = "eventcoord.ttl"

_READ_TTL = Prepared(lambda d: select(settings.c.value).where(settings.c.key == "ttl_seconds"))
_PG_NOW = "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint"


def clock(conn: Connection) -> tuple[int, int]:
    """The database's clock in microseconds and the liveness TTL in seconds (SPEC §5)."""
    if conn.dialect.name == "postgresql":
        now_us = int(conn.exec_driver_sql(_PG_NOW).scalar_one())
    else:
        # SQLite lives in one file on one host: its clock is this host's clock.
        now_us = time.time_ns() // 1000
    return now_us, ttl_seconds(conn)


def ttl_seconds(conn: Connection) -> int:
    """The liveness TTL kept in the database, re-read at most every couple of seconds."""
    info = conn.info
    hit: tuple[int, float] | None = info.get(_TTL_KEY)
    now = time.monotonic()
    if hit is not None and hit[1] > now:
        return hit[0]
    ttl = int(_READ_TTL.scalar(conn, {}))
    info[_TTL_KEY] = (ttl, now + TTL_REFRESH_SECONDS)
    return ttl


def forget_ttl(conn: Connection) -> None:
    """Drop the TTL cached on ``conn`` (after writing a new one through it)."""
    conn.info.pop(_TTL_KEY, None)


def append(
    conn: Connection,
    new: Sequence[NewEvent],
    now_us: int,
    expected: dict[str, Expected] | None = None,
) -> list[RecordedEvent]:
    """Append ``new`` in order inside the caller's transaction and return them recorded.

    Stream versions are checked against ``expected`` (ConcurrencyError on mismatch); the
    global position comes from the one-row counter, updated last so that on PostgreSQL
    commits are ordered by position and a rollback gives its numbers back (contiguity).
    """
    if not new:
        return []
    expected = expected or {}
    workspace = new[0].metadata.workspace
    counts: dict[str, int] = {}
    for item in new:
        counts[item.stream] = counts.get(item.stream, 0) + 1
    first_version: dict[str, int] = {}
    # Sorted, so concurrent appenders lock stream heads in one order (no deadlocks).
    for stream in sorted(counts):
        first_version[stream] = _advance_stream(conn, workspace, stream, counts[stream], expected.get(stream))
    last = int(_ADVANCE_HEAD.scalar(conn, {"n": len(new)}))
    position = last - len(new) + 1
    rows: list[dict[str, Any]] = []
    recorded: list[RecordedEvent] = []
    next_version = dict(first_version)
    encoded_meta: dict[int, str] = {}  # a command's events share one metadata object
    for item in new:
        meta = encoded_meta.get(id(item.metadata))
        if meta is None:
            meta = encoded_meta[id(item.metadata)] = encode(item.metadata).decode()
        version = next_version[item.stream]
        next_version[item.stream] = version + 1
        rows.append(
            {
                "position": position,
                "workspace": item.metadata.workspace,
                "stream": item.stream,
                "version": version,
                "type": event_type(item.event),
                "data": encode_event_data(item.event).decode(),
                "metadata": meta,
                "recorded_us": now_us,
            }
        )
        recorded.append(
            RecordedEvent(
                position=position,
                stream=item.stream,
                version=version,
                event=item.event,
                metadata=item.metadata,
                recorded_us=now_us,
            )
        )
        position += 1
    try:
        _INSERT_EVENT.many(conn, rows)
    except (IntegrityError, sqlite3.IntegrityError) as e:
        raise ConcurrencyError("a stream version was taken concurrently") from e
    return recorded


def _advance_stream(conn: Connection, workspace: str, stream: str, count: int, expected: Expected) -> int:
    """Move a stream's head forward by ``count``; return the first new version."""
    if expected is None:
        new_head = _UPSERT_STREAM_HEAD.scalar(conn, {"ws": workspace, "stream": stream, "n": count, "n2": count})
        return int(new_head) - count + 1
    if expected == 0:
        try:
            with conn.begin_nested():
                conn.execute(stream_heads.insert().values(workspace=workspace, stream=stream, version=count))
        except IntegrityError as e:
            raise ConcurrencyError(f"stream {stream!r} already exists (expected version 0)") from e
        return 1
    key = (stream_heads.c.workspace == workspace) & (stream_heads.c.stream == stream)
    moved = conn.execute(
        update(stream_heads).where(key & (stream_heads.c.version == expected)).values(version=expected + count)
    ).rowcount
    if moved != 1:
        raise ConcurrencyError(f"stream {stream!r} is not at expected version {expected}")
    return expected + 1


def stream_version(conn: Connection, workspace: str, stream: str) -> int:
    """The current version of a stream (0 when it has no events)."""
    v = conn.execute(
        select(stream_heads.c.version).where((stream_heads.c.workspace == workspace) & (stream_heads.c.stream == stream))
    ).scalar_one_or_none()
    return int(v or 0)


def head(conn: Connection) -> int:
    """The position of the newest committed event (0 for an empty store)."""
    return int(conn.execute(select(store_head.c.position).where(store_head.c.id == 1)).scalar_one())


_WIRE_COLUMNS = (
    events.c.position,
    events.c.stream,
    events.c.version,
    events.c.type,
    events.c.data,
    events.c.metadata,
    events.c.recorded_us,
)


def read_wire(conn: Connection, after: int, limit: int, workspace: str | None = None) -> list[WireEvent]:
    """Events with position > ``after`` in position order, as wire structs."""
    stmt = select(*_WIRE_COLUMNS).where(events.c.position > after)
    if workspace is not None:
        stmt = stmt.where(events.c.workspace == workspace)
    stmt = stmt.order_by(events.c.position).limit(limit)
    return [
        WireEvent(
            position=r.position,
            stream=r.stream,
            version=r.version,
            type=r.type,
            data=msgspec.Raw(r.data.encode()),
            metadata=msgspec.Raw(r.metadata.encode()),
            recorded_at=format_time(r.recorded_us),
        )
        for r in conn.execute(stmt)
    ]


def read_recorded(conn: Connection, after: int, limit: int) -> list[RecordedEvent]:
    """Events with position > ``after`` decoded to domain events (rebuilds, projections)."""
    from eventcoord.codec import decode_event

    stmt = (
        select(*_WIRE_COLUMNS, events.c.workspace)
        .where(events.c.position > after)
        .order_by(events.c.position)
        .limit(limit)
    )
    return [
        RecordedEvent(
            position=r.position,
            stream=r.stream,
            version=r.version,
            event=decode_event(r.type, r.data),
            metadata=msgspec.json.decode(r.metadata, type=EventMetadata),
            recorded_us=r.recorded_us,
        )
        for r in conn.execute(stmt)
    ]
