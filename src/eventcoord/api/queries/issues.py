"""Reads of issue leases: effective state of one issue, the unreleased leases."""

from __future__ import annotations

from typing import Any, TypedDict

from sqlalchemy import Connection, Table, select

from eventcoord.api.queries.common import clock, read_clock
from eventcoord.codec import format_time
from eventcoord.context import Caller, Context
from eventcoord.domain import streams
from eventcoord.domain.issues import effective_state
from eventcoord.liveness import is_live
from eventcoord.projections.tables import issues, leases, sessions
from eventcoord.reads.issues import load_issue_view

#: The read-model tables :func:`issue_state` reads (a point-in-time read loads only these).
ISSUE_STATE_TABLES = (issues, leases, sessions)


class About(TypedDict):
    """What ``History.read_about`` needs to read about one thing: its stream, the projection
    rebuilt from it, and every table the read looks at."""

    stream: str
    projection: str
    tables: tuple[Table, ...]


def about_issue(issue: str) -> About:
    """:func:`issue_state` as of a moment reads about ``issue``: its stream rebuilds its
    issue and lease rows (the ``leases`` projection's), the sessions come from the snapshot."""
    return About(stream=streams.issue(issue), projection="leases", tables=ISSUE_STATE_TABLES)


#: The read-model tables :func:`list_leases` reads.
LIST_LEASES_TABLES = (leases, sessions)


def issue_state(conn: Connection, caller: Caller, issue: str, as_session: str | None) -> dict[str, Any]:
    """``{issue, state, reason, holder, …}``: assignment joined with liveness, as ``as_session`` sees it."""
    now_us, ttl = clock(conn)
    ctx = Context(caller, now_us, ttl)
    view = load_issue_view(conn, ctx, issue)
    es = effective_state(view, as_session, ctx)
    lease = view.lease
    return {
        "issue": issue,
        "state": es.state,
        "reason": es.reason,
        "holder": es.holder,
        "fencing_token": lease.fencing_token if lease else None,
        "project": view.registry.project if view.registry else None,
    }


def list_leases(
    conn: Connection, workspace: str, project: str | None, session: str | None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Unreleased leases by project and issue, with their holders' liveness now."""
    _, cutoff = read_clock(conn)
    stmt = (
        select(leases, sessions.c.last_seen_us, sessions.c.ended_us, sessions.c.kind)
        .select_from(leases.outerjoin(sessions, sessions.c.session_id == leases.c.session_id))
        .where((leases.c.workspace == workspace) & leases.c.released_us.is_(None))
    )
    if project:
        stmt = stmt.where(leases.c.project == project)
    if session:
        stmt = stmt.where(leases.c.session_id == session)
    return [
        {
            "issue": r.issue,
            "project": r.project,
            "session_id": r.session_id,
            "actor_key": r.actor_key,
            "fencing_token": r.fencing_token,
            "live": is_live(r.last_seen_us, r.ended_us, cutoff),
            "kind": r.kind,
            "granted_at": format_time(r.granted_us),
        }
        for r in conn.execute(stmt.order_by(leases.c.project, leases.c.issue).limit(limit))
    ]


def granted_to(conn: Connection, workspace: str, session_id: str) -> list[dict[str, Any]]:
    """Every lease a session was granted, released or not, in grant order."""
    return [
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
            .where((leases.c.session_id == session_id) & (leases.c.workspace == workspace))
            .order_by(leases.c.lease_id)
        )
    ]
