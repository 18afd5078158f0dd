"""Read model of named leases (leader election): the last grant of every name.

The row outlives a release: ``fencing_token`` keeps the last token granted, so the next
grant's token is strictly higher. The appliers run on every acquire, renew and release:
their statements are built once (``Prepared``), a grant upserts the name's row and its
holder's slot, one statement each.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, delete, null, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable

from eventcoord.events import NamedLeaseAcquired, NamedLeaseReleased, NamedLeaseRenewed
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from .base import Appliers
from .tables import named_lease_slots, named_leases


def _upsert_grant(dialect: str) -> Executable:
    """The name's last grant; the capacity is fixed by the first one (kept on conflict)."""
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(named_leases)
    return insert.values(
        workspace=bindparam("ws"),
        name=bindparam("name"),
        session_id=bindparam("sid"),
        actor_key=bindparam("actor"),
        fencing_token=bindparam("token"),
        ttl_seconds=bindparam("ttl"),
        expires_us=bindparam("expires"),
        acquired_us=bindparam("at"),
        capacity=bindparam("capacity"),
    ).on_conflict_do_update(
        index_elements=[named_leases.c.workspace, named_leases.c.name],
        set_={
            "session_id": insert.excluded.session_id,
            "actor_key": insert.excluded.actor_key,
            "fencing_token": insert.excluded.fencing_token,
            "ttl_seconds": insert.excluded.ttl_seconds,
            "expires_us": insert.excluded.expires_us,
            "acquired_us": insert.excluded.acquired_us,
        },
    )


def _upsert_slot(dialect: str) -> Executable:
    """The holder's slot (a holder acquiring again takes its slot anew)."""
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(named_lease_slots)
    return insert.values(
        workspace=bindparam("ws"),
        name=bindparam("name"),
        session_id=bindparam("sid"),
        actor_key=bindparam("actor"),
        fencing_token=bindparam("token"),
        ttl_seconds=bindparam("ttl"),
        expires_us=bindparam("expires"),
        acquired_us=bindparam("at"),
    ).on_conflict_do_update(
        index_elements=[named_lease_slots.c.workspace, named_lease_slots.c.name, named_lease_slots.c.session_id],
        set_={
            "actor_key": insert.excluded.actor_key,
            "fencing_token": insert.excluded.fencing_token,
            "ttl_seconds": insert.excluded.ttl_seconds,
            "expires_us": insert.excluded.expires_us,
            "acquired_us": insert.excluded.acquired_us,
        },
    )


_UPSERT_GRANT = Prepared(_upsert_grant)
_UPSERT_SLOT = Prepared(_upsert_slot)
_HOLDER = (
    (named_leases.c.workspace == bindparam("ws"))
    & (named_leases.c.name == bindparam("name"))
    & (named_leases.c.session_id == bindparam("sid"))
)
_SLOT = (
    (named_lease_slots.c.workspace == bindparam("ws"))
    & (named_lease_slots.c.name == bindparam("name"))
    & (named_lease_slots.c.session_id == bindparam("sid"))
)
_RENEW = Prepared(
    lambda d: update(named_leases).where(_HOLDER).values(ttl_seconds=bindparam("ttl"), expires_us=bindparam("expires"))
)
_RENEW_SLOT = Prepared(
    lambda d: (
        update(named_lease_slots).where(_SLOT).values(ttl_seconds=bindparam("ttl"), expires_us=bindparam("expires"))
    )
)
_RELEASE = Prepared(
    lambda d: (
        update(named_leases)
        .where(_HOLDER)
        .values(session_id=null(), actor_key=null(), expires_us=null(), acquired_us=null())
    )
)
_RELEASE_SLOT = Prepared(lambda d: delete(named_lease_slots).where(_SLOT))


def acquired(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, NamedLeaseAcquired)
    params = {
        "ws": r.metadata.workspace,
        "name": e.name,
        "sid": e.session_id,
        "actor": e.actor_key,
        "token": e.fencing_token,
        "ttl": e.ttl_seconds,
        "expires": e.expires_at_us,
        "at": r.recorded_us,
    }
    _UPSERT_GRANT.write(conn, {**params, "capacity": e.capacity if isinstance(e.capacity, int) else 1})
    _UPSERT_SLOT.write(conn, params)


def renewed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, NamedLeaseRenewed)
    params = {
        "ws": r.metadata.workspace,
        "name": e.name,
        "sid": e.session_id,
        "ttl": e.ttl_seconds,
        "expires": e.expires_at_us,
    }
    _RENEW.write(conn, params)
    _RENEW_SLOT.write(conn, params)


def released(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, NamedLeaseReleased)
    params = {"ws": r.metadata.workspace, "name": e.name, "sid": e.session_id}
    _RELEASE.write(conn, params)
    _RELEASE_SLOT.write(conn, params)


APPLIERS: Appliers = {NamedLeaseAcquired: acquired, NamedLeaseRenewed: renewed, NamedLeaseReleased: released}
