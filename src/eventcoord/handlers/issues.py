"""Handlers of issue leases: load leases, holders, declarers and the cap; decide.

On PostgreSQL a project's guard row is locked FOR UPDATE before the cap is counted, so
the count and the grant are one decision the database serialises across replicas; the
partial unique index on unreleased leases is the backstop.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, bindparam, func, select

from eventcoord.commands import ClaimIssue, ConfigureProject, ReleaseIssue, VerifyHold
from eventcoord.context import Context, Decision
from eventcoord.domain import issues as domain
from eventcoord.domain import streams
from eventcoord.domain.admission import DelayFrom, ProjectRules
from eventcoord.domain.handoff import IssueLine
from eventcoord.domain.sessions import SessionState
from eventcoord.handlers.common import SESSION_COLUMNS, WS, load_session, lock_guard
from eventcoord.handlers.waits import join_state, load_line
from eventcoord.liveness import live_clause
from eventcoord.projections.tables import issues, leases, project_leases, projects, sessions
from eventcoord.store.prepared import Prepared

_RULES = Prepared(
    lambda d: select(projects.c.wip_limit, projects.c.lock_delay_seconds, projects.c.agent_wip_limit).where(
        (projects.c.workspace == WS) & (projects.c.project == bindparam("project"))
    )
)
_AGENT_HELD = Prepared(
    lambda d: (
        select(func.count())
        .select_from(leases)
        .where(
            (leases.c.session_id == bindparam("sid"))
            & leases.c.released_us.is_(None)
            & (leases.c.workspace == WS)
            & (leases.c.project == bindparam("project"))
            & (leases.c.issue != bindparam("issue"))
        )
    )
)
_LIVE_LEASES = Prepared(
    lambda d: (
        select(func.count())
        .select_from(leases.join(sessions, sessions.c.session_id == leases.c.session_id))
        .where(
            (leases.c.workspace == WS)
            & (leases.c.project == bindparam("project"))
            & leases.c.released_us.is_(None)
            & (leases.c.issue != bindparam("issue"))
            & live_clause(sessions.c.last_seen_us, sessions.c.ended_us, bindparam("cutoff"))
        )
    )
)
_UNRELEASED = Prepared(
    lambda d: select(project_leases.c.unreleased).where(
        (project_leases.c.workspace == WS) & (project_leases.c.project == bindparam("project"))
    )
)
_LEASED_IN_PROJECT = Prepared(
    lambda d: select(leases.c.lease_id).where(
        (leases.c.workspace == WS)
        & (leases.c.issue == bindparam("issue"))
        & leases.c.released_us.is_(None)
        & (leases.c.project == bindparam("project"))
    )
)
_LEASE = select(
    leases.c.issue, leases.c.project, leases.c.session_id, leases.c.actor_key, leases.c.fencing_token
).where((leases.c.workspace == WS) & (leases.c.issue == bindparam("issue")) & leases.c.released_us.is_(None))
_LEASE_PLAIN = Prepared(lambda d: _LEASE)
_LEASE_FOR_UPDATE = Prepared(lambda d: _LEASE.with_for_update())
_ISSUE = Prepared(
    lambda d: select(
        issues.c.issue,
        issues.c.project,
        issues.c.last_fencing_token,
        issues.c.handoff_note,
        issues.c.handoff_session_id,
        issues.c.delay_from_us,
        issues.c.delay_session_id,
    ).where((issues.c.workspace == WS) & (issues.c.issue == bindparam("issue")))
)
_DECLARERS = Prepared(
    lambda d: (
        select(*SESSION_COLUMNS)
        .where(
            and_(
                sessions.c.workspace == WS,
                sessions.c.working_on == bindparam("issue"),
                live_clause(sessions.c.last_seen_us, sessions.c.ended_us, bindparam("cutoff")),
            )
        )
        .order_by(sessions.c.last_seen_us.desc())
        .limit(5)
    )
)


def lock_project(conn: Connection, ctx: Context, project: str) -> int:
    """Serialise decisions on a project's cap; returns its wip_limit (default 3)."""
    return lock_project_rules(conn, ctx, project).wip_limit


def lock_project_rules(conn: Connection, ctx: Context, project: str) -> ProjectRules:
    """Serialise decisions on a project's cap; returns its configuration (defaults if none)."""
    lock_guard(conn, ctx.workspace, streams.project(project))
    row = _RULES.first(conn, {"ws": ctx.workspace, "project": project})
    return (
        ProjectRules()
        if row is None
        else ProjectRules(int(row[0]), int(row[1]), None if row[2] is None else int(row[2]))
    )


def agent_held(conn: Connection, ctx: Context, project: str, except_issue: str, session_id: str) -> int:
    """Unreleased leases a session holds in a project (other than ``except_issue``)."""
    return int(
        _AGENT_HELD.scalar(conn, {"ws": ctx.workspace, "project": project, "issue": except_issue, "sid": session_id})
    )


def live_lease_count(
    conn: Connection, ctx: Context, project: str, except_issue: str, wip_limit: int | None = None
) -> int:
    """Live leases of a project, not counting any lease on ``except_issue``.

    With ``wip_limit`` it costs the same with 5 or 5,000 unreleased leases in the project
    as long as they cannot reach the limit: the project's unreleased leases are one row
    (``project_leases``), and while they (this issue's aside) are fewer than ``wip_limit``
    so are the live ones, and that count is returned (an upper bound: the cap admits
    either way, and only a refusal reports the number). Only when they could reach the
    limit are the live ones counted.
    """
    params = {"ws": ctx.workspace, "project": project, "issue": except_issue, "cutoff": ctx.cutoff_us}
    if wip_limit is not None:
        unreleased = int(_UNRELEASED.scalar(conn, params) or 0)
        if unreleased and _LEASED_IN_PROJECT.first(conn, params) is not None:
            unreleased -= 1
        if unreleased < wip_limit:
            return unreleased
    return int(_LIVE_LEASES.scalar(conn, params))


def load_lease(conn: Connection, ctx: Context, issue: str, *, lock: bool = False) -> domain.LeaseState | None:
    """The unreleased lease of an issue."""
    row = (_LEASE_FOR_UPDATE if lock else _LEASE_PLAIN).first(conn, {"ws": ctx.workspace, "issue": issue})
    return None if row is None else domain.LeaseState(*row)


def load_issue_view(conn: Connection, ctx: Context, issue: str, *, lock: bool = False) -> domain.IssueView:
    """The issue's registry row, lease, holder and live declarers."""
    reg = _ISSUE.first(conn, {"ws": ctx.workspace, "issue": issue})
    lease = load_lease(conn, ctx, issue, lock=lock)
    holder = load_session(conn, ctx, lease.session_id, own=False) if lease else None
    rows = _DECLARERS.rows(conn, {"ws": ctx.workspace, "issue": issue, "cutoff": ctx.cutoff_us})
    declarers = tuple(SessionState(*r) for r in rows)
    return domain.IssueView(issue, None if reg is None else domain.IssueState(*reg), lease, holder, declarers)


def claim_issue(conn: Connection, ctx: Context, cmd: ClaimIssue) -> Decision:
    caller = load_session(conn, ctx, cmd.session_id)
    rules = lock_project_rules(conn, ctx, cmd.project)
    view = load_issue_view(conn, ctx, cmd.issue, lock=True)
    live = live_lease_count(conn, ctx, cmd.project, cmd.issue, rules.wip_limit)
    state = domain.ClaimState(
        caller,
        view,
        rules.wip_limit,
        live,
        rules=rules,
        agent_held=lambda sid: (
            agent_held(conn, ctx, cmd.project, cmd.issue, sid) if rules.agent_wip_limit is not None else 0
        ),
        line=load_line(conn, ctx, "issue", cmd.issue),
        joining=lambda line, holders: join_state(conn, ctx, cmd.session_id, line, holders),
    )
    return domain.decide_claim_issue(state, cmd, ctx)


def issue_line(conn: Connection, ctx: Context, issue: str, project: str) -> IssueLine | None:
    """An issue's line, ready for a hand-off, or None when nobody waits.

    The project's guard is locked first, always: a claim that joins the line holds it too,
    so no waiter can join between this read and the commit of the release.
    """
    rules = lock_project_rules(conn, ctx, project)
    line = load_line(conn, ctx, "issue", issue)
    if not line:
        return None
    view = load_issue_view(conn, ctx, issue)
    reg = view.registry
    delay = (
        DelayFrom(reg.delay_from_us, reg.delay_session_id)
        if reg and reg.delay_from_us is not None and reg.delay_session_id
        else None
    )
    return IssueLine(
        issue=issue,
        project=project,
        last_fencing_token=reg.last_fencing_token if reg else 0,
        handoff_note=reg.handoff_note if reg else None,
        rules=rules,
        live_count=lambda: live_lease_count(conn, ctx, project, issue, rules.wip_limit),
        agent_held=lambda sid: agent_held(conn, ctx, project, issue, sid) if rules.agent_wip_limit is not None else 0,
        delay=delay,
        line=line,
    )


def release_issue(conn: Connection, ctx: Context, cmd: ReleaseIssue) -> Decision:
    caller = load_session(conn, ctx, cmd.session_id)
    peek = load_lease(conn, ctx, cmd.issue)
    free = (
        issue_line(conn, ctx, cmd.issue, peek.project)
        if peek is not None and peek.session_id == cmd.session_id
        else None
    )
    state = domain.ReleaseState(caller, load_lease(conn, ctx, cmd.issue, lock=True), lambda: free)
    return domain.decide_release_issue(state, cmd, ctx)


def verify_hold(conn: Connection, ctx: Context, cmd: VerifyHold) -> Decision:
    state = domain.VerifyState(load_session(conn, ctx, cmd.session_id), load_issue_view(conn, ctx, cmd.issue))
    return domain.decide_verify_hold(state, cmd, ctx)


def configure_project(conn: Connection, ctx: Context, cmd: ConfigureProject) -> Decision:
    return domain.decide_configure_project(None, cmd, ctx)
