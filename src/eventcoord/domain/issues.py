"""Issue leases: effective state, claim (WIP cap, stale reclaim, force), release, verify_hold.

Pure functions over the state a handler loaded; the orders of checks are SPEC §5's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventcoord.commands import ClaimIssue, ReleaseIssue, VerifyHold
from eventcoord.context import Context, Decision
from eventcoord.domain.sessions import SessionState, require_live, require_session
from eventcoord.errors import DomainError, ValidationFailed
from eventcoord.events import LeaseGranted, LeaseReleased, ReleaseReason, WipCapDenied
from eventcoord.sanitize import ACTOR_CAP, clean_line

DEFAULT_WIP_LIMIT = 3


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
    """The join of assignment and liveness for one caller (SPEC §1 table)."""

    state: str
    reason: str
    holder: dict[str, Any] | None


def stream(issue: str) -> str:
    """The event stream of one issue."""
    return f"issue:{issue}"


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
    """Effective state in SPEC §5 order; declarers never block declarers.

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


def _check_project(view: IssueView, project: str) -> None:
    if view.registry is not None and view.registry.project != project:
        raise ValidationFailed("project", f"issue {view.issue!r} belongs to project {view.registry.project!r}, not {project!r}")


def _held_details(issue: str, holder: dict[str, Any] | None) -> dict[str, Any]:
    return {"issue": issue, "session_id": (holder or {}).get("session_id"), "actor_key": (holder or {}).get("actor_key")}


def decide_claim(
    cmd: ClaimIssue,
    ctx: Context,
    caller: SessionState | None,
    view: IssueView,
    wip_limit: int,
    live_count: int,
) -> Decision:
    """claim_issue in SPEC §5 order. ``live_count`` excludes any lease on this issue."""
    me = require_live(caller, cmd.session_id, ctx)
    _check_project(view, cmd.project)
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    state = effective_state(view, me.session_id, ctx, caller_declares=me.working_on == view.issue)
    lease = view.lease
    if state.state == "self_is_holder" and lease is not None:
        d.result = {"issue": cmd.issue, "fencing_token": lease.fencing_token, "project": lease.project}
        return d
    forced = cmd.force and ctx.caller.role in ("human", "admin")
    if state.state == "human_held" and not forced:
        raise DomainError("HUMAN_HELD", f"issue {cmd.issue!r} is held by a person: ask first", _held_details(cmd.issue, state.holder))
    if state.state == "held" and not forced:
        raise DomainError("ISSUE_HELD", f"issue {cmd.issue!r} is being worked on by another session", _held_details(cmd.issue, state.holder))
    if live_count >= wip_limit:
        d.add(
            f"project:{cmd.project}",
            WipCapDenied(
                project=cmd.project,
                issue=cmd.issue,
                session_id=me.session_id,
                actor_key=me.actor_key,
                limit=wip_limit,
                live_count=live_count,
            ),
        )
        d.error = DomainError(
            "WIP_CAP_REACHED",
            f"project {cmd.project!r} has {live_count} live leases (limit {wip_limit})",
            {"project": cmd.project, "limit": wip_limit, "live_count": live_count},
        )
        return d
    reclaimed_from = None
    if lease is not None:
        reason: ReleaseReason = "expired" if state.state == "reclaimable" else "superseded"
        d.add(
            stream(cmd.issue),
            LeaseReleased(
                issue=cmd.issue, session_id=lease.session_id, reason=reason, fencing_token=lease.fencing_token, by_session_id=me.session_id
            ),
        )
        if reason == "expired":
            reclaimed_from = {
                "session_id": lease.session_id,
                "actor_key": lease.actor_key,
                "handoff_note": view.registry.handoff_note if view.registry else None,
            }
        d.result = {"superseded": state.holder} if reason == "superseded" else {}
    token = grant(d, view, cmd.project, me)
    d.result = {
        **(d.result or {}),
        "issue": cmd.issue,
        "project": cmd.project,
        "fencing_token": token,
        "handoff_note": view.registry.handoff_note if view.registry else None,
    }
    if reclaimed_from is not None:
        d.result["reclaimed_from"] = reclaimed_from
    return d


def grant(d: Decision, view: IssueView, project: str, me: SessionState) -> int:
    """Append the grant; its fencing token exceeds every earlier grant of the issue."""
    token = (view.registry.last_fencing_token if view.registry else 0) + 1
    d.add(
        stream(view.issue),
        LeaseGranted(project=project, issue=view.issue, session_id=me.session_id, actor_key=me.actor_key, fencing_token=token),
    )
    return token


def decide_release(cmd: ReleaseIssue, ctx: Context, caller: SessionState | None, lease: LeaseState | None) -> Decision:
    """release_issue: only the holder may release (NOT_HOLDER otherwise)."""
    me = require_session(caller, cmd.session_id)
    if me.ended_us is not None:
        raise DomainError("SESSION_NOT_LIVE", f"session {cmd.session_id!r} has ended", {"session_id": cmd.session_id, "ended": True})
    if lease is None or lease.session_id != me.session_id:
        raise DomainError(
            "NOT_HOLDER",
            f"session {cmd.session_id!r} does not hold issue {cmd.issue!r}",
            {"issue": cmd.issue, "session_id": cmd.session_id, "holder_session_id": lease.session_id if lease else None},
        )
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    d.add(stream(cmd.issue), LeaseReleased(issue=cmd.issue, session_id=me.session_id, reason=cmd.reason, fencing_token=lease.fencing_token))
    d.result = {"issue": cmd.issue, "reason": cmd.reason, "fencing_token": lease.fencing_token}
    return d


def decide_verify_hold(cmd: VerifyHold, ctx: Context, caller: SessionState | None, view: IssueView) -> Decision:
    """The publish gate: refuse only on a high-confidence conflict; appends nothing."""
    me = require_session(caller, cmd.session_id)
    if me.ended_us is not None:
        raise DomainError("SESSION_NOT_LIVE", f"session {cmd.session_id!r} has ended", {"session_id": cmd.session_id, "ended": True})
    lease = view.lease
    mine = lease is not None and lease.session_id == me.session_id
    if cmd.fencing_token is not None and not (mine and lease is not None and lease.fencing_token == cmd.fencing_token):
        raise DomainError(
            "NOT_FRESH_HOLDER",
            f"fencing token {cmd.fencing_token} is not the current token of your lease on {cmd.issue!r}",
            {
                "issue": cmd.issue,
                "reason": "fencing-token-not-current",
                "presented_fencing_token": cmd.fencing_token,
                "current_fencing_token": lease.fencing_token if lease else None,
            },
        )
    if not me.stable:
        d = Decision()
        d.result = {"ok": True, "enforced": False, "effective_state": "not_evaluated", "reason": "actor-identity-unstable-advisory-only"}
        return d
    state = effective_state(view, me.session_id, ctx, caller_declares=me.working_on == view.issue)
    durable_conflict = state.state in ("reclaimable", "human_held") or (
        state.state == "held" and state.reason == "assignment_fresh_other"
    )
    if durable_conflict:
        raise DomainError(
            "NOT_FRESH_HOLDER",
            f"issue {cmd.issue!r} is durably held by another session ({state.reason})",
            {"issue": cmd.issue, "effective_state": state.state, "reason": state.reason, "holder": state.holder},
        )
    d = Decision()
    d.result = {"ok": True, "enforced": True, "effective_state": state.state, "reason": state.reason}
    return d
