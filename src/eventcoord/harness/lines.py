"""One line per thing a session is told: another session, a message, a note, a lost hold.

Each is on one line and cut to ``budget.LINE_CAP``, so one long message cannot crowd out
the rest of what the model is told.
"""

from __future__ import annotations

from eventcoord.harness.budget import cut
from eventcoord.harness.reads import Message, Note, Peer, Release

#: How many issues or file patterns of another session a line names before it counts the rest.
HELD_SHOWN = 8


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:HELD_SHOWN])
    return shown + (f" (+{len(items) - HELD_SHOWN} more)" if len(items) > HELD_SHOWN else "") if items else "none"


def peer_line(p: Peer) -> str:
    """Another live session: who (in which harness), its id, the issues and files it holds."""
    who = p.actor_key + (f" [{p.runtime}]" if p.runtime else "")
    return cut(f"- {who}, session {p.session_id}: issues {_listed(p.issues)}; files {_listed(p.paths)}")


def message_line(m: Message) -> str:
    """A message: who sent it, then the body."""
    sender = m.actor_key or "someone"
    return cut(f"- from {sender}" + (f" (session {m.session_id})" if m.session_id else "") + f": {m.body}")


def note_line(n: Note) -> str:
    """A handoff note on an issue the session may take over."""
    by = "you" if n.own else (n.actor_key or "someone")
    return cut(f"- issue {n.issue} (note by {by}): {n.note}")


def release_line(r: Release) -> str:
    """A hold someone else ended: what, why, who took it, and what to do."""
    by = f" by session {r.by_session_id}" if r.by_session_id else ""
    if r.kind == "lease":
        if r.reason == "superseded":
            return cut(f"- your lease on issue {r.issue} was taken over with force{by}: stop working on it.")
        return cut(
            f"- your lease on issue {r.issue} expired (this session had gone quiet) and was reclaimed{by}: "
            f"check `eventcoord state {r.issue}` before working on it again."
        )
    return cut(
        f"- your file claims for issue {r.issue} ({', '.join(r.paths)}) expired (this session had gone quiet) "
        f"and were reclaimed{by}: a write to them is refused while another session holds them."
    )
