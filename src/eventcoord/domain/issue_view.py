"""What a decision knows of one issue, and the effective state it makes.

The issue's registry row, its unreleased lease, the holder's session and the live sessions
declaring ``working_on`` it; :func:`effective_state` joins assignment and liveness for one
caller, in the order of docs/protocol.md#effective-state-in-order (declarers never block
declarers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventcoord.context import Context
from eventcoord.domain.sessions import SessionState
from eventcoord.sanitize import ACTOR_CAP, clean_line


@dataclass(frozen=True, slots=True)
class LeaseState:
    """The unreleased lease of an issue."""

    issue: str
    project: str
    session_id: str
    actor_key: str
    fencing_token: int


@dataclass(frozen=True, slots=True)
class IssueState:
    """What the issue registry knows: its project, last token and pending handoff note."""

    issue: str
    project: str
    last_fencing_token: int
    handoff_note: str | None
    handoff_session_id: str | None
    delay_from_us: int | None = None  # the last involuntary end of a lease (lock delay)
    delay_session_id: str | None = None


@dataclass(frozen=True, slots=True)
class IssueView:
    """Everything effective state needs about one issue, as seen at decision time."""

    issue: str
    registry: IssueState | None
    lease: LeaseState | None
    holder: SessionState | None
    declarers: tuple[SessionState, ...]  # live sessions declaring working_on this issue


@dataclass(frozen=True, slots=True)
class EffectiveState:
    """The join of assignment and liveness for one caller (docs/protocol.md#concepts)."""

    state: str
    reason: str
    holder: dict[str, Any] | None


def holder_view(session: SessionState | None, session_id: str, actor_key: str, live: bool) -> dict[str, Any]:
    """The holder object, every untrusted field sanitised here, at construction."""
    return {
        "session_id": clean_line(session_id, 128),
        "actor_key": clean_line(session.actor_key if session else actor_key, ACTOR_CAP * 4),
        "kind": clean_line(session.kind if session else "agent", 16),
        "live": live,
    }


def effective_state(
    view: IssueView, caller_session_id: str | None, ctx: Context, *, caller_declares: bool | None = None
) -> EffectiveState:
    """Effective state in docs/protocol.md#effective-state-in-order; declarers never block declarers.

    ``caller_declares``: the caller itself declares ``working_on`` this issue (inferred
    from ``view.declarers`` when not given).
    """
    lease, holder = view.lease, view.holder
    if lease is not None:
        live = holder is not None and ctx.is_live(holder.last_seen_us, holder.ended_us)
        hv = holder_view(holder, lease.session_id, lease.actor_key, live)
        if lease.session_id == caller_session_id:
            return EffectiveState("self_is_holder", "assignment_self", hv)
        if holder is not None and holder.kind == "human":
            return EffectiveState("human_held", "human_assignment", hv)
        if live:
            return EffectiveState("held", "assignment_fresh_other", hv)
        return EffectiveState("reclaimable", "assignment_holder_stale", hv)
    if caller_declares is None:
        caller_declares = any(d.session_id == caller_session_id for d in view.declarers)
    for d in () if caller_declares else view.declarers:
        if d.session_id != caller_session_id:
            return EffectiveState(
                "held", "liveness_claim_present_assignment_lagging", holder_view(d, d.session_id, d.actor_key, True)
            )
    return EffectiveState("free", "no_assignment_no_liveness", None)
