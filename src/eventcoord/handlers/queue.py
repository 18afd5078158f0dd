"""Handlers of the work queue: enqueue, claim_next_work, start/finish.

Every queue command on a project first locks the project's guard row (the same lock the
WIP cap uses), so its decisions are serialised by the database across replicas, then
re-queues the items of the project's stale non-human workers. Candidates are read with
``FOR UPDATE SKIP LOCKED`` and transitions lock their item row: two pulls never return the
same item. Lock order: project guard → sessions → work items → issue leases.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

import msgspec
from sqlalchemy import Connection, func, select

from eventcoord.commands import ClaimNextWork, EnqueueWork, FinishWork, StartWork
from eventcoord.context import Context, Decision
from eventcoord.domain import issues as lease_domain
from eventcoord.domain import queue as domain
from eventcoord.domain.sessions import SessionState, require_live
from eventcoord.errors import DomainError
from eventcoord.events import LeaseReleased, WorkEnqueued
from eventcoord.handlers.common import load_session, require_present
from eventcoord.handlers.issues import load_lease, lock_project, try_grant
from eventcoord.liveness import not_live_clause
from eventcoord.projections.tables import file_claims, issues, sessions, work_items
from eventcoord.store.schema import workspaces

PAGE = 100

_ITEM_COLUMNS = (
    work_items.c.item_id,
    work_items.c.project,
    work_items.c.issue,
    work_items.c.priority,
    work_items.c.status,
    work_items.c.session_id,
    work_items.c.fencing_token,
    work_items.c.blocked_by,
    work_items.c.paths,
    work_items.c.payload,
    work_items.c.enqueued_position,
)


def _item(row: Any) -> domain.ItemState:
    return domain.ItemState(
        item_id=row.item_id,
        project=row.project,
        issue=row.issue,
        priority=row.priority,
        status=row.status,
        session_id=row.session_id,
        fencing_token=row.fencing_token,
        blocked_by=tuple(msgspec.json.decode(row.blocked_by)),
        paths=tuple(msgspec.json.decode(row.paths)),
        payload=row.payload,
        enqueued_position=row.enqueued_position,
    )


def load_item(conn: Connection, ctx: Context, item_id: str, *, lock: bool = False) -> domain.ItemState | None:
    """One work item of the caller's workspace."""
    stmt = select(*_ITEM_COLUMNS).where((work_items.c.item_id == item_id) & (work_items.c.workspace == ctx.workspace))
    row = conn.execute(stmt.with_for_update() if lock else stmt).one_or_none()
    return None if row is None else _item(row)


def _require_item(conn: Connection, ctx: Context, item_id: str) -> domain.ItemState:
    item = load_item(conn, ctx, item_id)
    if item is None:
        raise DomainError("NOT_FOUND", f"no work item {item_id!r} in this workspace", {"item_id": item_id})
    return item


# --- stale-worker recovery -------------------------------------------------------------


def requeue_stale(
    conn: Connection, ctx: Context, d: Decision, project: str, caller: str | None
) -> tuple[dict[str, domain.ItemState], dict[str, int]]:
    """Re-queue the project's items whose non-human worker is stale (``worker_stale``).

    Their issue leases, if the worker still holds them, are released with ``expired``.
    Returns the re-queued items as they now stand and, per released issue, the index in
    ``d.events`` of its release (a grant in the same decision reclaims it instead).
    Reads only the project's claimed/running items (index ``ix_work_items_queue``).
    """
    suspects = conn.execute(
        select(work_items.c.session_id)
        .select_from(work_items.join(sessions, sessions.c.session_id == work_items.c.session_id))
        .where(
            (work_items.c.workspace == ctx.workspace)
            & (work_items.c.project == project)
            & work_items.c.status.in_(domain.ACTIVE)
            & (sessions.c.kind != "human")
            & not_live_clause(sessions.c.last_seen_us, sessions.c.ended_us, ctx.cutoff_us)
        )
        .distinct()
    ).scalars().all()
    worker_ids = sorted(s for s in suspects if s is not None and s != caller)
    if not worker_ids:
        return {}, {}
    workers: dict[str, SessionState] = {}
    for sid in worker_ids:  # sorted: concurrent recoveries lock in one order
        s = load_session(conn, ctx, sid, lock=True)
        if s is not None:
            workers[sid] = s
    rows = conn.execute(
        select(*_ITEM_COLUMNS)
        .where(
            (work_items.c.workspace == ctx.workspace)
            & (work_items.c.project == project)
            & work_items.c.status.in_(domain.ACTIVE)
            & work_items.c.session_id.in_(worker_ids)
        )
        .order_by(work_items.c.item_id)
        .with_for_update()
    ).all()
    stale = sorted(domain.stale_items((_item(r) for r in rows), workers, ctx, caller), key=lambda i: i.order)
    recovered: dict[str, domain.ItemState] = {}
    released: dict[str, int] = {}
    for item in stale:
        event, after = domain.requeued(item, "worker_stale")
        d.add(domain.stream(item.item_id), event)
        recovered[item.item_id] = after
        if item.issue is None or item.issue in released:
            continue
        lease = load_lease(conn, ctx, item.issue, lock=True)
        if lease is not None and lease.session_id == item.session_id:
            released[item.issue] = len(d.events)
            d.add(
                lease_domain.stream(item.issue),
                LeaseReleased(
                    issue=item.issue, session_id=lease.session_id, reason="expired", fencing_token=lease.fencing_token, by_session_id=caller
                ),
            )
    return recovered, released


# --- enqueue ---------------------------------------------------------------------------


def enqueue_work(conn: Connection, ctx: Context, cmd: EnqueueWork) -> Decision:
    paths = domain.normalise_paths(cmd.paths)
    existing: list[str] = (
        list(conn.execute(
            select(work_items.c.item_id).where(
                (work_items.c.workspace == ctx.workspace) & work_items.c.item_id.in_(sorted(set(cmd.blocked_by)))
            )
        ).scalars())
        if cmd.blocked_by
        else []
    )
    blockers = domain.check_blockers(cmd.blocked_by, existing)
    issue_project = None
    if cmd.issue is not None:
        issue_project = conn.execute(
            select(issues.c.project).where((issues.c.workspace == ctx.workspace) & (issues.c.issue == cmd.issue))
        ).scalar_one_or_none()
    domain.check_issue_project(cmd.issue, cmd.project, issue_project)
    lock_project(conn, ctx, cmd.project)
    d = Decision()
    requeue_stale(conn, ctx, d, cmd.project, None)
    item_id = ctx.make_id("w")
    d.add(
        domain.stream(item_id),
        WorkEnqueued(
            item_id=item_id,
            project=cmd.project,
            issue=cmd.issue,
            priority=cmd.priority,
            payload=cmd.payload,
            blocked_by=blockers,
            paths=paths,
        ),
    )
    d.result = {"item_id": item_id}
    return d


# --- selection -------------------------------------------------------------------------


def _queued(conn: Connection, ctx: Context, project: str) -> Iterator[domain.ItemState]:
    """Queued items in selection order, a page at a time, skipping rows others lock."""
    last: domain.ItemState | None = None
    while True:
        stmt = select(*_ITEM_COLUMNS).where(
            (work_items.c.workspace == ctx.workspace) & (work_items.c.project == project) & (work_items.c.status == "queued")
        )
        if last is not None:
            stmt = stmt.where(
                (work_items.c.priority < last.priority)
                | ((work_items.c.priority == last.priority) & (work_items.c.enqueued_position > last.enqueued_position))
            )
        stmt = stmt.order_by(work_items.c.priority.desc(), work_items.c.enqueued_position).limit(PAGE)
        page = [_item(r) for r in conn.execute(stmt.with_for_update(skip_locked=True))]
        yield from page
        if len(page) < PAGE:
            return
        last = page[-1]


def _statuses(conn: Connection, ctx: Context, item_ids: list[str]) -> dict[str, str]:
    rows = conn.execute(
        select(work_items.c.item_id, work_items.c.status).where(
            (work_items.c.workspace == ctx.workspace) & work_items.c.item_id.in_(item_ids)
        )
    )
    return {r.item_id: r.status for r in rows}


def _exclusive_claims(conn: Connection, ctx: Context) -> list[domain.FileClaimView]:
    """Unreleased exclusive file claims of the workspace, with their holders' liveness.

    A share lock on the workspace row (claim_files locks it FOR UPDATE) keeps the claims
    from changing under this decision on PostgreSQL.
    """
    conn.execute(select(workspaces.c.name).where(workspaces.c.name == ctx.workspace).with_for_update(read=True))
    rows = conn.execute(
        select(file_claims.c.path, file_claims.c.session_id, sessions.c.last_seen_us, sessions.c.ended_us)
        .select_from(file_claims.outerjoin(sessions, sessions.c.session_id == file_claims.c.session_id))
        .where((file_claims.c.workspace == ctx.workspace) & file_claims.c.released_us.is_(None) & file_claims.c.exclusive)
    )
    return [
        domain.FileClaimView(r.path, r.session_id, ctx.is_live(r.last_seen_us, r.ended_us))
        for r in rows
    ]


def _grant(conn: Connection, ctx: Context, d: Decision, me: SessionState, item: domain.ItemState, released: dict[str, int]) -> int | None:
    """Take the item's issue lease; a lease this decision released is reclaimed instead."""
    assert item.issue is not None
    index = released.get(item.issue)
    withdrawn = d.events.pop(index) if index is not None else None
    token = try_grant(conn, ctx, d, me, item.project, item.issue)
    if token is None and index is not None and withdrawn is not None:
        d.events.insert(index, withdrawn)
    return token


def claim_next_work(conn: Connection, ctx: Context, cmd: ClaimNextWork) -> Decision:
    lock_project(conn, ctx, cmd.project)
    me = require_live(load_session(conn, ctx, cmd.session_id, lock=True), cmd.session_id, ctx)
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    recovered, released = requeue_stale(conn, ctx, d, cmd.project, me.session_id)
    statuses: dict[str, str] = {}
    claims: list[domain.FileClaimView] | None = None
    for item in heapq.merge(sorted(recovered.values(), key=lambda i: i.order), _queued(conn, ctx, cmd.project), key=lambda i: i.order):
        unknown = [b for b in item.blocked_by if b not in statuses]
        if unknown:
            statuses.update(_statuses(conn, ctx, unknown))
        if not domain.blockers_done(item, statuses):
            continue
        if item.paths:
            claims = _exclusive_claims(conn, ctx) if claims is None else claims
            if domain.blocking_path(item, claims, me.session_id) is not None:
                continue
        token = None
        if item.issue is not None:
            token = _grant(conn, ctx, d, me, item, released)
            if token is None:
                continue
        d.add(domain.stream(item.item_id), domain.claimed(item, me, token))
        payload = None if item.payload is None else msgspec.json.decode(item.payload)
        d.result = {"item": domain.item_view(item, payload, "claimed", me.session_id, token)}
        return d
    d.result = {"item": None}
    return d


# --- transitions -----------------------------------------------------------------------


def start_work(conn: Connection, ctx: Context, cmd: StartWork) -> Decision:
    item = _require_item(conn, ctx, cmd.item_id)
    lock_project(conn, ctx, item.project)
    me = require_present(conn, ctx, cmd.session_id)
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    recovered, _ = requeue_stale(conn, ctx, d, item.project, me.session_id)
    item = recovered.get(item.item_id) or load_item(conn, ctx, item.item_id, lock=True) or item
    domain.decide_start(item, d, me.session_id, ctx.caller.role == "admin")
    return d


def finish_work(conn: Connection, ctx: Context, cmd: FinishWork) -> Decision:
    admin = ctx.caller.role == "admin"
    if cmd.session_id is None and not admin:
        raise DomainError("FORBIDDEN", "only an admin may finish work without a session", {"item_id": cmd.item_id})
    item = _require_item(conn, ctx, cmd.item_id)
    lock_project(conn, ctx, item.project)
    me = require_present(conn, ctx, cmd.session_id) if cmd.session_id is not None else None
    sid = me.session_id if me else None
    d = Decision(session_id=sid, actor_key=me.actor_key if me else None)
    recovered, _ = requeue_stale(conn, ctx, d, item.project, sid)
    item = recovered.get(item.item_id) or load_item(conn, ctx, item.item_id, lock=True) or item
    domain.decide_finish(item, d, sid, admin, cmd.outcome)
    if item.issue is not None and item.status in domain.ACTIVE and item.session_id is not None:
        _release_item_lease(conn, ctx, d, item, cmd.outcome, sid)
    return d


def _release_item_lease(conn: Connection, ctx: Context, d: Decision, item: domain.ItemState, outcome: str, by: str | None) -> None:
    """Release the worker's lease on the item's issue, unless another of its items needs it."""
    assert item.issue is not None
    lease = load_lease(conn, ctx, item.issue, lock=True)
    if lease is None or lease.session_id != item.session_id:
        return
    others = conn.execute(
        select(func.count()).where(
            (work_items.c.session_id == item.session_id)
            & work_items.c.status.in_(domain.ACTIVE)
            & (work_items.c.issue == item.issue)
            & (work_items.c.item_id != item.item_id)
        )
    ).scalar_one()
    if others:
        return
    d.add(
        lease_domain.stream(item.issue),
        LeaseReleased(
            issue=item.issue,
            session_id=lease.session_id,
            reason=domain.finish_release_reason(outcome),
            fencing_token=lease.fencing_token,
            by_session_id=by if by != lease.session_id else None,
        ),
    )
