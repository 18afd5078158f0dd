"""A scratch database: the read models at one position, rebuilt in memory by replay.

An in-memory SQLite database with the whole schema, filled from a snapshot's chunks and
advanced by replaying the log through the projections' own ``apply`` (the functions the
commands run). The read queries of ``eventcoord.api.queries`` then run on it unchanged;
their clock is pinned to the position's ``recorded_at`` (``dbclock.PINNED_KEY``), so liveness
is judged at that moment. Everything here is synchronous and runs in a worker thread.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, delete
from sqlalchemy.pool import StaticPool

from eventcoord import projections
from eventcoord.history.snapshots import CLOSED, COUNTED, READ_MODEL_NAMES, TABLES, path_counts, table_rows
from eventcoord.projections.queue import MARK_ALL_HELD
from eventcoord.projections.sessions import count_work_of_snapshot
from eventcoord.projections.tables import session_work, work_items
from eventcoord.store import dbclock
from eventcoord.store.log import RecordedEvent
from eventcoord.store.schema import metadata

T = TypeVar("T")


_EMPTY: list[bytes] = []


def _empty_schema() -> bytes:
    """An in-memory database with the whole schema and no rows, as an image (built once)."""
    if not _EMPTY:
        engine = create_engine("sqlite://", poolclass=StaticPool)
        metadata.create_all(engine)
        with engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            _EMPTY.append(raw.serialize())
        engine.dispose()
    return _EMPTY[0]


def plan(tables: Collection[str] | None) -> tuple[frozenset[str] | None, frozenset[str]]:
    """For a read of ``tables`` (None: all): the projections to replay (None: all) and the tables to load."""
    return _plan(None if tables is None else frozenset(tables))


@functools.cache
def _plan(tables: frozenset[str] | None) -> tuple[frozenset[str] | None, frozenset[str]]:
    # Cached: a scratch's caller and the scratch itself both ask, and the answer is fixed.
    if tables is None:
        return None, READ_MODEL_NAMES
    names, load = projections.needed_for(TABLES[t] for t in tables)
    return names, frozenset(str(t.name) for t in load)


class Scratch:
    """The read models right after ``position`` (of one workspace, or all), in memory.

    ``tables`` restricts it to what some reads need (:func:`plan`): only those tables are
    loaded and kept right by the replay (the other tables exist, for the appliers, but
    mean nothing), and a read that looks at any other table fails instead of answering
    from it.
    """

    def __init__(
        self,
        position: int,
        at_us: int | None,
        ttl: int,
        workspace: str | None,
        tables: Collection[str] | None = None,
        *,
        counting: bool = False,
    ) -> None:
        self.counting = counting
        self.position = position
        self.at_us = at_us
        self.ttl = ttl
        self.workspace = workspace
        names, self.tables = plan(tables)
        self._apply: Callable[[Connection, Sequence[RecordedEvent]], None] = (
            projections.apply if names is None else projections.applier_of(names)
        )
        self.engine: Engine = create_engine(
            "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
        self._lock = threading.Lock()
        self._reading = False
        with self.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.deserialize(_empty_schema())  # a copy of the image: ~0.2 ms, where create_all costs ~30
            if names is not None:
                raw.set_authorizer(self._authorize)
        if counting:
            # Only a scratch that counts has the table: a snapshot dumped from any other
            # fails, instead of storing counts of nothing.
            path_counts.create(self.engine)

    def _authorize(self, action: int, arg1: str | None, *_: object) -> int:
        # While a read runs, reading a table this scratch does not keep is an error.
        if self._reading and action == sqlite3.SQLITE_READ and arg1 in TABLES and arg1 not in self.tables:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def load(self, chunks: dict[str, list[bytes]]) -> int:
        """Insert a snapshot's rows; returns how many."""
        n = 0
        in_work: list[list[Any]] = []
        with self._lock, self.engine.begin() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            for name, datas in chunks.items():
                table = TABLES[name]
                cols = [c.name for c in table.columns]
                sql = f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                for data in datas:
                    rows = table_rows(table, data)
                    raw.executemany(sql, rows)
                    n += len(rows)
                    if name == work_items.name:
                        in_work.extend(rows)
            if chunks.get("work_items"):  # (a snapshot from before 0017_queue_held has no marks)
                conn.execute(MARK_ALL_HELD)
                if not chunks.get(session_work.name):  # nor one from before 0018_stale_workers counts
                    count_work_of_snapshot(conn, in_work)
        return n

    def replay(self, events: Sequence[RecordedEvent]) -> None:
        """Apply events (in position order) through the projections; moves ``position``."""
        if not events:
            return
        with self._lock, self.engine.begin() as conn:
            self._apply(conn, events)
        self.position = events[-1].position

    def replay_stream(self, events: Sequence[RecordedEvent], projection: str) -> None:
        """Rebuild one projection's tables from one thing's stream (all of it, up to the moment).

        The projection's tables then hold only that thing's rows (a projection keys its rows
        by what its events name, and every event about an issue is on its stream), and reads
        may look at them.
        """
        with self._lock, self.engine.begin() as conn:
            projections.applier_of((projection,))(conn, events)
        self.tables = self.tables | {str(t.name) for t in projections.OWNED[projection]}

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run a read query on the scratch, its clock pinned to the position's time."""
        with self._lock, self.engine.connect() as conn:
            conn.info[dbclock.PINNED_KEY] = (self.at_us if self.at_us is not None else 0, self.ttl)
            self._reading = True
            try:
                return fn(conn)
            finally:
                self._reading = False
                conn.info.pop(dbclock.PINNED_KEY, None)

    def count_paths(self) -> None:
        """From now on, count every claim and conflict inserted into ``path_counts`` (by path).

        Called after a snapshot's rows (its counts among them) are loaded, before replay.
        """
        assert self.counting, "a scratch made with counting=True"
        with self._lock, self.engine.begin() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            for mode, table in COUNTED.items():
                raw.execute(
                    f"CREATE TEMP TRIGGER IF NOT EXISTS _count_{table.name} AFTER INSERT ON main.{table.name} BEGIN"
                    f" INSERT INTO path_counts VALUES (NEW.workspace, '{mode}', NEW.path, 1)"
                    " ON CONFLICT (workspace, mode, path) DO UPDATE SET hits = hits + 1; END"
                )

    def track_changes(self) -> None:
        """From now on, note the key of every read-model row inserted, updated or deleted.

        Temporary triggers write them to ``_changed`` (:meth:`take_changes` reads them), so
        a snapshot built on this scratch's previous one re-cuts only the chunks they fall in
        (``snapshots.dump_changed``).
        """
        with self._lock, self.engine.begin() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.execute(
                "CREATE TEMP TABLE IF NOT EXISTS _changed (tbl TEXT NOT NULL, ws TEXT NOT NULL, k TEXT NOT NULL)"
            )
            for name, table in TABLES.items():
                if table is path_counts and not self.counting:
                    continue
                pk = [c.name for c in table.primary_key.columns]
                for event, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("UPDATE", "OLD"), ("DELETE", "OLD")):
                    key = ", ".join(f"{row}.{c}" for c in pk)
                    raw.execute(
                        f"CREATE TEMP TRIGGER IF NOT EXISTS _changed_{name}_{event}_{row} AFTER {event} ON main.{name} "
                        f"BEGIN INSERT INTO _changed VALUES ('{name}', {row}.workspace, json_array({key})); END"
                    )

    def take_changes(self) -> dict[tuple[str, str], set[tuple[Any, ...]]]:
        """The keys noted since the last call, by (table, workspace); the notes are cleared."""
        out: dict[tuple[str, str], set[tuple[Any, ...]]] = {}
        with self._lock, self.engine.begin() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            for tbl, ws, k in raw.execute("SELECT DISTINCT tbl, ws, k FROM _changed"):
                out.setdefault((tbl, ws), set()).add(tuple(json.loads(k)))
            raw.execute("DELETE FROM _changed")
        return out

    def drop_history(self) -> None:
        """Delete the history rows (``snapshots.CLOSED``): final, and kept by a snapshot now."""
        with self._lock, self.engine.begin() as conn:
            for name, closed in CLOSED.items():
                conn.execute(delete(TABLES[name]).where(closed))

    def close(self) -> None:
        """Drop the in-memory database."""
        self.engine.dispose()


def build(
    position: int,
    at_us: int | None,
    ttl: int,
    workspace: str | None,
    chunks: dict[str, list[bytes]],
    events: Sequence[RecordedEvent],
    tables: Collection[str] | None = None,
    *,
    counting: bool = False,
) -> Scratch:
    """A scratch at ``position``: the snapshot's rows, then ``events`` replayed (``tables``: see :class:`Scratch`).

    ``counting``: it also counts paths (``snapshots.path_counts``; for a snapshot), from the
    counts among ``chunks`` on.
    """
    s = Scratch(position, at_us, ttl, workspace, tables, counting=counting)
    s.load(chunks)
    if counting:
        s.count_paths()
    s.replay(events)
    s.position = position
    return s


def rows_of(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every read-model table's rows in primary-key order (for comparisons)."""
    from sqlalchemy import select

    return {
        name: [tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
        for name, t in TABLES.items()
        if name in READ_MODEL_NAMES
    }
