"""Read models built from the event stream: one module per read model.

``PROJECTIONS`` is the table of contents. ``apply`` runs inline, in the command's own
transaction; ``rebuild`` empties every read-model table and replays the log from 0
through the same functions, so a rebuild equals the live read models exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, delete

from eventcoord.events import AgentEnded, AgentHeartbeat, AgentRegistered
from eventcoord.store import log, transaction
from eventcoord.store.log import RecordedEvent
from eventcoord.store.schema import store_head

from . import files, leases, messages, named_leases, queue, sessions, tables, waits
from .base import Applier
from .tables import READ_MODEL_TABLES

PROJECTIONS = (sessions, leases, files, messages, queue, named_leases, waits)

#: The tables each projection owns, by name (``rebuild(only=NAME)`` empties and refills those).
OWNED: dict[str, tuple[Table, ...]] = {
    "sessions": (tables.sessions, tables.session_work),
    "leases": (tables.projects, tables.issues, tables.leases, tables.project_leases),
    "files": (tables.file_claims, tables.conflicts),
    "messages": (tables.messages,),
    "queue": (tables.work_items, tables.work_blockers, tables.work_ledger),
    "named_leases": (tables.named_leases, tables.named_lease_slots),
    "waits": (tables.waits,),
}

_DISPATCH: dict[type, list[Applier]] = {}
for _module in PROJECTIONS:
    for _cls, _fn in _module.APPLIERS.items():
        _DISPATCH.setdefault(_cls, []).append(_fn)


def _run(
    conn: Connection, recorded: Iterable[RecordedEvent], dispatch: Mapping[type, Sequence[Applier]], life: bool
) -> None:
    """Apply ``recorded`` in order through ``dispatch``; ``life``: keep the sessions' liveness too.

    Heartbeats and signs of life are folded per session (``sessions.Liveness``) and written
    before anything else touches that session's row, and at the end. In a PostgreSQL
    batch's fast pass a heartbeat is instead carried on the batch (and so is every later
    sign of life of its session), to be written with the others' before anything reads
    that row and before the batch ends (``store/postgres/statements.py``): a heartbeat then costs
    one round trip, its read. A session's liveness is pending in one fold at a time, so
    the two folds never reorder its writes.
    """
    b = transaction.current(conn) if life else None
    carry = b is not None and b.carry
    folded = sessions.Liveness()
    for r in recorded:
        e = r.event
        if life:
            if type(e) is AgentHeartbeat:
                if carry:
                    # Its command read the row locked (load_session(lock=True)): the batch's
                    # end statement writes what is carried, and must wait for no row lock.
                    assert b is not None
                    folded.flush(conn, e.session_id)  # its signs of life so far go first
                    _carried(b).heartbeat(r)
                else:
                    folded.heartbeat(r)
            elif isinstance(e, (AgentRegistered, AgentEnded)):
                # their appliers write the row: what is pending for it goes first
                folded.flush(conn, e.session_id)
                if b is not None and b.liveness is not None:
                    b.liveness.flush(conn, e.session_id)
            elif b is not None and b.liveness is not None and b.liveness.has(r.metadata.session_id):
                b.liveness.sign_of_life(r)
            else:
                folded.sign_of_life(r)
        for fn in dispatch.get(type(e), ()):
            fn(conn, r)
    if life:
        folded.flush(conn)


def _carried(b: transaction.Transaction) -> sessions.Liveness:
    """The batch's carried liveness (begun if none is carried); carrying counts as a write:
    a refusal after it must roll the pass back."""
    if b.liveness is None:
        b.liveness = sessions.Liveness()
    b.wrote()
    live: sessions.Liveness = b.liveness
    return live


def apply(conn: Connection, recorded: Iterable[RecordedEvent]) -> None:
    """Apply committed-in-this-transaction events to every inline read model."""
    _run(conn, recorded, _DISPATCH, True)


#: Tables a projection's appliers read besides their own (the queue's ledger names a
#: session's actor and host; an item enqueued or re-queued reads who holds its issue): a
#: replay of that projection needs them, and their owners.
READS: dict[str, tuple[Table, ...]] = {"queue": (tables.sessions, tables.leases)}

_MODULES = {m.__name__.rpartition(".")[2]: m for m in PROJECTIONS}


def needed_for(wanted: Iterable[Table]) -> tuple[frozenset[str], frozenset[Table]]:
    """What keeps ``wanted`` tables right in a replay: the projections to run, the tables to load.

    Each projection's appliers write only its own tables (:data:`OWNED`) and read only those
    and its :data:`READS`, so replaying the owners of ``wanted`` (and, transitively, the
    owners of what they read) from rows of ``wanted`` (and what they read) leaves ``wanted``
    exactly as a full replay would. Their other tables are written too but not meaningful.
    """
    load = set(wanted)
    names: set[str] = set()
    while True:
        more = {name for name, owned in OWNED.items() if name not in names and load.intersection(owned)}
        if not more:
            return frozenset(names), frozenset(load)
        names |= more
        for name in more:
            load.update(READS.get(name, ()))


def applier_of(names: Iterable[str]) -> Any:
    """``apply`` restricted to some projections (a key of :data:`OWNED` each)."""
    chosen = set(names)
    if chosen == set(OWNED):
        return apply
    dispatch: dict[type, list[Applier]] = {}
    for name in OWNED:
        if name in chosen:
            for cls, fn in _MODULES[name].APPLIERS.items():
                dispatch.setdefault(cls, []).append(fn)
    life = "sessions" in chosen

    def apply_some(conn: Connection, recorded: Iterable[RecordedEvent]) -> None:
        _run(conn, recorded, dispatch, life)

    return apply_some


def rebuild(
    conn: Connection,
    batch: int = 5000,
    *,
    only: str | None = None,
    base_position: int = 0,
    base_rows: Mapping[str, Sequence[Sequence[Any]]] | None = None,
) -> int:
    """Empty the read models and replay the whole log; returns the events applied.

    ``only`` names one projection (a key of :data:`OWNED`): just its tables are emptied
    and refilled, through just its appliers. After an archive the log starts later: the
    read models start from ``base_rows`` (a snapshot's rows by table, columns in table
    order) and the replay from ``base_position``.

    On PostgreSQL the read models and the position counter are locked EXCLUSIVE first:
    commands of other replicas wait for the rebuild to commit (reads go on), so none is
    applied twice or lost. SQLite's single write lock gives the same.
    """
    if only is not None and only not in OWNED:
        raise ValueError(f"unknown projection {only!r}; one of {', '.join(OWNED)}")
    targets = READ_MODEL_TABLES if only is None else tuple(t for t in READ_MODEL_TABLES if t in OWNED[only])
    run = apply if only is None else applier_of((only,))
    if conn.dialect.name == "postgresql":
        names = ", ".join(t.name for t in (*READ_MODEL_TABLES, store_head))
        conn.exec_driver_sql(f"LOCK TABLE {names} IN EXCLUSIVE MODE")
    for table in reversed(targets):
        conn.execute(delete(table))
    # SQLite: indexes no applier uses are built once at the end (PostgreSQL would need an
    # ACCESS EXCLUSIVE lock to drop one, and reads go on during its rebuild).
    unused = (
        [i for t in targets for i in t.indexes if i.name in tables.REPLAY_FREE_INDEXES]
        if conn.dialect.name == "sqlite"
        else []
    )
    for index in unused:
        index.drop(conn)
    for table in targets:
        rows = (base_rows or {}).get(table.name)
        if rows:
            cols = [c.name for c in table.columns]
            conn.execute(table.insert(), [dict(zip(cols, row, strict=True)) for row in rows])
    base = base_rows or {}
    if base.get(tables.work_items.name) and tables.work_items in targets:
        conn.execute(queue.MARK_ALL_HELD)  # (a snapshot from before 0017_queue_held has no marks)
    if base.get(tables.work_items.name) and tables.sessions in targets and not base.get(tables.session_work.name):
        # nor one from before 0018_stale_workers its items in work
        sessions.count_work_of_snapshot(conn, base[tables.work_items.name])
    after, applied = base_position, 0
    while True:
        page = log.read_recorded(conn, after, batch)
        if not page:
            break
        run(conn, page)
        applied += len(page)
        after = page[-1].position
    for index in unused:
        index.create(conn)
    return applied
