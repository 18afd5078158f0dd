"""Row locks a PostgreSQL batch's fast pass already holds, and guards locked ahead.

A later command of a fast pass that locks a guard row the pass already holds skips the
statement (``held``), or reads what it needs in one statement instead of two; only a fast
pass remembers (it has no savepoints, so nothing it locked is released early). Before its
first command a fast pass locks the guards of its claims and releases, or the file
commands' workspace rows, in one statement (``GuardLock``, ``lock_ahead``), ``SKIP
LOCKED``; a failure of it has no victim. Why: docs/architecture.md#postgresql-reads-ahead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from eventcoord.store.postgres import batch
from eventcoord.store.prepared import Prepared

#: A row lock: its table, then the values of its key.
Lock = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GuardLock:
    """A command's first lock: the guard row ``key`` of ``workspace``.

    ``statement`` locks many at once: parameters ``ws`` and ``key`` (lists, pairwise);
    its rows are the ``(workspace, key)`` pairs it holds afterwards. A statement whose
    ``key`` names an issue locks the guard of the project of its unreleased lease, and
    its rows are ``(workspace, guard key, issue)`` (a release's, ``lease_guard``).

    ``table``: the table of the rows it locks, when not a guard: the statement's rows are
    then the values of the lock's key (a workspace's own row, which file claims lock:
    ``("workspaces", name)``; ``key`` is unused).
    """

    statement: Prepared
    workspace: str
    key: str
    table: str = "guards"
    #: What a statement whose ``key`` names something else (an issue, an item) notes it
    #: locked by it: ``(via, workspace, key)`` (``lease_guard``, ``item_guard``).
    via: str = "lease-guards"


def guard(workspace: str, key: str) -> Lock:
    """The lock of a guard row."""
    return ("guards", workspace, key)


def lease_guard(workspace: str, issue: str) -> Lock:
    """Noted when the guard of the project of an issue's unreleased lease was locked ahead
    (a release's); the lease's project is still to be checked against its guard."""
    return ("lease-guards", workspace, issue)


#: ``GuardLock.via`` of a statement that locks the guards of items' projects.
ITEM_GUARDS = "item-guards"


def item_guard(workspace: str, item_id: str) -> Lock:
    """Noted when the guard of the project of a work item was locked ahead (a transition's:
    an item never changes project)."""
    return (ITEM_GUARDS, workspace, item_id)


def held(conn: Connection, lock: Lock) -> bool:
    """Whether the running fast pass holds ``lock`` already (always False elsewhere)."""
    b = batch.current(conn)
    return b is not None and lock in b.locked


def hold(conn: Connection, lock: Lock) -> None:
    """Note that the running pass now holds ``lock`` (remembered by a fast pass only)."""
    b = batch.current(conn)
    if b is not None and b.carry:
        b.locked.add(lock)


def lock_ahead(conn: Connection, wanted: Sequence[GuardLock]) -> None:
    """Lock the guards of ``wanted`` for the running fast pass, one statement per kind."""
    b = batch.current(conn)
    if b is None or not b.carry:
        return
    kinds: dict[tuple[Prepared, str, str], set[tuple[str, str]]] = {}
    for g in wanted:
        kinds.setdefault((g.statement, g.table, g.via), set()).add((g.workspace, g.key))
    for (statement, table, via), keys in kinds.items():
        pairs = sorted(keys)
        rows = statement.rows(conn, {"ws": [w for w, _ in pairs], "key": [k for _, k in pairs]})
        for row in rows:
            if table != "guards":
                b.locked.add((table, *row))
                continue
            b.locked.add(guard(row[0], row[1]))
            if len(row) > 2:  # the issue whose lease's project it guards, the item whose project
                b.locked.add((via, row[0], row[2]))
                b.guard_of[(via, row[0], row[2])] = guard(row[0], row[1])
