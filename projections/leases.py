"""Read models of the issue tier: projects (WIP limit), issues (fencing, handoff), leases."""

from __future__ import annotations

from sqlalchemy import Connection, update

from eventcoord.events import HandoffNoted, LeaseGranted, LeaseReleased, ProjectConfigured
from eventcoord.store.log import RecordedEvent

from .base import Appliers
from .tables import issues, leases, projects


def project_configured(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, ProjectConfigured)
    key = (projects.c.workspace == r.metadata.workspace) & (projects.c.project == e.project)
    if conn.execute(update(projects).where(key).values(wip_limit=e.wip_limit)).rowcount == 0:
        conn.execute(projects.insert().values(workspace=r.metadata.workspace, project=e.project, wip_limit=e.wip_limit))


def lease_granted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, LeaseGranted)
    ws = r.metadata.workspace
    key = (issues.c.workspace == ws) & (issues.c.issue == e.issue)
    # A grant consumes the handoff note: the next grant answers only with newer notes.
    moved = conn.execute(
        update(issues).where(key).values(last_fencing_token=e.fencing_token, handoff_note=None, handoff_session_id=None)
    ).rowcount
    if moved == 0:
        conn.execute(
            issues.insert().values(workspace=ws, issue=e.issue, project=e.project, last_fencing_token=e.fencing_token)
        )
    conn.execute(
        leases.insert().values(
            lease_id=r.position,
            workspace=ws,
            issue=e.issue,
            project=e.project,
            session_id=e.session_id,
            actor_key=e.actor_key,
            fencing_token=e.fencing_token,
            granted_us=r.recorded_us,
        )
    )


def lease_released(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, LeaseReleased)
    conn.execute(
        update(leases)
        .where((leases.c.workspace == r.metadata.workspace) & (leases.c.issue == e.issue) & leases.c.released_us.is_(None))
        .values(released_us=r.recorded_us, release_reason=e.reason)
    )


def handoff_noted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, HandoffNoted)
    ws = r.metadata.workspace
    key = (issues.c.workspace == ws) & (issues.c.issue == e.issue)
    conn.execute(update(issues).where(key).values(handoff_note=e.note, handoff_session_id=e.session_id))


APPLIERS: Appliers = {
    ProjectConfigured: project_configured,
    LeaseGranted: lease_granted,
    LeaseReleased: lease_released,
    HandoffNoted: handoff_noted,
}
