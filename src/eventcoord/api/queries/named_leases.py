"""Reads of named leases: every name ever granted, and whether it is held now."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from eventcoord.codec import format_time
from eventcoord.projections.tables import named_lease_slots, named_leases
from eventcoord.store import dbclock


def list_named_leases(conn: Connection, workspace: str) -> list[dict[str, Any]]:
    """Every named lease of the workspace by name; ``held`` = a holder and not yet expired.

    A name with ``capacity`` above 1 answers one row per held slot (docs/protocol.md#capacity), in token order.
    """
    now_us, _ = dbclock.read(conn)
    slots: dict[str, list[Any]] = {}
    for r in conn.execute(
        select(named_lease_slots)
        .where(named_lease_slots.c.workspace == workspace)
        .order_by(named_lease_slots.c.name, named_lease_slots.c.fencing_token)
    ):
        slots.setdefault(r.name, []).append(r)
    out: list[dict[str, Any]] = []
    for row in _names(conn, workspace, now_us):
        if row["capacity"] > 1 and slots.get(row["name"]):
            out += [
                {
                    "name": s.name,
                    "session_id": s.session_id,
                    "actor_key": s.actor_key,
                    "fencing_token": s.fencing_token,
                    "ttl_seconds": s.ttl_seconds,
                    "acquired_at": format_time(s.acquired_us),
                    "expires_at": format_time(s.expires_us),
                    "held": s.expires_us > now_us,
                    "capacity": row["capacity"],
                }
                for s in slots[row["name"]]
            ]
        else:
            out.append(row)
    return out


def _names(conn: Connection, workspace: str, now_us: int) -> list[dict[str, Any]]:
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
            "capacity": r.capacity,
        }
        for r in conn.execute(
            select(named_leases).where(named_leases.c.workspace == workspace).order_by(named_leases.c.name)
        )
    ]


def held_by(conn: Connection, workspace: str, session_id: str, now_us: int) -> list[dict[str, Any]]:
    """The named leases (slots) a session holds (expired or not), by name."""
    return [
        {
            "name": r.name,
            "fencing_token": r.fencing_token,
            "expires_at": format_time(r.expires_us),
            "expired": r.expires_us <= now_us,
        }
        for r in conn.execute(
            select(named_lease_slots)
            .where((named_lease_slots.c.session_id == session_id) & (named_lease_slots.c.workspace == workspace))
            .order_by(named_lease_slots.c.name)
        )
    ]
