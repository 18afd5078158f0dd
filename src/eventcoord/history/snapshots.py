"""Snapshots of the read models: every table's rows, by workspace, in content-addressed chunks.

A snapshot at position P is what the read models held right after P committed. It is a
manifest ``{table: {workspace: [chunk hash, ...]}}``; a chunk is a zlib-compressed JSON list
of rows in primary-key order. Chunk boundaries are chosen by the rows' keys (a row whose key
hashes to 0 mod :data:`BOUNDARY` ends its chunk), so a change touches only the chunks of the
rows it changed: a new snapshot copies those and shares every other chunk with the previous
ones (copy on write). Snapshots are derived from the log (built in a scratch database by
replay, never read from the live tables), so they are consistent by construction.

Rows that are history (an ended session, a released lease or claim, a finished work item,
the append-only conflict log, messages and work ledger: no applier changes them again, and no read of live
state shows them) are kept apart, under ``<table>/history``. The read models grow with the
log mostly by such rows, so a point-in-time read of live state (agents, leases, claims, an
issue) loads a snapshot without them (``load_chunks(history=False)``): its cost follows the
live state, not the length of the log. Snapshots written before this split hold every row
under the table's own name and are loaded whole.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

import msgspec
from sqlalchemy import ColumnElement, Connection, Table, bindparam, not_, select, true
from sqlalchemy.dialects import postgresql, sqlite

from eventcoord.projections.tables import READ_MODEL_TABLES, file_claims, leases, sessions, work_items
from eventcoord.store.schema import archives, snapshot_chunks, snapshots

#: A chunk ends after a row whose key hashes to 0 modulo this (about this many rows a chunk).
BOUNDARY = 64
#: A chunk never holds more rows than this.
MAX_ROWS = 1024

TABLES: dict[str, Table] = {t.name: t for t in READ_MODEL_TABLES}

Manifest = dict[str, dict[str, list[str]]]

#: The manifest key of a table's history rows: ``leases/history``.
HISTORY = "/history"
#: Finished work items: no transition leaves these (domain/queue/transitions.py).
FINISHED = ("done", "failed", "oom_killed", "cancelled")
#: Per table, the rows that are history: final (no applier updates or deletes them) and
#: invisible to the reads of live state. Every row of an append-only table is history.
CLOSED: dict[str, ColumnElement[bool]] = {
    # An ended session is refused every command and ignored by signs of life; it holds
    # nothing (ending releases all). Sessions churn, so these grow with the log.
    "sessions": sessions.c.ended_us.is_not(None),
    "leases": leases.c.released_us.is_not(None),
    "file_claims": file_claims.c.released_us.is_not(None),
    "work_items": work_items.c.status.in_(FINISHED),
    "conflicts": true(),
    "messages": true(),
    "work_ledger": true(),
}


class Snapshot(msgspec.Struct, frozen=True):
    """A snapshot's header: its position, that position's time, its manifest."""

    position: int
    recorded_us: int
    manifest: Manifest


def _key(table: Table, row: Sequence[Any]) -> bytes:
    cols = [c.name for c in table.columns]
    return msgspec.json.encode([row[cols.index(c.name)] for c in table.primary_key.columns])


def _chunks(table: Table, rows: Iterable[Sequence[Any]]) -> Iterator[list[list[Any]]]:
    current: list[list[Any]] = []
    for row in rows:
        current.append(list(row))
        if zlib.crc32(_key(table, row)) % BOUNDARY == 0 or len(current) >= MAX_ROWS:
            yield current
            current = []
    if current:
        yield current


def _store_chunks(table: Table, rows: Iterable[Sequence[Any]], chunks: dict[str, bytes]) -> list[str]:
    hashes = []
    for chunk in _chunks(table, rows):
        raw = msgspec.json.encode(chunk)
        digest = hashlib.sha256(raw).hexdigest()
        chunks.setdefault(digest, zlib.compress(raw, 6))
        hashes.append(digest)
    return hashes


def dump(conn: Connection) -> tuple[Manifest, dict[str, bytes]]:
    """Every read-model row of ``conn``'s database as a manifest and its chunks (hash → data).

    A table with history rows (:data:`CLOSED`) has two entries: ``name`` (the live rows) and
    ``name/history``.
    """
    manifest: Manifest = {}
    chunks: dict[str, bytes] = {}
    for table in READ_MODEL_TABLES:
        closed = CLOSED.get(table.name)
        parts = {table.name: None} if closed is None else {table.name: not_(closed), table.name + HISTORY: closed}
        for key, where in parts.items():
            per_ws: dict[str, list[str]] = {}
            workspaces = sorted(conn.execute(select(table.c.workspace).distinct()).scalars())
            for ws in workspaces:
                stmt = select(table).where(table.c.workspace == ws)
                if where is not None:
                    stmt = stmt.where(where)
                hashes = _store_chunks(table, conn.execute(stmt.order_by(*table.primary_key.columns)), chunks)
                if hashes or where is None:
                    per_ws[ws] = hashes
            manifest[key] = per_ws
    return manifest, chunks


def keeps_history_apart(manifest: Manifest) -> bool:
    """Whether a snapshot stores its history rows apart (written since the split)."""
    return any(key.endswith(HISTORY) for key in manifest)


def with_history(manifest: Manifest, previous: Manifest) -> Manifest:
    """A dump of a scratch loaded without history from ``previous``, completed with its history.

    History rows are final, and a scratch loaded with ``history=False`` holds none of the
    previous snapshot's: the history rows it holds are exactly those that became final
    (or were appended) in the replay since. The history of the new snapshot is therefore
    the previous one's chunks followed by those: nothing of it is read, decoded or hashed
    again, so a snapshot costs the live state and the events since, not the log's length.
    """
    out = {key: dict(per_ws) for key, per_ws in manifest.items()}
    for key, per_ws in previous.items():
        if key.endswith(HISTORY):
            merged = out.setdefault(key, {})
            for ws, hashes in per_ws.items():
                merged[ws] = [*hashes, *merged.get(ws, [])]
    return out


def decode_chunk(data: bytes) -> list[list[Any]]:
    """A stored chunk's rows."""
    rows: list[list[Any]] = msgspec.json.decode(zlib.decompress(data))
    return rows


def _insert_chunks(dialect: str) -> Any:
    ins = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(snapshot_chunks)
    return ins.values(hash=bindparam("h"), data=bindparam("d")).on_conflict_do_nothing(
        index_elements=[snapshot_chunks.c.hash]
    )


def _insert_snapshot(dialect: str) -> Any:
    ins = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(snapshots)
    return ins.on_conflict_do_nothing(index_elements=[snapshots.c.position])


def write(
    conn: Connection, position: int, recorded_us: int, created_us: int, manifest: Manifest, chunks: dict[str, bytes]
) -> int:
    """Store a snapshot; only chunks not stored yet are written. Returns the chunks written."""
    wanted = list(chunks)
    have: set[str] = set()
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        have.update(conn.execute(select(snapshot_chunks.c.hash).where(snapshot_chunks.c.hash.in_(part))).scalars())
    new = [{"h": h, "d": chunks[h]} for h in wanted if h not in have]
    if new:
        conn.execute(_insert_chunks(conn.dialect.name), new)
    conn.execute(
        _insert_snapshot(conn.dialect.name).values(
            position=position,
            recorded_us=recorded_us,
            created_us=created_us,
            manifest=msgspec.json.encode(manifest).decode(),
        )
    )
    return len(new)


def nearest(conn: Connection, position: int) -> Snapshot | None:
    """The newest snapshot at or before ``position``."""
    row = conn.execute(
        select(snapshots.c.position, snapshots.c.recorded_us, snapshots.c.manifest)
        .where(snapshots.c.position <= position)
        .order_by(snapshots.c.position.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    return Snapshot(int(row[0]), int(row[1]), msgspec.json.decode(row[2], type=Manifest))


def latest_position(conn: Connection) -> int:
    """The position of the newest snapshot (0 when there is none)."""
    row = conn.execute(select(snapshots.c.position).order_by(snapshots.c.position.desc()).limit(1)).first()
    return 0 if row is None else int(row[0])


def load_chunks(
    conn: Connection,
    snap: Snapshot,
    workspace: str | None,
    *,
    history: bool = True,
    tables: Collection[str] | None = None,
) -> dict[str, list[bytes]]:
    """The stored chunks of a snapshot, by table (only ``workspace``'s, if given).

    ``history=False`` leaves out the history rows (:data:`CLOSED`) of snapshots that keep
    them apart: enough for reads of live state, and replay after the snapshot, which never
    touches such a row. ``tables``: only those tables' chunks.
    """
    wanted: dict[str, list[str]] = {}
    for key, per_ws in snap.manifest.items():
        name, _, rest = key.partition("/")
        if (rest and not history) or (tables is not None and name not in tables):
            continue
        hashes = wanted.setdefault(name, [])
        if workspace is None:
            hashes.extend(h for ws in sorted(per_ws) for h in per_ws[ws])
        else:
            hashes.extend(per_ws.get(workspace, []))
    every = sorted({h for hs in wanted.values() for h in hs})
    data: dict[str, bytes] = {}
    for start in range(0, len(every), 500):
        part = every[start : start + 500]
        for h, d in conn.execute(
            select(snapshot_chunks.c.hash, snapshot_chunks.c.data).where(snapshot_chunks.c.hash.in_(part))
        ):
            data[h] = bytes(d)
    return {name: [data[h] for h in hs] for name, hs in wanted.items()}


class Archive(msgspec.Struct, frozen=True):
    """A prefix of the log moved to a file: events below ``before`` are there."""

    before: int
    file: str
    events: int


def archive_boundary(conn: Connection) -> Archive | None:
    """The newest archive (events below its ``before`` are no longer in the log)."""
    row = conn.execute(
        select(archives.c.before_position, archives.c.file, archives.c.events)
        .order_by(archives.c.before_position.desc())
        .limit(1)
    ).first()
    return None if row is None else Archive(int(row[0]), str(row[1]), int(row[2]))
