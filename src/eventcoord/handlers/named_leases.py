"""Handlers of named leases: lock the name's guard row, read its last grant, decide."""

from __future__ import annotations

from sqlalchemy import Connection, select

from eventcoord.commands import AcquireLease, ReleaseLease, RenewLease
from eventcoord.context import Context, Decision
from eventcoord.domain import named_leases as domain
from eventcoord.domain.sessions import require_live
from eventcoord.handlers.common import load_session, lock_guard, require_present
from eventcoord.projections.tables import named_leases


def load_named_lease(conn: Connection, ctx: Context, name: str) -> domain.NamedLeaseState | None:
    """Lock a named lease (its guard row, then its row) and read its last grant.

    The guard row exists even before the first grant, so two first acquisitions serialise
    too; the read-model row itself is written only by the projection.
    """
    lock_guard(conn, ctx.workspace, f"lease:{name}")
    row = conn.execute(
        select(
            named_leases.c.name,
            named_leases.c.session_id,
            named_leases.c.actor_key,
            named_leases.c.fencing_token,
            named_leases.c.ttl_seconds,
            named_leases.c.expires_us,
        )
        .where((named_leases.c.workspace == ctx.workspace) & (named_leases.c.name == name))
        .with_for_update()
    ).one_or_none()
    return None if row is None else domain.NamedLeaseState(*row)


def acquire_lease(conn: Connection, ctx: Context, cmd: AcquireLease) -> Decision:
    me = require_live(load_session(conn, ctx, cmd.session_id, lock=True), cmd.session_id, ctx)
    return domain.decide_acquire(cmd.name, load_named_lease(conn, ctx, cmd.name), me, cmd.ttl_seconds, ctx)


def renew_lease(conn: Connection, ctx: Context, cmd: RenewLease) -> Decision:
    me = require_present(conn, ctx, cmd.session_id)
    return domain.decide_renew(cmd.name, load_named_lease(conn, ctx, cmd.name), me, cmd.ttl_seconds, ctx)


def release_lease(conn: Connection, ctx: Context, cmd: ReleaseLease) -> Decision:
    me = require_present(conn, ctx, cmd.session_id)
    return domain.decide_release(cmd.name, load_named_lease(conn, ctx, cmd.name), me, ctx)


