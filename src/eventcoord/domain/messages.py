"""Messages: posting to a channel (``issue:``, ``agent:`` or ``project:``). Pure, no I/O."""

from __future__ import annotations

from eventcoord.commands import PostMessage
from eventcoord.context import Context, Decision
from eventcoord.domain.sessions import Claimant, SessionState, acting
from eventcoord.errors import DomainError
from eventcoord.events import MessagePosted
from eventcoord.sanitize import clean_text


def channel_stream(channel: str) -> str:
    """The event stream of one message channel."""
    return f"channel:{channel}"


def post(d: Decision, channel: str, me: Claimant, body: str) -> None:
    """Add a message (sanitised here, at construction) to a decision."""
    d.add(channel_stream(channel), MessagePosted(channel=channel, body=clean_text(body) or "", session_id=me.session_id, actor_key=me.actor_key))


def decide_post(cmd: PostMessage, ctx: Context, session: SessionState | None, target: SessionState | None) -> Decision:
    """post_message: ``agent:<session_id>`` must name a session of this workspace.

    ``target`` is that session (None when absent or for other channel kinds).
    """
    me = acting(cmd.session_id, session, ctx)
    kind, _, name = cmd.channel.partition(":")
    if kind == "agent" and target is None:
        raise DomainError("NOT_FOUND", f"no session {name!r} in this workspace", {"channel": cmd.channel, "session_id": name})
    body = clean_text(cmd.body) or ""
    if not body.strip():
        raise DomainError("VALIDATION", "body is empty", {"field": "body"})
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    d.add(channel_stream(cmd.channel), MessagePosted(channel=cmd.channel, body=body, session_id=me.session_id, actor_key=me.actor_key))
    d.result = {"channel": cmd.channel}
    d.result_position = "position"
    return d
