"""PostgreSQL group commit: the commands waiting at a moment, decided in one transaction.

A replica's writer takes every command waiting when it is free and runs them one after
another in one READ COMMITTED transaction: a fast pass without savepoints (reads ahead,
writes riding on the next statement), and after a failure a careful pass with a savepoint
per command, the victim of a lost race going to the next batch. One end statement advances
the position counter, inserts the events and renumbers the provisional positions, so the
counter's lock is held only from there to COMMIT. The whole design, chained batches and
deadlock avoidance included: docs/architecture.md#postgresql-group-commit.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import InterfaceError as SAInterfaceError
from sqlalchemy.util import await_

from eventcoord.errors import ConcurrencyError, DomainError, StoreError
from eventcoord.store import dbclock
from eventcoord.store.loaders import LOADERS, SUBSTITUTES
from eventcoord.store.log import Pending
from eventcoord.store.postgres import batch, held_locks, rows_ahead, session_rows, stats
from eventcoord.store.postgres.ahead import RUNNING, ReadsAhead
from eventcoord.store.postgres.batch import Batch
from eventcoord.store.postgres.held_locks import GuardLock
from eventcoord.store.postgres.rows_ahead import RowsAhead
from eventcoord.store.postgres.session_rows import SessionRead
from eventcoord.store.postgres.statements import send_carried, send_deferred, shifted
from eventcoord.store.transaction import Requeue, Resolve, identity

#: Commands decided in one transaction at most (more wait for the next batch). Each one
#: with a savepoint takes a subtransaction id; beyond 64 PostgreSQL's per-backend cache of
#: them overflows and every snapshot in the cluster gets slower.
MAX_BATCH = 64
#: Times a command is decided again after losing a race inside the database.
RETRIES = 12
#: How long a command that is not the first of its batch may wait for a row lock: longer
#: than a batch usually holds its locks (its decisions, then a commit's flush to disk),
#: far shorter than PostgreSQL's deadlock detection.
LOCK_WAIT_MS = 50
#: Batches run with savepoints from the start after a pass had to be rolled back.
CAREFUL_BATCHES = 16
# serialization_failure, deadlock_detected, unique_violation, lock_not_available
RETRYABLE = frozenset({"40001", "40P01", "23505", "55P03"})
_LOCK_NOT_AVAILABLE = "55P03"

#: How long the clock read by a batch's end statement may serve the chained next batch.
CHAIN_FRESH_S = 0.020
#: How long a batch decides before it lets the event loop answer others (reads, /health)
#: for one turn: a command that reads nothing from the database would otherwise keep the
#: loop for the whole batch (each is bounded on its own: ``domain/files.CLAIM_WORK_LIMIT``).
BATCH_SLICE_S = 0.02
#: Turns of the loop it lets others have then (a read or an HTTP answer needs a few).
SLICE_TURNS = 10

_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
_CLOCK_COLUMNS = (
    "(extract(epoch from clock_timestamp()) * 1000000)::bigint, (SELECT value FROM settings WHERE key = 'ttl_seconds')"
)
_CLOCK = "SELECT " + _CLOCK_COLUMNS
_TEST_CLOCK = f"SELECT value FROM settings WHERE key = '{dbclock.TEST_CLOCK_KEY}'"
#: The fast pass's first statement also starts the short lock wait, for every command.
_CLOCK_WAIT_BRIEFLY = _CLOCK + f", set_config('lock_timeout', '{LOCK_WAIT_MS}ms', true)"
#: A careful pass in a chained transaction: the clock, and the usual lock wait back ($1).
_CLOCK_WAIT_USUALLY = _CLOCK + ", set_config('lock_timeout', $1, true)"
_WAIT_BRIEFLY = f"SET LOCAL lock_timeout = '{LOCK_WAIT_MS}ms'"
#: Commit, and begin the next batch's transaction with the fast pass's short lock wait.
_COMMIT_AND_BEGIN = f"COMMIT; {_BEGIN}; {_WAIT_BRIEFLY}"
_ANSWERS = (
    "UPDATE idempotency AS i SET answer = u.a "
    "FROM unnest($1::varchar[], $2::varchar[], $3::text[]) AS u(ws, cid, a) "
    "WHERE i.workspace = u.ws AND i.command_id = u.cid"
)


@dataclass(slots=True)
class Job:
    """One ``transact`` call waiting for the writer."""

    fn: Callable[[Connection], Any]
    future: asyncio.Future[Any]
    retry: bool
    #: What it reads or locks first (the sessions row, its guard, then what the guard
    #: protects), which a fast pass may read or lock ahead with the others' (``ahead/``).
    read_ahead: ReadsAhead | None = None
    #: Races lost so far.
    attempts: int = 0


class Again:
    """Outcome: decide this job again in the next batch."""


AGAIN = Again()
#: A job's outcome: ("ok", value) | ("err", exception) | AGAIN | None (cancelled, skipped).
Outcome = tuple[str, Any] | Again | None


def end_statement(renumber: frozenset[str] | None = None, carried: str | None = None) -> str:
    """Advance the counter, move stream heads, insert the events, renumber: one statement.

    ``renumber``: the tables whose position columns may hold the batch's provisional
    positions (those its statements wrote; None: every table with one). Each table
    renumbered costs an index probe even when it holds none, so a batch of heartbeats,
    which write no position, renumbers nothing.

    ``carried``: a statement writing the sessions' carried liveness (``$1…$n`` of its own,
    here from ``$12``), run as one more CTE. Its rows are all held by this transaction
    already (each by its heartbeat's read), so it waits for no lock under the counter's.

    ``$1`` the number of staged events, ``$2…$8`` their columns, ``$9…$10`` the batch's
    provisional range ``[lo, hi)`` (a provisional ``p`` becomes ``p - lo + base + 1``),
    ``$11`` the connection's usual ``lock_timeout``.
    Returns ``base``, the events' versions in position order, and the database clock and
    TTL (for a chained next batch). An
    event staged without a version gets the next one of its stream: its stream's head
    moves by the batch's count of them, in the batch's order. Every lock this statement
    takes after the counter's (stream heads, its own rows) is only ever taken under the
    counter's lock, so no end statement waits for anything but another one's commit.
    """
    import eventcoord.projections.tables  # noqa: F401  (registers the read-model tables)
    from eventcoord.store.schema import metadata

    ctes = [
        # The batch's short lock wait ends before the counter's row is waited for: the
        # qual runs on the scanned row, before the UPDATE waits for its lock.
        "h AS (UPDATE store_head SET position = position + $1 "
        "WHERE id = 1 AND set_config('lock_timeout', $11, true) IS NOT NULL RETURNING position - $1 AS base)",
        "u AS (SELECT * FROM unnest($2::varchar[], $3::varchar[], $4::int[], $5::varchar[], $6::text[], $7::text[], "
        "$8::bigint[]) WITH ORDINALITY AS u(ws, st, v, t, d, m, r, n))",
        "w AS (SELECT n, ws, st, row_number() OVER (PARTITION BY ws, st ORDER BY n) AS k, "
        "count(*) OVER (PARTITION BY ws, st) AS c FROM u WHERE v IS NULL)",
        "s AS (INSERT INTO stream_heads (workspace, stream, version) SELECT w.ws, w.st, w.c FROM h, w WHERE w.k = 1 "
        "ORDER BY w.ws, w.st ON CONFLICT (workspace, stream) DO UPDATE SET version = stream_heads.version + "
        "excluded.version "
        "RETURNING workspace, stream, version)",
        "e AS (INSERT INTO events (position, workspace, stream, version, type, data, metadata, recorded_us) "
        "SELECT h.base + u.n, u.ws, u.st, coalesce(u.v, s.version - w.c + w.k), u.t, u.d, u.m, u.r "
        "FROM h, u LEFT JOIN w ON w.n = u.n LEFT JOIN s ON s.workspace = w.ws AND s.stream = w.st "
        "RETURNING position, version)",
    ]
    columns = sorted(
        (t.name, c.name)
        for t in metadata.tables.values()
        if renumber is None or t.name in renumber
        for c in t.columns
        if c.info.get("position")
    )
    for i, (table, col) in enumerate(columns):
        ctes.append(
            f"r{i} AS (UPDATE {table} SET {col} = {table}.{col} - $9 + h.base + 1 FROM h "
            f"WHERE {table}.{col} >= $9 AND {table}.{col} < $10)"
        )
    if carried is not None:
        ctes.append(f"carried AS ({shifted(carried, 11)})")
    # With nothing to renumber the range is still bound: typed here, it is not read.
    unread = "" if columns else ", $9::bigint, $10::bigint"
    return (
        "WITH "
        + ", ".join(ctes)
        + " SELECT (SELECT base FROM h), (SELECT array_agg(version ORDER BY position) FROM e), "
        + _CLOCK_COLUMNS
        + unread
    )


#: End statements by the tables they renumber and what they carry (a few kinds of batch).
_END: dict[tuple[frozenset[str] | None, str | None], str] = {}


@functools.cache
def _position_tables() -> frozenset[str]:
    """The tables with a column that holds positions (renumbered at a batch's end)."""
    import eventcoord.projections.tables  # noqa: F401  (registers the read-model tables)
    from eventcoord.store.schema import metadata

    return frozenset(t.name for t in metadata.tables.values() if any(c.info.get("position") for c in t.columns))


def sqlstate(e: BaseException) -> str | None:
    """The SQLSTATE of a database error (asyncpg's own or wrapped by SQLAlchemy), else None."""
    if isinstance(e, DBAPIError):
        orig: Any = e.orig
        state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
        return str(state) if state else None
    if isinstance(e, asyncpg.PostgresError):
        return str(e.sqlstate) if e.sqlstate else None
    return None


def connection_lost(e: BaseException) -> bool:
    """Whether ``e`` leaves the connection unusable (the batch's outcome is unknown)."""
    if isinstance(e, DBAPIError) and e.connection_invalidated:
        return True
    lost = (
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.ConnectionDoesNotExistError,
        # the server is shutting down, starting up or crashed (SQLSTATE 57P01-57P03)
        asyncpg.AdminShutdownError,
        asyncpg.CannotConnectNowError,
        asyncpg.CrashShutdownError,
        # the driver's protocol left mid-operation (seen as the server shuts down): unusable
        asyncpg.InternalClientError,
        SAInterfaceError,
        OSError,
        TimeoutError,
    )
    if isinstance(e, lost):
        return True
    orig = getattr(e, "orig", None)
    cause = getattr(orig, "__cause__", None) if orig is not None else None
    return (
        orig is not None and orig is not e and (connection_lost(orig) or (cause is not None and connection_lost(cause)))
    )


def describe(e: BaseException) -> str:
    """A short, secret-free cause for ``e`` (its class and first line), for 503s and /health."""
    inner = getattr(e, "orig", None) or e
    text = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {text[0][:200]}" if text else type(inner).__name__


def failed(job: Job, e: BaseException, first: bool) -> Outcome:
    """What becomes of a job whose ``fn`` raised ``e`` (already rolled back)."""
    if isinstance(e, Requeue):
        return AGAIN
    if isinstance(e, DomainError):
        return ("err", e)
    state = sqlstate(e)
    if state == _LOCK_NOT_AVAILABLE and not first:
        return AGAIN  # our own short lock wait: no race lost, it runs first next time
    if isinstance(e, ConcurrencyError) or state in RETRYABLE:
        job.attempts += 1
        if job.retry and job.attempts < RETRIES:
            return AGAIN
        if isinstance(e, ConcurrencyError):
            return ("err", e)
        return ("err", ConcurrencyError(f"lost a race {job.attempts} times: {_message(e)}"))
    if state is not None or isinstance(e, DBAPIError):
        return ("err", StoreError(f"postgresql: {_message(e)}"))
    return ("err", e)  # a bug in one command must not sink its batch


def _message(e: BaseException) -> str:
    return str(e.orig) if isinstance(e, DBAPIError) else str(e)


@dataclass(slots=True)
class _Abort:
    """The fast pass was rolled back because job ``index`` raised ``error`` (None: no one
    job can be blamed: a statement carrying earlier commands' writes failed)."""

    index: int | None
    error: BaseException


def run_batch(
    conn: Connection, jobs: Sequence[Job], savepoints: bool, waiting: Callable[[], bool] = lambda: False
) -> tuple[list[Outcome], bool]:
    """Decide and commit ``jobs`` (in the writer's greenlet); returns outcomes and whether it aborted.

    ``waiting`` tells whether commands wait for a writer: then the COMMIT chains the next
    batch's transaction (see "Chained batches" above).
    """
    raw: Any = conn.connection.driver_connection
    b: Batch | None = conn.info.get("eventcoord.batch.state")
    if b is None or b.raw is not raw:
        b = conn.info["eventcoord.batch.state"] = Batch(raw, raw.get_server_pid())
        b.usual_lock_timeout = str(await_(raw.fetchval("SHOW lock_timeout")))
    batch.attach(conn, b)
    # The loaders read what the batch read ahead, where a substitute is registered.
    conn.info[LOADERS] = SUBSTITUTES
    try:
        result = _attempt(conn, b, jobs, savepoints, waiting)
        if not isinstance(result, _Abort):
            return result, False
        outcomes: list[Outcome] = [None] * len(jobs)
        index = result.index  # None: no victim, every command is decided again carefully
        state = sqlstate(result.error)
        first = _first_live(jobs) == index
        if index is not None and state is not None and not (first and state == _LOCK_NOT_AVAILABLE):
            # A race or a store error: the victim is out. (The first command's short lock
            # wait is not its own rule: it is decided again below and waits as needed.)
            outcomes[index] = failed(jobs[index], result.error, first)
        rerun = [i for i in range(len(jobs)) if outcomes[i] is None and not jobs[i].future.done()]
        if not rerun:
            return outcomes, True
        again = _attempt(conn, b, [jobs[i] for i in rerun], True, waiting)
        assert not isinstance(again, _Abort)
        for i, outcome in zip(rerun, again, strict=True):
            outcomes[i] = outcome
        return outcomes, True
    finally:
        batch.attach(conn, None)
        conn.info.pop(RUNNING, None)
        b.reset()


def _first_live(jobs: Sequence[Job]) -> int:
    return next((i for i, j in enumerate(jobs) if not j.future.done()), -1)


def _begin(b: Batch, savepoints: bool) -> None:
    """Open the batch's transaction (or take the chained one) and read the clock and TTL.

    Fast pass: every command waits briefly for row locks, the first too (if it times out
    the pass is run again with savepoints, where the first waits as long as it must).
    """
    raw, chained, b.chained = b.raw, b.chained, None
    if chained is None:
        await_(raw.execute(_BEGIN))
        row = await_(raw.fetchrow(_CLOCK if savepoints else _CLOCK_WAIT_BRIEFLY))
    elif savepoints:  # the chained transaction waits briefly: undo that for the first command
        row = await_(raw.fetchrow(_CLOCK_WAIT_USUALLY, b.usual_lock_timeout))
    elif time.monotonic() - chained[2] > CHAIN_FRESH_S or dbclock.test_clock_on():
        row = await_(raw.fetchrow(_CLOCK_WAIT_BRIEFLY))
    else:
        row = chained
    b.now_us, b.ttl = int(row[0]), int(row[1])
    if dbclock.test_clock_on():  # tests only: a chained clock is never reused then (above)
        b.now_us = dbclock.shifted(b.now_us, await_(raw.fetchval(_TEST_CLOCK)))


def _attempt(
    conn: Connection, b: Batch, jobs: Sequence[Job], savepoints: bool, waiting: Callable[[], bool]
) -> list[Outcome] | _Abort:
    """One transaction over ``jobs``: a pass, then the end statement and COMMIT."""
    raw = b.raw
    b.reset()
    b.carry = not savepoints
    open_ = True
    try:
        _begin(b, savepoints)
        if not savepoints:
            ahead = [
                r
                for j in jobs
                if j.read_ahead is not None and not j.future.done()
                for r in (j.read_ahead if isinstance(j.read_ahead, tuple) else (j.read_ahead,))
            ]
            guards = [g for g in ahead if isinstance(g, GuardLock)]
            rows = [r for r in ahead if isinstance(r, RowsAhead)]
            try:
                # One lock of many rows, instead of one each; or one guard that several reads
                # ahead rely on (claims of one project), which are then read in one statement,
                # or one read that saves several statements alone (a pull's, a transition's).
                worth = len(rows) > 1 or any(r.alone for r in rows)
                if len({(g.table, g.workspace, g.key) for g in guards}) > 1 or (guards and worth):
                    held_locks.lock_ahead(conn, guards)
                reads = [r for r in ahead if isinstance(r, SessionRead)]
                if len(reads) > 1:  # one read of many rows, instead of one each
                    session_rows.read_ahead(conn, reads)
                if worth:  # after the guards they rely on
                    rows_ahead.read_ahead(conn, rows)
            except Exception as e:  # e.g. a new guard another batch inserts: decide them carefully
                if connection_lost(e):
                    raise
                open_ = False
                await_(raw.execute("ROLLBACK"))
                return _Abort(None, e)
        outcomes: list[Outcome] = [None] * len(jobs)
        waits_briefly = not savepoints
        first = True
        ends = time.monotonic() + BATCH_SLICE_S
        for i, job in enumerate(jobs):
            if job.future.done():  # its caller went away before it ran
                continue
            if time.monotonic() > ends:  # the transaction stays open meanwhile, as for a statement
                for _ in range(SLICE_TURNS):
                    await_(asyncio.sleep(0))
                ends = time.monotonic() + BATCH_SLICE_S
            if not first and not waits_briefly:
                await_(raw.execute(_WAIT_BRIEFLY))
                waits_briefly = True
            if savepoints:
                await_(raw.execute("SAVEPOINT c"))
            mark = b.begin_command()
            conn.info[RUNNING] = job.read_ahead  # for declared_ahead
            try:
                result = job.fn(conn)
                if savepoints:  # its read-model writes, in one round trip, inside its savepoint
                    send_deferred(conn)
                # (a fast pass carries them: they go with the next statement, statements.py)
                outcomes[i] = ("ok", result)
            except Exception as e:
                b.drop_own()  # never sent: they go with the command
                if connection_lost(e):
                    raise
                if savepoints:
                    await_(raw.execute("ROLLBACK TO SAVEPOINT c"))
                    b.rewind(mark)
                elif sqlstate(e) is not None or b.writes != mark[3]:
                    open_ = False
                    await_(raw.execute("ROLLBACK"))
                    # A statement that carried an earlier command's writes cannot tell whose
                    # failed: then no one is the victim, and all are decided carefully.
                    return _Abort(None if b.mixed else i, e)
                outcomes[i] = failed(job, e, first)
            first = False
        if b.deferred or ((b.liveness is not None or b.work_counts) and not b.appended):
            try:
                # The carried liveness goes with the end statement (its rows are ours):
                # only a batch that appended nothing, and so has no end statement, sends it.
                send_deferred(conn)
                if not b.appended:
                    if b.work_counts:  # (a replay's: a rebuild appends nothing; else with the end statement)
                        sql, args = b.work_counts.as_arrays()
                        b.work_counts = None
                        await_(raw.execute(sql, *args))
                    send_carried(conn)
            except Exception as e:  # e.g. a row another batch holds: decide them carefully
                if connection_lost(e):
                    raise
                open_ = False
                await_(raw.execute("ROLLBACK"))
                return _Abort(None, e)
        # Nothing after this waits for a row lock but the end statement, which ends the
        # short wait itself: the answers' UPDATE touches only this batch's own rows.
        resolve, clock = _end(b)
        open_ = False
        if clock is not None and waiting():
            await_(raw.execute(_COMMIT_AND_BEGIN))
            b.chained = (*clock, time.monotonic())
            stats.CHAINED.inc()
        else:
            await_(raw.execute("COMMIT"))
    except Exception as e:
        if not open_ or connection_lost(e):
            raise  # COMMIT itself failed, or the connection is gone: the outcome is unknown
        await_(raw.execute("ROLLBACK"))
        if sqlstate(e) in RETRYABLE:  # the end statement lost a race: decide them all again
            return [_lost(job, e) for job in jobs]
        return [("err", StoreError(f"postgresql: {_message(e)}")) for _ in jobs]
    return [_finish(o, resolve) for o in outcomes]


def _lost(job: Job, e: BaseException) -> Outcome:
    return None if job.future.done() else failed(job, e, first=True)


def _end(b: Batch) -> tuple[Resolve, tuple[int, int] | None]:
    """Advance the counter once, insert the events, renumber; write deferred answers.

    Returns the positions' resolve and, when the end statement ran, the database clock and
    TTL it read.
    """
    resolve: Resolve = identity
    clock = None
    if b.appended:
        renumber = None if b.renumber is None else frozenset(b.renumber & _position_tables())
        carried: str | None = None
        carried_args: list[Any] = []
        if b.work_counts:  # the items in work each session gained or lost, with the liveness
            carried, carried_args = b.work_counts.as_arrays(b.liveness)
        elif b.liveness is not None:
            carried, carried_args = b.liveness.as_arrays()
        b.liveness = b.work_counts = None
        sql = _END.get((renumber, carried))
        if sql is None:
            sql = _END[(renumber, carried)] = end_statement(renumber, carried)
        row = await_(b.raw.fetchrow(sql, b.appended, *b.events, b.lo, b.next, b.usual_lock_timeout, *carried_args))
        resolve = b.resolver(int(row[0]), row[1])
        clock = (int(row[2]), int(row[3]))
    if b.answers:
        ws, cids, bodies = zip(*((w, c, answer(resolve)) for w, c, answer in b.answers), strict=True)
        await_(b.raw.execute(_ANSWERS, list(ws), list(cids), list(bodies)))
    return resolve, clock


def _finish(outcome: Outcome, resolve: Resolve) -> Outcome:
    """Finish a committed job's result with the batch's real positions."""
    if isinstance(outcome, tuple) and outcome[0] == "ok" and isinstance(outcome[1], Pending):
        try:
            return ("ok", outcome[1].finish(resolve))
        except Exception as e:  # committed, but the answer could not be built
            return ("err", e)
    return outcome
