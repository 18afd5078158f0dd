"""Read model of agent sessions: identity, last sign of life, declared work, end."""

from __future__ import annotations

from msgspec import UNSET
from sqlalchemy import Boolean, Connection, bindparam, cast, literal_column, null, update
from sqlalchemy.types import NullType

from eventcoord.events import DENIALS, AgentEnded, AgentHeartbeat, AgentRegistered
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from .base import Appliers
from .tables import sessions

_REGISTER = Prepared(
    lambda d: sessions.insert().values(
        {
            **{
                c.name: bindparam(c.name)
                for c in sessions.columns
                if c.name not in ("stable", "ended_us", "heartbeats")
            },
            # A boolean the drivers take as is (no SQLAlchemy bind processing), as in files.py.
            "stable": cast(bindparam("stable", type_=NullType()), Boolean),
            "ended_us": null(),
            "heartbeats": literal_column("0"),
        }
    )
)


def registered(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, AgentRegistered)
    _REGISTER.run(
        conn,
        {
            "session_id": e.session_id,
            "workspace": r.metadata.workspace,
            "actor_key": e.actor_key,
            "identity_source": e.identity_source,
            "stable": e.stable,
            "kind": e.kind,
            "host": e.host,
            "runtime": e.runtime,
            "registered_us": r.recorded_us,
            "last_seen_us": r.recorded_us,
            "working_on": e.working_on,
            "token_id": e.token_id,
        },
    )


_HEARTBEAT = Prepared(
    lambda d: (
        update(sessions)
        .where(sessions.c.session_id == bindparam("sid"))
        .values(last_seen_us=bindparam("seen"), heartbeats=sessions.c.heartbeats + 1)
    )
)
_HEARTBEAT_DECLARING = Prepared(
    lambda d: (
        update(sessions)
        .where(sessions.c.session_id == bindparam("sid"))
        .values(
            last_seen_us=bindparam("seen"), heartbeats=sessions.c.heartbeats + 1, working_on=bindparam("working_on")
        )
    )
)
_SIGN_OF_LIFE = Prepared(
    lambda d: (
        update(sessions)
        .where(
            (sessions.c.session_id == bindparam("sid"))
            & sessions.c.ended_us.is_(None)
            & (sessions.c.last_seen_us < bindparam("seen"))
        )
        .values(last_seen_us=bindparam("seen"))
    )
)


def heartbeat(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, AgentHeartbeat)
    if e.working_on is UNSET:  # absent keeps the declaration, null clears it
        _HEARTBEAT.run(conn, {"sid": e.session_id, "seen": r.recorded_us})
    else:
        _HEARTBEAT_DECLARING.run(conn, {"sid": e.session_id, "seen": r.recorded_us, "working_on": e.working_on})


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
    # Session events set last_seen themselves; denials are not signs of life.
    if sid is None or isinstance(r.event, _SETS_LAST_SEEN) or r.type in DENIALS:
        return
    _SIGN_OF_LIFE.run(conn, {"sid": sid, "seen": r.recorded_us})


_SETS_LAST_SEEN = (AgentRegistered, AgentHeartbeat, AgentEnded)

APPLIERS: Appliers = {AgentRegistered: registered, AgentHeartbeat: heartbeat, AgentEnded: ended}
