"""What the session commands read: a session's unreleased leases, everything it holds, what its end frees.

An ending session's holdings are read locked where a concurrent command could release
them too, and each line it frees is read under the lock its joins take.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Connection, select

from eventcoord.context import Context
from eventcoord.domain.ending import Holdings
from eventcoord.domain.handoff import Freed
from eventcoord.domain.paths import DECISION_STEPS, Work
from eventcoord.projections.tables import file_claims, leases, named_lease_slots, work_items
from eventcoord.reads.common import load_sessions
from eventcoord.reads.files import lock_workspace, overlap_candidates
from eventcoord.reads.issues import issue_line
from eventcoord.reads.named_leases import lease_line
from eventcoord.reads.waits import load_files_line, load_wait_of


def held_issues(conn: Connection, session_id: str) -> list[str]:
    """Issues the session holds an unreleased lease on."""
    return list(
        conn.execute(
            select(leases.c.issue)
            .where((leases.c.session_id == session_id) & leases.c.released_us.is_(None))
            .order_by(leases.c.issue)
        ).scalars()
    )


def load_holdings(conn: Connection, ctx: Context, sid: str) -> Holdings:
    """Everything a session holds, locking what a concurrent command could also release."""
    held_leases = [
        (issue, token)
        for issue, token in conn.execute(
            select(leases.c.issue, leases.c.fencing_token)
            .where((leases.c.session_id == sid) & leases.c.released_us.is_(None))
            .order_by(leases.c.issue)
            .with_for_update()  # a concurrent reclaim must not release these a second time
        )
    ]
    claims: dict[str, list[str]] = defaultdict(list)
    for issue, path in conn.execute(
        select(file_claims.c.issue, file_claims.c.path)
        .where(
            (file_claims.c.workspace == ctx.workspace)
            & (file_claims.c.session_id == sid)
            & file_claims.c.released_us.is_(None)
        )
        .order_by(file_claims.c.issue, file_claims.c.position, file_claims.c.idx)
    ):
        claims[issue].append(path)
    items = list(
        conn.execute(
            select(work_items.c.item_id)
            .where((work_items.c.session_id == sid) & work_items.c.status.in_(("claimed", "running")))
            .order_by(work_items.c.enqueued_position)
            .with_for_update()
        ).scalars()
    )
    names = list(
        conn.execute(
            select(named_lease_slots.c.name)
            .where((named_lease_slots.c.workspace == ctx.workspace) & (named_lease_slots.c.session_id == sid))
            .order_by(named_lease_slots.c.name)
            .with_for_update()
        ).scalars()
    )
    return Holdings(held_leases, dict(claims), items, names)


def freed_by(conn: Connection, ctx: Context, sid: str, holdings: Holdings) -> Freed:
    """The lines of everything an ending session holds, and its own wait."""
    projects: dict[str, str] = {
        issue: project
        for issue, project in conn.execute(
            select(leases.c.issue, leases.c.project).where(
                (leases.c.session_id == sid) & leases.c.released_us.is_(None) & (leases.c.workspace == ctx.workspace)
            )
        )
    }
    issue_lines = [
        line for issue, _ in holdings.leases if (line := issue_line(conn, ctx, issue, projects[issue])) is not None
    ]
    released = sorted({p for paths in holdings.file_claims.values() for p in paths})
    files_line, files_held, files_holders = [], [], {}
    work = Work(DECISION_STEPS)  # choosing the files line, then handing off: one decision's steps
    if released:
        lock_workspace(conn, ctx)  # waiters join under it: none slips past the hand-off
        files_line = load_files_line(conn, ctx, released, work)
        if files_line:
            wanted = sorted({p for w in files_line for p in w.paths})
            files_held = [h for h in overlap_candidates(conn, ctx, wanted) if h.session_id != sid]
            files_holders = load_sessions(conn, ctx, {h.session_id for h in files_held if h.session_id is not None})
    lease_lines = [ll for name in holdings.named_leases if (ll := lease_line(conn, ctx, name, sid)) is not None]
    return Freed(
        issues=issue_lines,
        leases=lease_lines,
        files_line=files_line,
        files_held=files_held,
        files_holders=files_holders,
        own_wait=load_wait_of(conn, ctx, sid),
        work=work,
    )
