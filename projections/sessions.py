"""Read model of agent sessions: identity, last sign of life, declared work, end."""

from __future__ import annotations

from msgspec import UNSET
from sqlalchemy import Connection, update

from eventcoord.events import DENIALS, AgentEnded, AgentHeartbeat, AgentRegistered
from eventcoord.store.log import RecordedEvent

from .base import Appliers
from .tables import sessions


def registered(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, AgentRegistered)
    conn.execute(
        sessions.insert().values(
            session_id=e.session_id,
            workspace=r.metadata.workspace,
            actor_key=e.actor_key,
            identity_source=e.identity_source,
            stable=e.stable,
            kind=e.kind,
            host=e.host,
            runtime=e.runtime,
            registered_us=r.recorded_us,
            last_seen_us=r.recorded_us,
            ended_us=None,
            working_on=e.working_on,
            heartbeats=0,
        )
    )


def heartbeat(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, AgentHeartbeat)
    values: dict[str, object] = {"last_seen_us": r.recorded_us, "heartbeats": sessions.c.heartbeats + 1}
    if e.working_on is not UNSET:  # absent keeps the declaration, null clears it
        values["working_on"] = e.working_on
    conn.execute(update(sessions).where(sessions.c.session_id == e.session_id).values(**values))


def ended(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, AgentEnded)
    conn.execute(
        update(sessions)
        .where(sessions.c.session_id == e.session_id)
        .values(ended_us=r.recorded_us, last_seen_us=r.recorded_us, working_on=None)
    )


def sign_of_life(conn: Connection, r: RecordedEvent) -> None:
    """Every event a session's accepted command appends counts as a heartbeat (SPEC §1)."""
    sid = r.metadata.session_id
    if sid is None or r.type in DENIALS:
        return
    conn.execute(
        update(sessions)
        .where((sessions.c.session_id == sid) & sessions.c.ended_us.is_(None) & (sessions.c.last_seen_us < r.recorded_us))
        .values(last_seen_us=r.recorded_us)
    )


APPLIERS: Appliers = {AgentRegistered: registered, AgentHeartbeat: heartbeat, AgentEnded: ended}
