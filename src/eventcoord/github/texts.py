"""What the mirror writes for people and agents to read: audit comments and conflict notices.

Actor keys and handoff notes come from other participants: the service stripped control
characters when it recorded them; here they go into code spans and fenced blocks sized to
their content, so no note can close its block, render as markup or @-mention anyone. Each
comment ends with a hidden marker naming what it is about, so a reader can find duplicates.
"""

from __future__ import annotations

import re

from eventcoord.github.model import Holder, Lease, Takeover

_BACKTICKS = re.compile(r"`+")


def code(text: str) -> str:
    """``text`` as an inline code span that nothing in it can close."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def block(text: str) -> str:
    """``text`` as a fenced block that nothing in it can close."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _who(h: Holder) -> str:
    actor = code(h.actor_key) if h.actor_key else "an unknown actor"
    return f"{actor} (session {code(h.session_id)}, fencing token {h.fencing_token})"


def marker(repo: str, what: str) -> str:
    """The hidden line that says which fact a comment reports (one comment per fact)."""
    return f"<!-- eventcoord github mirror: {repo} {what} -->"


def audit_comment(repo: str, t: Takeover) -> str:
    """The comment for a lease that ended ``expired`` or ``superseded``."""
    how = (
        "its holder stopped showing signs of life"
        if t.reason == "expired"
        else "a person took it over while it was held"
    )
    lines = [
        f"**eventcoord**: the lease on {code(t.issue)} ended `{t.reason}` ({how}).",
        "",
        f"- previous holder: {_who(t.before)}",
        f"- new holder: {_who(t.after)}" if t.after else "- new holder: none yet (the issue is free to claim)",
    ]
    if t.handoff_note:
        lines += ["", "Handoff note left by the previous holder:", "", block(t.handoff_note)]
    else:
        lines += ["", "The previous holder left no handoff note."]
    lines += ["", marker(repo, f"audit position {t.position}")]
    return "\n".join(lines)


def conflict_comment(repo: str, lease: Lease, login: str) -> str:
    """The comment when GitHub shows WIP for a person while an agent holds the issue."""
    holder = Holder(lease.session_id, lease.fencing_token, lease.actor_key)
    return "\n".join(
        [
            f"**eventcoord**: this issue is marked `WIP` for @{login}, but an agent holds {code(lease.issue)}: "
            f"{_who(holder)}.",
            "",
            "eventcoord did not take the issue from the agent; it told the agent on its channel "
            f"{code('agent:' + lease.session_id)}. Settle it between you: the agent can release the issue, or "
            "a person with a human token can take it over with `eventcoord claim-issue --force`.",
            "",
            marker(repo, f"conflict {lease.issue} token {lease.fencing_token} {login}"),
        ]
    )


def conflict_message(repo: str, number: int, lease: Lease, login: str) -> str:
    """The message to the holding agent's channel about the same conflict."""
    return (
        f"GitHub shows {repo}#{number} as WIP for {login}, a person, while you hold {lease.issue} "
        f"(fencing token {lease.fencing_token}). Nothing was taken from you; check with them before you go on, "
        "or release the issue if they are doing it."
    )
