"""Read models of the issue tier: projects (WIP limit), issues (fencing, handoff), leases,
and the count of each project's unreleased leases (``project_leases``, for the WIP cap).

The appliers of grants and releases run on every claim and release: their statements are
built once (``Prepared``), and a grant upserts its issue row in one statement.
"""

from __future__ import annotations

from sqlalchemy import Connection, String, bindparam, literal, null, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable, Update

from eventcoord.events import HandoffNoted, LeaseGranted, LeaseReleased, ProjectConfigured
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from .base import Appliers
from .tables import issues, leases, project_leases, projects


def project_configured(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, ProjectConfigured)
    key = (projects.c.workspace == r.metadata.workspace) & (projects.c.project == e.project)
    delay = e.lock_delay_seconds if isinstance(e.lock_delay_seconds, int) else 0
    agent_limit = e.agent_wip_limit if isinstance(e.agent_wip_limit, int) else None
    values = {"wip_limit": e.wip_limit, "lock_delay_seconds": delay, "agent_wip_limit": agent_limit}
    if conn.execute(update(projects).where(key).values(**values)).rowcount == 0:
        conn.execute(projects.insert().values(workspace=r.metadata.workspace, project=e.project, **values))


def _upsert_issue(dialect: str) -> Executable:
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(issues)
    # A grant consumes the handoff note: the next grant answers only with newer notes.
    return insert.values(
        workspace=bindparam("ws"),
        issue=bindparam("issue"),
        project=bindparam("project"),
        last_fencing_token=bindparam("token"),
    ).on_conflict_do_update(
        index_elements=[issues.c.workspace, issues.c.issue],
        set_={"last_fencing_token": bindparam("token2"), "handoff_note": null(), "handoff_session_id": null()},
    )


# Each names the one row it writes (``rows``): a claim's writes may then go with the next
# claim's reads of other rows (``handlers/issues._CLAIM_READS``).
_UPSERT_ISSUE = Prepared(_upsert_issue, rows={"issues": ("ws", "issue")})
_INSERT_LEASE = Prepared(
    lambda d: leases.insert().values(
        lease_id=bindparam("id"),
        workspace=bindparam("ws"),
        issue=bindparam("issue"),
        project=bindparam("project"),
        session_id=bindparam("sid"),
        actor_key=bindparam("actor"),
        fencing_token=bindparam("token"),
        granted_us=bindparam("at"),
    ),
    rows={"leases": ("ws", "issue")},
)


def _release() -> Update:
    """Release an issue's unreleased lease (binds ``ws``, ``issue``, ``at``, ``reason``)."""
    return (
        update(leases)
        .where(
            (leases.c.workspace == bindparam("ws"))
            & (leases.c.issue == bindparam("issue"))
            & leases.c.released_us.is_(None)
        )
        .values(released_us=bindparam("at"), release_reason=bindparam("reason"))
    )


_RELEASE_LEASE = Prepared(lambda d: _release().returning(leases.c.project))


def _count_unreleased(dialect: str) -> Executable:
    """Add ``delta`` to a project's unreleased leases (the row is created by its first grant)."""
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(project_leases)
    return insert.values(
        workspace=bindparam("ws"), project=bindparam("project"), unreleased=bindparam("delta")
    ).on_conflict_do_update(
        index_elements=[project_leases.c.workspace, project_leases.c.project],
        set_={"unreleased": project_leases.c.unreleased + bindparam("delta2")},
    )


_COUNT_UNRELEASED = Prepared(
    _count_unreleased, rows={"project_leases": ("ws", "project")}, adds={"project_leases": ("unreleased", "delta")}
)


_ISSUE = (issues.c.workspace == bindparam("ws")) & (issues.c.issue == bindparam("issue"))
_DELAY_FROM = Prepared(
    lambda d: update(issues).where(_ISSUE).values(delay_from_us=bindparam("at"), delay_session_id=bindparam("sid")),
    rows={"issues": ("ws", "issue")},
)
_HANDOFF_NOTE = Prepared(
    lambda d: update(issues).where(_ISSUE).values(handoff_note=bindparam("note"), handoff_session_id=bindparam("sid")),
    rows={"issues": ("ws", "issue")},
)


def lease_granted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, LeaseGranted)
    ws = r.metadata.workspace
    _UPSERT_ISSUE.write(
        conn, {"ws": ws, "issue": e.issue, "project": e.project, "token": e.fencing_token, "token2": e.fencing_token}
    )
    _INSERT_LEASE.write(
        conn,
        {
            "id": r.position,
            "ws": ws,
            "issue": e.issue,
            "project": e.project,
            "sid": e.session_id,
            "actor": e.actor_key,
            "token": e.fencing_token,
            "at": r.recorded_us,
        },
    )
    _COUNT_UNRELEASED.write(conn, {"ws": ws, "project": e.project, "delta": 1, "delta2": 1})


def _release_counted(named: bool = False) -> Executable:
    """PostgreSQL: release the lease and count it off its project, in one statement.

    The release's ``RETURNING`` feeds the count as a data-modifying CTE, so the pair is one
    deferrable write (``Prepared.write``) rather than a read of the project, then a write.
    ``named``: the event names the project (``project``), so the write names the count's
    row too, and a batch may defer the releases of other projects beside it.
    """
    released = _release().returning(leases.c.workspace, leases.c.project).cte("released")
    project = bindparam("project", type_=String) if named else released.c.project
    count = postgresql.insert(project_leases).from_select(
        ["workspace", "project", "unreleased"], select(released.c.workspace, project, literal(-1))
    )
    return count.on_conflict_do_update(
        index_elements=[project_leases.c.workspace, project_leases.c.project],
        set_={"unreleased": project_leases.c.unreleased - 1},
    ).add_cte(released)


_RELEASE_COUNTED = Prepared(lambda d: _release_counted(), rows={"leases": ("ws", "issue")})
#: The same, for a release that names its project (``LeaseReleased.project``, stored shape
#: v3): it names the rows of both tables it writes.
_RELEASE_COUNTED_IN = Prepared(
    lambda d: _release_counted(named=True), rows={"leases": ("ws", "issue"), "project_leases": ("ws", "project")}
)


def lease_released(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, LeaseReleased)
    ws = r.metadata.workspace
    params = {"ws": ws, "issue": e.issue, "at": r.recorded_us, "reason": e.reason}
    if conn.dialect.name == "postgresql":
        if isinstance(e.project, str):
            _RELEASE_COUNTED_IN.write(conn, {**params, "project": e.project})
        else:  # written before the event named its project: the lease's row says it
            _RELEASE_COUNTED.write(conn, params)
    else:
        for (project,) in _RELEASE_LEASE.rows(conn, params):
            _COUNT_UNRELEASED.write(conn, {"ws": ws, "project": project, "delta": -1, "delta2": -1})
    if e.reason in ("expired", "superseded"):
        # The lock delay counts from here (docs/protocol.md#lock-delay); a queue re-queue records no ended_at.
        ended = e.ended_at_us if isinstance(e.ended_at_us, int) else r.recorded_us
        _DELAY_FROM.write(conn, {"ws": ws, "issue": e.issue, "at": ended, "sid": e.session_id})


def handoff_noted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, HandoffNoted)
    ws = r.metadata.workspace
    _HANDOFF_NOTE.write(conn, {"ws": ws, "issue": e.issue, "note": e.note, "sid": e.session_id})


APPLIERS: Appliers = {
    ProjectConfigured: project_configured,
    LeaseGranted: lease_granted,
    LeaseReleased: lease_released,
    HandoffNoted: handoff_noted,
}
