"""Reads of the work queue: items with their audit ledger."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

import msgspec
from sqlalchemy import Connection, Row, select

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


def _item_view(r: Row[Any], history: list[LedgerEntry]) -> ItemView:
    return ItemView(
        item_id=r.item_id,
        project=r.project,
        issue=r.issue,
        priority=r.priority,
        status=r.status,
        outcome=r.outcome,
        payload=None if r.payload is None else msgspec.Raw(r.payload.encode()),
        blocked_by=msgspec.Raw(r.blocked_by.encode()),
        paths=msgspec.Raw(r.paths.encode()),
        session_id=r.session_id,
        actor_key=r.actor_key,
        host=r.host,
        fencing_token=r.fencing_token,
        attempts=r.attempts,
        enqueued_at=format_time(r.enqueued_us),
        updated_at=format_time(r.updated_us),
        history=history,
    )


def histories(
    conn: Connection, workspace: str, item_ids: list[str], session_id: str | None = None
) -> dict[str, list[LedgerEntry]]:
    """The ledger entries of each item (only ``session_id``'s, if given), in position order."""
    out: dict[str, list[LedgerEntry]] = defaultdict(list)
    for start in range(0, len(item_ids), CHUNK):
        stmt = select(work_ledger).where(
            (work_ledger.c.workspace == workspace) & work_ledger.c.item_id.in_(item_ids[start : start + CHUNK])
        )
        if session_id is not None:
            stmt = stmt.where(work_ledger.c.session_id == session_id)
        for r in conn.execute(stmt.order_by(work_ledger.c.position)):
            out[r.item_id].append(_entry(r))
    return out


#: The read-model tables :func:`list_queue` reads (a point-in-time read loads only these).
LIST_QUEUE_TABLES = (work_items, work_ledger)


def list_queue(
    conn: Connection, workspace: str, project: str | None, status: Status | None, after: int, limit: int
) -> list[ItemView]:
    """Items enqueued after position ``after``, in enqueue order, each with its history."""
    stmt = select(work_items).where((work_items.c.workspace == workspace) & (work_items.c.enqueued_position > after))
    if project is not None:
        stmt = stmt.where(work_items.c.project == project)
    if status is not None:
        stmt = stmt.where(work_items.c.status == status)
    rows = conn.execute(stmt.order_by(work_items.c.enqueued_position).limit(limit)).all()
    history = histories(conn, workspace, [r.item_id for r in rows])
    return [_item_view(r, history.get(r.item_id, [])) for r in rows]


def items_by_id(conn: Connection, item_ids: list[str]) -> dict[str, Row[Any]]:
    """Work item rows by id."""
    return {
        r.item_id: r
        for start in range(0, len(item_ids), CHUNK)
        for r in conn.execute(select(work_items).where(work_items.c.item_id.in_(item_ids[start : start + CHUNK])))
    }
