"""Reads of named leases: every name ever granted, and whether it is held now."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from eventcoord.codec import format_time
from eventcoord.projections.tables import named_leases
from eventcoord.store import log


def list_named_leases(conn: Connection, workspace: str) -> list[dict[str, Any]]:
    """Every named lease of the workspace by name; ``held`` = a holder and not yet expired."""
    now_us, _ = log.clock(conn)
    return [
        {
            "name": r.name,
            "session_id": r.session_id,
            "actor_key": r.actor_key,
            "fencing_token": r.fencing_token,
            "ttl_seconds": r.ttl_seconds,
            "acquired_at": format_time(r.acquired_us) if r.acquired_us is not None else None,
            "expires_at": format_time(r.expires_us) if r.expires_us is not None else None,
            "held": r.session_id is not None and r.expires_us is not None and r.expires_us > now_us,
        }
        for r in conn.execute(select(named_leases).where(named_leases.c.workspace == workspace).order_by(named_leases.c.name))
    ]


def held_by(conn: Connection, workspace: str, session_id: str, now_us: int) -> list[dict[str, Any]]:
    """The named leases a session holds (expired or not), by name."""
    return [
        {
            "name": r.name,
            "fencing_token": r.fencing_token,
            "expires_at": format_time(r.expires_us) if r.expires_us is not None else None,
            "expired": r.expires_us is None or r.expires_us <= now_us,
        }
        for r in conn.execute(
            select(named_leases)
            .where((named_leases.c.session_id == session_id) & (named_leases.c.workspace == workspace))
            .order_by(named_leases.c.name)
        )
    ]
