"""``eventcoord rebuild --check``: the read models rebuilt in a scratch database, compared
with the live ones row by row (docs/protocol.md#history).

The live tables and the head are read in one consistent read (a snapshot transaction),
the scratch is rebuilt from the log up to that head, from position 0, or after an archive
from the archive's snapshot, never from a periodic snapshot (they are what is checked).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from sqlalchemy import Connection, Table, select

from eventcoord import projections
from eventcoord.history import logreads, snapshots
from eventcoord.history.scratch import build
from eventcoord.projections.tables import READ_MODEL_TABLES
from eventcoord.store import log
from eventcoord.store.base import EventStore

Rows = dict[str, list[tuple[Any, ...]]]


class Difference(msgspec.Struct, frozen=True):
    """One row that differs: its table, its key, the live row and the rebuilt one (None: absent)."""

    table: str
    key: list[Any]
    live: dict[str, Any] | None
    rebuilt: dict[str, Any] | None


def targets(only: str | None) -> tuple[Table, ...]:
    """The tables a check compares (one projection's, or all)."""
    if only is None:
        return READ_MODEL_TABLES
    return tuple(t for t in READ_MODEL_TABLES if t in projections.OWNED[only])


def read_rows(conn: Connection, tables: tuple[Table, ...]) -> Rows:
    """The tables' rows in primary-key order."""
    return {t.name: [tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))] for t in tables}


def begin_snapshot_read(conn: Connection) -> None:
    """Make the rest of this read see one moment of the database (before its first statement)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    else:
        conn.exec_driver_sql("BEGIN")


def base_of(conn: Connection) -> tuple[int, dict[str, list[bytes]]]:
    """Where a replay of the whole log starts: 0, or after an archive its snapshot's chunks."""
    archive = snapshots.archive_boundary(conn)
    if archive is None:
        return 0, {}
    snap = snapshots.nearest(conn, archive.before - 1)
    if snap is None or snap.position != archive.before - 1:
        raise RuntimeError(f"the archive {archive.file} has no snapshot at {archive.before - 1}")
    return snap.position, snapshots.load_chunks(conn, snap, None, tables=snapshots.READ_MODEL_NAMES)


def compare(tables: tuple[Table, ...], live: Rows, rebuilt: Rows) -> list[Difference]:
    """Every row present on one side only, or different, by table and key."""
    out: list[Difference] = []
    for t in tables:
        cols = [str(c.name) for c in t.columns]
        idx = [cols.index(str(c.name)) for c in t.primary_key.columns]
        a = {tuple(r[i] for i in idx): r for r in live[t.name]}
        b = {tuple(r[i] for i in idx): r for r in rebuilt[t.name]}
        for key in sorted(a.keys() | b.keys(), key=repr):
            x, y = a.get(key), b.get(key)
            if x != y:
                out.append(
                    Difference(
                        str(t.name),
                        list(key),
                        None if x is None else dict(zip(cols, x, strict=True)),
                        None if y is None else dict(zip(cols, y, strict=True)),
                    )
                )
    return out


async def check(store: EventStore, only: str | None = None) -> tuple[int, list[Difference]]:
    """Rebuild into scratch up to the head and compare with the live read models."""
    tables = targets(only)

    def live_read(conn: Connection) -> tuple[int, Rows, int, dict[str, list[bytes]], list[Any]]:
        begin_snapshot_read(conn)
        head = log.head(conn)
        rows = read_rows(conn, tables)
        base, chunks = base_of(conn)
        return head, rows, base, chunks, logreads.read_range(conn, base, head)

    head, live, _, chunks, events = await store.query(live_read)

    def rebuild() -> Rows:
        scratch = build(head, None, 0, None, chunks, events)
        try:
            return scratch.read(lambda c: read_rows(c, tables))
        finally:
            scratch.close()

    rebuilt = await asyncio.to_thread(rebuild)
    return head, compare(tables, live, rebuilt)
