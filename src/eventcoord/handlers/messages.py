"""Handlers of messages: load the poster and, for an ``agent:`` channel, its target."""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.commands import PostMessage
from eventcoord.context import Context, Decision
from eventcoord.domain import messages as domain
from eventcoord.reads.common import load_session


def post_message(conn: Connection, ctx: Context, cmd: PostMessage) -> Decision:
    session = load_session(conn, ctx, cmd.session_id) if cmd.session_id else None
    kind, _, name = cmd.channel.partition(":")
    target = load_session(conn, ctx, name, own=False) if kind == "agent" else None
    return domain.decide_post_message(domain.PostState(session, target), cmd, ctx)
