"""Reads of messages: one channel, in position order."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from eventcoord.codec import format_time
from eventcoord.projections.tables import messages


def channel_messages(conn: Connection, workspace: str, channel: str, after: int, limit: int) -> list[dict[str, Any]]:
    """Messages of one channel with position > ``after``, in order."""
    rows = conn.execute(
        select(messages)
        .where((messages.c.workspace == workspace) & (messages.c.channel == channel) & (messages.c.position > after))
        .order_by(messages.c.position)
        .limit(limit)
    )
    return [
        {
            "position": r.position,
            "channel": r.channel,
            "body": r.body,
            "session_id": r.session_id,
            "actor_key": r.actor_key,
            "recorded_at": format_time(r.recorded_us),
        }
        for r in rows
    ]
