"""What arrived for a session between two positions: messages on its own channel, and its
leases and file claims that another session ended (superseded, reclaimed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from eventcoord.codec import decode_event
from eventcoord.events import FileClaimReleased, LeaseReleased
from eventcoord.projections.tables import messages
from eventcoord.store import log
from eventcoord.store.schema import events


@dataclass(frozen=True, slots=True)
class Message:
    """A message on a session's own channel."""

    position: int
    body: str
    actor_key: str | None
    session_id: str | None


@dataclass(frozen=True, slots=True)
class Release:
    """A lease or file claim of the session that someone else ended: superseded or reclaimed."""

    position: int
    kind: str  # "lease" or "files"
    issue: str
    paths: list[str]
    reason: str
    by_session_id: str | None


def head(conn: Connection) -> int:
    """The newest committed position: every position up to it is committed."""
    return log.head(conn)


def inbox(conn: Connection, workspace: str, session_ids: Sequence[str], after: int, upto: int) -> list[Message]:
    """Messages on the sessions' own channels in (``after``, ``upto``], in order (at most 100)."""
    channels = [f"agent:{sid}" for sid in session_ids]
    return [
        Message(r.position, r.body, r.actor_key, r.session_id)
        for r in conn.execute(
            select(messages.c.position, messages.c.body, messages.c.actor_key, messages.c.session_id)
            .where(
                (messages.c.workspace == workspace)
                & messages.c.channel.in_(channels)
                & (messages.c.position > after)
                & (messages.c.position <= upto)
            )
            .order_by(messages.c.position)
            .limit(100)
        )
    ]


#: Why a session's hold ended that it must be told of. An ``overridden`` file claim and a
#: ``superseded`` lease are not here: the force that took them already posts a message on
#: the session's own channel.
_TOLD = {"LeaseReleased": ("expired",), "FileClaimReleased": ("expired",)}


def releases(conn: Connection, workspace: str, session_ids: Sequence[str], after: int, upto: int) -> list[Release]:
    """Leases and file claims of the sessions that another session ended (superseded,
    reclaimed) in (``after``, ``upto``], in order: the log's release events, by type."""
    if after >= upto:
        return []
    mentions: Any = None
    for sid in session_ids:
        clause = events.c.data.contains(f'"session_id":"{sid}"', autoescape=True)
        mentions = clause if mentions is None else mentions | clause
    out: list[Release] = []
    for position, kind, data in conn.execute(
        select(events.c.position, events.c.type, events.c.data)
        .where(
            (events.c.workspace == workspace)
            & events.c.type.in_(tuple(_TOLD))
            & (events.c.position > after)
            & (events.c.position <= upto)
            & mentions
        )
        .order_by(events.c.position)
        .limit(200)
    ):
        event = decode_event(kind, data)
        if isinstance(event, LeaseReleased) and event.session_id in session_ids and event.reason in _TOLD[kind]:
            out.append(Release(position, "lease", event.issue, [], event.reason, event.by_session_id))
        elif isinstance(event, FileClaimReleased) and event.session_id in session_ids and event.reason in _TOLD[kind]:
            out.append(Release(position, "files", event.issue, list(event.paths), event.reason, event.by_session_id))
    return out
