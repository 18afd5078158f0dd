"""Messages: posting to a channel (``issue:``, ``agent:`` or ``project:``). Pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from eventcoord import errors
from eventcoord.commands import PostMessage
from eventcoord.context import Context, Decision, Draft
from eventcoord.domain import streams
from eventcoord.domain.sessions import Claimant, SessionState, acting
from eventcoord.events import MessagePosted
from eventcoord.sanitize import clean_text


@dataclass(frozen=True, slots=True)
class PostState:
    """What post_message decides on: the poster and, for ``agent:<id>``, that session."""

    session: SessionState | None
    target: SessionState | None  # None when absent or for other channel kinds


def issue_channel(issue: str) -> str:
    """The channel of one issue."""
    return f"issue:{issue}"


def agent_channel(session_id: str) -> str:
    """The channel that reaches one session."""
    return f"agent:{session_id}"


def post(d: Draft, channel: str, me: Claimant, body: str) -> None:
    """Add a message (sanitised here, at construction) to a decision."""
    d.add(
        streams.channel(channel),
        MessagePosted(channel=channel, body=clean_text(body) or "", session_id=me.session_id, actor_key=me.actor_key),
    )


def decide_post_message(state: PostState, cmd: PostMessage, ctx: Context) -> Decision:
    """post_message: ``agent:<session_id>`` must name a session of this workspace."""
    me = acting(cmd.session_id, state.session, ctx)
    kind, _, name = cmd.channel.partition(":")
    if kind == "agent" and state.target is None:
        raise errors.not_found(f"no session {name!r} in this workspace", {"channel": cmd.channel, "session_id": name})
    body = clean_text(cmd.body) or ""
    if not body.strip():
        raise errors.invalid("body", "body is empty")
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    d.add(
        streams.channel(cmd.channel),
        MessagePosted(channel=cmd.channel, body=body, session_id=me.session_id, actor_key=me.actor_key),
    )
    d.result = {"channel": cmd.channel}
    d.result_position = "position"
    return d.decided()
