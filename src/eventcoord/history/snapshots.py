"""Snapshots of the read models: every table's rows, by workspace, in content-addressed chunks.

A snapshot at position P is what the read models held right after P committed, derived from
the log by replay: a manifest ``{table: {workspace: [chunk hash, ...]}}`` of zlib-compressed
JSON rows in key order, cut where a row's key hashes to 0 mod :data:`BOUNDARY`, so a new
snapshot copies only the chunks whose rows changed. Rows that are history (no applier
changes them again) are kept apart under ``<table>/history``, named once along the chain of
snapshots (``base_position``, :func:`history_of`), and left out of reads of live state
(``load_chunks(history=False)``). Snapshots written before either split are loaded whole.
See docs/history.md#point-in-time-questions and docs/decisions/0007-snapshots-off-the-command-path.md.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import msgspec
from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    DefaultClause,
    MetaData,
    Select,
    String,
    Table,
    Text,
    bindparam,
    func,
    not_,
    select,
    true,
    tuple_,
)
from sqlalchemy.dialects import postgresql, sqlite

from eventcoord.projections.queue import FINISHED
from eventcoord.projections.tables import READ_MODEL_TABLES, conflicts, file_claims, leases, sessions, work_items
from eventcoord.store.schema import BigInt, archives, snapshot_chunks, snapshots

#: A chunk ends after a row whose key hashes to 0 modulo this (about this many rows a chunk).
BOUNDARY = 64
#: A chunk never holds more rows than this.
MAX_ROWS = 1024

#: Kept only in snapshots, never in the live database: per path, how many claims it has had
#: (``mode`` ``claims``) and how many conflicts (``contention``). A scratch that builds
#: snapshots counts them as rows are inserted (``Scratch.count_paths``), so the all-time
#: heatmap is the newest snapshot's counts plus the rows since it (:func:`path_hits`), not a
#: count of every claim ever made.
SNAPSHOT_ONLY = MetaData()
path_counts = Table(
    "path_counts",
    SNAPSHOT_ONLY,
    Column("workspace", String(64), primary_key=True),
    Column("mode", String(16), primary_key=True),
    Column("path", Text, primary_key=True),
    Column("hits", BigInt, nullable=False),
)
#: The tables a snapshot holds: every read model, and the path counts.
SNAPSHOT_TABLES: tuple[Table, ...] = (*READ_MODEL_TABLES, path_counts)
TABLES: dict[str, Table] = {t.name: t for t in SNAPSHOT_TABLES}
#: The read models' names (what a rebuild or a check loads from a snapshot).
READ_MODEL_NAMES = frozenset(str(t.name) for t in READ_MODEL_TABLES)
#: The counted tables, by heatmap mode.
COUNTED = {"claims": file_claims, "contention": conflicts}

Manifest = dict[str, dict[str, list[str]]]

#: The manifest key of a table's history rows: ``leases/history``.
HISTORY = "/history"
#: Per table, the rows that are history: final (no applier updates or deletes them) and
#: invisible to the reads of live state. Every row of an append-only table is history.
CLOSED: dict[str, ColumnElement[bool]] = {
    # An ended session is refused every command and ignored by signs of life; it holds
    # nothing (ending releases all). Sessions churn, so these grow with the log.
    "sessions": sessions.c.ended_us.is_not(None),
    "leases": leases.c.released_us.is_not(None),
    "file_claims": file_claims.c.released_us.is_not(None),
    "work_items": work_items.c.status.in_(sorted(FINISHED)),
    "conflicts": true(),
    "messages": true(),
    "work_ledger": true(),
}


class Snapshot(msgspec.Struct, frozen=True):
    """A snapshot's header: its position, that position's time, its manifest.

    ``manifest``: the live rows' chunks (and, in snapshots written before the chain, the
    history's too); ``history``: the history chunks since ``base`` (None: in the manifest).
    """

    position: int
    recorded_us: int
    manifest: Manifest
    base: int | None = None
    history: Manifest | None = None

    @property
    def keeps_history_apart(self) -> bool:
        """Whether its history rows are apart from the live ones (written since the split)."""
        return self.history is not None or any(key.endswith(HISTORY) for key in self.manifest)


#: One part of a snapshot: a manifest key (``leases``, ``leases/history``) and a workspace.
PartKey = tuple[str, str]


class Part(msgspec.Struct, frozen=True):
    """How one part was chunked: its chunks' hashes, and the key of each chunk's last row.

    A chunk ``i`` holds the rows with keys in ``(last_keys[i-1], last_keys[i]]``, so a row's
    chunk is found by bisection, and a snapshot that changed a few rows re-chunks only the
    chunks they fall in (:func:`dump_changed`).
    """

    hashes: list[str]
    last_keys: list[tuple[Any, ...]]


#: The parts of one dump (what the next :func:`dump_changed` builds on).
Layout = dict[PartKey, Part]


class Dump(msgspec.Struct, frozen=True):
    """A dump of the read models: the manifest, the chunks not known before, the live parts' layout."""

    manifest: Manifest
    chunks: dict[str, bytes]
    layout: Layout


def _key_of(table: Table) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    at = [[c.name for c in table.columns].index(c.name) for c in table.primary_key.columns]
    return lambda row: tuple(row[i] for i in at)


class _Chunker:
    """Cuts one part's rows (in key order) into chunks at key-chosen boundaries.

    A chunk ends after a row whose key hashes to 0 modulo :data:`BOUNDARY`, or at
    :data:`MAX_ROWS`. Only chunks whose hash is neither in ``chunks`` nor ``known`` (stored
    already) are compressed.
    """

    def __init__(self, table: Table, chunks: dict[str, bytes], known: Collection[str]) -> None:
        self.key = _key_of(table)
        self.chunks = chunks
        self.known = known
        self.current: list[list[Any]] = []
        self.hashes: list[str] = []
        self.last_keys: list[tuple[Any, ...]] = []

    def add(self, row: Sequence[Any]) -> None:
        key = self.key(row)
        self.current.append(list(row))
        if zlib.crc32(msgspec.json.encode(list(key))) % BOUNDARY == 0 or len(self.current) >= MAX_ROWS:
            self._cut(key)

    def _cut(self, key: tuple[Any, ...]) -> None:
        raw = msgspec.json.encode(self.current)
        digest = hashlib.sha256(raw).hexdigest()
        if digest not in self.chunks and digest not in self.known:
            self.chunks[digest] = zlib.compress(raw, 6)
        self.hashes.append(digest)
        self.last_keys.append(key)
        self.current = []

    def finish(self) -> Part:
        """The part, its last rows cut into a chunk of their own."""
        if self.current:
            self._cut(self.key(self.current[-1]))
        return Part(self.hashes, self.last_keys)


def _parts(table: Table) -> dict[str, ColumnElement[bool] | None]:
    """A table's manifest keys and the rows each holds (None: every row)."""
    closed = CLOSED.get(table.name)
    return {table.name: None} if closed is None else {table.name: not_(closed), table.name + HISTORY: closed}


def _select(table: Table, workspace: str, where: ColumnElement[bool] | None) -> Select[Any]:
    stmt = select(table).where(table.c.workspace == workspace)
    return stmt if where is None else stmt.where(where)


def dump(conn: Connection, known: Collection[str] = (), tables: Sequence[Table] = SNAPSHOT_TABLES) -> Dump:
    """Every row of ``tables`` in ``conn``'s database as a manifest, its chunks and its layout.

    A table with history rows (:data:`CLOSED`) has two entries: ``name`` (the live rows) and
    ``name/history``. ``known``: hashes of chunks stored already (not compressed again).
    ``tables``: a database that did not count paths has only the read models.
    """
    manifest: Manifest = {}
    chunks: dict[str, bytes] = {}
    layout: Layout = {}
    for table in tables:
        workspaces = sorted(conn.execute(select(table.c.workspace).distinct()).scalars())
        for key, where in _parts(table).items():
            per_ws: dict[str, list[str]] = {}
            for ws in workspaces:
                chunker = _Chunker(table, chunks, known)
                for row in conn.execute(_select(table, ws, where).order_by(*table.primary_key.columns)):
                    chunker.add(row)
                part = chunker.finish()
                if part.hashes:
                    per_ws[ws] = part.hashes
                    if key == table.name:  # history parts are never re-cut: no layout
                        layout[(key, ws)] = part
            manifest[key] = per_ws
    return Dump(manifest, chunks, layout)


def _rechunk(
    conn: Connection,
    table: Table,
    workspace: str,
    where: ColumnElement[bool] | None,
    old: Part,
    changed: Iterable[tuple[Any, ...]],
    chunks: dict[str, bytes],
    known: Collection[str],
) -> Part:
    """``old`` with the chunks holding a ``changed`` key cut again from the rows now.

    Chunks no changed key falls in are kept as they are. Re-cutting goes on past a changed
    chunk until the cutter is back in step with the old boundaries (it has just cut at an
    old chunk's end), so the result is exactly what cutting every row would give.
    """
    n = len(old.hashes)
    # Chunk n stands for the keys after the last chunk's end (rows added at the end).
    dirty = {bisect.bisect_left(old.last_keys, k) for k in changed}
    if n in dirty and n > 0:
        dirty.add(n - 1)  # the last chunk ends where the rows did, not at a boundary: rows after join it
    chunker = _Chunker(table, chunks, known)
    in_step = True
    for i in range(n + 1):
        if in_step and i not in dirty:
            if i < n:
                chunker.hashes.append(old.hashes[i])
                chunker.last_keys.append(old.last_keys[i])
            continue
        lo = old.last_keys[i - 1] if i > 0 else None
        hi = old.last_keys[i] if i < n else None
        for row in conn.execute(_key_range(table, workspace, where, lo, hi)):
            if row.workspace == workspace:
                chunker.add(row)
        in_step = not chunker.current
    return chunker.finish()


def _key_range(
    table: Table,
    workspace: str,
    where: ColumnElement[bool] | None,
    lo: tuple[Any, ...] | None,
    hi: tuple[Any, ...] | None,
) -> Select[Any]:
    """The rows with keys in ``(lo, hi]`` (None: unbounded), in key order, as an index range.

    A key that starts with the workspace is compared after it (``workspace = ? AND issue > ?``):
    SQLite does not range over ``(workspace, issue) > (?, ?)`` beside ``workspace = ?``. A key
    without it is a range of its own, the workspace left to the caller: SQLite would rather
    walk a workspace index (every row of the workspace) than range over the primary key.
    """
    pk = list(table.primary_key.columns)
    lead = pk[0].name == "workspace"
    cols = pk[1:] if lead else pk
    stmt = select(table) if where is None else select(table).where(where)
    if lead:
        stmt = stmt.where(table.c.workspace == workspace)
    for bound, above in ((lo, True), (hi, False)):
        if bound is not None:
            vals = bound[1:] if lead else bound
            left, right = (cols[0], vals[0]) if len(cols) == 1 else (tuple_(*cols), tuple_(*vals))
            stmt = stmt.where(left > right if above else left <= right)
    return stmt.order_by(*pk)


def dump_changed(
    conn: Connection, layout: Layout, changed: dict[tuple[str, str], set[tuple[Any, ...]]], known: Collection[str]
) -> Dump:
    """What :func:`dump` would give, re-cutting only the chunks of rows that changed.

    ``layout``: the live parts of the previous dump of this database; ``changed``: the keys
    of every row inserted, updated or deleted since, by (table, workspace). The history
    parts hold the history rows in the database (all of them: a database that keeps
    building on its dumps deletes its history rows once they are dumped).
    """
    manifest: Manifest = {}
    chunks: dict[str, bytes] = {}
    out: Layout = {}
    for table in SNAPSHOT_TABLES:
        parts = _parts(table)
        live_key = table.name
        workspaces = sorted(
            {ws for (k, ws) in layout if k == live_key} | {ws for (t, ws) in changed if t == table.name}
        )
        per_ws: dict[str, list[str]] = {}
        for ws in workspaces:
            old = layout.get((live_key, ws), Part([], []))
            keys = changed.get((table.name, ws))
            part = old if not keys else _rechunk(conn, table, ws, parts[live_key], old, keys, chunks, known)
            if part.hashes:
                per_ws[ws] = part.hashes
                out[(live_key, ws)] = part
        manifest[live_key] = per_ws
        closed = CLOSED.get(table.name)
        if closed is not None:
            history: dict[str, list[str]] = {}
            for ws in sorted(conn.execute(select(table.c.workspace).where(closed).distinct()).scalars()):
                chunker = _Chunker(table, chunks, known)
                for row in conn.execute(_select(table, ws, closed).order_by(*table.primary_key.columns)):
                    chunker.add(row)
                history[ws] = chunker.finish().hashes
            manifest[live_key + HISTORY] = history
    return Dump(manifest, chunks, out)


def decode_chunk(data: bytes) -> list[list[Any]]:
    """A stored chunk's rows."""
    rows: list[list[Any]] = msgspec.json.decode(zlib.decompress(data))
    return rows


def table_rows(table: Table, data: bytes) -> list[list[Any]]:
    """A stored chunk's rows of ``table``, each with every column the table has now.

    A snapshot keeps the columns its table had when it was written; a column added since
    (at the end, with a server default: ``work_items.waiting_on``, 0016_queue_ready) takes
    its default, and a nullable one without a default (``work_items.held_by``,
    0017_queue_held) NULL. (An item that waited then reads as ready, and one on an issue
    another held as held by no one: a pull still checks each item's blockers and its issue's
    lease, so it only reads that item sooner.)
    """
    rows = decode_chunk(data)
    missing = list(table.columns)[len(rows[0]) :] if rows else []
    if missing:
        tail = [_server_default(c) for c in missing]
        rows = [row + tail for row in rows]
    return rows


def _server_default(column: Column[Any]) -> Any:
    default = column.server_default
    if default is None and column.nullable:
        return None
    if not isinstance(default, DefaultClause) or not isinstance(default.arg, str):
        raise ValueError(f"a snapshot lacks {column.table.name}.{column.name}, which has no server default")
    return column.type.python_type(default.arg)


def _insert_chunks(dialect: str) -> Any:
    ins = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(snapshot_chunks)
    return ins.values(hash=bindparam("h"), data=bindparam("d")).on_conflict_do_nothing(
        index_elements=[snapshot_chunks.c.hash]
    )


def _insert_snapshot(dialect: str) -> Any:
    ins = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(snapshots)
    return ins.on_conflict_do_nothing(index_elements=[snapshots.c.position])


def write(
    conn: Connection,
    position: int,
    recorded_us: int,
    created_us: int,
    manifest: Manifest,
    chunks: dict[str, bytes],
    base: int | None = None,
) -> int:
    """Store a snapshot; only chunks not stored yet are written. Returns the chunks written.

    ``manifest``: a dump's (:class:`Dump`); its history parts are the history rows that
    became final after the snapshot at ``base`` (None: all of them).
    """
    wanted = list(chunks)
    have: set[str] = set()
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        have.update(conn.execute(select(snapshot_chunks.c.hash).where(snapshot_chunks.c.hash.in_(part))).scalars())
    new = [{"h": h, "d": chunks[h]} for h in wanted if h not in have]
    if new:
        conn.execute(_insert_chunks(conn.dialect.name), new)
    live = {k: v for k, v in manifest.items() if not k.endswith(HISTORY)}
    history = {k: v for k, v in manifest.items() if k.endswith(HISTORY)}
    conn.execute(
        _insert_snapshot(conn.dialect.name).values(
            position=position,
            recorded_us=recorded_us,
            created_us=created_us,
            manifest=msgspec.json.encode(live).decode(),
            base_position=base,
            history=msgspec.json.encode(history).decode(),
        )
    )
    return len(new)


_HEADER = (snapshots.c.position, snapshots.c.recorded_us, snapshots.c.manifest, snapshots.c.base_position)


def _snapshot_of(row: Any) -> Snapshot:
    history = None if row[4] is None else msgspec.json.decode(row[4], type=Manifest)
    base = None if row[3] is None else int(row[3])
    return Snapshot(int(row[0]), int(row[1]), msgspec.json.decode(row[2], type=Manifest), base, history)


def nearest(conn: Connection, position: int) -> Snapshot | None:
    """The newest snapshot at or before ``position``."""
    row = conn.execute(
        select(*_HEADER, snapshots.c.history)
        .where(snapshots.c.position <= position)
        .order_by(snapshots.c.position.desc())
        .limit(1)
    ).first()
    return None if row is None else _snapshot_of(row)


def history_of(conn: Connection, snap: Snapshot) -> Manifest:
    """Every history chunk of ``snap``, by part, oldest first: its chain's, from the root on."""
    if snap.history is None:
        return {k: v for k, v in snap.manifest.items() if k.endswith(HISTORY)}
    chain = [snap.history]
    base = snap.base
    if base is not None:
        # The chain's deltas in one read (small: a few new chunks each), walked here.
        deltas = {
            int(p): (b, h)
            for p, b, h in conn.execute(
                select(snapshots.c.position, snapshots.c.base_position, snapshots.c.history).where(
                    snapshots.c.position < snap.position
                )
            )
        }
        while base is not None:
            b, h = deltas[base]
            if h is None:  # written before the chain: its manifest names all of its history
                root = conn.execute(select(*_HEADER, snapshots.c.history).where(snapshots.c.position == base)).one()
                chain.append(history_of(conn, _snapshot_of(root)))
                break
            chain.append(msgspec.json.decode(h, type=Manifest))
            base = None if b is None else int(b)
    out: Manifest = {}
    for delta in reversed(chain):
        for key, per_ws in delta.items():
            merged = out.setdefault(key, {})
            for ws, hashes in per_ws.items():
                merged.setdefault(ws, []).extend(hashes)
    return out


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
    parts = {**snap.manifest, **history_of(conn, snap)} if history else snap.manifest
    for key, per_ws in parts.items():
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


def path_hits(conn: Connection, workspace: str, mode: str, position: int) -> tuple[int, dict[str, int]] | None:
    """The newest snapshot at or before ``position`` that counted paths: its position and
    ``{path: hits}`` of ``mode`` in ``workspace``; None when there is none (the counts are
    then the rows themselves)."""
    snap = nearest(conn, position)
    if snap is None or path_counts.name not in snap.manifest:
        return None
    # Chunks are named by their content, so decoded counts are kept by those names: the
    # next read of the same snapshot (a dashboard polling) decodes nothing.
    key = (mode, *snap.manifest[str(path_counts.name)].get(workspace, []))
    with _HITS_LOCK:  # reads run on several threads
        hits = _HITS.get(key)
        if hits is not None:
            _HITS.move_to_end(key)
            return snap.position, hits
    chunks = load_chunks(conn, snap, workspace, history=False, tables=(str(path_counts.name),))
    hits = {}
    for data in chunks.get(str(path_counts.name), []):
        for _, m, path, n in decode_chunk(data):
            if m == mode:
                hits[path] = int(n)
    with _HITS_LOCK:
        _HITS[key] = hits
        while len(_HITS) > 8:
            _HITS.popitem(last=False)
    return snap.position, hits


#: Decoded path counts of recent snapshots, by mode and chunk hashes (content-addressed).
_HITS: OrderedDict[tuple[str, ...], dict[str, int]] = OrderedDict()
_HITS_LOCK = threading.Lock()


def counted_upto(conn: Connection, position: int) -> bytes:
    """``path_counts`` at ``position`` counted from the live rows, as one chunk: for building on
    a snapshot that did not count (written before the counts; the rows never leave)."""
    rows: list[list[Any]] = []
    for mode, table in COUNTED.items():
        stmt = (
            select(table.c.workspace, table.c.path, func.count())
            .where(table.c.position <= position)
            .group_by(table.c.workspace, table.c.path)
        )
        rows.extend([ws, mode, path, int(n)] for ws, path, n in conn.execute(stmt))
    return zlib.compress(msgspec.json.encode(rows), 6)
