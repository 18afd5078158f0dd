"""The position counter and stream heads of one SQLite write transaction, kept in memory.

SQLite's writer holds the one write lock from a batch's first statement to its commit, so
the batch reads the counter and each stream's head once, hands out positions and versions
from memory and writes what it moved just before it commits (:meth:`LogHeads.flush`). A
batch starts from what the last committed batch left (:class:`KnownHeads`) only while
``PRAGMA data_version`` and the counter show nothing else wrote; a failed command is
rewound with its savepoint. PostgreSQL batches keep their own, provisional, positions
(``store/postgres/batch.py``). Why: docs/architecture.md#sqlite-the-counter-and-stream-heads-in-memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, bindparam
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql import Executable

from eventcoord.errors import ConcurrencyError
from eventcoord.store import transaction
from eventcoord.store.log import READ_HEAD, READ_STREAM
from eventcoord.store.prepared import Prepared
from eventcoord.store.schema import store_head, stream_heads
from eventcoord.store.transaction import Expected, Transaction

_WRITE_HEAD = Prepared(lambda d: store_head.update().where(store_head.c.id == 1).values(position=bindparam("p")))


def _write_streams(dialect: str) -> Executable:
    ins = sqlite.insert(stream_heads).values(
        workspace=bindparam("ws"), stream=bindparam("stream"), version=bindparam("v")
    )
    return ins.on_conflict_do_update(
        index_elements=[stream_heads.c.workspace, stream_heads.c.stream], set_={"version": ins.excluded.version}
    )


_WRITE_STREAMS = Prepared(_write_streams)

Mark = tuple[int | None, int]
#: Stream heads :class:`KnownHeads` keeps at most; past it, it forgets them all and starts over.
KNOWN_MAX = 65_536


class KnownHeads:
    """The counter and the stream heads as one writer's last committed batch left them.

    Kept between batches on the writer's connection. A batch trusts them only when no other
    connection committed since (:meth:`check`, as it starts) and the counter is where they
    say, when the batch first reads it (:meth:`LogHeads.take`, :meth:`LogHeads.version`).
    """

    __slots__ = ("_data_version", "position", "versions")

    def __init__(self) -> None:
        #: ``PRAGMA data_version`` at the last check: it changes when another connection commits.
        self._data_version: int | None = None
        #: The counter after the last committed batch (None: not known).
        self.position: int | None = None
        self.versions: dict[tuple[str, str], int] = {}

    def check(self, raw: Any) -> None:
        """At a batch's start, under its write lock (``raw``: the driver connection): forget
        everything if another connection committed since the last check."""
        (data_version,) = raw.execute("PRAGMA data_version").fetchone()
        if data_version != self._data_version:
            self.forget()
            self._data_version = data_version

    def forget(self) -> None:
        """Know nothing (a failed batch, a new connection): the next batch reads afresh."""
        self._data_version = None
        self.position = None
        self.versions.clear()

    def learn(self, heads: LogHeads) -> None:
        """What a batch read and moved, once it committed."""
        position = heads.position()
        if position is None:  # it never read the counter: it appended nothing
            return
        seen = heads.versions_seen()
        if not heads.trusted_known() or len(self.versions) + len(seen) > KNOWN_MAX:
            self.versions.clear()
        self.position = position
        self.versions.update(seen)


class LogHeads(Transaction):
    """The counter and the stream heads as this transaction has read and moved them."""

    __slots__ = ("_base", "_head", "_known", "_moved", "_undo", "_versions")

    def __init__(self, known: KnownHeads | None = None) -> None:
        #: What the writer's last batch left, trusted once the counter is read and matches.
        self._known = known
        #: The counter as the transaction first read it (None: not read yet).
        self._base: int | None = None
        #: The newest position handed out; None: none yet.
        self._head: int | None = None
        self._versions: dict[tuple[str, str], int] = {}
        self._moved: set[tuple[str, str]] = set()
        #: Each stream change as (stream, version before, whether it had moved before):
        #: what :meth:`rewind` undoes.
        self._undo: list[tuple[tuple[str, str], int, bool]] = []

    def _read_base(self, conn: Connection) -> int:
        """Read the counter, at the first need (as late as before, so that a job that wrote
        the log's tables itself earlier in the batch is seen), and trust the known heads only
        if it stands where they left it."""
        base = self._base = int(READ_HEAD.scalar(conn, {}))
        return base

    def take(self, conn: Connection, count: int) -> int:
        """Hand out ``count`` consecutive positions; returns the first."""
        head = self._head
        if head is None:
            head = self._base
            if head is None:
                head = self._read_base(conn)
        self._head = head + count
        return head + 1

    def head(self) -> int | None:
        """The newest position handed out in this transaction (None: none yet)."""
        return self._head

    def position(self) -> int | None:
        """The counter as this transaction leaves it (None: never read)."""
        return self._head if self._head is not None else self._base

    def trusted_known(self) -> bool:
        """Whether this transaction found the known heads still the database's (the counter
        read stands where they left it)."""
        return self._known is not None and self._base is not None and self._known.position == self._base

    def versions_seen(self) -> dict[tuple[str, str], int]:
        """Every stream head this transaction read or moved, as it leaves them."""
        return self._versions

    def version(self, conn: Connection, workspace: str, stream: str) -> int:
        """A stream's current version (0: no events yet)."""
        key = (workspace, stream)
        v = self._versions.get(key)
        if v is None:
            if self._base is None:
                self._read_base(conn)
            known = self._known
            v = known.versions.get(key) if known is not None and known.position == self._base else None
            if v is None:
                v = int(READ_STREAM.scalar(conn, {"ws": workspace, "stream": stream}) or 0)
            self._versions[key] = v
        return v

    def advance(self, conn: Connection, workspace: str, stream: str, count: int, expected: int | None) -> int:
        """Move a stream's head forward by ``count``; returns the first new version.

        ``expected`` (not None) must be the stream's current version, else
        :class:`ConcurrencyError`, as the database's own check would say.
        """
        current = self.version(conn, workspace, stream)
        if expected is not None and current != expected:
            if expected == 0:
                raise ConcurrencyError(f"stream {stream!r} already exists (expected version 0)")
            raise ConcurrencyError(f"stream {stream!r} is not at expected version {expected}")
        key = (workspace, stream)
        self._undo.append((key, current, key in self._moved))
        self._versions[key] = current + count
        self._moved.add(key)
        return current + 1

    # The running transaction, as the shared SQL sees it (``store/transaction.py``).

    def positions(
        self, conn: Connection, workspace: str, counts: dict[str, int], expected: dict[str, Expected]
    ) -> tuple[dict[str, int | None], int]:
        """From memory: the streams' heads move now, the counter hands out the positions."""
        versions: dict[str, int | None] = {
            s: self.advance(conn, workspace, s, counts[s], expected.get(s)) for s in counts
        }
        return versions, self.take(conn, sum(counts.values()))

    def stream_version(self, conn: Connection, workspace: str, stream: str) -> int | None:
        return self.version(conn, workspace, stream)

    def last_position(self) -> int | None:
        return self._head

    def mark(self) -> Mark:
        """Where the transaction stands before a command (see :meth:`rewind`)."""
        return self._head, len(self._undo)

    def rewind(self, mark: Mark) -> None:
        """Undo what the commands since ``mark`` moved (they were rolled back)."""
        self._head, undone = mark
        while len(self._undo) > undone:
            key, before, moved = self._undo.pop()
            self._versions[key] = before  # as read: still the database's
            if not moved:
                self._moved.discard(key)

    def flush(self, conn: Connection) -> None:
        """Write the counter and the heads this transaction moved (just before its commit)."""
        if self._head is not None:
            _WRITE_HEAD.run(conn, {"p": self._head})
        if self._moved:
            _WRITE_STREAMS.many(
                conn, [{"ws": ws, "stream": st, "v": self._versions[(ws, st)]} for ws, st in sorted(self._moved)]
            )
        self._moved.clear()
        self._undo.clear()


@contextlib.contextmanager
def running(conn: Connection, known: KnownHeads | None = None) -> Iterator[LogHeads]:
    """Keep the log's heads in memory for the transaction running on ``conn`` meanwhile,
    starting from the heads ``known`` where they still hold (:meth:`KnownHeads.check` ran).

    The caller calls :meth:`LogHeads.flush` before it commits, and :meth:`KnownHeads.learn`
    once it committed.
    """
    with transaction.running(conn, LogHeads(known)) as heads:
        yield heads
