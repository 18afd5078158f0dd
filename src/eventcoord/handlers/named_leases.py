"""Handlers of named leases: load the name's state (``reads/named_leases.py``), decide.

A refused acquire that asks to wait joins the name's line as its second step.
"""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.commands import AcquireLease, ReleaseLease, RenewLease
from eventcoord.context import Context, Decision
from eventcoord.domain import named_leases as domain
from eventcoord.handlers.waits import join_line
from eventcoord.reads.named_leases import lease_line, load_named_lease_command

# Until its callers import it from ``reads.named_leases``.
__all__ = ["lease_line"]


def acquire_lease(conn: Connection, ctx: Context, cmd: AcquireLease) -> Decision:
    d = domain.decide_acquire_lease(load_named_lease_command(conn, ctx, cmd.session_id, cmd.name), cmd, ctx)
    return join_line(conn, ctx, d)  # with ``wait``, a refused acquire joins the name's line


def renew_lease(conn: Connection, ctx: Context, cmd: RenewLease) -> Decision:
    return domain.decide_renew_lease(load_named_lease_command(conn, ctx, cmd.session_id, cmd.name), cmd, ctx)


def release_lease(conn: Connection, ctx: Context, cmd: ReleaseLease) -> Decision:
    return domain.decide_release_lease(load_named_lease_command(conn, ctx, cmd.session_id, cmd.name), cmd, ctx)
