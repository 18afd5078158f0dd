"""PostgreSQL for ``bench/history_reads.py``: a fresh database, and a copy of a SQLite store in it.

The copy moves every row of every table (log, stream heads, read models, snapshots and their
chunks) with ``COPY``, in batches, so PostgreSQL holds exactly the store that was filled and
measured on SQLite: the same events at the same positions and times, and the read models
and snapshots the pipeline derived from them. Filling PostgreSQL through the pipeline itself
runs at a few hundred commands/s on this machine (``docs/performance.md``), hours for 10 M.
"""

from __future__ import annotations

import sqlite3

import asyncpg

from eventcoord.store import open_store

BATCH = 50_000


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def fresh_database(server: str, name: str, *, reuse: bool = False, drop: bool = False) -> tuple[str, bool]:
    """``(url, created)`` of database ``name`` on ``server``: migrated and empty, or kept (``reuse``)."""
    base = server.rstrip("/").rsplit("/", 1)[0] if server.count("/") > 2 else server.rstrip("/")
    admin = await asyncpg.connect(_dsn(base) + "/postgres")
    try:
        exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if drop or (exists and not reuse):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            exists = False
        if drop:
            return "", False
        if not exists:
            await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = f"{base}/{name}"
    if not exists:
        store = open_store(url)
        await store.start()
        await store.migrate()
        await store.close()
    return url, not exists


async def copy_into_postgres(sqlite_path: str, pg_url: str) -> None:
    """Every row of the SQLite store at ``sqlite_path`` into the migrated PostgreSQL ``pg_url``."""
    lite = sqlite3.connect(sqlite_path)
    tables = [
        r[0]
        for r in lite.execute(
            "SELECT name FROM sqlite_master"
            " WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'alembic_version'"
        )
    ]
    pg = await asyncpg.connect(_dsn(pg_url))
    try:
        for table in tables:
            kinds = {
                r["column_name"]: r["data_type"]
                for r in await pg.fetch(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1", table
                )
            }
            if table != "events":  # the migration's own rows (store_head, settings …) are replaced
                await pg.execute(f'DELETE FROM "{table}"')
            cur = lite.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cur.description]
            flags = [kinds.get(c) == "boolean" for c in columns]
            blobs = [kinds.get(c) == "bytea" for c in columns]
            while batch := cur.fetchmany(BATCH):
                records = [
                    tuple(
                        bool(v) if f and v is not None else bytes(v) if b and v is not None else v
                        for v, f, b in zip(row, flags, blobs, strict=True)
                    )
                    for row in batch
                ]
                await pg.copy_records_to_table(table, records=records, columns=columns)
        for r in await pg.fetch(
            "SELECT table_name, column_name FROM information_schema.columns WHERE column_default LIKE 'nextval%'"
        ):
            await pg.execute(
                f"SELECT setval(pg_get_serial_sequence('\"{r['table_name']}\"', '{r['column_name']}'), "
                f'COALESCE((SELECT max("{r["column_name"]}") FROM "{r["table_name"]}"), 0) + 1, false)'
            )
        await pg.execute("VACUUM ANALYZE")
    finally:
        await pg.close()
        lite.close()
