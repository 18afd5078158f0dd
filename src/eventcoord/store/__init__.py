"""The event store: contract, backends and the SQL they share."""

from __future__ import annotations

import os

from eventcoord.store.base import EventStore


def open_store(url: str) -> EventStore:
    """The store for a SQLAlchemy URL: ``sqlite+aiosqlite:///…`` or ``postgresql+asyncpg://…``."""
    if url.startswith("sqlite"):
        from eventcoord.store.sqlite.store import SqliteEventStore

        return SqliteEventStore(url)
    if url.startswith("postgresql"):
        from eventcoord.store.postgres.store import PostgresEventStore

        if url.startswith("postgresql://"):
            url = "postgresql+asyncpg://" + url[len("postgresql://") :]
        # Writers per replica (batches in flight); the benchmarks compare settings with it.
        writers = os.environ.get("EVENTCOORD_PG_WRITERS", "")
        return (
            PostgresEventStore(url, writers=int(writers))
            if writers.isdigit() and int(writers) > 0
            else PostgresEventStore(url)
        )
    raise ValueError(f"unsupported database URL {url!r}: use sqlite+aiosqlite:/// or postgresql+asyncpg://")


__all__ = ["EventStore", "open_store"]
