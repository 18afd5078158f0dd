"""Read routes of the queue tier: the queue with its audit ledger, one agent's work, named leases."""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, Response, get
from litestar.params import Parameter
from sqlalchemy import Connection, Row, select

from eventcoord.api.deps import caller, runtime
from eventcoord.api.reads import AgentView, json
from eventcoord.codec import format_time
from eventcoord.errors import DomainError
from eventcoord.projections.tables import leases, named_leases, sessions, work_items, work_ledger
from eventcoord.store import log

Status = Literal["queued", "claimed", "running", "done", "failed", "oom_killed", "cancelled"]


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


def _histories(conn: Connection, workspace: str, item_ids: list[str], session_id: str | None = None) -> dict[str, list[LedgerEntry]]:
    out: dict[str, list[LedgerEntry]] = defaultdict(list)
    for start in range(0, len(item_ids), 500):
        stmt = select(work_ledger).where(
            (work_ledger.c.workspace == workspace) & work_ledger.c.item_id.in_(item_ids[start : start + 500])
        )
        if session_id is not None:
            stmt = stmt.where(work_ledger.c.session_id == session_id)
        for r in conn.execute(stmt.order_by(work_ledger.c.position)):
            out[r.item_id].append(_entry(r))
    return out


@get("/v1/queue", operation_id="listQueue", summary="Work items with their audit history")
async def list_queue(
    request: Request[Any, Any, Any],
    project: Annotated[str | None, Parameter(description="only this project")] = None,
    status: Annotated[Status | None, Parameter(description="only items in this status")] = None,
    after: Annotated[int, Parameter(ge=0, description="only items enqueued at a position after this")] = 0,
    limit: Annotated[int, Parameter(ge=1, le=10000)] = 1000,
) -> Response[bytes]:
    """``{"items": [...]}`` in enqueue order; each item carries ``history``: every
    transition from the ledger with the session, actor and host that made it, when, and
    its detail (fencing token, outcome, or re-queue reason)."""
    who = await caller(request)

    def run(conn: Connection) -> list[ItemView]:
        stmt = select(work_items).where((work_items.c.workspace == who.workspace) & (work_items.c.enqueued_position > after))
        if project is not None:
            stmt = stmt.where(work_items.c.project == project)
        if status is not None:
            stmt = stmt.where(work_items.c.status == status)
        rows = conn.execute(stmt.order_by(work_items.c.enqueued_position).limit(limit)).all()
        history = _histories(conn, who.workspace, [r.item_id for r in rows])
        return [_item_view(r, history.get(r.item_id, [])) for r in rows]

    return json({"items": await runtime(request).store.query(run)})


@get("/v1/agents/{session_id:str}", operation_id="getAgent", summary="One session and what it worked on")
async def get_agent(request: Request[Any, Any, Any], session_id: str) -> Response[bytes]:
    """``{"agent", "work", "leases", "named_leases"}``: the session with its liveness, the
    work items it claimed, ran or finished (with its own ledger entries), every issue lease
    it was granted (released or not) and the named leases it holds now. 404 if the session
    is not in the caller's workspace."""
    who = await caller(request)

    def run(conn: Connection) -> dict[str, Any] | None:
        now_us, ttl = log.clock(conn)
        cutoff = now_us - ttl * 1_000_000
        s = conn.execute(
            select(sessions).where((sessions.c.session_id == session_id) & (sessions.c.workspace == who.workspace))
        ).one_or_none()
        if s is None:
            return None
        agent = AgentView.of(s, cutoff)
        item_ids = list(
            dict.fromkeys(
                conn.execute(
                    select(work_ledger.c.item_id)
                    .where((work_ledger.c.session_id == session_id) & (work_ledger.c.workspace == who.workspace))
                    .order_by(work_ledger.c.position)
                ).scalars()
            )
        )
        mine = _histories(conn, who.workspace, item_ids, session_id)
        items = {
            r.item_id: r
            for start in range(0, len(item_ids), 500)
            for r in conn.execute(select(work_items).where(work_items.c.item_id.in_(item_ids[start : start + 500])))
        }
        work = [
            {
                "item_id": i,
                "project": items[i].project,
                "issue": items[i].issue,
                "status": items[i].status,
                "outcome": items[i].outcome,
                "current_worker": items[i].session_id == session_id,
                "history": mine.get(i, []),
            }
            for i in item_ids
            if i in items
        ]
        held = [
            {
                "issue": r.issue,
                "project": r.project,
                "fencing_token": r.fencing_token,
                "granted_at": format_time(r.granted_us),
                "released_at": format_time(r.released_us) if r.released_us is not None else None,
                "release_reason": r.release_reason,
            }
            for r in conn.execute(
                select(leases)
                .where((leases.c.session_id == session_id) & (leases.c.workspace == who.workspace))
                .order_by(leases.c.lease_id)
            )
        ]
        named = [
            {
                "name": r.name,
                "fencing_token": r.fencing_token,
                "expires_at": format_time(r.expires_us) if r.expires_us is not None else None,
                "expired": r.expires_us is None or r.expires_us <= now_us,
            }
            for r in conn.execute(
                select(named_leases)
                .where((named_leases.c.session_id == session_id) & (named_leases.c.workspace == who.workspace))
                .order_by(named_leases.c.name)
            )
        ]
        return {"agent": agent, "work": work, "leases": held, "named_leases": named}

    body = await runtime(request).store.query(run)
    if body is None:
        raise DomainError("NOT_FOUND", f"no session {session_id!r} in this workspace", {"session_id": session_id})
    return json(body)


@get("/v1/named-leases", operation_id="listNamedLeases", summary="Named leases (leader election)")
async def list_named_leases(request: Request[Any, Any, Any]) -> Response[bytes]:
    """``{"leases": [...]}``: every name ever granted, its holder (null once released),
    last fencing token, and whether it is held now (a holder and not yet expired)."""
    who = await caller(request)

    def run(conn: Connection) -> list[dict[str, Any]]:
        now_us, _ = log.clock(conn)
        return [
            {
                "name": r.name,
                "session_id": r.session_id,
                "actor_key": r.actor_key,
                "fencing_token": r.fencing_token,
                "ttl_seconds": r.ttl_seconds,
                "acquired_at": format_time(r.acquired_us) if r.acquired_us is not None else None,
                "expires_at": format_time(r.expires_us) if r.expires_us is not None else None,
                "held": r.session_id is not None and r.expires_us is not None and r.expires_us > now_us,
            }
            for r in conn.execute(
                select(named_leases).where(named_leases.c.workspace == who.workspace).order_by(named_leases.c.name)
            )
        ]

    return json({"leases": await runtime(request).store.query(run)})


ROUTES = [list_queue, get_agent, list_named_leases]
