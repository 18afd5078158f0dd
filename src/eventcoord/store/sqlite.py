"""SQLite backend: one writer thread that group-commits many commands per transaction.

SQLite allows one writer at a time anyway; funnelling every write through one thread with
``BEGIN IMMEDIATE`` removes lock contention, and committing a batch of concurrent commands
in one transaction (a SAVEPOINT each, so one failure never rolls back its neighbours)
amortises the fsync. The stdlib driver runs in that thread directly: aiosqlite would hop
threads once per statement. Reads go through aiosqlite on their own connections (WAL).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from eventcoord.errors import ConcurrencyError, DomainError, StoreError
from eventcoord.store.base import EventStore, upgrade

T = TypeVar("T")
MAX_BATCH = 256


@dataclass(slots=True)
class _Job:
    fn: Callable[[Connection], Any]
    future: asyncio.Future[Any]


def _answer(jobs: list[_Job], outcomes: list[Any]) -> None:
    """On the event loop: settle each job's future with its outcome."""
    for job, outcome in zip(jobs, outcomes, strict=True):
        if job.future.done():  # the caller went away (cancelled)
            continue
        if isinstance(outcome, BaseException):
            job.future.set_exception(outcome)
        else:
            job.future.set_result(outcome)


def _pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (SQLAlchemy's recipe)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


class SqliteEventStore(EventStore):
    """Event store in one SQLite file (the embedded default)."""

    dialect = "sqlite"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._path = path
        self._writer: Engine | None = None
        self._reader: AsyncEngine | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None

    def _make_writer(self) -> Engine:
        engine = create_engine(f"sqlite:///{self._path}", poolclass=NullPool)
        event.listen(engine, "connect", _pragmas)

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # IMMEDIATE takes the write lock up front: no deadlock-prone lock upgrade later.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    async def start(self) -> None:
        self._writer = self._make_writer()
        self._reader = create_async_engine(f"sqlite+aiosqlite:///{self._path}")
        event.listen(self._reader.sync_engine, "connect", _pragmas)
        self._thread = threading.Thread(
            target=self._write_loop, args=(asyncio.get_running_loop(),), name="eventcoord-sqlite-writer", daemon=True
        )
        self._thread.start()

    async def close(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(self._thread.join)
            self._thread = None
        if self._reader is not None:
            await self._reader.dispose()
        if self._writer is not None:
            self._writer.dispose()

    async def migrate(self) -> None:
        engine = self._writer or self._make_writer()

        def run() -> None:
            with engine.begin() as conn:
                upgrade(conn)

        await asyncio.to_thread(run)
        if self._writer is None:
            engine.dispose()

    async def transact(self, fn: Callable[[Connection], T], *, retry: bool = True) -> T:
        assert self._thread is not None, "store not started"
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put(_Job(fn, future))
        return await future

    async def query(self, fn: Callable[[Connection], T]) -> T:
        assert self._reader is not None, "store not started"
        async with self._reader.connect() as conn:
            return await conn.run_sync(fn)

    def _write_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The writer thread: take every waiting job, run them as one batch, answer them.

        A plain thread fed by a SimpleQueue, answering a whole batch with one
        ``call_soon_threadsafe``: no per-command hop through the executor machinery.
        """
        jobs_in = self._jobs
        while True:
            first = jobs_in.get()
            if first is None:
                break
            jobs = [first]
            while len(jobs) < MAX_BATCH:
                try:
                    job = jobs_in.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    jobs_in.put(None)  # stop after this batch
                    break
                jobs.append(job)
            try:
                outcomes = self._run_batch(jobs)
            except Exception as e:  # the batch itself failed (commit, I/O): fail each job
                outcomes = [StoreError(f"sqlite write failed: {e}")] * len(jobs)
            loop.call_soon_threadsafe(_answer, jobs, outcomes)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run_batch(self, jobs: list[_Job]) -> list[Any]:
        """Runs in the writer thread: one transaction, one SAVEPOINT per job."""
        assert self._writer is not None
        if self._conn is None:
            self._conn = self._writer.connect()
        conn = self._conn
        outcomes: list[Any] = []
        try:
            with conn.begin():
                # One fixed savepoint name on the driver connection: SQLAlchemy's nested
                # transactions name each savepoint anew, so their SQL never hits a cache.
                raw = conn.connection.driver_connection
                assert raw is not None
                for job in jobs:
                    raw.execute("SAVEPOINT command")
                    try:
                        outcomes.append(job.fn(conn))
                        raw.execute("RELEASE command")
                        continue
                    except (DomainError, ConcurrencyError) as e:
                        outcome: BaseException = e
                    except IntegrityError as e:
                        outcome = ConcurrencyError(str(e.orig))
                    except sqlite3.IntegrityError as e:
                        outcome = ConcurrencyError(str(e))
                    except DBAPIError as e:
                        outcome = StoreError(str(e.orig))
                    except Exception as e:  # a bug in one command must not sink its batch
                        outcome = e
                    raw.execute("ROLLBACK TO command")
                    raw.execute("RELEASE command")
                    outcomes.append(outcome)
        except Exception:
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()
            raise
        return outcomes
