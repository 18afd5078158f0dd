"""Every ``Prepared`` statement's declared effects agree with what its SQL says.

``Prepared(writes=…, reads=…, rows=…, session_row=…)`` are declared by hand; a PostgreSQL
batch trusts them to decide which deferred writes may go with a statement, so a wrong one
serves stale rows silently. For every statement of the package, the effects
``store/effects.py`` derives from its PostgreSQL SQL must agree with the declaration (only
PostgreSQL's batch reads them: SQLite runs each statement as it comes).
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import re
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.sql import TextClause

import eventcoord
from eventcoord.projections import keys
from eventcoord.store.effects import compared, derive
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import metadata

_DIALECTS: dict[str, Any] = {"postgresql": PGDialect(paramstyle="named")}  # type: ignore[no-untyped-call]
_PRIMARY_KEYS = {t.name: tuple(c.name for c in t.primary_key.columns) for t in metadata.tables.values()}
_COLUMNS = {t.name: tuple(c.name for c in t.columns) for t in metadata.tables.values()}
#: Parameters that name rows by ranges of a key (a ``KeySpans``), given for the batch, not bound.
_SPANS = {"spans", "rows"}


def _every_prepared() -> list[Prepared]:
    for module in pkgutil.walk_packages(eventcoord.__path__, "eventcoord."):
        if ".migrations." not in module.name and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    return [o for o in gc.get_objects() if isinstance(o, Prepared)]


def _statements() -> list[tuple[Prepared, str, str, bool]]:
    """(statement, dialect, its SQL with named parameters, whether it is SQL text)."""
    out = []
    for p in _every_prepared():
        for name, dialect in _DIALECTS.items():
            stmt = None
            try:
                stmt = p.statement(name)
                sql = str(stmt.compile(dialect=dialect))
            # A statement PostgreSQL never runs: built with SQLite's own INSERT … ON CONFLICT,
            # which it cannot compile.
            except AttributeError:
                assert "sqlite" in p._build.__code__.co_filename
                continue
            out.append((p, name, sql, isinstance(stmt, TextClause)))
    # in an order of their own, not the garbage collector's: every xdist worker must collect
    # the same tests in the same order
    return sorted(
        out, key=lambda s: (s[1], s[2], s[0]._build.__code__.co_filename, s[0]._build.__code__.co_firstlineno)
    )


STATEMENTS = _statements()


def test_every_statement_is_found() -> None:
    assert len({id(p) for p, *_ in STATEMENTS}) > 100


def _disagreements(p: Prepared, sql: str, is_text: bool) -> list[str]:
    said = derive(sql, _PRIMARY_KEYS)
    wrong = []
    if p._writes is not None:
        if p._writes not in said.writes | said.locks:
            wrong.append(f"writes={p._writes!r}: it writes {set(said.writes)}, locks {set(said.locks)}")
        if said.writes - {p._writes}:
            wrong.append(f"writes={p._writes!r}: it also writes {set(said.writes - {p._writes})}")
    elif is_text and said.writes:
        wrong.append(f"SQL text that writes {set(said.writes)} declares no writes=")
    if p._reads is not None and not said.tables <= p._reads:
        wrong.append(f"reads={set(p._reads)}: it names {set(said.tables)}")
    bound = set(derive_params(sql))
    for table, names in (p._rows or {}).items():
        for name in names:
            if name not in bound:
                if name not in _SPANS:
                    wrong.append(f"rows={{{table!r}: …{name!r}…}}: no such parameter")
            elif not compared(sql, table, name, _COLUMNS[table]) and not _compared_with_a_key(sql, table, name):
                wrong.append(f"rows={{{table!r}: …{name!r}…}}: no column of {table} is compared with it")
    if p._session_row is not None and not compared(sql, "sessions", p._session_row, ("session_id",)):
        wrong.append(f"session_row={p._session_row!r}: no session_id is compared with it")
    return wrong


def derive_params(sql: str) -> list[str]:
    """The named parameters ``sql`` binds."""
    return re.findall(r"(?<!:):(\w+)", sql)


def _compared_with_a_key(sql: str, table: str, name: str) -> bool:
    """Whether a live key of ``table`` (``projections/keys.py``) is compared with ``name``."""
    return any(k.table == table and f"{k.sql()} = :{name}" in sql for k in keys.KEYS)


@pytest.mark.parametrize(
    ("prepared", "dialect", "sql", "is_text"),
    STATEMENTS,
    ids=[f"{d}:{' '.join(sql.split())[:60]}" for _, d, sql, _ in STATEMENTS],
)
def test_declared_effects_agree_with_the_statement(prepared: Prepared, dialect: str, sql: str, is_text: bool) -> None:
    assert _disagreements(prepared, sql, is_text) == []


def test_effects_are_derived_from_the_sql() -> None:
    said = derive("UPDATE work_items SET status = :s WHERE work_items.item_id = :item", _PRIMARY_KEYS)
    assert (said.writes, said.tables, said.locks, said.rows) == (
        {"work_items"},
        {"work_items"},
        frozenset(),
        {"work_items": ("item",)},
    )
    said = derive("INSERT INTO work_blockers (workspace, blocker_id, item_id) VALUES (:ws, :b, :i)", _PRIMARY_KEYS)
    assert said.writes == {"work_blockers"} and said.rows == {"work_blockers": ("ws", "b", "i")}
    said = derive("SELECT name FROM workspaces WHERE name = :ws FOR UPDATE", _PRIMARY_KEYS)
    assert (said.writes, said.locks, said.rows) == (frozenset(), {"workspaces"}, {"workspaces": ("ws",)})
    said = derive("SELECT 1 FROM leases JOIN sessions ON sessions.session_id = leases.session_id", _PRIMARY_KEYS)
    assert said.tables == {"leases", "sessions"} and said.rows == {}


def test_a_wrong_declaration_is_caught() -> None:
    wrong = Prepared(
        lambda d: text("UPDATE leases SET released_us = :at WHERE lease_id = :id"),
        writes="file_claims",
        rows={"leases": ("issue",)},
    )
    sql = str(wrong.statement("postgresql").compile(dialect=_DIALECTS["postgresql"]))
    assert len(_disagreements(wrong, sql, True)) == 3
