"""Read models of the work queue: ``work_items`` (current state) and ``work_ledger`` (audit).

The ledger is the queue's audit trail: one row per transition naming the session, actor and
host that made it, when, and a detail (fencing token, outcome or re-queue reason).
Actor and host of a session never change, so they are looked up from ``sessions``. Every
statement is built once (``Prepared``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, null, select, text, update
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.selectable import ScalarSelect

from eventcoord.codec import encode
from eventcoord.events import (
    LeaseGranted,
    LeaseReleased,
    WorkClaimed,
    WorkEnqueued,
    WorkFinished,
    WorkRequeued,
    WorkStarted,
)
from eventcoord.store.key_spans import KeySpans
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared, text_list, unindexed

from . import keys
from .base import Appliers
from .tables import QUEUED_ON_ISSUE, leases, sessions, work_blockers, work_items, work_ledger


def _insert_ledger(of_session: bool) -> Any:
    """A ledger line; ``of_session``: with the actor and host of its session (they never
    change), read by the insert itself: a deferrable write, where reading them first cost a
    round trip of its own on PostgreSQL for every start, finish and re-queue."""
    actor: Any = bindparam("actor")
    host: Any = bindparam("host")
    if of_session:
        of = sessions.c.session_id == bindparam("sid")
        actor = select(sessions.c.actor_key).where(of).scalar_subquery()
        host = select(sessions.c.host).where(of).scalar_subquery()
    return work_ledger.insert().values(
        position=bindparam("position"),
        workspace=bindparam("ws"),
        item_id=bindparam("item"),
        action=bindparam("action"),
        session_id=bindparam("sid"),
        actor_key=actor,
        host=host,
        detail=bindparam("detail"),
        recorded_us=bindparam("at"),
    )


#: A ledger line names its row by its position (the event's, unique): in a PostgreSQL batch
#: the lines of a batch's commands go together, rather than one flushing the one before it
#: (``Prepared(rows=…)``).
_LEDGER_ROW = {"work_ledger": ("position",)}
_INSERT_LEDGER = Prepared(lambda d: _insert_ledger(of_session=False), rows=_LEDGER_ROW)
_INSERT_LEDGER_OF_SESSION = Prepared(
    lambda d: _insert_ledger(of_session=True), writes="work_ledger", session_facts=True, rows=_LEDGER_ROW
)
# An item is found by its primary key, the only index this can use: the workspace is
# checked, not searched by (``|| ''``), or a planner without statistics takes any index that
# leads with the workspace and filters the workspace's every item (0011_one_index_each).
_ITEM = (work_items.c.item_id == bindparam("item")) & (unindexed(work_items.c.workspace) == bindparam("ws"))
#: An item's *live key* on PostgreSQL (``keys.WORK_LIVE``), compared by equality (one
#: probe: a list of keys cost more than a sequential scan of a small table, and a generic
#: plan made then was kept). ``ix_work_items_live_key`` (then ``priority DESC,
#: enqueued_position``) is the only index on it, so the queue's lookups of live items that
#: compare it, and name no other column of the item, have exactly one index to use with or
#: without statistics, and it holds no finished item. ``live_key`` and ``held_key`` build
#: the values it is compared with. (Qualified: the suspects' statement joins sessions.)
PG_LIVE_KEY = keys.WORK_LIVE.sql()
live_key = keys.work_live_key
held_key = keys.work_held_key
#: An item's *queued issue key* on PostgreSQL (``keys.WORK_QUEUED_ISSUE``): a pull at its
#: project's cap reads the queued items without an issue, or on one issue, by it, in pull
#: order. ``queued_issue_key`` builds the values it is compared with.
PG_QUEUED_ISSUE_KEY = keys.WORK_QUEUED_ISSUE.sql()
queued_issue_key = keys.work_queued_issue_key


#: Outcomes no transition leaves (domain/queue/transitions.py).
FINISHED = frozenset({"done", "failed", "oom_killed", "cancelled"})
# The statuses of some items, each by its primary key (the workspace checked, not searched
# by); on PostgreSQL a lateral probe per id (``OFFSET 0`` keeps it one: a generic plan of
# ``= ANY(…)`` made on an empty table scanned it). ``ids``: a :func:`text_list`.
STATUSES = Prepared(
    lambda d: text(
        "SELECT item_id, status FROM work_items WHERE item_id IN (SELECT value FROM json_each(:ids))"
        " AND workspace || '' = :ws"
        if d == "sqlite"
        else "SELECT w.item_id, w.status FROM unnest(CAST(:ids AS text[])) AS k(id) CROSS JOIN LATERAL ("
        "SELECT item_id, status FROM work_items WHERE item_id = k.id AND workspace || '' = :ws OFFSET 0) AS w"
    )
)


def statuses(conn: Connection, workspace: str, ids: Sequence[str]) -> dict[str, str]:
    """The statuses of the items ``ids`` of ``workspace`` that exist."""
    return {r[0]: r[1] for r in STATUSES.rows(conn, {"ids": text_list(conn, ids), "ws": workspace})}


#: A blocker's rows are named by the blocker (``Prepared(rows=…)``): in a PostgreSQL batch
#: the forgetting of one finished item's rows goes with another's, rather than flushing it.
_INSERT_BLOCKER = Prepared(
    lambda d: work_blockers.insert().values(
        workspace=bindparam("ws"), blocker_id=bindparam("blocker"), item_id=bindparam("item")
    ),
    rows={"work_blockers": ("ws", "blocker")},
)


_OF_BLOCKER = (work_blockers.c.workspace == bindparam("ws")) & (work_blockers.c.blocker_id == bindparam("item"))
#: A finished blocker's rows go: it blocks nothing that can still change.
_FORGET_BLOCKER = Prepared(lambda d: delete(work_blockers).where(_OF_BLOCKER), rows={"work_blockers": ("ws", "item")})


# The items a blocker that finished ``done`` blocked wait on one blocker fewer, each found by
# its primary key. PostgreSQL deletes the blocker's rows in the same statement (a CTE: both
# see one snapshot, so no order of the batch's deferred writes can delete them first);
# SQLite runs the two in order (``_FORGET_BLOCKER`` after). The join from the deleted rows
# probes the items by key (plan asserted: no plan, generic or made on a small table, hashes
# the work items for it).
def _unblock(d: str) -> Any:
    fewer = {"waiting_on": work_items.c.waiting_on - 1}
    if d == "sqlite":
        blockers = select(work_blockers.c.item_id).where(_OF_BLOCKER)
        return update(work_items).where(work_items.c.item_id.in_(blockers)).values(fewer)
    gone = delete(work_blockers).where(_OF_BLOCKER).returning(work_blockers.c.item_id).cte("unblocked")
    return update(work_items).where(work_items.c.item_id == gone.c.item_id).values(fewer)


_UNBLOCK = Prepared(_unblock)


def _finish_unblocking(d: str) -> Any:
    """PostgreSQL: an item finished ``done``, the items it blocked waiting on one fewer and
    its blocker rows gone, in one statement: one deferred write where two (its row's, then
    the others', which touch rows no key names) went one after the other, each alone, in a
    batch of finishes. The rows differ: no item blocks itself (its blockers existed before it)."""
    assert d == "postgresql", "SQLite runs _FINISHED, _UNBLOCK and _FORGET_BLOCKER in order"
    done: dict[str, Any] = {
        "status": bindparam("status"),
        "outcome": bindparam("outcome"),
        "updated_us": bindparam("at"),
        "held_by": null(),
    }
    finished = update(work_items).where(_ITEM).values(done).returning(work_items.c.item_id).cte("finished")
    unblock: Any = _unblock(d)
    return unblock.add_cte(finished)


_FINISH_UNBLOCKING = Prepared(_finish_unblocking)


def _blocker_finished(conn: Connection, workspace: str, item_id: str, done: bool) -> None:
    """The items ``item_id`` blocked wait on it no more if it finished ``done``; its rows go."""
    params = {"ws": workspace, "item": item_id}
    if done:
        _UNBLOCK.write(conn, params)
    if not done or conn.dialect.name == "sqlite":  # (PostgreSQL's _UNBLOCK deleted them)
        _FORGET_BLOCKER.write(conn, params)


def _holder(workspace: ColumnElement[Any], issue: ColumnElement[Any]) -> ScalarSelect[Any]:
    """Who holds ``issue``: its unreleased lease's session (through uq_leases_unreleased,
    the only index of leases by issue), NULL if none (or no issue)."""
    return (
        select(leases.c.session_id)
        .where((leases.c.workspace == workspace) & (leases.c.issue == issue) & leases.c.released_us.is_(None))
        .scalar_subquery()
    )


#: The writes of one item name it (``Prepared(rows=…)``): in a PostgreSQL batch the next
#: command's read of another item by its key (``handlers/queue.load_item``) may carry them.
#: Item ids are unique across workspaces. An issue's queued items are named by a span of
#: their on-issue key instead (``_MARK_HELD``), which no item id is taken to miss.
ONE_ITEM: dict[str, tuple[str, ...]] = {"work_items": ("item",)}


_INSERT_ITEM = Prepared(
    lambda d: work_items.insert().values(
        item_id=bindparam("item"),
        workspace=bindparam("ws"),
        project=bindparam("project"),
        issue=bindparam("issue"),
        priority=bindparam("priority"),
        payload=bindparam("payload"),
        blocked_by=bindparam("blocked_by"),
        paths=bindparam("paths"),
        status=bindparam("status"),
        enqueued_position=bindparam("position"),
        enqueued_us=bindparam("at"),
        updated_us=bindparam("at2"),
        attempts=bindparam("attempts"),
        waiting_on=bindparam("waiting"),
        held_by=_holder(bindparam("ws"), bindparam("issue")),
    ),
    rows=ONE_ITEM,
)
_CLAIMED = Prepared(
    lambda d: (
        update(work_items)
        .where(_ITEM)
        .values(
            status=bindparam("status"),
            session_id=bindparam("sid"),
            actor_key=bindparam("actor"),
            host=bindparam("host"),
            fencing_token=bindparam("token"),
            attempts=work_items.c.attempts + 1,
            updated_us=bindparam("at"),
            held_by=null(),  # (a mark of queued items only)
        )
    ),
    rows=ONE_ITEM,
)
_STARTED = Prepared(
    lambda d: update(work_items).where(_ITEM).values(status=bindparam("status"), updated_us=bindparam("at")),
    rows=ONE_ITEM,
)


_FINISHED = Prepared(
    lambda d: (
        update(work_items)
        .where(_ITEM)
        .values(status=bindparam("status"), outcome=bindparam("outcome"), updated_us=bindparam("at"), held_by=null())
    ),
    rows=ONE_ITEM,
)
_REQUEUED = Prepared(
    lambda d: (
        update(work_items)
        .where(_ITEM)
        .values(
            status=bindparam("status"),
            session_id=null(),
            actor_key=null(),
            host=null(),
            fencing_token=null(),
            updated_us=bindparam("at"),
            held_by=_holder(work_items.c.workspace, work_items.c.issue),
        )
    ),
    rows=ONE_ITEM,
)

#: A queued item's *on-issue key* on PostgreSQL (``keys.WORK_ON_ISSUE``):
#: ``ix_work_items_queued_on_issue`` (0017_queue_held) is the only index on it. SQLite
#: names its index of the same name (workspace, issue; partial).


def _mark_held(d: str) -> Any:
    if d == "sqlite":
        return text(
            "UPDATE work_items INDEXED BY ix_work_items_queued_on_issue SET held_by = :sid"
            f" WHERE workspace = :ws AND issue = :issue AND {QUEUED_ON_ISSUE}"
        )
    return (
        update(work_items).where(keys.WORK_ON_ISSUE.of(work_items) == bindparam("key")).values(held_by=bindparam("sid"))
    )


# It names its rows, an issue's queued items, by their on-issue key (``KeySpans``: one item's
# id is never taken to miss them), so that the marks of a batch's claims of other issues go
# together, with the next claim's reads (``Prepared(rows=…)``).
_MARK_HELD = Prepared(_mark_held, writes="work_items", rows={"work_items": ("rows",)})


#: Every queued item's mark, read from the leases (as 0017_queue_held fills it in): for read
#: models restored from a snapshot, whose rows carry no mark if it was written before the
#: column (``snapshots.table_rows`` gives them NULL). Idempotent; one statement.
MARK_ALL_HELD = (
    update(work_items).where(text(QUEUED_ON_ISSUE)).values(held_by=_holder(work_items.c.workspace, work_items.c.issue))
)


def issue_held(conn: Connection, workspace: str, issue: str, session_id: str | None) -> None:
    """The issue's queued items are held by ``session_id`` (None: by no one), as its lease's
    grant or release leaves them: a pull's indexes leave out the items others hold
    (0017_queue_held). One probe of the issue's queued items, usually none."""
    key = keys.work_on_issue_key(workspace, issue)
    params = {"sid": session_id, "ws": workspace, "issue": issue, "key": key, "rows": KeySpans.points((key,))}
    _MARK_HELD.write(conn, params)


def _ledger(
    conn: Connection,
    r: RecordedEvent,
    item_id: str,
    action: str,
    session_id: str | None,
    detail: str | None = None,
    actor_key: str | None = None,
    host: str | None = None,
) -> None:
    of_session = session_id is not None and actor_key is None
    if session_id is None and actor_key is None:
        actor_key = r.metadata.actor_key
    (_INSERT_LEDGER_OF_SESSION if of_session else _INSERT_LEDGER).write(
        conn,
        {
            "position": r.position,
            "ws": r.metadata.workspace,
            "item": item_id,
            "action": action,
            "sid": session_id,
            "actor": actor_key,
            "host": host,
            "detail": detail[:240] if detail else None,
            "at": r.recorded_us,
        },
    )


def enqueued(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkEnqueued)
    ws = r.metadata.workspace
    # It waits on each blocker not finished ``done``; one that may still finish is noted,
    # so that its ``done`` counts it down (a blocker that failed never will). Every blocker
    # is an item of the workspace (enqueue_work refuses others, and reads them locked so that
    # none finishes meanwhile). A replay that dropped the rows of finished items (the history
    # worker's scratch) misses some: those count as not waiting, so a count there may be low,
    # never high, and a pull checks each item's blockers anyway.
    blockers = list(dict.fromkeys(e.blocked_by))
    known = statuses(conn, ws, blockers) if blockers else {}
    for blocker in blockers:
        if blocker in known and known[blocker] not in FINISHED:
            _INSERT_BLOCKER.write(conn, {"ws": ws, "blocker": blocker, "item": e.item_id})
    _INSERT_ITEM.write(
        conn,
        {
            "item": e.item_id,
            "ws": r.metadata.workspace,
            "project": e.project,
            "issue": e.issue,
            "priority": e.priority,
            "payload": None if e.payload is None else encode(e.payload).decode(),
            "blocked_by": encode(e.blocked_by).decode(),
            "paths": encode(e.paths).decode(),
            "status": "queued",
            "position": r.position,
            "at": r.recorded_us,
            "at2": r.recorded_us,
            "attempts": 0,
            "waiting": sum(b in known and known[b] != "done" for b in blockers),
        },
    )
    _ledger(conn, r, e.item_id, "enqueued", r.metadata.session_id)


def claimed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkClaimed)
    params = {
        "item": e.item_id,
        "ws": r.metadata.workspace,
        "status": "claimed",
        "sid": e.session_id,
        "actor": e.actor_key,
    }
    _CLAIMED.write(conn, {**params, "host": e.host, "token": e.fencing_token, "at": r.recorded_us})
    detail = None if e.fencing_token is None else f"fencing_token={e.fencing_token}"
    _ledger(conn, r, e.item_id, "claimed", e.session_id, detail, e.actor_key, e.host)


def started(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkStarted)
    _STARTED.write(conn, {"item": e.item_id, "ws": r.metadata.workspace, "status": "running", "at": r.recorded_us})
    _ledger(conn, r, e.item_id, "started", e.session_id)


def finished(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkFinished)
    ws, at = r.metadata.workspace, r.recorded_us
    params = {"item": e.item_id, "ws": ws, "status": e.outcome, "outcome": e.outcome, "at": at}
    if e.outcome == "done" and conn.dialect.name == "postgresql":
        _FINISH_UNBLOCKING.write(conn, params)
    else:
        _FINISHED.write(conn, params)
        _blocker_finished(conn, r.metadata.workspace, e.item_id, e.outcome == "done")
    _ledger(conn, r, e.item_id, "finished", e.session_id, e.outcome)


def requeued(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkRequeued)
    _REQUEUED.write(conn, {"item": e.item_id, "ws": r.metadata.workspace, "status": "queued", "at": r.recorded_us})
    _ledger(conn, r, e.item_id, "requeued", e.session_id, e.reason)


def lease_granted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, LeaseGranted)
    issue_held(conn, r.metadata.workspace, e.issue, e.session_id)


def lease_released(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, LeaseReleased)
    issue_held(conn, r.metadata.workspace, e.issue, None)


APPLIERS: Appliers = {
    LeaseGranted: lease_granted,
    LeaseReleased: lease_released,
    WorkEnqueued: enqueued,
    WorkClaimed: claimed,
    WorkStarted: started,
    WorkFinished: finished,
    WorkRequeued: requeued,
}
