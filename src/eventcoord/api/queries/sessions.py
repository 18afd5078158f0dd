"""Reads of sessions: agents with their liveness, and one agent with what it worked on."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import Connection, Select, select

from eventcoord.api.queries import issues, named_leases, queue
from eventcoord.api.queries.common import read_clock
from eventcoord.codec import format_time
from eventcoord.liveness import is_live, live_clause, not_live_clause
from eventcoord.projections.tables import sessions, work_ledger


class AgentView(msgspec.Struct, frozen=True, kw_only=True):
    """A session as ``GET /v1/agents`` shows it; liveness computed at read time."""

    session_id: str
    actor_key: str
    identity_source: str
    stable: bool
    kind: str
    host: str | None
    runtime: str | None
    working_on: str | None
    live: bool
    registered_at: str
    last_heartbeat_at: str
    ended_at: str | None

    @classmethod
    def of(cls, r: Any, cutoff_us: int) -> AgentView:
        """A ``sessions`` row as seen now (live when not ended and seen after ``cutoff_us``)."""
        return cls(
            session_id=r.session_id,
            actor_key=r.actor_key,
            identity_source=r.identity_source,
            stable=r.stable,
            kind=r.kind,
            host=r.host,
            runtime=r.runtime,
            working_on=r.working_on,
            live=is_live(r.last_seen_us, r.ended_us, cutoff_us),
            registered_at=format_time(r.registered_us),
            last_heartbeat_at=format_time(r.last_seen_us),
            ended_at=format_time(r.ended_us) if r.ended_us is not None else None,
        )


#: The read-model tables :func:`list_agents` reads (a point-in-time read loads only these).
LIST_AGENTS_TABLES = (sessions,)


def page_of_agents(workspace: str, live: bool | None, cutoff: int, limit: int) -> Select[Any]:
    """Sessions of the workspace, newest first (only live or only not-live ones if asked): a
    walk of ``ix_sessions_registered`` backwards, not a sort of every session ever registered."""
    stmt = select(sessions).where(sessions.c.workspace == workspace)
    if live is True:
        stmt = stmt.where(live_clause(sessions.c.last_seen_us, sessions.c.ended_us, cutoff))
    elif live is False:
        stmt = stmt.where(not_live_clause(sessions.c.last_seen_us, sessions.c.ended_us, cutoff))
    # session_id breaks ties: sessions registered in one group commit share registered_us,
    # and a rebuild must answer them in the same order.
    return stmt.order_by(sessions.c.registered_us.desc(), sessions.c.session_id.desc()).limit(limit)


def list_agents(conn: Connection, workspace: str, live: bool | None, limit: int) -> list[AgentView]:
    """Sessions of the workspace, newest first; only live or only not-live ones if asked."""
    _, cutoff = read_clock(conn)
    return [AgentView.of(r, cutoff) for r in conn.execute(page_of_agents(workspace, live, cutoff, limit))]


def agent_detail(conn: Connection, workspace: str, session_id: str) -> dict[str, Any] | None:
    """``{agent, work, leases, named_leases}`` of one session, or None if it is not in ``workspace``."""
    now_us, cutoff = read_clock(conn)
    s = conn.execute(
        select(sessions).where((sessions.c.session_id == session_id) & (sessions.c.workspace == workspace))
    ).one_or_none()
    if s is None:
        return None
    item_ids = list(
        dict.fromkeys(
            conn.execute(
                select(work_ledger.c.item_id)
                .where((work_ledger.c.session_id == session_id) & (work_ledger.c.workspace == workspace))
                .order_by(work_ledger.c.position)
            ).scalars()
        )
    )
    mine = queue.histories(conn, workspace, item_ids, session_id)
    items = queue.items_by_id(conn, item_ids)
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
    return {
        "agent": AgentView.of(s, cutoff),
        "work": work,
        "leases": issues.granted_to(conn, workspace, session_id),
        "named_leases": named_leases.held_by(conn, workspace, session_id, now_us),
    }
