"""Why a write was stopped, for the model: each blocked path, who holds it, what to do instead.

Built from a ``FILES_CLAIMED`` refusal's conflicts; the commands it suggests are the CLI's
own, ready to run.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from eventcoord.harness.budget import CONTEXT_CAP, Section, cut, fit

#: The longest list of paths the suggested wait command spells out.
_PATHS_SHOWN = 600


def _holder(c: Mapping[str, Any]) -> str:
    actor = c.get("holder_actor_key") or "someone"
    sid = c.get("holder_session_id")
    where = f"session {sid}" if sid else "no session: it yields only to force"
    return f"{actor} ({where}) for issue {c.get('holder_issue')}"


def denial(
    session_id: str,
    issue: str,
    conflicts: Sequence[Mapping[str, Any]],
    shown: Mapping[str, str],
    cap: int = CONTEXT_CAP,
) -> str:
    """The deny reason: every blocked path (as the session named it: ``shown`` maps a claim
    pattern to it) with its holder's actor, session and issue, then the three ways on."""
    by_path: dict[str, list[Mapping[str, Any]]] = {}
    for c in conflicts:
        by_path.setdefault(str(c.get("path")), []).append(c)
    lines = []
    for pattern, held in by_path.items():
        holders = "; ".join(
            _holder(c) + (f", claim {c.get('holder_path')}" if c.get("holder_path") != pattern else "") for c in held
        )
        lines.append(cut(f"- {shown.get(pattern, pattern)}: held by {holders}"))
    holder_ids = sorted({str(c["holder_session_id"]) for c in conflicts if c.get("holder_session_id")})
    patterns = " ".join(shlex.quote(p) for p in by_path)
    if len(patterns) > _PATHS_SHOWN:
        patterns = "<the paths above>"
    ways = ["What to do: edit other files instead; or"]
    ways += [
        f"message the holder: eventcoord post-message --session-id {session_id} --channel agent:{h} --body '…'; or"
        for h in holder_ids[:3]
    ]
    ways.append(
        f"wait for the files: eventcoord claim-files --session-id {session_id} --issue {issue} "
        f"--paths {patterns} --wait (you are told when they are yours; then write again)."
    )
    what_to_do = " ".join(ways)
    head = Section("eventcoord: not written. Another live session holds what this edit writes:", lines)
    return fit([head], cap - len(what_to_do) - 1) + "\n" + what_to_do
