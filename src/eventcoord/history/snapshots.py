"""Snapshots of the read models: every table's rows, by workspace, in content-addressed chunks.

A snapshot at position P is what the read models held right after P committed. It is a
manifest ``{table: {workspace: [chunk hash, ...]}}``; a chunk is a zlib-compressed JSON list
of rows in primary-key order. Chunk boundaries are chosen by the rows' keys (a row whose key
hashes to 0 mod :data:`BOUNDARY` ends its chunk), so a change touches only the chunks of the
rows it changed: a new snapshot copies those and shares every other chunk with the previous
ones (copy on write). Snapshots are derived from the log (built in a scratch database by
replay, never read from the live tables), so they are consistent by construction.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec
from sqlalchemy import Connection, Table, bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from eventcoord.projections.tables import READ_MODEL_TABLES
from eventcoord.store.schema import archives, snapshot_chunks, snapshots

#: A chunk ends after a row whose key hashes to 0 modulo this (about this many rows a chunk).
BOUNDARY = 64
#: A chunk never holds more rows than this.
MAX_ROWS = 1024

TABLES: dict[str, Table] = {t.name: t for t in READ_MODEL_TABLES}

Manifest = dict[str, dict[str, list[str]]]


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


def dump(conn: Connection) -> tuple[Manifest, dict[str, bytes]]:
    """Every read-model row of ``conn``'s database as a manifest and its chunks (hash → data)."""
    manifest: Manifest = {}
    chunks: dict[str, bytes] = {}
    for table in READ_MODEL_TABLES:
        per_ws: dict[str, list[str]] = {}
        workspaces = sorted(conn.execute(select(table.c.workspace).distinct()).scalars())
        for ws in workspaces:
            rows = conn.execute(select(table).where(table.c.workspace == ws).order_by(*table.primary_key.columns))
            hashes = []
            for chunk in _chunks(table, rows):
                raw = msgspec.json.encode(chunk)
                digest = hashlib.sha256(raw).hexdigest()
                chunks.setdefault(digest, zlib.compress(raw, 6))
                hashes.append(digest)
            per_ws[ws] = hashes
        manifest[table.name] = per_ws
    return manifest, chunks


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


def load_chunks(conn: Connection, snap: Snapshot, workspace: str | None) -> dict[str, list[bytes]]:
    """The stored chunks of a snapshot, by table (only ``workspace``'s, if given)."""
    wanted: dict[str, list[str]] = {}
    for name, per_ws in snap.manifest.items():
        if workspace is None:
            wanted[name] = [h for ws in sorted(per_ws) for h in per_ws[ws]]
        else:
            wanted[name] = list(per_ws.get(workspace, []))
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
