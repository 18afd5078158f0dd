"""What others in the workspace hold and left: the other live sessions with their issues and
file patterns, and the handoff notes on issues nobody live holds (what a SessionStart tells).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, case, select

from eventcoord import liveness
from eventcoord.projections.tables import file_claims, issues, leases, sessions
from eventcoord.store import dbclock

#: The most live claims of the other sessions a briefing reads (it names a few of each).
_CLAIMS_READ = 2000


@dataclass(frozen=True, slots=True)
class Peer:
    """Another live session and what it holds."""

    session_id: str
    actor_key: str
    runtime: str | None
    host: str | None
    issues: list[str]
    paths: list[str]


@dataclass(frozen=True, slots=True)
class Note:
    """A handoff note left on an issue nobody live holds now."""

    issue: str
    note: str
    actor_key: str | None
    own: bool  # left by a session of the same actor


def peers(conn: Connection, workspace: str, session_id: str, limit: int) -> list[Peer]:
    """Up to ``limit`` other live sessions, most recently seen first, with their live leases
    and file claims."""
    now_us, ttl = dbclock.read(conn)
    cutoff = liveness.cutoff(now_us, ttl)
    rows = conn.execute(
        select(sessions.c.session_id, sessions.c.actor_key, sessions.c.runtime, sessions.c.host)
        .where(
            (sessions.c.workspace == workspace)
            & liveness.live_clause(sessions.c.last_seen_us, sessions.c.ended_us, cutoff)
            & (sessions.c.session_id != session_id)
        )
        .order_by(sessions.c.last_seen_us.desc())
        .limit(limit)
    ).all()
    ids = [r.session_id for r in rows]
    held: dict[str, list[str]] = {sid: [] for sid in ids}
    claimed: dict[str, list[str]] = {sid: [] for sid in ids}
    if ids:
        for sid, issue in conn.execute(
            select(leases.c.session_id, leases.c.issue)
            .where(leases.c.session_id.in_(ids) & leases.c.released_us.is_(None))
            .order_by(leases.c.lease_id)
        ):
            held[sid].append(issue)
        for sid, path in conn.execute(
            select(file_claims.c.session_id, file_claims.c.path)
            .where(
                (file_claims.c.workspace == workspace)
                & file_claims.c.released_us.is_(None)
                & file_claims.c.session_id.in_(ids)
            )
            .order_by(file_claims.c.position, file_claims.c.idx)
            .limit(_CLAIMS_READ)
        ):
            if path not in claimed[sid]:
                claimed[sid].append(path)
    return [Peer(r.session_id, r.actor_key, r.runtime, r.host, held[r.session_id], claimed[r.session_id]) for r in rows]


def resumable_notes(conn: Connection, workspace: str, actor_key: str, limit: int) -> list[Note]:
    """Handoff notes on issues nobody live holds (free, or held by a stale non-human session),
    the actor's own first."""
    now_us, ttl = dbclock.read(conn)
    cutoff = liveness.cutoff(now_us, ttl)
    noted = conn.execute(
        select(issues.c.issue, issues.c.handoff_note, sessions.c.actor_key)
        .select_from(issues.outerjoin(sessions, sessions.c.session_id == issues.c.handoff_session_id))
        .where((issues.c.workspace == workspace) & issues.c.handoff_note.is_not(None))
        .order_by(case((sessions.c.actor_key == actor_key, 0), else_=1), issues.c.issue)
        .limit(200)
    ).all()
    if not noted:
        return []
    holder = sessions.alias("holder")
    blocked = {
        issue
        for issue, kind, last_seen, ended in conn.execute(
            select(leases.c.issue, holder.c.kind, holder.c.last_seen_us, holder.c.ended_us)
            .select_from(leases.outerjoin(holder, holder.c.session_id == leases.c.session_id))
            .where(
                (leases.c.workspace == workspace)
                & leases.c.released_us.is_(None)
                & leases.c.issue.in_([r.issue for r in noted])
            )
        )
        if kind == "human" or liveness.is_live(last_seen, ended, cutoff)
    }
    notes = [Note(r.issue, r.handoff_note, r.actor_key, r.actor_key == actor_key) for r in noted]
    notes = [n for n in notes if n.issue not in blocked and n.note.strip()]
    notes.sort(key=lambda n: (not n.own, n.issue))
    return notes[:limit]
