"""Read models built from the event stream: one module per read model.

``PROJECTIONS`` is the table of contents. ``apply`` runs inline, in the command's own
transaction; ``rebuild`` empties every read-model table and replays the log from 0
through the same functions, so a rebuild equals the live read models exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, delete

from eventcoord.store import log
from eventcoord.store.log import RecordedEvent
from eventcoord.store.schema import store_head

from . import files, leases, messages, named_leases, queue, sessions, waits
from .base import Applier
from .tables import READ_MODEL_TABLES

PROJECTIONS = (sessions, leases, files, messages, queue, named_leases, waits)

_DISPATCH: dict[type, list[Applier]] = {}
for _module in PROJECTIONS:
    for _cls, _fn in _module.APPLIERS.items():
        _DISPATCH.setdefault(_cls, []).append(_fn)


def apply(conn: Connection, recorded: Iterable[RecordedEvent]) -> None:
    """Apply committed-in-this-transaction events to every inline read model."""
    for r in recorded:
        for fn in _DISPATCH.get(type(r.event), ()):
            fn(conn, r)
        sessions.sign_of_life(conn, r)


def rebuild(conn: Connection, batch: int = 5000) -> int:
    """Empty the read models and replay the whole log; returns the events applied.

    On PostgreSQL the read models and the position counter are locked EXCLUSIVE first:
    commands of other replicas wait for the rebuild to commit (reads go on), so none is
    applied twice or lost. SQLite's single write lock gives the same.
    """
    if conn.dialect.name == "postgresql":
        names = ", ".join(t.name for t in (*READ_MODEL_TABLES, store_head))
        conn.exec_driver_sql(f"LOCK TABLE {names} IN EXCLUSIVE MODE")
    for table in reversed(READ_MODEL_TABLES):
        conn.execute(delete(table))
    after, applied = 0, 0
    while True:
        page = log.read_recorded(conn, after, batch)
        if not page:
            return applied
        apply(conn, page)
        applied += len(page)
        after = page[-1].position
