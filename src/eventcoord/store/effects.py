"""What a statement's SQL says it touches: the table it writes, the tables it names, and the
rows it names by primary key, each column equal to one parameter.

``Prepared(writes=…, reads=…, rows=…)`` declare these by hand for SQL text, where SQLAlchemy
finds no tables; a declaration that disagrees with the statement would let a PostgreSQL
batch send a deferred write with a read it changes. ``derive`` reads them from the SQL (as
compiled for SQLite: named parameters), so that tests can hold every declaration to it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

_WRITE = re.compile(
    r"\b(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|DELETE\s+FROM|(?<!\bFOR\s)(?<!\bDO\s)(?<!\bKEY\s)UPDATE)\s+\"?(\w+)", re.I
)
_NAMED = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+\"?(\w+)", re.I)
_LOCK = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?UPDATE\b", re.I)
_INSERT_INTO = re.compile(
    r"\bINSERT\s+(?:OR\s+\w+\s+)?INTO\s+\"?(\w+)\"?\s*\(([^)]*)\)\s*(?:VALUES\s*\(([^)]*)\)|SELECT\s+(.*?)\s+FROM\b)",
    re.I | re.S,
)
_PARAMS = re.compile(r":(\w+)")


@dataclass(frozen=True)
class Effects:
    """What one statement touches, as its SQL says."""

    #: The tables it writes (INSERT, UPDATE, DELETE; not a ``FOR UPDATE`` lock).
    writes: frozenset[str]
    #: Every table of the schema it names.
    tables: frozenset[str]
    #: The tables whose rows it may lock (``FOR UPDATE``): those it names, when it locks.
    locks: frozenset[str]
    #: By table: the parameters equal to its primary key's columns, in key order, where
    #: the statement names that table alone and every key column is equal to a parameter.
    rows: dict[str, tuple[str, ...]] = field(default_factory=dict)


def derive(sql: str, primary_keys: Mapping[str, tuple[str, ...]]) -> Effects:
    """The effects of ``sql`` (named parameters, ``:name``) on the tables of
    ``primary_keys`` (table name → its primary key's columns)."""
    known = primary_keys.keys()
    writes = frozenset(t for t in _WRITE.findall(sql) if t in known)
    tables = frozenset(t for t in _NAMED.findall(sql) if t in known)
    rows: dict[str, tuple[str, ...]] = {}
    if len(tables) == 1:
        (table,) = tables
        key = _keyed(sql, table, primary_keys[table])
        if key is not None:
            rows[table] = key
    locks = tables if _LOCK.search(sql) else frozenset()
    return Effects(writes, tables, locks, rows)


def compared(sql: str, table: str, parameter: str, columns: Collection[str]) -> bool:
    """Whether ``sql`` sets one of ``columns`` of ``table`` to ``parameter``, or compares one
    with it (``col = :p``, ``t.col = CAST(:p AS text)``, ``col IS :p``, ``col IS NOT
    DISTINCT FROM :p``; an INSERT's values or selected values, by position)."""
    names = "|".join(re.escape(c) for c in columns)
    pattern = (
        rf"(?<![\w.])(?:\w+\.)?\"?(?:{names})\"?\s*(?:=|IS|IS\s+NOT\s+DISTINCT\s+FROM)\s*"
        rf"(?:CAST\(\s*)?:{re.escape(parameter)}\b"
    )
    if re.search(pattern, sql, re.I):
        return True
    inserted = _INSERT_INTO.search(sql)
    if inserted is None or inserted.group(1) != table:
        return False
    values = inserted.group(3) if inserted.group(3) is not None else inserted.group(4)
    given = dict(
        zip(
            (c.strip().strip('"') for c in inserted.group(2).split(",")),
            (v.strip().split()[0] if v.strip() else "" for v in values.split(",")),
            strict=False,
        )
    )
    return any(given.get(c) == f":{parameter}" for c in columns)


def _keyed(sql: str, table: str, key: Collection[str]) -> tuple[str, ...] | None:
    """The parameters ``sql`` sets or compares the key's columns of ``table`` to (None: not
    every column is, or not to a parameter)."""
    found: list[str] = []
    for column in key:
        match = re.search(rf"(?<![\w.])(?:{table}\.)?\"?{column}\"?\s*=\s*:(\w+)", sql)
        inserted = [p for p in _PARAMS.findall(sql) if compared(sql, table, p, (column,))]
        if match is not None:
            found.append(match.group(1))
        elif len(inserted) == 1:
            found.append(inserted[0])
        else:
            return None
    return tuple(found)
