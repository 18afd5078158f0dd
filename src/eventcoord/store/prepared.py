"""Statements built once and run cheaply on the hot path, on either backend.

A :class:`Prepared` statement is built once at import and compiled once per backend to
fixed SQL text, which runs straight on the driver connection of the current transaction
(building a SQLAlchemy statement per call costs ~100 µs; the SQL itself a few). Inside a
PostgreSQL batch a read model's write (:meth:`Prepared.write`) rides on the batch's next
statement as a data-modifying CTE where doing them together equals doing them in order
(``Prepared(rows=…, session_row=…)`` declare what makes that so):
docs/architecture.md#prepared-statements-and-deferred-writes.
"""

from __future__ import annotations

import contextlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, literal_column
from sqlalchemy import text as sql_text
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.util import find_tables

_SQLITE = sqlite.dialect(paramstyle="named")
_ASYNCPG = pg_asyncpg.dialect()  # type: ignore[no-untyped-call]


#: The SQLite writer's connection and its driver connection, while it runs a batch
#: (:func:`writer_connection`): SQLAlchemy's way down to the driver costs ~1.5 µs a statement.
_writer: tuple[Connection, Any] | None = None


def _driver(conn: Connection) -> Any:
    """The DBAPI connection under ``conn``: same transaction, no SQLAlchemy layers."""
    writer = _writer
    if writer is not None and writer[0] is conn:
        return writer[1]
    return conn.connection.driver_connection


@contextlib.contextmanager
def writer_connection(conn: Connection) -> Iterator[Any]:
    """Meanwhile, statements on ``conn`` find its driver connection (yielded) at once.

    For SQLite's writer, which runs one batch at a time on the event loop.
    """
    global _writer
    before = _writer
    raw = conn.connection.driver_connection
    _writer = (conn, raw)
    try:
        yield raw
    finally:
        _writer = before


class _Pg:
    """A statement compiled for asyncpg: SQL text and the order of its parameters."""

    __slots__ = (
        "adds",
        "at_spans",
        "counts_pending_life",
        "counts_work",
        "defaults",
        "dml",
        "life_only",
        "names",
        "reads_sessions",
        "rows",
        "session_facts",
        "session_row",
        "sql",
        "tables",
        "target",
        "writes_to",
    )

    def __init__(
        self,
        stmt: Executable,
        writes: str | None = None,
        session_row: str | None = None,
        rows: Mapping[str, tuple[str, ...]] | None = None,
        life_only: bool = False,
        counts_pending_life: bool = False,
        reads: frozenset[str] | None = None,
        session_facts: bool = False,
        adds: Mapping[str, tuple[str, str]] | None = None,
        at_spans: Mapping[str, str] | None = None,
        counts_work: bool = False,
    ) -> None:
        compiled = stmt.compile(dialect=_ASYNCPG)  # type: ignore[attr-defined]
        assert not compiled._bind_processors, "a Prepared statement's types need no bind processing"
        self.sql = str(compiled)
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        # Literal values in the statement (``id == 1``) become binds with defaults.
        self.defaults = {k: v for k, v in compiled.params.items() if v is not None}
        #: INSERT/UPDATE/DELETE (with RETURNING when read through ``rows``/``first``).
        self.dml = bool(compiled.isinsert or compiled.isupdate or compiled.isdelete)
        #: The table a write changes, and every table it reads or changes (``Prepared.write``);
        #: SQL text names no tables to find: ``writes`` declares its one table.
        target = getattr(stmt, "table", None)
        if writes is not None:
            self.target: str | None = writes
            self.tables = frozenset((writes,))
        elif reads is not None:
            self.target = None
            self.tables = reads
        else:
            self.target = target.name if self.dml and target is not None else None
            self.tables = frozenset(t.name for t in find_tables(stmt, include_crud=True))  # type: ignore[arg-type]
        #: The tables it may write (a batch renumbers its provisional positions only in
        #: tables written): none for a statement with no write in its text, None when a
        #: write's tables cannot be known (SQL text that declares none).
        self.writes_to: frozenset[str] | None = (
            frozenset()
            if not writes_sql(self.sql)
            else self.tables
            if writes is not None or (reads is None and self.tables)
            else None
        )
        #: It reads of ``sessions`` only what a sign of life never changes (``Prepared``).
        self.session_facts = session_facts
        if session_facts:  # (a deferred write of sessions other than a sign of life goes first)
            self.tables = self.tables | {"sessions"}
        #: Whether it may read or write ``sessions`` (the text is searched too: SQL text
        #: names no tables to find) more than facts a sign of life never changes, and the
        #: parameter naming the one row it touches there.
        self.reads_sessions = (
            not session_facts
            and not counts_work
            and ("sessions" in self.tables or _SESSIONS.search(self.sql) is not None)
        )
        #: Of ``sessions`` it only adds to ``active_items`` (``Prepared``).
        self.counts_work = counts_work
        self.session_row = session_row
        #: The tables it touches in one row only (or rows of one key): the parameters that
        #: name it, by table.
        self.rows: dict[str, tuple[str, ...]] = dict(rows or {})
        if session_row is not None:
            self.rows["sessions"] = (session_row,)
        #: A write that only raises ``last_seen_us`` of one session that has not ended.
        self.life_only = life_only
        #: By table: the one column it changes in its keyed row, only by adding a parameter
        #: to it (``column + delta``; a new row holds the delta), and that parameter.
        self.adds: dict[str, tuple[str, str]] = dict(adds or {})
        assert self.adds.keys() <= self.rows.keys(), "an added column is in a keyed row"
        #: By table of ``rows``: the parameter holding the ``KeySpans`` its rows lie at there
        #: (reads ahead of ranges compare it, ``spans_at``).
        self.at_spans: dict[str, str] = dict(at_spans or {})
        assert self.at_spans.keys() <= self.rows.keys(), "rows at spans are keyed rows"
        #: A read of other sessions than its keyed one only for whether they are live, which
        #: counts a session with a sign of life pending as live (``pending_signs_of_life``).
        self.counts_pending_life = counts_pending_life

    def keys(self, params: Mapping[str, Any]) -> dict[str, tuple[Any, ...]] | None:
        """The row keys it touches, by table (None: it names none)."""
        if not self.rows:
            return None
        return {table: tuple(params[n] for n in names) for table, names in self.rows.items()}

    def spans_at(self, params: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """By table, the ``KeySpans`` that hold every row it changes there (None: none given)."""
        if not self.at_spans or params is None:
            return None
        return {table: params[name] for table, name in self.at_spans.items()}

    def added(self, params: Mapping[str, Any] | None) -> dict[str, tuple[str, int]] | None:
        """By table, the column it adds to and how much (None: it adds to none)."""
        if not self.adds or params is None:
            return None
        return {table: (column, int(params[name])) for table, (column, name) in self.adds.items()}

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        if self.defaults:
            params = {**self.defaults, **params}
        return [params[n] for n in self.names]


class Prepared:
    """One statement, built once per dialect by ``build(dialect_name)``."""

    def __init__(
        self,
        build: Callable[[str], Executable],
        writes: str | None = None,
        session_row: str | None = None,
        rows: Mapping[str, tuple[str, ...]] | None = None,
        life_only: bool = False,
        counts_pending_life: bool = False,
        reads: Iterable[str] | None = None,
        session_facts: bool = False,
        adds: Mapping[str, tuple[str, str]] | None = None,
        at_spans: Mapping[str, str] | None = None,
        counts_work: bool = False,
    ) -> None:
        """``writes``: for a statement in SQL text, the one table it reads and changes, which
        lets :meth:`write` defer it (a built statement's tables are found in it).
        ``reads``: for a read in SQL text, every table it reads, which lets the writes a
        PostgreSQL batch deferred that touch none of its rows go with it (``_statement``).

        ``session_row``: the parameter holding the ``session_id`` of the one ``sessions`` row
        the statement touches (it touches no other): in a PostgreSQL batch it runs without
        first writing the signs of life carried for other sessions (``send_carried``).
        ``rows``: likewise for other tables, the parameters that together name the rows it
        touches there (``{"leases": ("ws", "issue")}``): a deferred write to other rows of
        those tables may go with it (``_statement``). One parameter holding a
        :class:`KeySpans` names rows by ranges of an indexed key instead.
        ``life_only``: a write that only raises ``last_seen_us`` of one session (its
        ``session_row``) that has not ended: a sign of life.
        ``counts_pending_life``: a read that touches ``sessions`` in its keyed row and
        otherwise only asks whether sessions are live, counting as live every session
        whose sign of life is pending (it binds :func:`pending_signs_of_life`): a deferred
        sign of life of another session may go with it.
        ``session_facts``: it reads of ``sessions`` only what a sign of life never changes
        (a session's actor and host), so the signs of life carried need not be written first
        (with ``writes``, the one table it changes).
        ``adds``: by table of ``rows``, ``(column, parameter)`` when the write changes that
        row only by adding the parameter to that column (a counter; a new row holds the
        parameter): a PostgreSQL batch's reads ahead of that row that return the column are
        moved by it rather than forgotten (``Batch.forget_rows_ahead``).
        ``at_spans``: by table of ``rows``, the parameter holding a :class:`KeySpans` that
        holds every row the write changes there, by the key reads of ranges probe (a release
        of file claims: their live keys): a PostgreSQL batch's reads ahead of ranges that it
        does not meet are kept (``rows`` still decides what it may go with).
        ``counts_work``: of ``sessions`` it changes only ``active_items``, by adding to it
        (the items a session works on, ``projections/queue.py``). No read ahead and no
        sessions row read (``session_rows``) returns that column, so none is forgotten for
        it; the one read of it, the queue's stale workers, is right before or after it (a
        claim's worker is live, a finish only takes a worker away); and the signs of life
        carried for its row need not be written first (the two commute).
        """
        self._build = build
        self._writes = writes
        self._session_row = session_row
        self._rows = rows
        self._life_only = life_only
        self._counts_pending_life = counts_pending_life
        self._reads = None if reads is None else frozenset(reads)
        self._session_facts = session_facts
        self._adds = adds
        self._at_spans = at_spans
        self._counts_work = counts_work
        self._stmts: dict[str, Executable] = {}
        self._sqlite_sql: str | None = None
        self._defaults: dict[str, Any] = {}
        self._pg: _Pg | None = None

    def statement(self, dialect: str) -> Executable:
        """The SQLAlchemy statement for a dialect."""
        stmt = self._stmts.get(dialect)
        if stmt is None:
            stmt = self._stmts[dialect] = self._build(dialect)
        return stmt

    def _sql(self) -> str:
        if self._sqlite_sql is None:
            compiled = self.statement("sqlite").compile(dialect=_SQLITE)  # type: ignore[attr-defined]
            # Literal values in the statement (``id == 1``) become binds with defaults.
            self._defaults = {k: v for k, v in compiled.params.items() if v is not None}
            self._sqlite_sql = str(compiled)
        return self._sqlite_sql

    def _params(self, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return {**self._defaults, **params} if self._defaults else params

    def _asyncpg(self) -> _Pg:
        pg = self._pg
        if pg is None:
            pg = self._pg = _Pg(
                self.statement("postgresql"),
                self._writes,
                self._session_row,
                self._rows,
                self._life_only,
                self._counts_pending_life,
                self._reads,
                self._session_facts,
                self._adds,
                self._at_spans,
                self._counts_work,
            )
        return pg

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        """Every row, as tuples."""
        driver = conn.dialect.driver
        if driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            rows: Sequence[Sequence[Any]] = _driver(conn).execute(self._sql(), self._params(params)).fetchall()
            return rows
        execution = _EXECUTIONS.get(driver)
        if execution is not None:
            return execution.rows(conn, self._asyncpg(), params)
        return [tuple(r) for r in conn.execute(self.statement(conn.dialect.name), params)]

    def first(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Any] | None:
        """The first row, or None."""
        driver = conn.dialect.driver
        if driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            row: Sequence[Any] | None = _driver(conn).execute(self._sql(), self._params(params)).fetchone()
            return row
        execution = _EXECUTIONS.get(driver)
        if execution is not None:
            return execution.first(conn, self._asyncpg(), params)
        r = conn.execute(self.statement(conn.dialect.name), params).first()
        return None if r is None else tuple(r)

    def scalar(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        """The first column of the first row, or None."""
        row = self.first(conn, params)
        return None if row is None else row[0]

    def run(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Execute; returns the row count."""
        driver = conn.dialect.driver
        if driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            return int(_driver(conn).execute(self._sql(), self._params(params)).rowcount)
        execution = _EXECUTIONS.get(driver)
        if execution is not None:
            return execution.run(conn, self._asyncpg(), params)
        return int(conn.execute(self.statement(conn.dialect.name), params).rowcount)

    def write(self, conn: Connection, params: Mapping[str, Any]) -> None:
        """Execute a read model's write whose row count is not needed; in a PostgreSQL
        batch, deferred to the end of the command (see the module's docstring)."""
        execution = _EXECUTIONS.get(conn.dialect.driver)
        if execution is None or not execution.write(conn, self._asyncpg(), params):
            self.run(conn, params)

    def many(self, conn: Connection, params: Iterable[Mapping[str, Any]]) -> None:
        """Execute once per parameter set (executemany)."""
        driver = conn.dialect.driver
        if driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            _driver(conn).executemany(self._sql(), (self._params(x) for x in params))
            return
        execution = _EXECUTIONS.get(driver)
        if execution is not None:
            execution.many(conn, self._asyncpg(), params)
            return
        conn.execute(self.statement(conn.dialect.name), list(params))


class Execution(ABC):
    """How a backend runs prepared statements on its driver, in and out of its write
    transactions (PostgreSQL: raw asyncpg, with the batch's deferred and carried writes:
    ``store/postgres/statements.py``). Installed by driver name (:func:`install`)."""

    @abstractmethod
    def rows(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        """Every row of ``pg``."""

    @abstractmethod
    def first(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> Sequence[Any] | None:
        """The first row of ``pg``, or None."""

    @abstractmethod
    def run(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> int:
        """Execute ``pg``; its row count."""

    @abstractmethod
    def write(self, conn: Connection, pg: _Pg, params: Mapping[str, Any]) -> bool:
        """Take a read model's write to send later; False: not here, run it now."""

    @abstractmethod
    def many(self, conn: Connection, pg: _Pg, params: Iterable[Mapping[str, Any]]) -> None:
        """Execute ``pg`` once per parameter set."""

    @abstractmethod
    def pending_signs_of_life(self, conn: Connection) -> list[str]:
        """The sessions whose sign of life the running transaction has not sent yet."""


_EXECUTIONS: dict[str, Execution] = {}


def install(driver: str, execution: Execution) -> None:
    """Run prepared statements on connections of ``driver`` (SQLAlchemy's name) by ``execution``."""
    _EXECUTIONS[driver] = execution


def pending_signs_of_life(conn: Connection) -> list[str]:
    """The sessions whose sign of life the running PostgreSQL batch has deferred, not sent
    yet: a statement that may go with them (``counts_pending_life``) counts them as live."""
    execution = _EXECUTIONS.get(conn.dialect.driver)
    return [] if execution is None else execution.pending_signs_of_life(conn)


def text_list(conn: Connection, values: Iterable[str]) -> object:
    """A list of strings as one parameter of a prebuilt statement: an array on PostgreSQL
    (``CAST(:p AS text[])``, ``unnest``), a JSON array on SQLite (``json_each(:p)``)."""
    listed = list(values)
    return listed if conn.dialect.name == "postgresql" else json.dumps(listed)


def indexed_by(dialect: str, statement: Executable, table: str, index: str) -> Executable:
    """``statement``, but on SQLite with ``table`` read through ``index`` only (``INDEXED BY``).

    For a statement whose index SQLite cannot be steered to otherwise: every index that
    could serve it leads with the same column (the workspace), and without statistics SQLite
    may take the one that reads the workspace's every row. SQLAlchemy renders no table hints
    for SQLite, so the statement is compiled once and the clause put after ``FROM table``.
    """
    if dialect != "sqlite":
        return statement
    assert isinstance(statement, ClauseElement)
    sql = str(statement.compile(dialect=sqlite.dialect(paramstyle="named")))
    marker = f"FROM {table} "
    if marker not in sql:
        raise ValueError(f"no 'FROM {table}' in {sql!r}")
    return sql_text(sql.replace(marker, f"FROM {table} INDEXED BY {index} ", 1))


def unindexed(column: Any) -> ColumnElement[Any]:
    """``column || ''``: the same value, but no index on ``column`` can serve a comparison.

    For a column a statement checks but must not search by: a planner without statistics
    would otherwise take any index that leads with it (a workspace's every row), where only
    one index is meant to serve the statement (0011_one_index_each).
    """
    result: ColumnElement[Any] = column.op("||")(literal_column("''"))
    return result


_WRITE = re.compile(r"\b(INSERT|DELETE|MERGE|TRUNCATE)\b|(?<!\bFOR )(?<!\bFOR NO KEY )\bUPDATE\b", re.IGNORECASE)


def writes_sql(sql: str) -> bool:
    """Whether SQL text may write a row: it names INSERT, UPDATE (not a ``FOR UPDATE`` lock), DELETE …"""
    return _WRITE.search(sql) is not None


_SESSIONS = re.compile(r"\bsessions\b", re.IGNORECASE)
