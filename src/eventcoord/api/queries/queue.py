"""Reads of the work queue: items with their audit ledger."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

import msgspec
from sqlalchemy import Connection, Row, Select, select

from eventcoord.codec import format_time
from eventcoord.projections.tables import work_items, work_ledger

Status = Literal["queued", "claimed", "running", "done", "failed", "oom_killed", "cancelled"]
#: Item ids per IN (...) list: well under every backend's bind-parameter limit.
CHUNK = 500


class LedgerEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One transition of an item: who (session, actor, host) did what, when."""

    position: int
    action: str
    session_id: str | None
    actor_key: str | None
    host: str | None
    detail: str | None
    at: str


class ItemView(msgspec.Struct, frozen=True, kw_only=True):
    """A work item as ``GET /v1/queue`` shows it, with its whole history."""

    item_id: str
    project: str
    issue: str | None
    priority: int
    status: str
    outcome: str | None
    payload: msgspec.Raw | None
    blocked_by: msgspec.Raw
    paths: msgspec.Raw
    session_id: str | None
    actor_key: str | None
    host: str | None
    fencing_token: int | None
    attempts: int
    enqueued_at: str
    updated_at: str
    history: list[LedgerEntry]


def _entry(r: Row[Any]) -> LedgerEntry:
    return LedgerEntry(
        position=r.position,
        action=r.action,
        session_id=r.session_id,
        actor_key=r.actor_key,
        host=r.host,
        detail=r.detail,
        at=format_time(r.recorded_us),
    )


class ItemState(msgspec.Struct, kw_only=True):
    """What of a work item its transitions change (the rest is fixed when it is enqueued)."""

    status: str
    outcome: str | None
    session_id: str | None
    actor_key: str | None
    host: str | None
    fencing_token: int | None
    attempts: int
    updated_at: str


def _state_of(r: Row[Any]) -> ItemState:
    return ItemState(
        status=r.status,
        outcome=r.outcome,
        session_id=r.session_id,
        actor_key=r.actor_key,
        host=r.host,
        fencing_token=r.fencing_token,
        attempts=r.attempts,
        updated_at=format_time(r.updated_us),
    )


def state_from_ledger(enqueued_us: int, history: list[LedgerEntry]) -> ItemState:
    """An item's state after the transitions of ``history`` (its ledger, in order).

    The ledger records every transition with what it set, as ``projections/queue.py``
    writes it: a claim its session, actor, host and fencing token (``fencing_token=N``), a
    finish its outcome; a re-queue clears the holder. So the state at any position is
    the fold of the entries up to it, which lets a point-in-time read skip the replay.
    """
    s = ItemState(
        status="queued",
        outcome=None,
        session_id=None,
        actor_key=None,
        host=None,
        fencing_token=None,
        attempts=0,
        updated_at=format_time(enqueued_us),
    )
    for e in history:
        s.updated_at = e.at
        if e.action == "claimed":
            s.status, s.session_id, s.actor_key, s.host = "claimed", e.session_id, e.actor_key, e.host
            s.fencing_token = int(e.detail.removeprefix("fencing_token=")) if e.detail else None
            s.attempts += 1
        elif e.action == "started":
            s.status = "running"
        elif e.action == "finished":
            s.outcome = e.detail  # the outcome
            s.status = e.detail or s.status
        elif e.action == "requeued":
            s.status, s.session_id, s.actor_key, s.host, s.fencing_token = "queued", None, None, None, None
    return s


def _item_view(r: Row[Any], history: list[LedgerEntry], state: ItemState | None = None) -> ItemView:
    s = _state_of(r) if state is None else state
    return ItemView(
        item_id=r.item_id,
        project=r.project,
        issue=r.issue,
        priority=r.priority,
        status=s.status,
        outcome=s.outcome,
        payload=None if r.payload is None else msgspec.Raw(r.payload.encode()),
        blocked_by=msgspec.Raw(r.blocked_by.encode()),
        paths=msgspec.Raw(r.paths.encode()),
        session_id=s.session_id,
        actor_key=s.actor_key,
        host=s.host,
        fencing_token=s.fencing_token,
        attempts=s.attempts,
        enqueued_at=format_time(r.enqueued_us),
        updated_at=s.updated_at,
        history=history,
    )


def histories(
    conn: Connection, workspace: str, item_ids: list[str], session_id: str | None = None, upto: int | None = None
) -> dict[str, list[LedgerEntry]]:
    """The ledger entries of each item (only ``session_id``'s, if given; up to ``upto``), in position order."""
    out: dict[str, list[LedgerEntry]] = defaultdict(list)
    for start in range(0, len(item_ids), CHUNK):
        stmt = select(work_ledger).where(
            (work_ledger.c.workspace == workspace) & work_ledger.c.item_id.in_(item_ids[start : start + CHUNK])
        )
        if session_id is not None:
            stmt = stmt.where(work_ledger.c.session_id == session_id)
        if upto is not None:
            stmt = stmt.where(work_ledger.c.position <= upto)
        for r in conn.execute(stmt.order_by(work_ledger.c.position)):
            out[r.item_id].append(_entry(r))
    return out


#: The read-model tables :func:`list_queue` reads (a point-in-time read loads only these).
LIST_QUEUE_TABLES = (work_items, work_ledger)


def list_queue(
    conn: Connection,
    workspace: str,
    project: str | None,
    status: Status | None,
    after: int,
    limit: int,
    upto: int | None = None,
) -> list[ItemView]:
    """Items enqueued after position ``after``, in enqueue order, each with its history.

    ``upto``: as of that position (docs/protocol.md#history), from the live tables: the items enqueued by
    then, each in the state its ledger up to then gives (:func:`state_from_ledger`).
    """
    if upto is not None:
        return _queue_upto(conn, workspace, project, status, after, limit, upto)
    rows = conn.execute(page_of_items(workspace, project, status, after, limit)).all()
    history = histories(conn, workspace, [r.item_id for r in rows])
    return [_item_view(r, history.get(r.item_id, [])) for r in rows]


def page_of_items(
    workspace: str, project: str | None, status: str | None, after: int, limit: int, upto: int | None = None
) -> Select[Any]:
    """Items enqueued after ``after`` (and by ``upto``), in enqueue order: a walk of
    ``ix_work_items_order`` (or ``ix_work_items_status_order`` for one status), never a sort of
    every item the workspace ever had."""
    where = (work_items.c.workspace == workspace) & (work_items.c.enqueued_position > after)
    if upto is not None:
        where = where & (work_items.c.enqueued_position <= upto)
    if project is not None:
        where = where & (work_items.c.project == project)
    if status is not None:
        where = where & (work_items.c.status == status)
    return select(work_items).where(where).order_by(work_items.c.enqueued_position).limit(limit)


def items_by_id(conn: Connection, item_ids: list[str]) -> dict[str, Row[Any]]:
    """Work item rows by id."""
    return {
        r.item_id: r
        for start in range(0, len(item_ids), CHUNK)
        for r in conn.execute(select(work_items).where(work_items.c.item_id.in_(item_ids[start : start + CHUNK])))
    }


def _queue_upto(
    conn: Connection, workspace: str, project: str | None, status: Status | None, after: int, limit: int, upto: int
) -> list[ItemView]:
    out: list[ItemView] = []
    # The status then is known only after folding the ledger: walk in enqueue order until full.
    while len(out) < limit:
        rows = conn.execute(page_of_items(workspace, project, None, after, CHUNK, upto)).all()
        if not rows:
            break
        history = histories(conn, workspace, [r.item_id for r in rows], upto=upto)
        for r in rows:
            entries = history.get(r.item_id, [])
            state = state_from_ledger(r.enqueued_us, entries)
            if status is None or state.status == status:
                out.append(_item_view(r, entries, state))
                if len(out) == limit:
                    break
        after = rows[-1].enqueued_position
    return out
