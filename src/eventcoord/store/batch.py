"""The state of one PostgreSQL group-commit transaction, kept on its connection.

Commands of a batch are decided one after another in one transaction, but the position
counter is advanced only once, at the end (``store/pg_writer.py``), so that its row lock is
held from then to commit and no longer. Until then a command's events get *provisional*
positions: numbers far above any real position (``PROVISIONAL_BASE``), unique to this
database backend (its process id is part of them) and in the order the batch appends them.
Read models written in the batch carry them (a lease's id, a claim's position, ...); the
events themselves are staged here and inserted by the end statement with their real
positions, which also moves every provisional number in the read models to its real one.

A provisional number never leaves the transaction: the answers of a batch are finished
with a :data:`Resolve` function after the counter moved (see ``log.Pending``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

#: Provisional positions start here (real positions stay far below 2**62).
PROVISIONAL_BASE = 1 << 62
#: Room per backend process: a batch appends fewer events than this.
_PER_BACKEND = 1 << 24
_KEY = "eventcoord.batch"

#: Maps a position handed out inside a transaction to the one it commits with.
Resolve = Callable[[int], int]


def identity(position: int) -> int:
    """The resolve function where positions are final when handed out (SQLite)."""
    return position


class Requeue(Exception):
    """Run this job again in the next batch: not a lost race, just not decidable now.

    Raised when a command meets something an earlier command of the same batch has not
    finished yet (an idempotency record whose answer is written at commit).
    """


class Batch:
    """Provisional positions, staged events and deferred idempotency answers of a batch."""

    __slots__ = ("answers", "events", "lo", "next", "now_us", "raw", "ttl", "writes")

    def __init__(self, raw: Any, backend_pid: int) -> None:
        #: The asyncpg connection the batch runs on (the same transaction as SQLAlchemy's).
        self.raw = raw
        self.lo = PROVISIONAL_BASE + backend_pid * _PER_BACKEND
        self.next = self.lo
        self.now_us = 0
        self.ttl = 0
        #: Rows changed so far; a refused command that changed none needs no rollback.
        self.writes = 0
        #: Staged events, column by column (the end statement takes arrays).
        self.events: tuple[list[str], list[str], list[int], list[str], list[str], list[str], list[int]] = (
            [],
            [],
            [],
            [],
            [],
            [],
            [],
        )
        #: (workspace, command_id, answer) of idempotency records whose answer is written at the end.
        self.answers: list[tuple[str, str, Callable[[Resolve], str]]] = []

    def reset(self) -> None:
        """Forget everything (the transaction was rolled back)."""
        self.next = self.lo
        self.writes = 0
        for column in self.events:
            column.clear()
        self.answers.clear()

    def mark(self) -> tuple[int, int, int, int]:
        """Where the batch stands before a command runs (see :meth:`rewind`)."""
        return self.next, len(self.events[0]), len(self.answers), self.writes

    def rewind(self, mark: tuple[int, int, int, int]) -> None:
        """Undo a command rolled back to its savepoint: its positions go to the next one."""
        self.next, n_events, n_answers, self.writes = mark
        for column in self.events:
            del column[n_events:]
        del self.answers[n_answers:]

    def take(self, count: int) -> int:
        """Hand out ``count`` consecutive provisional positions; returns the first."""
        first = self.next
        self.next += count
        return first

    @property
    def appended(self) -> int:
        """Events staged so far."""
        return self.next - self.lo

    def last(self) -> int | None:
        """The newest provisional position handed out, if any."""
        return self.next - 1 if self.next > self.lo else None

    def resolver(self, base: int) -> Resolve:
        """Provisional → real, once the counter moved from ``base`` (identity for others)."""
        lo, hi, shift = self.lo, self.next, base - self.lo + 1

        def resolve(position: int) -> int:
            return position + shift if lo <= position < hi else position

        return resolve


def current(conn: Connection) -> Batch | None:
    """The batch running on ``conn``, if any (PostgreSQL writer only)."""
    b: Batch | None = conn.info.get(_KEY)
    return b


def attach(conn: Connection, batch: Batch | None) -> None:
    """Make ``batch`` the one running on ``conn`` (None detaches)."""
    if batch is None:
        conn.info.pop(_KEY, None)
    else:
        conn.info[_KEY] = batch
