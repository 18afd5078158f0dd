"""SQLite backend: one writer on the event loop that group-commits concurrent commands.

The writer takes all the commands waiting at a moment and commits them in one ``BEGIN
IMMEDIATE`` transaction on the stdlib driver, re-running a batch with a SAVEPOINT per
command only when one failed after writing. Reads go through aiosqlite beside it (WAL);
checkpoints run in a thread, and hold the writer's next batch for one short copy when the
log has grown past ``WAL_RESTART_FRAMES``, so that it starts over instead of growing without
end. Why: docs/architecture.md#sqlite-one-writer-on-the-event-loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from eventcoord.commands import Command
from eventcoord.errors import ConcurrencyError, DomainError, StoreError
from eventcoord.store.base import EventStore, upgrade
from eventcoord.store.log import Pending
from eventcoord.store.postgres import stats
from eventcoord.store.prepared import writer_connection
from eventcoord.store.sqlite import log_heads
from eventcoord.store.transaction import identity

T = TypeVar("T")
#: Commands committed together at most (more wait for the next batch).
MAX_BATCH = 256
#: How long the first waiting command holds the batch open for others (group commit),
#: when the previous batch had company; a command arriving alone is committed at once.
#: The window ends early once as many commands wait as the last batch held: until then the
#: loop idled through the rest of it (docs/decisions/0002-one-writer-on-sqlite.md).
GROUP_COMMIT_WINDOW = 0.001
#: How long one batch may decide on the event loop before the rest of its commands wait for
#: the next: the loop answers others in between (reads, /health), however slow the
#: commands (each is bounded on its own: ``domain/files.CLAIM_WORK_LIMIT``).
BATCH_SLICE_S = 0.02
#: Turns of the loop a sliced batch leaves before the next: a read or an HTTP answer needs a
#: few (each await is one), and a turn with nothing to do costs microseconds.
SLICE_TURNS = 10
#: How often the WAL is checkpointed into the database file, off the event loop.
CHECKPOINT_INTERVAL = 0.25
#: WAL frames (pages) past which a checkpoint holds the writer to finish, so the log
#: starts over: 16 MiB of 4 KiB pages, about a sixth of a second of claims at full rate.
WAL_RESTART_FRAMES = 4096
#: Copies beside the writer before the held one, at most, each of what was written while
#: the one before ran; they stop when one took less than ``SHORT_COPY_S``.
CATCH_UP_COPIES = 3
SHORT_COPY_S = 0.003
#: The WAL file's size kept when the log starts over (``PRAGMA journal_size_limit``).
WAL_SIZE_LIMIT = 64 * 1024 * 1024


@dataclass(slots=True)
class _Job:
    fn: Callable[[Connection], Any]
    future: asyncio.Future[Any]


class _PartialWrite(Exception):
    """A job failed after writing: the batch must be run again with savepoints."""


def _answer(jobs: list[_Job], outcomes: list[Any]) -> None:
    """Settle each job's future with its outcome."""
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


def _writer_pragmas(dbapi_conn: Any, record: Any) -> None:
    _pragmas(dbapi_conn, record)
    # Checkpoints run in the background thread, never inside a commit on the loop.
    dbapi_conn.execute("PRAGMA wal_autocheckpoint=0")
    # 64 MiB of page cache (the default is 2 MiB): the read models' hot pages and their
    # indexes stay in memory, and a rebuild's one transaction spills less (~6 % faster).
    dbapi_conn.execute("PRAGMA cache_size=-65536")
    # When the log starts over, its file is cut back to this size (else it keeps its peak).
    dbapi_conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")


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
        self._pending: list[_Job] = []
        self._flush_scheduled = False
        self._last_batch = 0
        #: The group-commit window's timer while a batch gathers (ended early once as many
        #: commands wait as the last batch held).
        self._window: asyncio.TimerHandle | None = None
        self._conn: Connection | None = None
        #: The log's heads as the last committed batch left them (``log_heads.KnownHeads``).
        self._known = log_heads.KnownHeads()
        self._checkpointer: asyncio.Task[None] | None = None
        #: A checkpoint is finishing the log: no batch starts until it is done.
        self._held = False
        self.checkpoint_interval = CHECKPOINT_INTERVAL
        self.wal_restart_frames = WAL_RESTART_FRAMES

    def _make_writer(self) -> Engine:
        engine = create_engine(f"sqlite:///{self._path}", poolclass=NullPool)
        event.listen(engine, "connect", _writer_pragmas)

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # IMMEDIATE takes the write lock up front: no deadlock-prone lock upgrade later.
            # On the driver itself: SQLAlchemy's way to it (an execution context, events,
            # a cursor) cost more than the statement, once per batch.
            raw = conn.connection.driver_connection
            assert raw is not None
            raw.execute("BEGIN IMMEDIATE")

        return engine

    async def start(self) -> None:
        self._writer = self._make_writer()
        self._reader = create_async_engine(f"sqlite+aiosqlite:///{self._path}")
        event.listen(self._reader.sync_engine, "connect", _pragmas)
        self._checkpointer = asyncio.create_task(self._checkpoint_loop(), name="eventcoord-sqlite-checkpoint")

    async def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checkpointer
            self._checkpointer = None
        while self._pending:
            self._flush()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._reader is not None:
            await self._reader.dispose()
        if self._writer is not None:
            # PASSIVE: another process (a serving replica, a CLI) may be using this file; a
            # TRUNCATE checkpoint here made its writes fail with an immediate SQLITE_BUSY.
            await asyncio.to_thread(self._checkpoint, "PASSIVE")
            self._writer.dispose()

    async def migrate(self) -> None:
        engine = self._writer or self._make_writer()

        def run() -> None:
            with engine.begin() as conn:
                upgrade(conn)

        await asyncio.to_thread(run)
        if self._writer is None:
            engine.dispose()

    async def _write(self, fn: Callable[[Connection], Any], retry: bool, command: tuple[str, Command] | None) -> Any:
        assert self._writer is not None, "store not started"
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending
        pending.append(_Job(fn, future))
        if not self._flush_scheduled and not self._held:
            self._flush_scheduled = True
            if self._last_batch > 1:  # under load: hold the batch open for more commands
                self._window = loop.call_later(GROUP_COMMIT_WINDOW, self._flush)
            else:  # alone: commit at the next turn of the loop, no added latency
                loop.call_soon(self._flush)
        elif self._window is not None and len(pending) >= self._last_batch:
            # As many wait as the last batch held: waiting longer would only idle the loop.
            self._window.cancel()
            self._window = None
            loop.call_soon(self._flush)
        return await future

    async def query(self, fn: Callable[[Connection], T]) -> T:
        assert self._reader is not None, "store not started"
        async with self._reader.connect() as conn:
            return await conn.run_sync(fn)

    def _flush(self) -> None:
        """Commit the waiting commands as one batch and answer them."""
        if self._window is not None:
            self._window.cancel()
            self._window = None
        if self._held or not self._pending:  # checkpoint() schedules the batch once done
            self._flush_scheduled = False
            return
        jobs, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        self._last_batch = len(jobs)
        try:
            outcomes = self._run_batch(jobs)
        except Exception as e:  # the batch itself failed (commit, I/O): fail each job
            outcomes = [StoreError(f"sqlite write failed: {e}")] * len(jobs)
        # Jobs its time slice left undecided go first in the next batch, after the loop has
        # had a few turns to answer others.
        sliced = len(outcomes) < len(jobs)
        self._pending[:0] = jobs[len(outcomes) :]
        jobs = jobs[: len(outcomes)]
        self._flush_scheduled = bool(self._pending)
        if self._pending:  # more waited than this batch took: the rest go next
            asyncio.get_running_loop().call_soon(self._flush_after, SLICE_TURNS if sliced else 0)
        _answer(jobs, outcomes)
        stats.BATCHES.inc()
        stats.COMMANDS.inc(len(jobs))

    def _flush_after(self, turns: int) -> None:
        """Flush once the loop has taken ``turns`` more turns (each polls for I/O first)."""
        if turns:
            asyncio.get_running_loop().call_soon(self._flush_after, turns - 1)
        else:
            self._flush()

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.checkpoint_interval)
            try:
                await self.checkpoint()
            except Exception:  # a loop boundary: log-free retry next interval
                continue

    async def checkpoint(self) -> None:
        """Copy the WAL into the database file off the loop; finish it when it grew large.

        The first copy runs beside the writer. If the log is past ``wal_restart_frames``,
        the writer is held while a second copy takes what was written meanwhile, so that the
        next batch begins on a log copied to its end and starts it over.
        """
        frames, _ = await asyncio.to_thread(self._checkpoint, "PASSIVE")
        stats.WAL_FRAMES.set(max(frames, 0))
        # Even a copy that reached the end does not let the log start over when a batch ran
        # beside it: that batch's read began on the log unfinished and appended to it.
        if frames < self.wal_restart_frames:
            return
        # Each copy beside the writer leaves behind what was written while it ran; copy
        # again while that took long, so that the copy the writer waits for is short.
        loop = asyncio.get_running_loop()
        for _ in range(CATCH_UP_COPIES):
            started = loop.time()
            await asyncio.to_thread(self._checkpoint, "PASSIVE")
            if loop.time() - started < SHORT_COPY_S:
                break
        self._held = True
        started = loop.time()
        try:
            frames, copied = await asyncio.to_thread(self._checkpoint, "PASSIVE")
        finally:
            self._held = False
            stats.WAL_HOLD_SECONDS.observe(loop.time() - started)
            if self._pending and not self._flush_scheduled:
                self._flush_scheduled = True
                loop.call_soon(self._flush)
        if copied >= frames:
            stats.WAL_FINISHED.inc()

    def _checkpoint(self, mode: str) -> tuple[int, int]:
        """Copy the WAL into the database file (PASSIVE never blocks the writer): the log's
        frames and how many of them the database file now holds (-1, -1 if not in WAL mode)."""
        conn = sqlite3.connect(self._path, timeout=10)
        try:
            _busy, frames, copied = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            return int(frames), int(copied)
        finally:
            conn.close()

    def _run_batch(self, jobs: list[_Job]) -> list[Any]:
        """One transaction for the whole batch; a failed job never rolls back its neighbours.

        Most refusals are raised before a command writes anything, so the fast pass runs
        jobs without savepoints and checks the connection's change counter instead. Only
        if a job failed *after* writing is the transaction rolled back and the batch run
        again with a SAVEPOINT per job (one fixed name, on the driver connection).
        """
        assert self._writer is not None
        known = self._known
        if self._conn is None:
            self._conn = self._writer.connect()
            known.forget()  # data_version counts per connection
        conn = self._conn
        try:
            try:
                with conn.begin():
                    outcomes, heads = self._run_jobs(conn, jobs, known, savepoints=False)
            except _PartialWrite:
                stats.ROLLBACKS.inc()
                with conn.begin():
                    outcomes, heads = self._run_jobs(conn, jobs, known, savepoints=True)
        except Exception:
            known.forget()
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()
            raise
        known.learn(heads)  # committed: the next batch may start from here
        return outcomes

    @staticmethod
    def _run_jobs(
        conn: Connection, jobs: list[_Job], known: log_heads.KnownHeads, *, savepoints: bool
    ) -> tuple[list[Any], log_heads.LogHeads]:
        """Run the jobs in the transaction begun on ``conn``; the counter and the stream heads they
        moved are written last (``log_heads``)."""
        with writer_connection(conn) as raw:
            known.check(raw)
            with log_heads.running(conn, known) as heads:
                outcomes = SqliteEventStore._run_each(conn, raw, heads, jobs, savepoints=savepoints)
                heads.flush(conn)
                return outcomes, heads

    @staticmethod
    def _run_each(
        conn: Connection, raw: Any, heads: log_heads.LogHeads, jobs: list[_Job], *, savepoints: bool
    ) -> list[Any]:
        outcomes: list[Any] = []
        ends = time.monotonic() + BATCH_SLICE_S
        for job in jobs:
            if outcomes and time.monotonic() > ends:
                break  # the rest wait for the next batch: the loop answers others first
            if savepoints:
                raw.execute("SAVEPOINT command")
            before = raw.total_changes
            mark = heads.mark()
            try:
                outcome = job.fn(conn)
                # Positions are final as soon as SQLite's one writer hands them out.
                outcomes.append(outcome.finish(identity) if isinstance(outcome, Pending) else outcome)
                if savepoints:
                    raw.execute("RELEASE command")
                continue
            except (DomainError, ConcurrencyError) as e:
                outcome = e
            except IntegrityError as e:
                outcome = ConcurrencyError(str(e.orig))
            except sqlite3.IntegrityError as e:
                outcome = ConcurrencyError(str(e))
            except DBAPIError as e:
                outcome = StoreError(str(e.orig))
            except Exception as e:  # a bug in one command must not sink its batch
                outcome = e
            if savepoints:
                raw.execute("ROLLBACK TO command")
                raw.execute("RELEASE command")
            elif raw.total_changes != before:
                raise _PartialWrite
            heads.rewind(mark)  # what it moved in memory goes back with it
            outcomes.append(outcome)
        return outcomes
