"""The migrations build exactly the schema the tables declare, on both backends.

Alembic's autogenerate compares the migrated database with the metadata
(``store/schema.py``, ``projections/tables.py``): every table, column, type, default and
index. Alembic compares an index's columns and expressions but not its ``WHERE``, nor on
PostgreSQL an expression's collation or constants (it drops quotes before comparing), so a
second check compares every index as the database itself states it (PostgreSQL's
``pg_indexes``, SQLite's ``PRAGMA index_xinfo`` and partial predicate) in the migrated
database and in one built from the metadata alone.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Connection, Index, text
from sqlalchemy.ext.asyncio import create_async_engine
from tests.conftest import _db_url_for, _pg_exec

from eventcoord.projections import keys
from eventcoord.store.schema import metadata


@contextmanager
def _declared_for(dialect: str) -> Iterator[None]:
    """The metadata as ``dialect`` gets it: without the indexes declared for another backend
    only (``ddl_if``), which may share a name with this backend's own."""
    others: list[tuple[Any, Index]] = []
    for table in metadata.tables.values():
        for index in list(table.indexes):
            only = index._ddl_if.dialect if index._ddl_if is not None else None
            if only is not None and only != dialect:
                table.indexes.discard(index)
                others.append((table, index))
    try:
        yield
    finally:
        for table, index in others:
            table.indexes.add(index)


def _differences(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "compare_server_default": True,
            "include_name": lambda name, kind, parent: not (kind == "table" and name == "alembic_version"),
        },
    )
    with _declared_for(conn.dialect.name):
        return list(compare_metadata(context, metadata))


def _uncomparable(differences: list[Any]) -> set[str]:
    """The indexes Alembic reports as dropped and created again because it cannot compare
    their expressions: PostgreSQL states a ``CASE`` with casts and ``ELSE NULL`` that its
    clean-up of the expression's text does not undo (the live keys)."""
    removed = {d[1].name for d in differences if d[0] == "remove_index"}
    return {
        d[1].name
        for d in differences
        if d[0] == "add_index" and d[1].name in removed and not all(isinstance(e, Column) for e in d[1].expressions)
    }


def _stated_alike(conn: Connection, names: set[str]) -> dict[str, tuple[str, str]]:
    """For each index of ``names``: how PostgreSQL states the migrated one and one built
    from its declaration (in a savepoint, rolled back), named alike."""
    with _declared_for("postgresql"):
        declared = {i.name: i for t in metadata.tables.values() for i in t.indexes if i.name in names}
    stated: dict[str, tuple[str, str]] = {}
    for name in sorted(names):
        index = declared[name]
        twin = Index(f"{name}_declared", *index.expressions, **index.kwargs)
        twin._set_parent(index.table)  # type: ignore[arg-type]
        try:
            with conn.begin_nested() as savepoint:
                twin.create(conn)
                sql = "SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN (:a, :b)"
                defs = {str(n): str(d) for n, d in conn.execute(text(sql), {"a": name, "b": twin.name})}
                savepoint.rollback()
        finally:
            index.table.indexes.discard(twin)  # type: ignore[union-attr]
        stated[name] = (defs[name], defs[twin.name].replace(twin.name, name))
    return stated


async def test_autogenerate_finds_no_difference(store: Any, backend: str) -> None:
    differences = await store.query(_differences)
    uncomparable = _uncomparable(differences) if backend == "postgresql" else set()
    # Only the live keys' indexes, each compared instead as PostgreSQL states it.
    assert uncomparable <= {k.index for k in keys.KEYS}
    rest = [d for d in differences if not (d[0] in ("add_index", "remove_index") and d[1].name in uncomparable)]
    assert rest == []
    if uncomparable:
        stated = await store.query(lambda c: _stated_alike(c, uncomparable))
        for name, (migrated, declared) in stated.items():
            assert migrated == declared, name


def _indexes(conn: Connection) -> dict[str, Any]:
    """Every index as the database states it, whatever the text that created it."""
    if conn.dialect.name == "postgresql":
        sql = (
            "SELECT indexname, indexdef FROM pg_indexes"
            " WHERE schemaname = current_schema() AND tablename <> 'alembic_version'"
        )
        return {str(n): str(d) for n, d in conn.exec_driver_sql(sql)}
    found: dict[str, Any] = {}
    listed = "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    for name, table, sql in list(conn.exec_driver_sql(listed)):
        columns = [tuple(r) for r in conn.exec_driver_sql(f"PRAGMA index_xinfo('{name}')")]
        where = re.split(r"\bWHERE\b", sql, maxsplit=1, flags=re.I)[1:]
        predicate = re.sub(r"[\s()]+", " ", where[0]).strip().lower() if where else None
        unique = sql.upper().startswith("CREATE UNIQUE")
        found[name] = (table, unique, columns, predicate)
    return found


async def test_every_index_is_the_one_the_tables_declare(store: Any, backend: str, tmp_path: Any) -> None:
    migrated = await store.query(_indexes)
    name = f"ec_declared_{uuid.uuid4().hex[:10]}"
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/declared.db"
    else:
        await _pg_exec(f'CREATE DATABASE "{name}"')
        url = _db_url_for(name)
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            declared = await conn.run_sync(lambda c: (metadata.create_all(c), _indexes(c))[1])
    finally:
        await engine.dispose()
        if backend == "postgresql":
            await _pg_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert declared  # the comparison compares something
    assert migrated == declared
