"""The event store: contract, backends and the SQL they share."""

from __future__ import annotations

from eventcoord.store.base import EventStore


def open_store(url: str) -> EventStore:
    """The store for a SQLAlchemy URL: ``sqlite+aiosqlite:///…`` or ``postgresql+asyncpg://…``."""
    if url.startswith("sqlite"):
        from eventcoord.store.sqlite import SqliteEventStore

        return SqliteEventStore(url)
    if url.startswith("postgresql"):
        from eventcoord.store.postgres import PostgresEventStore

        if url.startswith("postgresql://"):
            url = "postgresql+asyncpg://" + url[len("postgresql://") :]
        return PostgresEventStore(url)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite+aiosqlite:/// or postgresql+asyncpg://")


__all__ = ["EventStore", "open_store"]
