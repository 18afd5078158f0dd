"""Reads of the waiting lines (docs/protocol.md#waiting): one row per waiter, ordered by key then place."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from eventcoord.codec import format_time
from eventcoord.projections.tables import waits


def list_waits(conn: Connection, workspace: str) -> list[dict[str, Any]]:
    """Every waiter of the workspace: ``kind``, ``key``, ``session_id``, ``actor_key``, ``place``, ``since``.

    A files wait has a row per requested path; its place is its rank among the waits for
    that same path pattern. Lines may still hold stale waiters: they are dropped when their
    line is next looked at (the row's ``session_id`` tells whom to ask).
    """
    rows = conn.execute(
        select(waits.c.kind, waits.c.key, waits.c.session_id, waits.c.actor_key, waits.c.since_us, waits.c.issue)
        .where(waits.c.workspace == workspace)
        .order_by(waits.c.key, waits.c.kind, waits.c.position, waits.c.idx)
    )
    out: list[dict[str, Any]] = []
    places: dict[tuple[str, str], int] = {}
    for r in rows:
        line = (r.kind, r.key)
        places[line] = places.get(line, 0) + 1
        row = {
            "kind": r.kind,
            "key": r.key,
            "session_id": r.session_id,
            "actor_key": r.actor_key,
            "place": places[line],
            "since": format_time(r.since_us),
        }
        if r.kind == "files":
            row["issue"] = r.issue
        out.append(row)
    return out
