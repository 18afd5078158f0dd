"""The running write transaction, as the shared SQL sees it; each backend installs its own.

The log's SQL, the idempotency records, the clock and the projections run the same on
both backends. Where a backend's write transaction keeps something itself (SQLite's
counter and stream heads in memory; a PostgreSQL batch's provisional positions, staged
events, answers written at commit and writes carried to its end), it installs a
:class:`Transaction` on its connection (:func:`running`) and the shared code asks it
(:func:`current`). Positions a transaction hands out are final at commit (:class:`Resolve`).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection

#: ``log.append``'s expected version of a stream: None (any), 0 (new) or its version.
Expected = int | None
X = TypeVar("X", bound="Transaction")


class Resolve:
    """Maps a position handed out inside a transaction to the one it committed with.

    Positions outside the transaction's provisional range (already committed ones, or any
    on SQLite) map to themselves. Also knows the stream versions assigned at commit (see
    ``log.RecordedEvent``).
    """

    __slots__ = ("_hi", "_lo", "_shift", "_versions")

    def __init__(self, lo: int = 0, hi: int = 0, shift: int = 0, versions: Sequence[int] = ()) -> None:
        self._lo, self._hi, self._shift, self._versions = lo, hi, shift, versions

    def __call__(self, position: int) -> int:
        return position + self._shift if self._lo <= position < self._hi else position

    def version(self, position: int, version: int) -> int:
        """The stream version of the event at ``position`` (``version`` when it was known then)."""
        if self._lo <= position < self._hi and self._versions:
            return self._versions[position - self._lo]
        return version


#: The resolve of a transaction whose positions are final when handed out (SQLite).
identity = Resolve()


class Requeue(Exception):
    """Run this job again in the next transaction: not a lost race, just not decidable now.

    Raised when a command meets something an earlier command of the same batch has not
    finished yet (an idempotency record whose answer is written at commit).
    """


class Transaction(ABC):
    """What a backend's write transaction keeps itself; the defaults keep nothing more."""

    __slots__ = ()

    #: Whether it carries the sessions' signs of life and counts of work in progress to its
    #: end, where the backend writes them (``projections.sessions``); then ``liveness`` and
    #: ``work_counts`` hold what is carried (None: nothing).
    carry: bool = False
    liveness: Any = None
    work_counts: Any = None
    #: Whether idempotency answers are written at commit (:meth:`answer_at_commit`).
    answers_at_commit: bool = False

    @abstractmethod
    def positions(
        self, conn: Connection, workspace: str, counts: dict[str, int], expected: dict[str, Expected]
    ) -> tuple[dict[str, int | None], int]:
        """Positions for ``sum(counts)`` new events and the streams' first new versions
        (``counts`` by stream; a version None is assigned at commit); ConcurrencyError when a
        stream is not at its ``expected`` version. Returns (versions, first position)."""

    def stage(self, rows: list[dict[str, Any]]) -> bool:
        """Keep the events' rows to insert at commit (True), or not (False: insert them now)."""
        return False

    def stream_version(self, conn: Connection, workspace: str, stream: str) -> int | None:
        """A stream's version as this transaction keeps it (None: read the database's)."""
        return None

    def last_position(self) -> int | None:
        """The newest position handed out in this transaction (None: none)."""
        return None

    def reads_log(self) -> None:
        """A command reads the log: raise :class:`Requeue` if this transaction cannot show it all."""
        return None

    def clock(self) -> tuple[int, int] | None:
        """The database's clock and the TTL as this transaction read them once (None: read them)."""
        return None

    def answer_at_commit(self, workspace: str, command_id: str, answer: Callable[[Resolve], str]) -> None:
        """Write the answer of ``command_id`` once positions are final (``answers_at_commit``)."""
        raise NotImplementedError

    def wrote(self) -> None:
        """Count a write a refusal after it must roll back (with ``carry``: carrying one)."""
        return None


_running: dict[Connection, Transaction] = {}


def current(conn: Connection) -> Transaction | None:
    """The write transaction running on ``conn``, if a backend installed one."""
    return _running.get(conn)


@contextlib.contextmanager
def running(conn: Connection, transaction: X) -> Iterator[X]:
    """Make ``transaction`` the one running on ``conn`` meanwhile (the one before it after)."""
    before = _running.get(conn)
    _running[conn] = transaction
    try:
        yield transaction
    finally:
        if before is None:
            _running.pop(conn, None)
        else:
            _running[conn] = before


def attach(conn: Connection, transaction: Transaction | None) -> None:
    """Make ``transaction`` the one running on ``conn`` (None: no more)."""
    if transaction is None:
        _running.pop(conn, None)
    else:
        _running[conn] = transaction
