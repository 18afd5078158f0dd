"""PostgreSQL backend: one transaction per command, decided by row locks in the database.

Runs at READ COMMITTED: guards are explicit row locks (``SELECT ... FOR UPDATE`` on the
project, workspace or session row a decision depends on), the one-row position counter is
updated last so commits are ordered by position, and a race lost inside the database
(deadlock, serialisation failure, a unique key taken concurrently) is decided again.
Several replicas share nothing but this database.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from eventcoord.errors import ConcurrencyError, StoreError
from eventcoord.store.base import EventStore, upgrade

T = TypeVar("T")
RETRIES = 12
# serialization_failure, deadlock_detected, unique_violation, lock_not_available
_RETRYABLE = {"40001", "40P01", "23505", "55P03"}
_MIGRATION_LOCK = 0x6576636F  # "evco": one replica migrates at a time


def _sqlstate(e: DBAPIError) -> str | None:
    orig: Any = e.orig
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


class PostgresEventStore(EventStore):
    """Event store on PostgreSQL through asyncpg (production, several replicas)."""

    dialect = "postgresql"

    def __init__(self, url: str, pool_size: int = 20) -> None:
        super().__init__(url)
        self._pool_size = pool_size
        self._engine: AsyncEngine | None = None

    @property
    def engine(self) -> AsyncEngine:
        assert self._engine is not None, "store not started"
        return self._engine

    async def start(self) -> None:
        self._engine = create_async_engine(
            self.url, pool_size=self._pool_size, max_overflow=self._pool_size, pool_pre_ping=False
        )

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()

    async def migrate(self) -> None:
        engine = self._engine or create_async_engine(self.url)

        def run(conn: Connection) -> None:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
            upgrade(conn)

        async with engine.begin() as conn:
            await conn.run_sync(run)
        if self._engine is None:
            await engine.dispose()

    async def transact(self, fn: Callable[[Connection], T], *, retry: bool = True) -> T:
        attempts = RETRIES if retry else 1
        for attempt in range(attempts):
            try:
                async with self.engine.begin() as conn:
                    return await conn.run_sync(fn)
            except ConcurrencyError:
                if attempt == attempts - 1:
                    raise
            except IntegrityError as e:
                if _sqlstate(e) != "23505":  # only a unique key taken concurrently is a race
                    raise StoreError(f"postgresql: {e.orig}") from e
                if not retry or attempt == attempts - 1:
                    raise ConcurrencyError(f"lost a race: {e.orig}") from e
            except DBAPIError as e:
                if _sqlstate(e) not in _RETRYABLE:
                    raise StoreError(f"postgresql: {e.orig}") from e
                if attempt == attempts - 1:
                    raise ConcurrencyError(f"lost a race {attempts} times: {e.orig}") from e
            # Jittered backoff so racing replicas do not collide in lock-step again.
            await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise ConcurrencyError("retries exhausted")

    async def query(self, fn: Callable[[Connection], T]) -> T:
        async with self.engine.connect() as conn:
            return await conn.run_sync(fn)
