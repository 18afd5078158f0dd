"""What a session is told when it starts: who it is, who else is here, what waits for it.

At most 4,000 characters (``budget.CONTEXT_CAP``): the session's own id first, then the
other live sessions with the issues and file patterns they hold, the messages waiting on
its channel (and holds it lost), and the handoff notes of issues it may resume.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventcoord.harness.budget import CONTEXT_CAP, Section, fit
from eventcoord.harness.lines import message_line, note_line, peer_line, release_line
from eventcoord.harness.reads import Message, Note, Peer, Release

#: How many other sessions and notes a briefing reads (it lists those that fit).
PEERS = 12
NOTES = 5


def briefing(
    session_id: str,
    actor_key: str,
    peers: Sequence[Peer],
    messages: Sequence[Message] = (),
    released: Sequence[Release] = (),
    notes: Sequence[Note] = (),
    cap: int = CONTEXT_CAP,
) -> str:
    """The SessionStart text, at most ``cap`` characters."""
    sections = [
        Section(
            f"eventcoord: this session is {session_id} (actor {actor_key}). Every file you write here is claimed "
            "for you first; a write to a file another live session holds is refused, naming the holder."
        ),
        Section("Other live sessions, most recently active first:", [peer_line(p) for p in peers])
        if peers
        else Section("No other live session is here."),
    ]
    if messages:
        sections.append(Section(f"Messages waiting on agent:{session_id}:", [message_line(m) for m in messages]))
    if released:
        sections.append(Section("Holds you lost:", [release_line(r) for r in released]))
    if notes:
        title = "Handoff notes of issues you may resume (claim one to take it over):"
        sections.append(Section(title, [note_line(n) for n in notes]))
    return fit(sections, cap)
