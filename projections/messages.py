"""Read model of messages: every MessagePosted, readable per channel in position order."""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.events import MessagePosted
from eventcoord.store.log import RecordedEvent

from .base import Appliers
from .tables import messages


def message_posted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, MessagePosted)
    conn.execute(
        messages.insert().values(
            position=r.position,
            workspace=r.metadata.workspace,
            channel=e.channel,
            body=e.body,
            session_id=e.session_id,
            actor_key=e.actor_key,
            recorded_us=r.recorded_us,
        )
    )


APPLIERS: Appliers = {MessagePosted: message_posted}
