"""The event-store contract, written once; each backend only adds why it differs.

A store runs functions over a synchronous SQLAlchemy ``Connection`` inside one database
transaction (``transact``) or a read (``query``). Everything that must be atomic — the
decision's reads, the append and the inline read models — happens inside one ``transact``.
"""

from __future__ import annotations

import importlib.resources
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

import msgspec
from sqlalchemy import Connection

from eventcoord.codec import EventMetadata, WireEvent
from eventcoord.commands import Command
from eventcoord.events import Event
from eventcoord.store import dbclock, log
from eventcoord.store.log import Expected, NewEvent, Pending, RecordedEvent

T = TypeVar("T")


class EventStore(ABC):
    """An append-only event log with a gap-free, commit-ordered global position."""

    #: ``sqlite`` or ``postgresql``.
    dialect: str

    def __init__(self, url: str) -> None:
        self.url = url

    @abstractmethod
    async def start(self) -> None:
        """Open connections and start background workers; call once before use."""

    @abstractmethod
    async def close(self) -> None:
        """Stop workers and release connections."""

    @abstractmethod
    async def migrate(self) -> None:
        """Apply every Alembic revision up to head (idempotent, safe with replicas)."""

    @overload
    async def transact(
        self, fn: Callable[[Connection], Pending[T]], *, retry: bool = True, command: tuple[str, Command] | None = None
    ) -> T: ...

    @overload
    async def transact(
        self, fn: Callable[[Connection], T], *, retry: bool = True, command: tuple[str, Command] | None = None
    ) -> T: ...

    async def transact(
        self, fn: Callable[[Connection], Any], *, retry: bool = True, command: tuple[str, Command] | None = None
    ) -> Any:
        """Run ``fn`` inside one write transaction and commit it.

        Concurrent calls may share one transaction (group commit): each ``fn`` sees what
        the ones before it wrote, and each succeeds or fails on its own. A ``DomainError``
        raised by ``fn`` rolls back everything ``fn`` wrote, and only that. With ``retry``,
        a race lost inside the database (serialisation failure, deadlock, a unique key
        taken concurrently, ConcurrencyError) runs ``fn`` again from scratch, in a later
        transaction; when retries run out the caller gets ConcurrencyError.

        Positions ``fn`` sees (``log.append``'s, ``log.head``'s) may be provisional until
        commit (PostgreSQL): a result that mentions them must be a
        :class:`~eventcoord.store.log.Pending`, whose ``finish`` the store calls with the
        final positions; ``transact`` returns what ``finish`` returns.

        ``command``: the (workspace, command) ``fn`` decides, if any. A backend may prepare
        for it: a PostgreSQL batch reads or locks ahead what the commands of a batch read
        first, in one statement each (``store/postgres/ahead/``).
        """
        return await self._write(fn, retry, command)

    @abstractmethod
    async def _write(self, fn: Callable[[Connection], Any], retry: bool, command: tuple[str, Command] | None) -> Any:
        """The backend's ``transact``: run ``fn`` in a write transaction, finish a Pending."""

    @abstractmethod
    async def query(self, fn: Callable[[Connection], T]) -> T:
        """Run a read-only ``fn``; it sees every transaction committed before the call."""

    async def query_one(self, fn: Callable[[Connection], T]) -> T:
        """Run a read-only ``fn`` that sends one statement; it sees every transaction committed
        before the call. PostgreSQL runs it outside a transaction: one round trip, no
        ``BEGIN`` and ``ROLLBACK`` around it (a second statement would see a later snapshot)."""
        return await self.query(fn)

    async def write_aside(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn``, a write that no command reads (the log's hash chain), and commit it.

        Off the commands' batches where the backend can (PostgreSQL: a pooled connection of
        its own); SQLite's one writer runs it like any write.
        """
        result: T = await self.transact(fn)
        return result

    async def append(
        self,
        workspace: str,
        stream: str,
        expected_version: Expected,
        new: Sequence[Event],
        **metadata: Any,
    ) -> list[RecordedEvent]:
        """Append events to one stream, failing with ConcurrencyError if its version moved."""
        meta = EventMetadata(workspace=workspace, **metadata)
        items = [NewEvent(stream, e, meta) for e in new]

        def run(conn: Connection) -> Pending[list[RecordedEvent]]:
            now_us, _ = dbclock.read(conn)
            recorded = log.append(conn, items, now_us, {stream: expected_version})
            return Pending(
                lambda real: [
                    msgspec.structs.replace(r, position=real(r.position), version=real.version(r.position, r.version))
                    for r in recorded
                ]
            )

        return await self.transact(run, retry=False)

    async def read(self, after: int = 0, limit: int = 100, workspace: str | None = None) -> list[WireEvent]:
        """Events after ``after`` in position order (optionally of one workspace)."""
        return await self.query(lambda c: log.read_wire(c, after, limit, workspace))

    async def head(self) -> int:
        """The newest committed position."""
        return await self.query(log.head)


def migrations_path() -> str:
    """Where the Alembic scripts live, in a checkout or an installed wheel."""
    return str(importlib.resources.files("eventcoord.migrations"))


def upgrade(conn: Connection) -> None:
    """Run Alembic's upgrade to head on an open connection."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", migrations_path())
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")
