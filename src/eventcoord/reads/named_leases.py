"""What a named lease's decisions read: the name's guard locked, its last grant, its slots, its line.

The guard row exists even before the first grant, so two first acquisitions serialise too.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, select

from eventcoord.context import Context
from eventcoord.domain import named_leases as domain
from eventcoord.domain import streams
from eventcoord.domain.handoff import LeaseLine
from eventcoord.projections.tables import named_lease_slots, named_leases
from eventcoord.reads.common import WS, load_session, lock_guard
from eventcoord.reads.waits import load_line
from eventcoord.store.prepared import Prepared

_NAME = (named_leases.c.workspace == WS) & (named_leases.c.name == bindparam("name"))
# The hot statements of named leases, built once (``Prepared``), like the issue tier's.
_LAST_GRANT = Prepared(
    lambda d: (
        select(
            named_leases.c.name,
            named_leases.c.session_id,
            named_leases.c.actor_key,
            named_leases.c.fencing_token,
            named_leases.c.ttl_seconds,
            named_leases.c.expires_us,
        )
        .where(_NAME)
        .with_for_update()
    )
)
_CAPACITY = Prepared(lambda d: select(named_leases.c.capacity).where(_NAME))
_SLOTS = Prepared(
    lambda d: (
        select(
            named_lease_slots.c.session_id,
            named_lease_slots.c.actor_key,
            named_lease_slots.c.fencing_token,
            named_lease_slots.c.ttl_seconds,
            named_lease_slots.c.expires_us,
        )
        .where((named_lease_slots.c.workspace == WS) & (named_lease_slots.c.name == bindparam("name")))
        .order_by(named_lease_slots.c.fencing_token)
    )
)


def load_named_lease(conn: Connection, ctx: Context, name: str) -> domain.NamedLeaseState | None:
    """Lock a named lease (its guard row, then its row) and read its last grant.

    The guard row exists even before the first grant, so two first acquisitions serialise
    too; the read-model row itself is written only by the projection.
    """
    lock_guard(conn, ctx.workspace, streams.named_lease(name))
    row = _LAST_GRANT.first(conn, {"ws": ctx.workspace, "name": name})
    return None if row is None else domain.NamedLeaseState(*row)


def load_slots(conn: Connection, ctx: Context, name: str) -> tuple[list[domain.Slot], int | None]:
    """The holders of a name (in token order) and its fixed capacity (None if never acquired)."""
    params = {"ws": ctx.workspace, "name": name}
    capacity = _CAPACITY.scalar(conn, params)
    slots = [domain.Slot(*r) for r in _SLOTS.rows(conn, params)]
    return slots, None if capacity is None else int(capacity)


def load_named_lease_command(
    conn: Connection, ctx: Context, session_id: str, name: str
) -> domain.NamedLeaseCommandState:
    """The caller's session, then the lease (sessions before guards: the usual lock order)."""
    session = load_session(conn, ctx, session_id, lock=True)
    lease = load_named_lease(conn, ctx, name)
    slots, capacity = load_slots(conn, ctx, name)
    return domain.NamedLeaseCommandState(session, lease, slots, capacity, load_line(conn, ctx, "lease", name))


def lease_line(conn: Connection, ctx: Context, name: str, leaving: str) -> LeaseLine | None:
    """A name's line when ``leaving`` gives its slot up (None when nobody waits)."""
    lease = load_named_lease(conn, ctx, name)
    line = load_line(conn, ctx, "lease", name)
    if not line:
        return None
    slots, capacity = load_slots(conn, ctx, name)
    others = [x for x in slots if x.session_id != leaving and x.expires_us > ctx.now_us]
    last = max([lease.fencing_token if lease else 0, *(x.fencing_token for x in slots)])
    return LeaseLine(name, last, (capacity or 1) - len(others), capacity or 1, line)
