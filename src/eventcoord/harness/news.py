"""What a session is told between turns: messages that arrived, holds others ended.

Each is told once (``bindings.deliver`` moves the delivery position). A session registered
by this hook is told its id; a renewed one also that the one before had ended or gone
quiet, so what it held may be gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventcoord.harness.budget import CONTEXT_CAP, Section, fit
from eventcoord.harness.lines import message_line, release_line
from eventcoord.harness.reads import Message, Release


def news(
    session_id: str,
    messages: Sequence[Message] = (),
    released: Sequence[Release] = (),
    *,
    registered: bool = False,
    previous: str | None = None,
    cap: int = CONTEXT_CAP,
) -> str:
    """The text of what arrived for the session since its last delivery ('' when nothing did)."""
    sections: list[Section] = []
    if registered and previous is not None:
        sections.append(
            Section(
                f"eventcoord: this session is now {session_id}; the one before ({previous}) had ended or gone "
                "quiet past its TTL, so what it held may have been taken."
            )
        )
    elif registered:
        sections.append(Section(f"eventcoord: this session is {session_id}."))
    if released:
        sections.append(Section("eventcoord: holds you lost:", [release_line(r) for r in released]))
    if messages:
        title = f"eventcoord: messages for you on agent:{session_id}:"
        more = f"- … {{n}} more: eventcoord messages --channel agent:{session_id}"
        sections.append(Section(title, [message_line(m) for m in messages], more))
    return fit(sections, cap)
