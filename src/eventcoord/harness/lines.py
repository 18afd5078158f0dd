"""One line per thing a session is told: another session, a message, a note, a lost hold.

Each is on one line and cut to ``budget.LINE_CAP``, so one long message cannot crowd out
the rest of what the model is told.
"""

from __future__ import annotations

from eventcoord.harness.budget import LINE_CAP, cut
from eventcoord.harness.reads import Message, Note, Peer, Release


def _listed(items: list[str], room: int) -> str:
    """As many of ``items`` as fit in ``room`` characters, then how many more there are."""
    if not items:
        return "none"
    shown: list[str] = []
    used = 0
    for i, item in enumerate(items):
        more = f" (+{len(items) - i - 1} more)" if i < len(items) - 1 else ""
        if shown and used + 2 + len(item) + len(more) > room:
            return ", ".join(shown) + f" (+{len(items) - i} more)"
        shown.append(item)
        used += len(item) + (2 if len(shown) > 1 else 0)
    return ", ".join(shown)


def peer_line(p: Peer) -> str:
    """Another live session: who (in which harness), its id, the issues and files it holds."""
    who = p.actor_key + (f" [{p.runtime}]" if p.runtime else "")
    head = f"- {who}, session {p.session_id}: issues "
    issues = _listed(p.issues, (LINE_CAP - len(head)) // 3)
    files = "; files "
    return cut(head + issues + files + _listed(p.paths, LINE_CAP - len(head) - len(issues) - len(files)))


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
