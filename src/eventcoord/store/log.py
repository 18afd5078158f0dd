"""Backend-neutral SQL over the log: append with expected versions, read by position.

Plain SQLAlchemy Core on a synchronous ``Connection``: the SQLite writer calls it directly
on the event loop, PostgreSQL inside the writer's greenlet; one implementation, two
backends. Where the backend's write transaction keeps the counter, the stream heads or
the events itself (``store/transaction.py``: a PostgreSQL batch hands out provisional
positions and stages the events), ``append`` asks it; whatever a transaction returns that
mentions positions is a :class:`Pending` result, finished once the real ones are known.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import msgspec
from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import Executable

from eventcoord.codec import (
    EventMetadata,
    WireEvent,
    decode_event,
    encode,
    encode_event_data,
    event_type,
    format_time,
)
from eventcoord.errors import ConcurrencyError
from eventcoord.events import Event
from eventcoord.store import transaction
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import events, store_head, stream_heads
from eventcoord.store.transaction import Expected, Resolve

T = TypeVar("T")
__all__ = ["Expected", "NewEvent", "Pending", "RecordedEvent", "Resolve"]


class Pending(Generic[T]):
    """A transaction's result that mentions positions: finished once they are final.

    ``finish`` gets a :class:`~eventcoord.store.transaction.Resolve` that maps every position the
    transaction saw (``append``'s, ``head``'s) to the one it committed with. The store calls
    it after the transaction's positions are fixed; ``transact`` returns what it returns.
    """

    __slots__ = ("finish",)

    def __init__(self, finish: Callable[[Resolve], T]) -> None:
        self.finish = finish


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
    lambda d: (
        update(store_head)
        .where(store_head.c.id == 1)
        .values(position=store_head.c.position + bindparam("n"))
        .returning(store_head.c.position)
    )
)
_INSERT_EVENT = Prepared(lambda d: events.insert())
#: The position counter, and a stream's head (binds ``ws``, ``stream``), as the database holds them.
READ_HEAD = Prepared(lambda d: select(store_head.c.position).where(store_head.c.id == 1))
READ_STREAM = Prepared(
    lambda d: select(stream_heads.c.version).where(
        (stream_heads.c.workspace == bindparam("ws")) & (stream_heads.c.stream == bindparam("stream"))
    )
)


class NewEvent(msgspec.Struct, frozen=True):
    """An event about to be appended to ``stream``."""

    stream: str
    event: Event
    metadata: EventMetadata


class RecordedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event as stored: the domain event plus its place in the log.

    Inside a PostgreSQL batch ``position`` is provisional and ``version`` is 0 when the
    stream's head moves at commit (no expected version): a :class:`Pending` result gets
    both from its ``Resolve`` (``real(position)``, ``real.version(position, version)``).
    """

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
    Inside a PostgreSQL batch the positions are provisional and the events are staged: the
    batch moves the counter and inserts them, once, just before it commits.
    """
    if not new:
        return []
    expected = expected or {}
    workspace = new[0].metadata.workspace
    counts: dict[str, int] = {}
    for item in new:
        counts[item.stream] = counts.get(item.stream, 0) + 1
    running = transaction.current(conn)
    next_version: dict[str, int | None]
    if running is not None:  # the backend's transaction moves them (in memory, or at commit)
        next_version, position = running.positions(conn, workspace, counts, expected)
    else:
        # Sorted, so concurrent appenders lock stream heads in one order (no deadlocks).
        next_version = {s: advance_stream(conn, workspace, s, counts[s], expected.get(s)) for s in sorted(counts)}
        position = int(_ADVANCE_HEAD.scalar(conn, {"n": len(new)})) - len(new) + 1
    rows: list[dict[str, Any]] = []
    recorded: list[RecordedEvent] = []
    encoded_meta: dict[int, str] = {}  # a command's events share one metadata object
    for item in new:
        meta = encoded_meta.get(id(item.metadata))
        if meta is None:
            meta = encoded_meta[id(item.metadata)] = encode(item.metadata).decode()
        version = next_version.get(item.stream)
        if version is not None:
            next_version[item.stream] = version + 1
        row = {
            "position": position,
            "workspace": item.metadata.workspace,
            "stream": item.stream,
            "version": version,
            "type": event_type(item.event),
            "data": encode_event_data(item.event).decode(),
            "metadata": meta,
            "recorded_us": now_us,
        }
        rows.append(row)
        recorded.append(
            RecordedEvent(
                position=position,
                stream=item.stream,
                version=version or 0,
                event=item.event,
                metadata=item.metadata,
                recorded_us=now_us,
            )
        )
        position += 1
    if running is not None and running.stage(rows):
        return recorded
    try:
        _INSERT_EVENT.many(conn, rows)
    except (IntegrityError, sqlite3.IntegrityError) as e:
        raise ConcurrencyError("a stream version was taken concurrently") from e
    return recorded


def advance_stream(conn: Connection, workspace: str, stream: str, count: int, expected: Expected) -> int:
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
    running = transaction.current(conn)
    kept = None if running is None else running.stream_version(conn, workspace, stream)
    if kept is not None:
        return kept
    return int(READ_STREAM.scalar(conn, {"ws": workspace, "stream": stream}) or 0)


def head(conn: Connection) -> int:
    """The position of the newest event this transaction sees (0 for an empty store).

    Inside a PostgreSQL batch that has appended, that is the batch's newest provisional
    position: resolve it with the batch's :class:`Resolve` (see :class:`Pending`).
    """
    running = transaction.current(conn)
    if running is not None and (last := running.last_position()) is not None:
        return last
    return int(READ_HEAD.scalar(conn, {}))


def _log_visible(conn: Connection) -> None:
    """A transaction that reads the log must see all of it (``Transaction.reads_log``)."""
    running = transaction.current(conn)
    if running is not None:
        running.reads_log()


WIRE_COLUMNS = (
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
    _log_visible(conn)
    stmt = select(*WIRE_COLUMNS).where(events.c.position > after)
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


_METADATA = msgspec.json.Decoder(EventMetadata)


def recorded_of(row: Sequence[Any]) -> RecordedEvent:
    """A row of :data:`WIRE_COLUMNS` (in that order) decoded to the domain event."""
    return RecordedEvent(
        position=row[0],
        stream=row[1],
        version=row[2],
        event=decode_event(row[3], row[4]),
        metadata=_METADATA.decode(row[5]),
        recorded_us=row[6],
    )


_READ_RECORDED = Prepared(
    lambda d: (
        select(*WIRE_COLUMNS)
        .where(events.c.position > bindparam("after"))
        .order_by(events.c.position)
        .limit(bindparam("limit"))
    )
)


def read_recorded(conn: Connection, after: int, limit: int) -> list[RecordedEvent]:
    """Events with position > ``after`` decoded to domain events (rebuilds, projections).

    Prebuilt and read as plain rows on the driver: a rebuild reads the whole log this way.
    """
    _log_visible(conn)
    return [recorded_of(r) for r in _READ_RECORDED.rows(conn, {"after": after, "limit": limit})]
