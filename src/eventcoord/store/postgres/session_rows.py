"""Sessions rows a PostgreSQL batch reads for all its commands in one statement.

A heartbeat's whole cost on PostgreSQL is the locked read of its session's row, so before
its first command a fast pass reads the row of every command that said it will read one
(``SessionRead``), locked, ``SKIP LOCKED`` (with no wait it cannot close a cycle of waits),
in ``session_id`` order. The row is the command's read only if nothing in the batch wrote
that row since (``Batch.sessions_read``; docs/architecture.md#postgresql-reads-ahead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from eventcoord.store.postgres import batch
from eventcoord.store.prepared import Prepared


@dataclass(frozen=True, slots=True)
class SessionRead:
    """A command's first read: the row of ``session_id`` in ``workspace``, locked.

    ``statement`` reads many at once, locked and skipping locked rows: parameters ``ws``
    and ``sid`` (lists, pairwise), rows of the workspace, then the session's columns.
    """

    statement: Prepared
    workspace: str
    session_id: str


def read_ahead(conn: Connection, reads: Sequence[SessionRead]) -> None:
    """Read (locked) the rows of ``reads`` for the running batch, one statement per kind."""
    b = batch.current(conn)
    if b is None:
        return
    kinds: dict[Prepared, list[SessionRead]] = {}
    for r in reads:
        kinds.setdefault(r.statement, []).append(r)
    for statement, wanted in kinds.items():
        pairs = sorted({(r.workspace, r.session_id) for r in wanted})
        rows = statement.rows(conn, {"ws": [w for w, _ in pairs], "sid": [s for _, s in pairs]})
        for row in rows:
            b.sessions_read[row[1]] = (statement, row[0], tuple(row[1:]))


def read(conn: Connection, statement: Prepared, workspace: str, session_id: str) -> Sequence[Any] | None:
    """The row ``statement`` read ahead for ``session_id``, if it still holds (else None:
    the command reads it itself)."""
    b = batch.current(conn)
    if b is None or not b.sessions_read:
        return None
    found = b.sessions_read.get(session_id)
    if found is None or found[0] is not statement or found[1] != workspace:
        return None
    if b.liveness is not None and b.liveness.has(session_id):
        return None  # a heartbeat of it is carried: its own read sends that first
    return found[2]
