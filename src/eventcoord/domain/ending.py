"""Ending a session: everything it holds released, and what that frees handed to the first
live waiter of each line, in one decision."""

from __future__ import annotations

from dataclasses import dataclass

from eventcoord.commands import EndAgent
from eventcoord.context import Context, Decision, Draft
from eventcoord.domain import streams
from eventcoord.domain.handoff import Freed, hand_off_freed
from eventcoord.domain.sessions import Claimant, SessionState, require_not_ended
from eventcoord.events import (
    AgentEnded,
    FileClaimReleased,
    HandoffNoted,
    LeaseReleased,
    NamedLeaseReleased,
    WorkRequeued,
)
from eventcoord.sanitize import clean_text


@dataclass(frozen=True, slots=True)
class Holdings:
    """Everything a session holds when it ends, as the read models hold it."""

    leases: list[tuple[str, int]]  # (issue, fencing token), by issue
    file_claims: dict[str, list[str]]  # issue -> paths, in claim order
    items: list[str]  # its claimed or running work items, in enqueue order
    named_leases: list[str]  # by name


@dataclass(frozen=True, slots=True)
class EndState:
    """What end_agent decides on: the session, everything it holds, and the lines that
    holding them kept waiting (``freed``: served after the releases, first waiter first)."""

    session: SessionState | None
    holdings: Holdings
    freed: Freed | None = None


def decide_end_agent(state: EndState, cmd: EndAgent, ctx: Context) -> Decision:
    """End a session and release everything it held, eagerly, with reason ``agent_ended``.

    In order: each lease (followed by the handoff note on that issue), the file claims per
    issue, the re-queue of its unfinished work, its named leases, then ``AgentEnded``.
    """
    s = require_not_ended(state.session, cmd.session_id, already=True)
    sid, held = s.session_id, state.holdings
    ended = AgentEnded(session_id=sid, handoff_note=clean_text(cmd.handoff_note))
    d = Draft(session_id=sid, actor_key=s.actor_key)
    for issue, token in held.leases:
        d.add(
            streams.issue(issue), LeaseReleased(issue=issue, session_id=sid, reason="agent_ended", fencing_token=token)
        )
        if ended.handoff_note:
            d.add(streams.issue(issue), HandoffNoted(issue=issue, session_id=sid, note=ended.handoff_note))
    for issue, paths in held.file_claims.items():
        d.add(streams.files(issue), FileClaimReleased(issue=issue, session_id=sid, paths=paths, reason="agent_ended"))
    for item_id in held.items:
        d.add(streams.work(item_id), WorkRequeued(item_id=item_id, session_id=sid, reason="agent_ended"))
    for name in held.named_leases:
        d.add(streams.named_lease(name), NamedLeaseReleased(name=name, session_id=sid, reason="agent_ended"))
    if state.freed is not None:
        hand_off_freed(d, state.freed, Claimant(sid, s.actor_key), ctx)
    d.add(streams.session(sid), ended)
    d.result = {
        "released_leases": [issue for issue, _ in held.leases],
        "released_claims": [p for paths in held.file_claims.values() for p in paths],
        "requeued_items": list(held.items),
        "released_named_leases": list(held.named_leases),
    }
    return d.decided()
