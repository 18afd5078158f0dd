"""PostgreSQL backend: per-replica group commit, decided by row locks in the database.

Runs at READ COMMITTED: guards are explicit row locks (``SELECT ... FOR UPDATE`` on the
project, workspace or session row a decision depends on), and a race lost inside the
database (deadlock, serialisation failure, a unique key taken concurrently) is decided
again. Writes go through one writer per replica that commits the commands waiting at a
moment in one transaction (``store/postgres/writer.py`` explains the batch, its positions and
its failure rules); a command arriving alone is committed at once, and under load a
writer waits a little for more before its next batch (``store/postgres/gathering.py``: longer when
its thread waits for a CPU). Several replicas share nothing but this database.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, event, exc, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from eventcoord.commands import Command
from eventcoord.errors import StoreError, StoreUnavailable
from eventcoord.store.base import EventStore, upgrade
from eventcoord.store.outage import Outage
from eventcoord.store.postgres import batch, gathering, stats
from eventcoord.store.postgres import writer as pg_writer
from eventcoord.store.postgres.ahead.table import reads_ahead
from eventcoord.store.postgres.cpu_pressure import CpuPressure
from eventcoord.store.postgres.statements import send_carried, send_deferred
from eventcoord.store.postgres.writer import AGAIN, MAX_BATCH, Job, Outcome
from eventcoord.store.prepared import writes_sql

T = TypeVar("T")
RETRIES = pg_writer.RETRIES
_MIGRATION_LOCK = 0x6576636F  # "evco": one replica migrates at a time
#: Writers (connections, batches in flight) per replica; ``EVENTCOORD_PG_WRITERS`` sets it.
#: A command's cost on PostgreSQL is mostly its round trips, and one writer waits for each
#: in turn; with two, one decides while the other waits (commits still take turns on the
#: position counter). Two raise a lone replica's throughput on uncontended commands, but
#: where commands contend (one queue, teams sharing projects) the two batches take each
#: other's row locks: short lock waits cut off, passes rolled back, careful batches, and now
#: and then a backlog that feeds itself. So one it is; raise it for loads whose commands
#: touch disjoint rows (docs/decisions/0002-one-writer-on-sqlite.md).
WRITERS = 1
#: Seconds to wait for a new connection before the database counts as unreachable (503).
CONNECT_TIMEOUT = 5.0
#: Prepared statements a writer's connection keeps (asyncpg's cache; 100 by default).
WRITER_STATEMENTS = 512
_WRITES = ("INSERT", "UPDATE", "DELETE", "insert", "update", "delete")


def _count_writes(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
    """Count rows a statement changed in the running batch (SQLAlchemy-executed statements)."""
    b = batch.current(conn)
    if b is not None and statement.lstrip().startswith(_WRITES) and (executemany or cursor.rowcount != 0):
        b.writes += 1


def _send_deferred_first(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
    """Send the running command's deferred read-model writes before SQLAlchemy runs another.

    A statement SQLAlchemy runs that may write makes the batch renumber every table at its
    end: its tables are not looked for (no hot command writes this way).
    """
    b = batch.current(conn)
    if b is not None and writes_sql(statement):
        b.touch(None)
        b.sessions_read.clear()
        b.drop_rows_ahead()
    send_carried(conn)  # whatever it reads, it sees the signs of life carried so far
    send_deferred(conn)


def _closed(driver: Any) -> bool:
    """Whether asyncpg already knows ``driver`` (its connection) is gone: no round trip.

    A server that shuts down or restarts sends each session FATAL 57P01 and closes it;
    asyncpg notices while the connection sits idle, so asking costs nothing.
    """
    is_closed = getattr(driver, "is_closed", None)
    return bool(is_closed()) if is_closed is not None else False


def _gone(conn: AsyncConnection) -> bool:
    """Whether a writer's held connection is known to be dead (no round trip)."""
    sync = conn.sync_connection
    try:
        return sync is None or _closed(sync.connection.driver_connection)
    except Exception:  # invalidated and not yet revalidated: as good as gone
        return True


def _discard_closed(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Pool checkout: a connection the server closed is replaced before anyone uses it."""
    if _closed(getattr(dbapi_connection, "driver_connection", None)):
        raise exc.DisconnectionError("the server closed this connection")


class PostgresEventStore(EventStore):
    """Event store on PostgreSQL through asyncpg (production, several replicas)."""

    dialect = "postgresql"

    def __init__(self, url: str, pool_size: int = 10, writers: int = WRITERS) -> None:
        super().__init__(url)
        self._pool_size = pool_size
        self._writers = writers
        self._engine: AsyncEngine | None = None
        self._writer_engine: AsyncEngine | None = None
        self._pending: list[Job] = []
        self._wake = asyncio.Event()
        self._lanes: list[asyncio.Task[None]] = []
        self._careful = 0  # batches left to run with savepoints from the start
        self._gathering = gathering.Gathering()
        self._pressure = CpuPressure()  # read from the event loop's thread, which runs the writers
        self._closing = False
        self._outage = Outage("postgresql")

    @property
    def engine(self) -> AsyncEngine:
        assert self._engine is not None, "store not started"
        return self._engine

    async def start(self) -> None:
        timeout = {"timeout": CONNECT_TIMEOUT}
        self._engine = create_async_engine(
            self.url, pool_size=self._pool_size, max_overflow=self._pool_size, pool_pre_ping=False, connect_args=timeout
        )
        # No ping (a round trip per read): a connection the server closed (a restart) is
        # known to asyncpg already and replaced at checkout; one that died unannounced
        # fails its read, which is run once more on a fresh one (query).
        event.listen(self._engine.sync_engine.pool, "checkout", _discard_closed)
        # Writers issue BEGIN/COMMIT themselves on the driver connection; SQLAlchemy must
        # not open transactions of its own on theirs.
        # A command's deferred writes go with the next statement (statements.py): each pair
        # of texts is a statement of its own, more than asyncpg's 100 kept by default.
        # Their plans are generic from the first run: each statement is built to be read by
        # its own indexes whatever its parameters and statistics (tests/contract/test_plans.py
        # asserts the generic plans), and PostgreSQL's default planned a statement anew at
        # every run while its generic plan's estimate looked dearer than its first five
        # custom plans (a batch's end statement with its carried rows: ~0.3 ms each time).
        self._writer_engine = create_async_engine(
            self.url,
            pool_size=self._writers,
            max_overflow=0,
            isolation_level="AUTOCOMMIT",
            connect_args={
                **timeout,
                "statement_cache_size": WRITER_STATEMENTS,
                "server_settings": {"plan_cache_mode": "force_generic_plan"},
            },
        )
        event.listen(self._writer_engine.sync_engine, "after_cursor_execute", _count_writes)
        # A statement SQLAlchemy runs comes after the command's deferred writes, as written.
        event.listen(self._writer_engine.sync_engine, "before_cursor_execute", _send_deferred_first)
        self._lanes = [
            asyncio.create_task(self._lane(), name=f"eventcoord-pg-writer-{i}") for i in range(self._writers)
        ]

    async def close(self) -> None:
        if self._lanes:
            self._closing = True  # the writers finish what is waiting, then stop
            self._gathering.end()
            self._wake.set()
            await asyncio.gather(*self._lanes)
            self._lanes = []
        if self._writer_engine is not None:
            await self._writer_engine.dispose()
        if self._engine is not None:
            await self._engine.dispose()

    async def migrate(self) -> None:
        engine = self._engine or create_async_engine(self.url)

        def run(conn: Connection) -> None:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
            upgrade(conn)

        async with engine.begin() as conn:
            await conn.run_sync(run)
        if self._engine is None:
            await engine.dispose()

    async def _write(self, fn: Callable[[Connection], Any], retry: bool, command: tuple[str, Command] | None) -> Any:
        if not self._lanes or self._closing:
            raise StoreError("postgresql: the store is not started or already closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append(Job(fn, future, retry, reads_ahead(command)))
        self._gathering.arrived(len(self._pending))
        self._wake.set()
        return await future

    async def query(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` on a pooled connection; an unreachable database is :class:`StoreUnavailable`.

        Any failure to get a connection is an outage, whatever the database said (refused,
        too many connections, not accepting connections, starting up). A connection lost
        while reading is invalidated by SQLAlchemy (with the pool's older ones) and the
        read, having written nothing, runs once more on a fresh connection: a connection
        that died while pooled (a restart) fails no request, and the first query after the
        database is back connects afresh, with no restart of ours.
        """
        return await self._read(fn, one=False)

    async def query_one(self, fn: Callable[[Connection], T]) -> T:
        """Outside a transaction, an outage and a dead pooled connection met as :meth:`query` meets them."""
        return await self._read(fn, one=True)

    async def _read(self, fn: Callable[[Connection], T], one: bool) -> T:
        for attempt in (1, 2):
            try:
                conn = await self.engine.connect()
            except Exception as e:
                raise self._outage.failed(pg_writer.describe(e)) from e
            try:
                try:
                    if one:
                        # The driver then sends the statement alone: no BEGIN, no ROLLBACK (the
                        # isolation level is the adapter's flag; setting it sends nothing).
                        await conn.execution_options(isolation_level="AUTOCOMMIT")
                    result = await conn.run_sync(fn)
                finally:
                    await _put_back(conn)
            except Exception as e:
                if not pg_writer.connection_lost(e):
                    raise
                if attempt == 2:
                    raise self._outage.failed(pg_writer.describe(e)) from e
                continue
            self._outage.answered()
            return result
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def write_aside(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` in a transaction of its own on a pooled connection, beside the writers' batches.

        An outage is :class:`StoreUnavailable`, as for a read (no retry: the caller decides).
        """
        try:
            conn = await self.engine.connect()
        except Exception as e:
            raise self._outage.failed(pg_writer.describe(e)) from e
        try:
            async with conn.begin():
                return await conn.run_sync(fn)
        except Exception as e:
            if pg_writer.connection_lost(e):
                raise self._outage.failed(pg_writer.describe(e)) from e
            raise
        finally:
            await _put_back(conn)

    async def _lane(self) -> None:
        """One writer: whenever it is free, take every waiting command (up to MAX_BATCH).

        With two writers, one decides the next batch while the other waits for its commit
        to reach the disk (the commit holds the position counter, so commits still take
        turns). A command arriving alone finds a free writer and is committed at once; one
        arriving while every writer is busy joins the next batch.
        """
        conn: AsyncConnection | None = None
        loop = asyncio.get_running_loop()
        took = 0.0  # how long the last batch took
        try:
            while True:
                if self._pending:
                    jobs, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                    if conn is not None and _gone(conn):
                        await _drop(conn)  # the server closed it while we waited (a restart)
                        conn = None
                    try:
                        if conn is None:
                            conn = await self._connect_writer()
                        began = loop.time()
                        again, lost = await self._run(conn, jobs)
                        took = loop.time() - began
                    except Exception as e:  # a bug here must not stop the writer for good
                        again, lost = [], True
                        failure = (
                            e
                            if isinstance(e, StoreUnavailable)
                            else self._outage.failed(pg_writer.describe(e))
                            if pg_writer.connection_lost(e)
                            else StoreError(f"postgresql writer: {e!r}")
                        )
                        for job in jobs:
                            if not job.future.done():
                                job.future.set_exception(failure)
                    if lost and conn is not None:  # the connection failed: a new one next time
                        await _drop(conn)
                        conn = None
                    # Jobs to decide again go first, in front of the newcomers.
                    self._pending[:0] = again
                    if len(jobs) > 1 and len(self._pending) < len(jobs):  # under load: gather more
                        starved = self._pressure.starved(loop.time())
                        stats.CPU_PRESSURE.set(self._pressure.pressure)
                        await self._gathering.wait(len(jobs), gathering.window(took, starved))
                    continue
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def _connect_writer(self) -> AsyncConnection:
        """A writer's connection; any failure to get one is an outage (StoreUnavailable)."""
        assert self._writer_engine is not None
        try:
            return await self._writer_engine.connect()
        except Exception as e:
            raise self._outage.failed(pg_writer.describe(e)) from e

    def _waiting(self) -> bool:
        """Whether commands wait for a writer (a committing batch then begins the next one)."""
        return bool(self._pending) and not self._closing

    async def _run(self, conn: AsyncConnection, jobs: list[Job]) -> tuple[list[Job], bool]:
        """Run one batch and settle its jobs; returns those to decide again, and whether the connection failed."""
        savepoints = self._careful > 0
        attempts = sum(j.attempts for j in jobs)
        lost = False
        try:
            outcomes, aborted = await conn.run_sync(pg_writer.run_batch, jobs, savepoints, self._waiting)
        except Exception as e:  # the connection failed: the batch's outcome is unknown
            failure = (
                self._outage.failed(pg_writer.describe(e))
                if pg_writer.connection_lost(e)
                else StoreError(f"postgresql: {e}")
            )
            outcomes, aborted, lost = [("err", failure)] * len(jobs), False, True
        if not lost:
            self._outage.answered()
        self._careful = pg_writer.CAREFUL_BATCHES if aborted else max(0, self._careful - 1)
        again: list[Job] = []
        for job, outcome in zip(jobs, outcomes, strict=True):
            if outcome is AGAIN:
                again.append(job)
            elif not job.future.done():
                _settle(job, outcome)
        stats.BATCHES.inc()
        stats.COMMANDS.inc(len(jobs))
        stats.ROLLBACKS.inc(aborted)
        stats.AGAIN.inc(len(again))
        stats.LOST_RACES.inc(sum(j.attempts for j in jobs) - attempts)
        return again, lost


async def _put_back(conn: AsyncConnection) -> None:
    """Return a read's connection to the pool (``async with``'s exit, which may raise).

    Its rollback fails if the connection died after the read (or the driver lost its
    place): the connection is thrown away, and what the read found stands (a read writes
    nothing).
    """
    try:
        await asyncio.shield(conn.close())
    except Exception:
        await _drop(conn)


async def _drop(conn: AsyncConnection) -> None:
    """Throw a failed writer connection away."""
    with contextlib.suppress(Exception):
        await conn.invalidate()
    with contextlib.suppress(Exception):
        await conn.close()


def _settle(job: Job, outcome: Outcome) -> None:
    assert isinstance(outcome, tuple), outcome
    kind, value = outcome
    if kind == "ok":
        job.future.set_result(value)
    else:
        job.future.set_exception(value)
