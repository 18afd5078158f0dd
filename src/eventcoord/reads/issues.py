"""What the issue tier's decisions read: leases, holders, declarers, the cap, a line to hand off.

On PostgreSQL a project's guard row is locked FOR UPDATE before the cap is counted, so
the count and the grant are one decision the database serialises across replicas; the
partial unique index on unreleased leases is the backstop. SQLite's one writer
serialises every decision: it takes no guard, and reads a claim in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    Connection,
    Executable,
    Select,
    and_,
    bindparam,
    exists,
    func,
    literal_column,
    select,
    true,
)
from sqlalchemy.sql.elements import Label

from eventcoord.commands import ClaimIssue, ReleaseIssue
from eventcoord.context import Context
from eventcoord.domain import issues as domain
from eventcoord.domain import streams
from eventcoord.domain.admission import DelayFrom, ProjectRules
from eventcoord.domain.handoff import IssueLine
from eventcoord.domain.sessions import SessionState
from eventcoord.domain.waits import waiter_live
from eventcoord.liveness import live_clause
from eventcoord.projections.sessions import PG_DECLARING_KEY, declaring_key
from eventcoord.projections.tables import issues, leases, project_leases, projects, sessions, waits
from eventcoord.reads.common import (
    SESSION_COLUMNS,
    WS,
    guard_upsert,
    load_session,
    load_session_and_lock_guard,
    lock_guard,
    own_session,
)
from eventcoord.reads.waits import load_line
from eventcoord.store.loaders import loader
from eventcoord.store.prepared import Prepared, indexed_by, unindexed

_RULE_COLUMNS = (projects.c.wip_limit, projects.c.lock_delay_seconds, projects.c.agent_wip_limit)
_OF_PROJECT = (projects.c.workspace == WS) & (projects.c.project == bindparam("project"))
#: A one-row base: rows LEFT JOINed to it are NULLs when missing, rather than no row.
_ONE = select(literal_column("1").label("one")).subquery("one")
_RULES = Prepared(lambda d: select(*_RULE_COLUMNS).where(_OF_PROJECT))


def _locked_rules(dialect: str) -> Executable:
    """PostgreSQL: a project's guard locked and its rules read, in one statement.

    The rules are not what the guard protects (``configure_project`` does not take it),
    so reading them in the statement's snapshot, taken before the lock was granted, reads
    what a separate read after it could have read an instant earlier. (A project's
    unreleased count is protected: :data:`_CLAIM_READS` runs after the lock.) A guard row
    it inserts is not counted as a write of the batch: a refusal after it keeps the row,
    which is harmless (a lock row, in no read model) and saves rolling the batch back.
    """
    assert dialect == "postgresql", "SQLite runs the guard and the rules as two statements"
    return (
        select(*_RULE_COLUMNS).select_from(_ONE.outerjoin(projects, _OF_PROJECT)).add_cte(guard_upsert().cte("guard"))
    )


_LOCKED_RULES = Prepared(_locked_rules)
# An agent's unreleased leases in a project (but one issue): by its session's index
# (SQLite names it: without statistics it read every unreleased lease of the workspace
# through ``uq_leases_unreleased``, which also leads with the workspace).
_AGENT_HELD_SELECT = (
    select(func.count())
    .select_from(leases)
    .where(
        (leases.c.session_id == bindparam("sid"))
        & leases.c.session_id.is_not(None)  # (for INDEXED BY: the index's own condition)
        & leases.c.released_us.is_(None)
        & (leases.c.workspace == WS)
        & (leases.c.project == bindparam("project"))
        & (leases.c.issue != bindparam("issue"))
    )
)
_AGENT_HELD = Prepared(lambda d: indexed_by(d, _AGENT_HELD_SELECT, "leases", "ix_leases_session_live"))
# A project's live leases, read through ``ix_leases_project_live`` only: never every
# unreleased lease of the workspace (``uq_leases_unreleased`` by its workspace, SQLite's
# choice without statistics: named out with INDEXED BY) or of every session
# (``ix_leases_session_live``, a generic plan's choice on empty tables when the leases were
# joined to their sessions). PostgreSQL probes each lease's session in a lateral subquery
# (``OFFSET 0``: never flattened into a join a generic plan could scan the sessions for).
_OF_PROJECT_LIVE = (
    (leases.c.workspace == WS)
    & (leases.c.project == bindparam("project"))
    & leases.c.released_us.is_(None)
    & (leases.c.issue != bindparam("issue"))
)
_LIVE_HOLDER = live_clause(sessions.c.last_seen_us, sessions.c.ended_us, bindparam("cutoff"))


def _live_leases(d: str) -> Any:
    if d == "sqlite":
        joined = leases.join(sessions, sessions.c.session_id == leases.c.session_id)
        # (``project IS NOT NULL`` spelled out: SQLite infers it from ``project = ?`` for the
        # planner's own choice, not for a partial index named by INDEXED BY)
        counted = (
            select(func.count())
            .select_from(joined)
            .where(_OF_PROJECT_LIVE & leases.c.project.is_not(None) & _LIVE_HOLDER)
        )
        return indexed_by(d, counted, "leases", "ix_leases_project_live")
    holder = (
        select(literal_column("1").label("one"))
        .where((sessions.c.session_id == leases.c.session_id) & _LIVE_HOLDER)
        .offset(literal_column("0"))
        .lateral("holder")
    )
    return select(func.count()).select_from(leases.join(holder, true())).where(_OF_PROJECT_LIVE)


_LIVE_LEASES = Prepared(_live_leases)
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
        # Not indexable on purpose: only uq_leases_unreleased (workspace, issue) may serve
        # this, never ix_leases_project_live, whatever the statistics say. (Not ``project ||
        # ''``: ``||`` is strict, so comparing it implies ``project IS NOT NULL``, that
        # index's predicate, and a generic plan made before ANALYZE read it by the
        # workspace alone, every unreleased lease: 0.5 ms behind 5,000 of them.)
        & (func.coalesce(leases.c.project, literal_column("''")) == bindparam("project"))
    )
)
_LEASE = select(
    leases.c.issue, leases.c.project, leases.c.session_id, leases.c.actor_key, leases.c.fencing_token
).where((leases.c.workspace == WS) & (leases.c.issue == bindparam("issue")) & leases.c.released_us.is_(None))
_LEASE_PLAIN = Prepared(lambda d: _LEASE)
_LEASE_FOR_UPDATE = Prepared(lambda d: _LEASE.with_for_update())
_ISSUE_COLUMNS = (
    issues.c.issue,
    issues.c.project,
    issues.c.last_fencing_token,
    issues.c.handoff_note,
    issues.c.handoff_session_id,
    issues.c.delay_from_us,
    issues.c.delay_session_id,
)


def _declaring(dialect: str, revived: bool = False) -> ColumnElement[bool]:
    """The live sessions that declared working on an issue (binds ``declaring``, ``cutoff``).

    PostgreSQL compares the declaring key, which only ``ix_sessions_declaring_key`` can
    serve (0013_declaring_key); SQLite the columns, which ``ix_sessions_working_on`` serves.
    ``revived`` (PostgreSQL): a session in the list ``revived`` counts as live, whatever its
    ``last_seen_us`` (a sign of life of it is pending in the batch: ``counts_pending_life``).
    """
    if dialect == "postgresql":
        live: ColumnElement[bool] = sessions.c.last_seen_us > bindparam("cutoff")
        if revived:
            live = live | sessions.c.session_id.op("=")(func.any(bindparam("revived")))
        return (literal_column(PG_DECLARING_KEY) == bindparam("declaring")) & live
    return and_(
        sessions.c.workspace == WS,
        sessions.c.working_on == bindparam("issue"),
        live_clause(sessions.c.last_seen_us, sessions.c.ended_us, bindparam("cutoff")),
    )


def _claim_reads(dialect: str, caller: bool = False) -> Select[Any]:
    """A project's rules, its unreleased leases and an issue's registry row: one round trip.

    Primary-key lookups, each LEFT JOINed to a one-row base so that a missing row is NULLs
    rather than no row (on PostgreSQL each statement is a round trip, the main cost of a
    command). Columns, sliced by the ``_AT_*`` below: the rules, the unreleased count, the
    issue's row, whether anyone waits for it or declared working on it, and its unreleased
    lease, locked (``FOR UPDATE`` in a CTE: PostgreSQL locks no row on the nullable side of
    an outer join). It runs after the project's guard is locked, in a statement of its own,
    so that it reads what the guard's previous holder committed.

    ``caller``: the caller's sessions row (``sid``) too, after the lease's columns (an alias:
    the declarers' subquery must not be correlated to it), and the declarers count the
    sessions ``revived`` as live (PostgreSQL).
    """
    lease = _locked_lease(dialect)
    joined = (
        _ONE.outerjoin(projects, _OF_PROJECT)
        .outerjoin(
            project_leases,
            (project_leases.c.workspace == WS) & (project_leases.c.project == bindparam("project")),
        )
        .outerjoin(issues, (issues.c.workspace == WS) & (issues.c.issue == bindparam("issue")))
        .outerjoin(lease, true())
    )
    # Whether anyone waits for the issue or declared working on it: both are rare, and
    # only then are the line and the declarers read (two round trips fewer for a claim).
    declared = exists().where(_declaring(dialect, revived=caller))
    columns = (*_RULE_COLUMNS, project_leases.c.unreleased, *_ISSUE_COLUMNS, _waiting(), declared.label("d"))
    own: tuple[Any, ...] = ()
    if caller:
        # By its id alone (the primary key), as _RELEASE_PEEK reads it.
        me = sessions.alias("caller")
        joined = joined.outerjoin(me, (me.c.session_id == bindparam("sid")) & (unindexed(me.c.workspace) == WS))
        own = tuple(me.c[c.name] for c in SESSION_COLUMNS)
    return select(*columns, *lease.c, *own).select_from(joined)


def _waiting() -> Label[bool]:
    """Whether anyone waits in an issue's line (binds ``ws``, ``issue``)."""
    line = (waits.c.workspace == WS) & (waits.c.kind == "issue") & (waits.c.key == bindparam("issue"))
    return exists().where(line).label("w")


def _locked_lease(dialect: str) -> CTE:
    """An issue's unreleased lease, locked on PostgreSQL (binds ``ws``, ``issue``)."""
    return (_LEASE.with_for_update() if dialect == "postgresql" else _LEASE).cte("lease")


#: The rows ``_CLAIM_READS`` reads by key (a read-model write of other rows may go with it).
_CLAIM_ROWS = {
    "projects": ("ws", "project"),
    "project_leases": ("ws", "project"),
    "issues": ("ws", "issue"),
    "leases": ("ws", "issue"),
    "waits": ("ws", "issue"),
}
_CLAIM_READS = Prepared(_claim_reads, rows=_CLAIM_ROWS)
#: Once the batch holds the project's guard (PostgreSQL): ``_CLAIM_READS`` and, after its
#: columns, the caller's session (unlocked, as ``load_session_and_lock_guard`` reads it), in
#: one round trip.
_SESSION_AND_CLAIM_READS = Prepared(
    lambda d: _claim_reads(d, caller=True), rows={**_CLAIM_ROWS, "sessions": ("sid",)}, counts_pending_life=True
)
#: A release's first read: the caller's session and the issue's unreleased lease, unlocked.
_RELEASE_PEEK = Prepared(
    lambda d: select(*SESSION_COLUMNS, *_LEASE.selected_columns).select_from(
        # By its id alone (the primary key): no index that leads with the workspace may serve it.
        _ONE.outerjoin(
            sessions, (sessions.c.session_id == bindparam("sid")) & (unindexed(sessions.c.workspace) == WS)
        ).outerjoin(
            leases, (leases.c.workspace == WS) & (leases.c.issue == bindparam("issue")) & leases.c.released_us.is_(None)
        )
    ),
    session_row="sid",
    rows={"leases": ("ws", "issue")},
)


#: A release's read after its project's guard is locked: the lease, locked, and whether
#: anyone waits (the line is read only then).
def _release_reads(dialect: str, caller: bool = False) -> Select[Any]:
    """``caller``: the caller's sessions row (``sid``, by its id alone) too, after the lease."""
    lease = _locked_lease(dialect)
    joined = _ONE.outerjoin(lease, true())
    if not caller:
        return select(_waiting(), *lease.c).select_from(joined)
    joined = joined.outerjoin(
        sessions, (sessions.c.session_id == bindparam("sid")) & (unindexed(sessions.c.workspace) == WS)
    )
    return select(_waiting(), *lease.c, *SESSION_COLUMNS).select_from(joined)


_RELEASE_READS = Prepared(_release_reads)
#: Once the batch holds the guard of the project of the issue's lease (PostgreSQL): the
#: caller's session, whether anyone waits, and the lease, locked; one round trip.
_RELEASE_LOCKED_READS = Prepared(
    lambda d: _release_reads(d, caller=True),
    session_row="sid",
    rows={"leases": ("ws", "issue"), "waits": ("ws", "issue")},
)
#: Where ``_CLAIM_READS``'s columns are: rules, unreleased count, issue row, waiting, declared, lease.
_AT_RULES = slice(0, len(_RULE_COLUMNS))
_AT_UNRELEASED = _AT_RULES.stop
_AT_ISSUE = slice(_AT_UNRELEASED + 1, _AT_UNRELEASED + 1 + len(_ISSUE_COLUMNS))
_AT_WAITING = _AT_ISSUE.stop
_AT_DECLARED = _AT_WAITING + 1
_AT_LEASE = slice(_AT_DECLARED + 1, None)
#: Where a claim's reads ahead put the unreleased count and the declarers (``_CLAIM_READS``'s
#: layout, the declared flag's place holding them).
CLAIM_UNRELEASED_AT = _AT_UNRELEASED
CLAIM_DECLARED_AT = _AT_DECLARED
_ISSUE = Prepared(
    lambda d: select(*_ISSUE_COLUMNS).where((issues.c.workspace == WS) & (issues.c.issue == bindparam("issue")))
)
_DECLARERS = Prepared(
    lambda d: select(*SESSION_COLUMNS).where(_declaring(d)).order_by(sessions.c.last_seen_us.desc()).limit(5)
)


def lock_project(conn: Connection, ctx: Context, project: str) -> int:
    """Serialise decisions on a project's cap; returns its wip_limit (default 3)."""
    return lock_project_rules(conn, ctx, project).wip_limit


@loader
def lock_project_rules(conn: Connection, ctx: Context, project: str) -> ProjectRules:
    """Serialise decisions on a project's cap; returns its configuration (defaults if none)."""
    if conn.dialect.name == "sqlite":  # no guard to lock (see lock_guard)
        return project_rules_after_lock(conn, ctx, project)
    params = {"ws": ctx.workspace, "key": streams.project(project), "project": project}
    return project_rules(_LOCKED_RULES.first(conn, params))  # the guard and the rules: one round trip


def project_rules_after_lock(conn: Connection, ctx: Context, project: str) -> ProjectRules:
    """A project's rules, read once its guard is held."""
    return project_rules(_RULES.first(conn, {"ws": ctx.workspace, "project": project}))


def project_rules(row: Sequence[Any] | None) -> ProjectRules:
    """A project's rules from (wip_limit, lock_delay_seconds, agent_wip_limit), NULLs if never configured."""
    if row is None or row[0] is None:
        return ProjectRules()
    return ProjectRules(int(row[0]), int(row[1]), None if row[2] is None else int(row[2]))


def agent_held(conn: Connection, ctx: Context, project: str, except_issue: str, session_id: str) -> int:
    """Unreleased leases a session holds in a project (other than ``except_issue``)."""
    return int(
        _AGENT_HELD.scalar(conn, {"ws": ctx.workspace, "project": project, "issue": except_issue, "sid": session_id})
    )


def agents_held(
    conn: Connection, ctx: Context, project: str, except_issue: str, session_ids: Sequence[str]
) -> dict[str, int]:
    """:func:`agent_held` of several sessions, in one statement (its own for a single one)."""
    wanted = list(dict.fromkeys(session_ids))
    if len(wanted) <= 1:
        return {sid: agent_held(conn, ctx, project, except_issue, sid) for sid in wanted}
    counted = conn.execute(
        select(leases.c.session_id, func.count())
        .where(
            leases.c.session_id.in_(wanted)
            & leases.c.released_us.is_(None)
            & (leases.c.workspace == ctx.workspace)
            & (leases.c.project == project)
            & (leases.c.issue != except_issue)
        )
        .group_by(leases.c.session_id)
    )
    found = {str(sid): int(n) for sid, n in counted}
    return {sid: found.get(sid, 0) for sid in wanted}


def live_lease_count(
    conn: Connection, ctx: Context, project: str, except_issue: str, wip_limit: int | None = None
) -> int:
    """Live leases of a project, not counting any lease on ``except_issue``.

    With ``wip_limit`` it costs the same with 5 or 5,000 unreleased leases in the project
    as long as they cannot reach the limit: see :func:`cap_count`.
    """
    params = {"ws": ctx.workspace, "project": project, "issue": except_issue, "cutoff": ctx.cutoff_us}
    if wip_limit is None:
        return int(_LIVE_LEASES.scalar(conn, params))
    unreleased = int(_UNRELEASED.scalar(conn, params) or 0)
    leased_here = bool(unreleased) and _LEASED_IN_PROJECT.first(conn, params) is not None
    return cap_count(conn, ctx, project, except_issue, wip_limit, unreleased, leased_here)


def cap_count(
    conn: Connection,
    ctx: Context,
    project: str,
    except_issue: str,
    wip_limit: int,
    unreleased: int,
    leased_here: bool,
) -> int:
    """Live leases of a project (``except_issue``'s aside), as far as the cap needs to know.

    ``unreleased`` is the project's row of ``project_leases``, ``leased_here`` whether one of
    them is on ``except_issue``. While the others are fewer than ``wip_limit`` so are the
    live ones, and that count is returned (an upper bound: the cap admits either way, and
    only a refusal reports the number); only when they could reach the limit are the live
    ones counted. So the cap costs the same with 5 or 5,000 unreleased leases in a project.
    """
    others = unreleased - 1 if leased_here and unreleased else unreleased
    if others < wip_limit:
        return others
    params = {"ws": ctx.workspace, "project": project, "issue": except_issue, "cutoff": ctx.cutoff_us}
    return int(_LIVE_LEASES.scalar(conn, params))


def load_lease(conn: Connection, ctx: Context, issue: str, *, lock: bool = False) -> domain.LeaseState | None:
    """The unreleased lease of an issue."""
    row = (_LEASE_FOR_UPDATE if lock else _LEASE_PLAIN).first(conn, {"ws": ctx.workspace, "issue": issue})
    return None if row is None else domain.LeaseState(*row)


def load_issue_view(conn: Connection, ctx: Context, issue: str, *, lock: bool = False) -> domain.IssueView:
    """The issue's registry row, lease, holder and live declarers."""
    reg = _ISSUE.first(conn, {"ws": ctx.workspace, "issue": issue})
    return issue_view(conn, ctx, issue, None if reg is None else domain.IssueState(*reg), lock=lock)


def issue_view(
    conn: Connection, ctx: Context, issue: str, registry: domain.IssueState | None, *, lock: bool = False
) -> domain.IssueView:
    """The issue's lease, holder and live declarers, beside its registry row read already."""
    return issue_view_with(conn, ctx, issue, registry, load_lease(conn, ctx, issue, lock=lock))


def issue_view_with(
    conn: Connection,
    ctx: Context,
    issue: str,
    registry: domain.IssueState | None,
    lease: domain.LeaseState | None,
    *,
    declared: bool = True,
) -> domain.IssueView:
    """The issue's holder and live declarers, beside its registry row and lease read already.

    ``declared=False``: the caller knows that no live session declared working on the issue.
    """
    holder = load_session(conn, ctx, lease.session_id, own=False) if lease else None
    params = {
        "ws": ctx.workspace,
        "issue": issue,
        "cutoff": ctx.cutoff_us,
        "declaring": declaring_key(ctx.workspace, issue),
    }
    rows = _DECLARERS.rows(conn, params) if declared else ()
    declarers = tuple(SessionState(*r) for r in rows)
    return domain.IssueView(issue, registry, lease, holder, declarers)


def issue_line(conn: Connection, ctx: Context, issue: str, project: str) -> IssueLine | None:
    """An issue's line, ready for a hand-off, or None when nobody waits.

    The project's guard is locked first, always: a claim that joins the line holds it too,
    so no waiter can join between this read and the commit of the release.
    """
    lock_guard(conn, ctx.workspace, streams.project(project))
    return _line_after_lock(conn, ctx, issue, project)


def _line_after_lock(conn: Connection, ctx: Context, issue: str, project: str) -> IssueLine | None:
    """:func:`issue_line` once the project's guard is held."""
    line = load_line(conn, ctx, "issue", issue)
    if not line:
        return None
    rules = project_rules_after_lock(conn, ctx, project)
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
        live_count=live_lease_count(conn, ctx, project, issue, rules.wip_limit),
        agent_held=agents_held(conn, ctx, project, issue, [w.session_id for w in line if waiter_live(w, ctx)])
        if rules.agent_wip_limit is not None
        else {},
        delay=delay,
        line=line,
    )


@loader
def load_claim(conn: Connection, ctx: Context, cmd: ClaimIssue) -> domain.ClaimState:
    """What claim_issue decides on, read once the project's guard is locked (PostgreSQL)."""
    if conn.dialect.name == "sqlite":  # no guard to lock: the session with the rest, in one statement
        return claim_after_lock(conn, ctx, cmd, ())
    caller = load_session_and_lock_guard(conn, ctx, cmd.session_id, streams.project(cmd.project))
    row = _CLAIM_READS.first(conn, _claim_params(ctx, cmd))
    assert row is not None  # the one-row base
    return claim_state(conn, ctx, cmd, caller, row)


def _claim_params(ctx: Context, cmd: ClaimIssue) -> dict[str, Any]:
    return {
        "ws": ctx.workspace,
        "project": cmd.project,
        "issue": cmd.issue,
        "cutoff": ctx.cutoff_us,
        "declaring": declaring_key(ctx.workspace, cmd.issue),
    }


def claim_after_lock(conn: Connection, ctx: Context, cmd: ClaimIssue, revived: Sequence[str]) -> domain.ClaimState:
    """:func:`load_claim` once the project's guard is held (or on SQLite, which takes none):
    the caller's session read with the rest, in one statement. ``revived``: sessions whose
    sign of life is pending, which count as live declarers (a PostgreSQL batch's)."""
    params = {**_claim_params(ctx, cmd), "sid": cmd.session_id, "revived": list(revived)}
    row = _SESSION_AND_CLAIM_READS.first(conn, params)
    assert row is not None  # the one-row base
    return claim_with_session(conn, ctx, cmd, row)


def claim_with_session(conn: Connection, ctx: Context, cmd: ClaimIssue, row: Sequence[Any]) -> domain.ClaimState:
    """A claim's state from a row of ``_SESSION_AND_CLAIM_READS`` (the caller's session last)."""
    session, row = row[-len(SESSION_COLUMNS) :], row[: -len(SESSION_COLUMNS)]
    caller = None if session[0] is None else own_session(ctx, session)
    return claim_state(conn, ctx, cmd, caller, row)


def claim_state(
    conn: Connection, ctx: Context, cmd: ClaimIssue, caller: SessionState | None, row: Sequence[Any]
) -> domain.ClaimState:
    """A claim's state from a row of ``_CLAIM_READS``: what it says, and the reads it asks for
    (the holder, the declarers, the live count, the line and the leases per agent)."""
    rules = project_rules(row[_AT_RULES])
    registry = None if row[_AT_ISSUE.start] is None else domain.IssueState(*row[_AT_ISSUE])
    lease = None if row[_AT_LEASE.start] is None else domain.LeaseState(*row[_AT_LEASE])
    view = issue_view_with(conn, ctx, cmd.issue, registry, lease, declared=bool(row[_AT_DECLARED]))
    leased_here = view.lease is not None and view.lease.project == cmd.project
    live = cap_count(conn, ctx, cmd.project, cmd.issue, rules.wip_limit, int(row[_AT_UNRELEASED] or 0), leased_here)
    line = load_line(conn, ctx, "issue", cmd.issue) if row[_AT_WAITING] else []
    held: dict[str, int] = {}
    if rules.agent_wip_limit is not None:  # a per-agent limit: the leases of the caller and the waiters ahead
        ahead = next((i for i, w in enumerate(line) if w.session_id == cmd.session_id), len(line))
        held = agents_held(conn, ctx, cmd.project, cmd.issue, [cmd.session_id, *(w.session_id for w in line[:ahead])])
    return domain.ClaimState(caller, view, rules.wip_limit, live, rules=rules, agent_held=held, line=line)


@loader
def load_release(conn: Connection, ctx: Context, cmd: ReleaseIssue) -> domain.ReleaseState:
    """What release_issue decides on: the caller, the lease (locked) and the line it frees.

    A release by its holder locks the guard of the lease's project first, always: a claim
    that joins the line holds it too, so no waiter can join between this read and the
    commit (as in :func:`issue_line`). SQLite takes no guard: one statement reads it all.
    """
    params = _release_params(ctx, cmd)
    if conn.dialect.name == "sqlite":
        return release_state(conn, ctx, cmd, *release_after_lock(conn, ctx, cmd))
    row = _RELEASE_PEEK.first(conn, params)
    assert row is not None  # the one-row base
    n = len(SESSION_COLUMNS)
    caller = None if row[0] is None else own_session(ctx, row[:n])
    peek = None if row[n] is None else domain.LeaseState(*row[n:])
    if peek is None or peek.session_id != cmd.session_id:
        return domain.ReleaseState(caller, load_lease(conn, ctx, cmd.issue, lock=True))
    lock_guard(conn, ctx.workspace, streams.project(peek.project))
    return release_state(conn, ctx, cmd, caller, *release_reads(conn, ctx, cmd))


def _release_params(ctx: Context, cmd: ReleaseIssue) -> dict[str, Any]:
    return {"ws": ctx.workspace, "sid": cmd.session_id, "issue": cmd.issue}


Lease = domain.LeaseState | None


def release_reads(conn: Connection, ctx: Context, cmd: ReleaseIssue) -> tuple[bool, Lease]:
    """Once the guard of the lease's project is held: whether anyone waits, and the lease, locked."""
    row = _RELEASE_READS.first(conn, _release_params(ctx, cmd))
    assert row is not None  # the one-row base
    return bool(row[0]), None if row[1] is None else domain.LeaseState(*row[1:])


def release_after_lock(conn: Connection, ctx: Context, cmd: ReleaseIssue) -> tuple[SessionState | None, bool, Lease]:
    """:func:`release_reads` and the caller's session, in one statement."""
    row = _RELEASE_LOCKED_READS.first(conn, _release_params(ctx, cmd))
    assert row is not None  # the one-row base
    return release_with_session(ctx, row)


def release_with_session(ctx: Context, row: Sequence[Any]) -> tuple[SessionState | None, bool, Lease]:
    """A row of ``_RELEASE_LOCKED_READS``: the caller's session, whether anyone waits, the lease."""
    n = len(SESSION_COLUMNS)
    session, waiting, lease = row[-n:], row[0], row[1:-n]
    caller = None if session[0] is None else own_session(ctx, session)
    return caller, bool(waiting), None if lease[0] is None else domain.LeaseState(*lease)


def release_state(
    conn: Connection, ctx: Context, cmd: ReleaseIssue, caller: SessionState | None, waiting: bool, lease: Lease
) -> domain.ReleaseState:
    """A release's state once what its lease's guard protects was read: the line it frees,
    read only when anyone waits and the caller holds the lease."""
    mine = lease is not None and lease.session_id == cmd.session_id
    free = _line_after_lock(conn, ctx, cmd.issue, lease.project) if mine and waiting and lease else None
    return domain.ReleaseState(caller, lease, free)
