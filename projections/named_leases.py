"""Read model of named leases (leader election): the last grant of every name.

The row outlives a release: ``fencing_token`` keeps the last token granted, so the next
grant's token is strictly higher.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, update

from eventcoord.events import NamedLeaseAcquired, NamedLeaseReleased, NamedLeaseRenewed
from eventcoord.store.log import RecordedEvent

from .base import Appliers
from .tables import named_lease_slots, named_leases


def acquired(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, NamedLeaseAcquired)
    ws = r.metadata.workspace
    values = {
        "session_id": e.session_id,
        "actor_key": e.actor_key,
        "fencing_token": e.fencing_token,
        "ttl_seconds": e.ttl_seconds,
        "expires_us": e.expires_at_us,
        "acquired_us": r.recorded_us,
    }
    key = (named_leases.c.workspace == ws) & (named_leases.c.name == e.name)
    if conn.execute(update(named_leases).where(key).values(**values)).rowcount == 0:
        conn.execute(
            named_leases.insert().values(
                workspace=ws, name=e.name, capacity=e.capacity if isinstance(e.capacity, int) else 1, **values
            )
        )
    slot = (
        (named_lease_slots.c.workspace == ws)
        & (named_lease_slots.c.name == e.name)
        & (named_lease_slots.c.session_id == e.session_id)
    )
    conn.execute(delete(named_lease_slots).where(slot))
    conn.execute(
        named_lease_slots.insert().values(
            workspace=ws,
            name=e.name,
            session_id=e.session_id,
            actor_key=e.actor_key,
            fencing_token=e.fencing_token,
            ttl_seconds=e.ttl_seconds,
            expires_us=e.expires_at_us,
            acquired_us=r.recorded_us,
        )
    )


def renewed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, NamedLeaseRenewed)
    key = (named_leases.c.workspace == r.metadata.workspace) & (named_leases.c.name == e.name)
    conn.execute(
        update(named_leases)
        .where(key & (named_leases.c.session_id == e.session_id))
        .values(ttl_seconds=e.ttl_seconds, expires_us=e.expires_at_us)
    )
    slot = (named_lease_slots.c.workspace == r.metadata.workspace) & (named_lease_slots.c.name == e.name)
    conn.execute(
        update(named_lease_slots)
        .where(slot & (named_lease_slots.c.session_id == e.session_id))
        .values(ttl_seconds=e.ttl_seconds, expires_us=e.expires_at_us)
    )


def released(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, NamedLeaseReleased)
    key = (named_leases.c.workspace == r.metadata.workspace) & (named_leases.c.name == e.name)
    conn.execute(
        update(named_leases)
        .where(key & (named_leases.c.session_id == e.session_id))
        .values(session_id=None, actor_key=None, expires_us=None, acquired_us=None)
    )
    slot = (named_lease_slots.c.workspace == r.metadata.workspace) & (named_lease_slots.c.name == e.name)
    conn.execute(delete(named_lease_slots).where(slot & (named_lease_slots.c.session_id == e.session_id)))


APPLIERS: Appliers = {NamedLeaseAcquired: acquired, NamedLeaseRenewed: renewed, NamedLeaseReleased: released}
