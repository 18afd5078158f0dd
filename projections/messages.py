"""Read model of messages: every MessagePosted, readable per channel in position order."""

from __future__ import annotations

from sqlalchemy import Connection, bindparam

from eventcoord.events import MessagePosted
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared

from .base import Appliers
from .tables import messages

_INSERT = Prepared(
    lambda d: messages.insert().values(
        position=bindparam("position"),
        workspace=bindparam("ws"),
        channel=bindparam("channel"),
        body=bindparam("body"),
        session_id=bindparam("sid"),
        actor_key=bindparam("actor"),
        recorded_us=bindparam("at"),
    )
)


def message_posted(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, MessagePosted)
    _INSERT.write(
        conn,
        {
            "position": r.position,
            "ws": r.metadata.workspace,
            "channel": e.channel,
            "body": e.body,
            "sid": e.session_id,
            "actor": e.actor_key,
            "at": r.recorded_us,
        },
    )


APPLIERS: Appliers = {MessagePosted: message_posted}
