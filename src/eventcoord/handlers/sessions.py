"""Handlers of the session commands: load state, call the pure decision."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Connection, select

from eventcoord.commands import EndAgent, HeartbeatAgent, RegisterAgent
from eventcoord.context import Context, Decision
from eventcoord.domain import sessions as domain
from eventcoord.events import (
    FileClaimReleased,
    HandoffNoted,
    LeaseReleased,
    NamedLeaseReleased,
    WorkRequeued,
)
from eventcoord.handlers.common import load_session
from eventcoord.projections.tables import file_claims, leases, named_leases, work_items


def register_agent(conn: Connection, ctx: Context, cmd: RegisterAgent) -> Decision:
    return domain.decide_register(cmd, ctx)


def held_issues(conn: Connection, session_id: str) -> list[str]:
    """Issues the session holds an unreleased lease on."""
    return list(
        conn.execute(
            select(leases.c.issue)
            .where((leases.c.session_id == session_id) & leases.c.released_us.is_(None))
            .order_by(leases.c.issue)
        ).scalars()
    )


def heartbeat_agent(conn: Connection, ctx: Context, cmd: HeartbeatAgent) -> Decision:
    session = load_session(conn, ctx, cmd.session_id, lock=True)
    held = held_issues(conn, cmd.session_id) if cmd.handoff_note else []
    return domain.decide_heartbeat(session, held, cmd, ctx)


def end_agent(conn: Connection, ctx: Context, cmd: EndAgent) -> Decision:
    """End a session and release everything it held, eagerly, with reason agent_ended."""
    session, d = domain.decide_end(load_session(conn, ctx, cmd.session_id, lock=True), cmd, ctx)
    sid = session.session_id
    ended = domain.ended_event(session, cmd)
    released_leases: list[str] = []
    for issue, token in conn.execute(
        select(leases.c.issue, leases.c.fencing_token)
        .where((leases.c.session_id == sid) & leases.c.released_us.is_(None))
        .order_by(leases.c.issue)
        .with_for_update()  # a concurrent reclaim must not release these a second time
    ):
        d.add(f"issue:{issue}", LeaseReleased(issue=issue, session_id=sid, reason="agent_ended", fencing_token=token))
        if ended.handoff_note:
            d.add(f"issue:{issue}", HandoffNoted(issue=issue, session_id=sid, note=ended.handoff_note))
        released_leases.append(issue)
    by_issue: dict[str, list[str]] = defaultdict(list)
    for issue, path in conn.execute(
        select(file_claims.c.issue, file_claims.c.path)
        .where(
            (file_claims.c.workspace == ctx.workspace)
            & (file_claims.c.session_id == sid)
            & file_claims.c.released_us.is_(None)
        )
        .order_by(file_claims.c.issue, file_claims.c.position, file_claims.c.idx)
    ):
        by_issue[issue].append(path)
    for issue, paths in by_issue.items():
        d.add(f"files:{issue}", FileClaimReleased(issue=issue, session_id=sid, paths=paths, reason="agent_ended"))
    requeued = list(
        conn.execute(
            select(work_items.c.item_id)
            .where((work_items.c.session_id == sid) & work_items.c.status.in_(("claimed", "running")))
            .order_by(work_items.c.enqueued_position)
            .with_for_update()
        ).scalars()
    )
    for item_id in requeued:
        d.add(f"work:{item_id}", WorkRequeued(item_id=item_id, session_id=sid, reason="agent_ended"))
    names = list(
        conn.execute(
            select(named_leases.c.name)
            .where((named_leases.c.workspace == ctx.workspace) & (named_leases.c.session_id == sid))
            .order_by(named_leases.c.name)
            .with_for_update()
        ).scalars()
    )
    for name in names:
        d.add(f"lease:{name}", NamedLeaseReleased(name=name, session_id=sid, reason="agent_ended"))
    d.add(domain.stream(sid), ended)
    d.result = {
        "released_leases": released_leases,
        "released_claims": [p for paths in by_issue.values() for p in paths],
        "requeued_items": requeued,
        "released_named_leases": names,
    }
    return d
