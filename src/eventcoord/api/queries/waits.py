"""Reads of the waiting lines (docs/protocol.md#waiting): one row per waiter, by key then place, paged."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from sqlalchemy import Connection, func, select, tuple_

from eventcoord import errors
from eventcoord.codec import format_time
from eventcoord.projections.tables import waits

#: The longest ``after`` a page can hand out (a key is at most 1,024 characters).
CURSOR_MAX = 4096


def _cursor(kind: str, key: str, position: int, idx: int) -> str:
    """Where a page ended: the last row's place in the order, opaque to clients."""
    raw = json.dumps([key, kind, position, idx], separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _after(cursor: str) -> tuple[str, str, int, int]:
    """The row a cursor names (key, kind, position, idx); anything else is 422 naming ``after``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key, kind, position, idx = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise errors.invalid("after", "after: expected the `next` of a previous page of /v1/waits") from None
    if not (isinstance(key, str) and isinstance(kind, str) and type(position) is int and type(idx) is int):
        raise errors.invalid("after", "after: expected the `next` of a previous page of /v1/waits")
    return key, kind, position, idx


def list_waits(
    conn: Connection, workspace: str, after: str | None = None, limit: int = 1000
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the workspace's waiters, and the cursor of the next page (None: the last).

    Each row: ``kind``, ``key``, ``session_id``, ``actor_key``, ``place``, ``since`` (and
    ``issue`` for a files wait). A files wait has a row per requested path; its place is
    its rank among the waits for that same path pattern. Rows come by key, then kind, then
    place; ``after`` (a previous page's ``next``) continues after that page's last row,
    and a page that begins inside a line counts the places before it. Lines may still hold
    stale waiters: they are dropped when their line is next looked at (the row's
    ``session_id`` tells whom to ask).
    """
    order = (waits.c.key, waits.c.kind, waits.c.position, waits.c.idx)
    query = select(
        waits.c.kind, waits.c.key, waits.c.session_id, waits.c.actor_key, waits.c.since_us, waits.c.issue, *order[2:]
    ).where(waits.c.workspace == workspace)
    places: dict[tuple[str, str], int] = {}
    if after is not None:
        key, kind, position, idx = _after(after)
        query = query.where(tuple_(*order) > tuple_(key, kind, position, idx))
        # the line the last page ended in goes on here: its places go on from there
        places[(kind, key)] = conn.execute(
            select(func.count()).where(
                waits.c.workspace == workspace,
                waits.c.kind == kind,
                waits.c.key == key,
                tuple_(waits.c.position, waits.c.idx) <= tuple_(position, idx),
            )
        ).scalar_one()
    rows = conn.execute(query.order_by(*order).limit(limit + 1)).all()
    out: list[dict[str, Any]] = []
    for r in rows[:limit]:
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
    if len(rows) <= limit:
        return out, None
    last = rows[limit - 1]
    return out, _cursor(last.kind, last.key, last.position, last.idx)
