"""Statements built once and run cheaply on the hot path, on either backend.

Building a SQLAlchemy statement per call (``select().where()``, cache key, compile-cache
lookup) costs ~100 µs; the SQL itself costs a few. A :class:`Prepared` statement is built
once at import. In the SQLite writer (stdlib driver) it runs as fixed SQL text straight on
the driver connection of the current transaction (~3 µs); elsewhere (PostgreSQL, SQLite
reads through aiosqlite) through ``Connection.execute`` with the prebuilt statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql import Executable

_SQLITE = sqlite.dialect(paramstyle="named")


def _driver(conn: Connection) -> Any:
    """The DBAPI connection under ``conn``: same transaction, no SQLAlchemy layers."""
    return conn.connection.driver_connection


class Prepared:
    """One statement, built once per dialect by ``build(dialect_name)``."""

    def __init__(self, build: Callable[[str], Executable]) -> None:
        self._build = build
        self._stmts: dict[str, Executable] = {}
        self._sqlite_sql: str | None = None
        self._defaults: dict[str, Any] = {}

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

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        """Every row, as tuples."""
        if conn.dialect.driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            rows: Sequence[Sequence[Any]] = _driver(conn).execute(self._sql(), self._params(params)).fetchall()
            return rows
        return [tuple(r) for r in conn.execute(self.statement(conn.dialect.name), params)]

    def first(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Any] | None:
        """The first row, or None."""
        if conn.dialect.driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            row: Sequence[Any] | None = _driver(conn).execute(self._sql(), self._params(params)).fetchone()
            return row
        r = conn.execute(self.statement(conn.dialect.name), params).first()
        return None if r is None else tuple(r)

    def scalar(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        """The first column of the first row, or None."""
        row = self.first(conn, params)
        return None if row is None else row[0]

    def run(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Execute; returns the row count."""
        if conn.dialect.driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            return int(_driver(conn).execute(self._sql(), self._params(params)).rowcount)
        return int(conn.execute(self.statement(conn.dialect.name), params).rowcount)

    def many(self, conn: Connection, params: Iterable[Mapping[str, Any]]) -> None:
        """Execute once per parameter set (executemany)."""
        if conn.dialect.driver == "pysqlite":  # the SQLite writer (stdlib driver, on the event loop)
            _driver(conn).executemany(self._sql(), (self._params(x) for x in params))
            return
        conn.execute(self.statement(conn.dialect.name), list(params))
