"""PostgreSQL: how prepared statements run on asyncpg, in and out of a group-commit batch.

Statements run as raw asyncpg calls (``Prepared``'s SQL compiled once). Inside a batch a read
model's write is deferred and goes with the batch's next statement as a data-modifying CTE
where doing them together equals doing them in order (``Prepared(rows=…, session_row=…)``
declare what makes that so); the signs of life a fast pass carries are written before any
statement that could read their rows (``send_carried``), and the deferred writes before
anything else (``send_deferred``): docs/architecture.md#prepared-statements-and-deferred-writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.util import await_

from eventcoord.store import prepared
from eventcoord.store.postgres import batch
from eventcoord.store.postgres.deferred_writes import DeferredWrites, Entry
from eventcoord.store.prepared import Execution, _Pg


def _driver(conn: Connection) -> Any:
    """The asyncpg connection under ``conn``: same transaction, no SQLAlchemy layers."""
    return conn.connection.driver_connection


class AsyncpgStatements(Execution):
    """``Prepared`` on asyncpg: raw calls, the running batch's deferred writes sent with them."""

    def rows(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        sql, args = _statement(conn, pg, params)
        records: Sequence[Sequence[Any]] = await_(_driver(conn).fetch(sql, *args))
        if pg.dml and records:
            _wrote(conn)
        return records

    def first(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> Sequence[Any] | None:
        sql, args = _statement(conn, pg, params)
        record: Sequence[Any] | None = await_(_driver(conn).fetchrow(sql, *args))
        if pg.dml and record is not None:
            _wrote(conn)
        return record

    def run(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> int:
        sql, args = _statement(conn, pg, params)
        count = _count(await_(_driver(conn).execute(sql, *args)))
        if count:
            _wrote(conn)
        return count

    def write(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> bool:
        """Deferred to the end of the command in a batch, if it is a write it can place."""
        pending = batch.current(conn)
        if pending is None or pg.target is None:
            return False
        keys = pg.keys(params)
        _before(conn, pg, params, keys)  # the signs of life carried for its row go first
        if pending.deferred and not pending.deferred.apart(pg, keys):
            send_deferred(conn)  # it touches what a deferred write changes: in order
        pending.deferred.append(pg, pg.args(params), keys)
        return True

    def many(self, conn: Connection, pg: _Pg, params: Iterable[Mapping[str, Any]]) -> None:
        _before(conn, pg, None)
        send_deferred(conn)  # executemany takes no company
        await_(_driver(conn).executemany(pg.sql, [pg.args(x) for x in params]))
        _wrote(conn)

    def pending_signs_of_life(self, conn: Connection) -> list[str]:
        """The sessions whose sign of life the running batch has deferred, not sent yet."""
        pending = batch.current(conn)
        if pending is None:
            return []
        return [keys["sessions"][0] for pg, _, keys in pending.deferred if pg.life_only and keys is not None]


prepared.install("asyncpg", AsyncpgStatements())


def _count(status: str) -> int:
    """The row count of an asyncpg status such as ``UPDATE 3`` or ``INSERT 0 1``."""
    tail = status.rpartition(" ")[2]
    return int(tail) if tail.isdigit() else 0


_PARAM = re.compile(r"\$(\d+)")
_COMBINED: dict[tuple[str, ...], str | None] = {}
_ALONE = "SELECT 1"


def _combined(statements: Sequence[_Pg], main: _Pg | None = None) -> str | None:
    """One statement running ``statements`` as data-modifying CTEs, then ``main`` (or
    nothing), parameters renumbered in that order; None if their CTEs' names clash.

    A statement with CTEs of its own has them lifted to the top (PostgreSQL allows a
    data-modifying CTE only there), in front of the statement they belong to.
    """
    key = (*(pg.sql for pg in statements), main.sql if main is not None else _ALONE)
    if key in _COMBINED:
        return _COMBINED[key]
    ctes: list[str] = []
    names: set[str] = set()
    offset = 0
    main_body = _ALONE
    for i, pg in enumerate([*statements, *([main] if main is not None else [])]):
        split = _split_with(shifted(pg.sql, offset))
        if split is None:  # a WITH list this cannot read: sent alone
            _COMBINED[key] = None
            return None
        own, body = split
        offset += len(pg.names)
        for name, text in own:
            if name in names:
                _COMBINED[key] = None
                return None
            names.add(name)
            ctes.append(text)
        if i < len(statements):
            ctes.append(f"deferred_{i} AS ({body})")
        else:
            main_body = body
    sql = "WITH " + ", ".join(ctes) + " " + main_body
    _COMBINED[key] = sql
    return sql


_CTE = re.compile(r"\s*(\w+)\s+AS\s*\(", re.IGNORECASE)


def _split_with(sql: str) -> tuple[list[tuple[str, str]], str] | None:
    """A statement's own CTEs (``name``, ``name AS (…)``) and the statement after them;
    None for a WITH list of another shape (column lists, ``MATERIALIZED`` …)."""
    if sql[:5].upper() != "WITH ":
        return [], sql
    ctes: list[tuple[str, str]] = []
    at = 5
    while True:
        m = _CTE.match(sql, at)
        if m is None:
            return None
        close = _closing(sql, m.end() - 1)
        if close < 0:
            return None
        ctes.append((m.group(1), sql[m.start(1) : close + 1]))
        at = close + 1
        rest = sql[at:].lstrip()
        if not rest.startswith(","):
            return ctes, rest
        at = sql.index(",", at) + 1


def _closing(sql: str, opening: int) -> int:
    """The index of the parenthesis closing the one at ``opening`` (literals skipped; -1: none)."""
    depth, i, n = 0, opening, len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            escapes = sql[i - 1] in "Ee"  # E'…' takes backslash escapes; '…' does not
            i += 1
            while i < n:
                if (escapes and sql[i] == "\\") or (sql[i] == "'" and sql[i + 1 : i + 2] == "'"):
                    i += 2
                elif sql[i] == "'":
                    break
                else:
                    i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1  # unbalanced


def shifted(sql: str, offset: int) -> str:
    """``sql`` with its parameters ``$n`` renumbered ``$(n + offset)``."""
    return _PARAM.sub(lambda m: f"${int(m.group(1)) + offset}", sql) if offset else sql


#: Deferred writes sent as one statement at most: beyond, PostgreSQL's cost of a statement of
#: so many data-modifying CTEs (each a plan node of its own, planned afresh for each new
#: count) outgrows a round trip per kind of write (``send_deferred``).
COMBINE_AT_MOST = 12


def send_deferred(conn: Connection) -> None:
    """Send the deferred writes now, in one round trip (PostgreSQL batch).

    Up to ``COMBINE_AT_MOST`` go as one statement of CTEs (``_combined``). More, or writes
    whose CTEs' names clash (two releases), go by command: the writes of one command as
    one statement, and the commands whose writes have the same statements as one
    ``executemany`` of it (one round trip, one plan kept: a batch of claims sends its
    claims' writes in one round trip, not one per kind of write). Deferred writes touch none
    of one another's rows (``DeferredWrites.apart``), so their order is free.
    """
    pending = batch.current(conn)
    if pending is None or not pending.deferred:
        return
    deferred = pending.deferred
    sql = _as_one(deferred)
    if sql is not None:
        args = _args(deferred)
        _sending(pending)  # (forgets them)
        await_(pending.raw.execute(sql, *args))
        return
    shapes: dict[tuple[str, ...], tuple[str, list[list[Any]]]] = {}
    for writes in deferred.by_command():
        shape = tuple(pg.sql for pg, _, _ in writes)
        sent = shapes.get(shape)
        if sent is None:
            sql = _as_one(writes)
            if sql is None:  # one by one
                for pg, xs, _ in writes:
                    shapes.setdefault((pg.sql,), (pg.sql, []))[1].append(xs)
                continue
            sent = shapes[shape] = (sql, [])
        sent[1].append(_args(writes))
    _sending(pending)
    for sql, many in shapes.values():
        if len(many) == 1:
            await_(pending.raw.execute(sql, *many[0]))
        else:
            await_(pending.raw.executemany(sql, many))


def _as_one(writes: DeferredWrites | list[Entry]) -> str | None:
    """The SQL that runs deferred ``writes`` as one statement (``_args`` in order), or None:
    more than ``COMBINE_AT_MOST``, or their CTEs' names clash."""
    if len(writes) > COMBINE_AT_MOST:
        return None
    return writes[0][0].sql if len(writes) == 1 else _combined([pg for pg, _, _ in writes])


def _args(writes: Iterable[Entry]) -> list[Any]:
    """The arguments of deferred ``writes``, in order (their statements' numbering)."""
    return [a for _, xs, _ in writes for a in xs]


def _sending(pending: batch.Batch) -> None:
    """The deferred writes go now: they are gone (a failure rolls them back with the pass or
    the command); a write of the running command counts; an earlier command's mixes."""
    if pending.own > 0:
        pending.mixed = True
    if len(pending.deferred) > pending.own:
        pending.writes += 1
    pending.deferred.clear()
    pending.own = 0


def _statement(conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The SQL and arguments to send for ``pg`` in the running PostgreSQL batch, if any.

    The deferred writes it may not pass are sent first; those touching none of its
    tables (or only other rows of them, by ``Prepared(rows=…)``) go with it, as CTEs in
    front of it: run with its snapshot, which they do not change for it. That saves their
    round trip: in a fast pass the writes a command leaves behind usually go with the next
    command's first read.
    """
    args = pg.args(params)
    pending = _before(conn, pg, params)
    if pending is None or not pending.deferred:
        return pg.sql, args
    if (
        not pg.tables
        or pg.sql[:15].upper() == "WITH RECURSIVE "
        or len(pending.deferred) > COMBINE_AT_MOST
        or not pending.deferred.apart(pg, pg.keys(params))
    ):
        send_deferred(conn)  # SQL text that names no table, it touches their rows, or too many
        return pg.sql, args
    deferred = pending.deferred
    sql = _combined([d for d, _, _ in deferred], pg)
    if sql is None:  # their CTEs' names clash with its own
        send_deferred(conn)
        return pg.sql, args
    carried = [a for _, xs, _ in deferred for a in xs]
    _sending(pending)
    return sql, carried + args


#: ``_before``'s keys not computed yet (None is a value: the statement names no row).
_UNKNOWN: Any = object()


def _before(conn: Connection, pg: _Pg, params: Mapping[str, Any] | None, keys: Any = _UNKNOWN) -> batch.Batch | None:
    """Before a statement of the running PostgreSQL batch: note what it writes, and write
    the signs of life carried that it could read. Returns the batch (None: no batch).

    ``keys``: ``pg.keys(params)``, where the caller has them already."""
    pending = batch.current(conn)
    if pending is not None:
        pending.touch(pg.writes_to)
        if pending.sessions_read:
            _forget_sessions_read(pending, pg, params)
        if pending.rows_ahead and pg.writes_to != frozenset():
            if keys is _UNKNOWN:
                keys = None if params is None else pg.keys(params)
            pending.forget_rows_ahead(
                pg.writes_to, keys, pg.life_only, pg.added(params), pg.spans_at(params), pg.counts_work
            )
        if pending.liveness is not None and _meets_carried(pending, pg, params):
            send_carried(conn)
    return pending


def _forget_sessions_read(pending: batch.Batch, pg: _Pg, params: Mapping[str, Any] | None) -> None:
    """``pg`` is about to run or be deferred: the ``sessions`` rows read ahead that it may
    write no longer hold (``session_rows``)."""
    if (pg.writes_to is not None and "sessions" not in pg.writes_to) or pg.counts_work:
        return
    if pg.session_row is not None and params is not None:
        pending.sessions_read.pop(params[pg.session_row], None)
    else:
        pending.sessions_read.clear()


def _meets_carried(pending: batch.Batch, pg: _Pg, params: Mapping[str, Any] | None) -> bool:
    """Whether ``pg`` may touch a ``sessions`` row whose signs of life are carried."""
    if not pg.reads_sessions:
        return False
    if pg.session_row is None or params is None:
        return True
    return bool(pending.liveness.has(params[pg.session_row]))


def send_carried(conn: Connection) -> None:
    """Write the signs of life the running PostgreSQL batch carries (``projections.sessions``).

    A fast pass carries every command's heartbeats and signs of life to here, folded per
    session, instead of writing them with each command: a heartbeat costs one round trip,
    its read, instead of two. They are written before any statement that could read or
    change those rows (a read of another session's row needs nothing), and before the end.
    """
    pending = batch.current(conn)
    if pending is None or pending.liveness is None:
        return
    send_deferred(conn)  # the older writes first: a deferred sign of life may precede a carried heartbeat
    # The commands that carried them counted these writes already: a refusal of the
    # running one after them needs no rollback of the pass (and a failure, no victim).
    writes = pending.writes
    carried, pending.liveness = pending.liveness, None
    carried.flush(conn)
    send_deferred(conn)
    pending.writes, pending.mixed = writes, True


def _wrote(conn: Connection) -> None:
    """Count a write for the running batch (a refusal after a write must be rolled back)."""
    b = batch.current(conn)
    if b is not None:
        b.writes += 1
