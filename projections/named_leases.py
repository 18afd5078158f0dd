"""Read model of named leases (leader election): the last grant of every name.

The row outlives a release: ``fencing_token`` keeps the last token granted, so the next
grant's token is strictly higher. The appliers run on every acquire, renew and release:
their statements are built once (``Prepared``), a grant upserts the name's row and its
holder's slot, one statement each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, bindparam, delete, null, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable

from eventcoord.events import NamedLeaseAcquired, NamedLeaseReleased, NamedLeaseRenewed
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from .base import Appliers
from .tables import named_lease_slots, named_leases

#: A grant's columns and the parameters they take.
_GRANT_PARAMS = {
    "workspace": "ws",
    "name": "name",
    "session_id": "sid",
    "actor_key": "actor",
    "fencing_token": "token",
    "ttl_seconds": "ttl",
    "expires_us": "expires",
    "acquired_us": "at",
}


def _upsert(table: Table, key: tuple[str, ...], *, capacity: bool = False) -> Callable[[str], Executable]:
    """A grant written into ``table`` (its row is ``key``): inserted, or its columns set anew.
    ``capacity``: also the name's capacity, which only the insert sets (the first grant's)."""

    def build(dialect: str) -> Executable:
        insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
        values: dict[str, Any] = {column: bindparam(param) for column, param in _GRANT_PARAMS.items()}
        if capacity:
            values["capacity"] = bindparam("capacity")
        kept = [column for column in _GRANT_PARAMS if column not in key]
        return insert.values(**values).on_conflict_do_update(
            index_elements=[table.c[column] for column in key], set_={c: insert.excluded[c] for c in kept}
        )

    return build


#: The name's last grant (the capacity is fixed by the first) and the holder's slot (a
#: holder acquiring again takes its slot anew).
_UPSERT_GRANT = Prepared(_upsert(named_leases, ("workspace", "name"), capacity=True))
_UPSERT_SLOT = Prepared(_upsert(named_lease_slots, ("workspace", "name", "session_id")))


def _holder(table: Table) -> ColumnElement[bool]:
    """The row of ``table`` for the name's holder ``sid``."""
    return (
        (table.c.workspace == bindparam("ws"))
        & (table.c.name == bindparam("name"))
        & (table.c.session_id == bindparam("sid"))
    )


_HOLDER, _SLOT = _holder(named_leases), _holder(named_lease_slots)
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
