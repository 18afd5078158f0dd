"""Row locks a PostgreSQL batch's fast pass already holds, and guards locked ahead.

A command locks a guard row (a project's, the workspace's) so that the database
serialises the decisions that depend on it; the lock is held until the batch commits. A
later command of the same fast pass that locks the same row again would wait for nothing
and learn nothing: every statement after the first lock already reads what the row's
previous holder committed. So the fast pass remembers the rows it locked (``hold``) and
such a command skips the statement (``held``), or reads what it needs in one statement
instead of two (a claim: its session and the project's reads together).

Only a fast pass remembers: it has no savepoints, so nothing it locked is released
before it commits or rolls back as a whole (a careful pass rolls commands back to their
savepoints, which releases their row locks, and remembers nothing).

**Guards locked ahead** (``GuardLock``, ``lock_ahead``). Before its first command, a fast
pass locks in one statement the guard of every command that said it locks one first
(claim_issue: its project's; release_issue: its lease's project's): the rows missing are
inserted (``ON CONFLICT DO NOTHING``: ours until commit; a claim's), the existing ones
locked ``SKIP LOCKED``, all in key order. A row
another transaction holds is left to the command's own lock, which waits for it as it
always did; the read-ahead itself waits only for a transaction that is inserting the same
new guard, under the fast pass's short lock wait. A failure of it has no victim: the
commands are decided again in a careful pass (``pg_writer``).

File commands lock their workspace's own row instead of a guard (``GuardLock.table``):
it is locked ahead the same way, ``SKIP LOCKED``, except that a missing row is left to
the first command, which inserts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from eventcoord.store import batch
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
