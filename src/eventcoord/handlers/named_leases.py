"""Handlers of named leases: lock the name's guard row, read its last grant, decide."""

from __future__ import annotations

from sqlalchemy import Connection, select

from eventcoord.commands import AcquireLease, ReleaseLease, RenewLease
from eventcoord.context import Context, Decision
from eventcoord.domain import named_leases as domain
from eventcoord.domain import streams
from eventcoord.handlers.common import load_session, lock_guard
from eventcoord.projections.tables import named_leases


def load_named_lease(conn: Connection, ctx: Context, name: str) -> domain.NamedLeaseState | None:
    """Lock a named lease (its guard row, then its row) and read its last grant.

    The guard row exists even before the first grant, so two first acquisitions serialise
    too; the read-model row itself is written only by the projection.
    """
    lock_guard(conn, ctx.workspace, streams.named_lease(name))
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


def _state(conn: Connection, ctx: Context, session_id: str, name: str) -> domain.NamedLeaseCommandState:
    """The caller's session, then the lease (sessions before guards: the usual lock order)."""
    session = load_session(conn, ctx, session_id, lock=True)
    return domain.NamedLeaseCommandState(session, load_named_lease(conn, ctx, name))


def acquire_lease(conn: Connection, ctx: Context, cmd: AcquireLease) -> Decision:
    return domain.decide_acquire_lease(_state(conn, ctx, cmd.session_id, cmd.name), cmd, ctx)


def renew_lease(conn: Connection, ctx: Context, cmd: RenewLease) -> Decision:
    return domain.decide_renew_lease(_state(conn, ctx, cmd.session_id, cmd.name), cmd, ctx)


def release_lease(conn: Connection, ctx: Context, cmd: ReleaseLease) -> Decision:
    return domain.decide_release_lease(_state(conn, ctx, cmd.session_id, cmd.name), cmd, ctx)
