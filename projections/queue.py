"""Read models of the work queue: ``work_items`` (current state) and ``work_ledger`` (audit).

The ledger is the p24 audit trail: one row per transition naming the session, actor and
host that made it, when, and a detail (fencing token, outcome or re-queue reason).
Actor and host of a session never change, so they are looked up from ``sessions``.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Connection, select, update

from eventcoord.codec import encode
from eventcoord.events import WorkClaimed, WorkEnqueued, WorkFinished, WorkRequeued, WorkStarted
from eventcoord.store.log import RecordedEvent

from .base import Appliers
from .tables import sessions, work_items, work_ledger


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
    if session_id is not None and actor_key is None:
        row = conn.execute(select(sessions.c.actor_key, sessions.c.host).where(sessions.c.session_id == session_id)).first()
        if row is not None:
            actor_key, host = row.actor_key, row.host
    if session_id is None and actor_key is None:
        actor_key = r.metadata.actor_key
    conn.execute(
        work_ledger.insert().values(
            position=r.position,
            workspace=r.metadata.workspace,
            item_id=item_id,
            action=action,
            session_id=session_id,
            actor_key=actor_key,
            host=host,
            detail=detail[:240] if detail else None,
            recorded_us=r.recorded_us,
        )
    )


def _item(r: RecordedEvent, item_id: str) -> ColumnElement[bool]:
    return (work_items.c.item_id == item_id) & (work_items.c.workspace == r.metadata.workspace)


def enqueued(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkEnqueued)
    conn.execute(
        work_items.insert().values(
            item_id=e.item_id,
            workspace=r.metadata.workspace,
            project=e.project,
            issue=e.issue,
            priority=e.priority,
            payload=None if e.payload is None else encode(e.payload).decode(),
            blocked_by=encode(e.blocked_by).decode(),
            paths=encode(e.paths).decode(),
            status="queued",
            session_id=None,
            actor_key=None,
            host=None,
            fencing_token=None,
            enqueued_position=r.position,
            enqueued_us=r.recorded_us,
            updated_us=r.recorded_us,
            outcome=None,
            attempts=0,
        )
    )
    _ledger(conn, r, e.item_id, "enqueued", r.metadata.session_id)


def claimed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkClaimed)
    conn.execute(
        update(work_items)
        .where(_item(r, e.item_id))
        .values(
            status="claimed",
            session_id=e.session_id,
            actor_key=e.actor_key,
            host=e.host,
            fencing_token=e.fencing_token,
            attempts=work_items.c.attempts + 1,
            updated_us=r.recorded_us,
        )
    )
    detail = None if e.fencing_token is None else f"fencing_token={e.fencing_token}"
    _ledger(conn, r, e.item_id, "claimed", e.session_id, detail, e.actor_key, e.host)


def started(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkStarted)
    conn.execute(update(work_items).where(_item(r, e.item_id)).values(status="running", updated_us=r.recorded_us))
    _ledger(conn, r, e.item_id, "started", e.session_id)


def finished(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkFinished)
    conn.execute(
        update(work_items).where(_item(r, e.item_id)).values(status=e.outcome, outcome=e.outcome, updated_us=r.recorded_us)
    )
    _ledger(conn, r, e.item_id, "finished", e.session_id, e.outcome)


def requeued(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, WorkRequeued)
    conn.execute(
        update(work_items)
        .where(_item(r, e.item_id))
        .values(status="queued", session_id=None, actor_key=None, host=None, fencing_token=None, updated_us=r.recorded_us)
    )
    _ledger(conn, r, e.item_id, "requeued", e.session_id, e.reason)


APPLIERS: Appliers = {
    WorkEnqueued: enqueued,
    WorkClaimed: claimed,
    WorkStarted: started,
    WorkFinished: finished,
    WorkRequeued: requeued,
}
