"""Issue leases: claim (WIP cap, stale reclaim, force, waiting), release, verify_hold.

Also the project configuration the WIP cap reads, and the grant a work-queue pull takes.
Pure functions over the state a handler loaded; the orders of checks are
docs/protocol.md#claim_issue-in-order and docs/protocol.md#verify_hold-in-order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from msgspec import UNSET

from eventcoord import errors
from eventcoord.commands import ClaimIssue, ConfigureProject, ReleaseIssue, VerifyHold
from eventcoord.context import Context, Decision, Draft, StreamEvent
from eventcoord.domain import refusals, streams, waits
from eventcoord.domain.admission import (
    DEFAULT_WIP_LIMIT,
    DelayFrom,
    ProjectRules,
    check_caps,
    delayed,
    lock_delay_until,
)
from eventcoord.domain.handoff import IssueLine, hand_off_issue
from eventcoord.domain.issue_view import (
    EffectiveState,
    IssueState,
    IssueView,
    LeaseState,
    effective_state,
    holder_view,
)
from eventcoord.domain.messages import agent_channel, post
from eventcoord.domain.sessions import Claimant, SessionState, require_live, require_not_ended
from eventcoord.events import (
    LeaseGranted,
    LeaseReleased,
    ProjectConfigured,
    ReleaseReason,
    WaitStarted,
)

# What a decision knows of one issue is defined in issue_view.py; the issue tier's callers
# import it from here with the decisions.
__all__ = [
    "DEFAULT_WIP_LIMIT",
    "EffectiveState",
    "IssueState",
    "IssueView",
    "LeaseState",
    "effective_state",
    "holder_view",
]


@dataclass(frozen=True, slots=True)
class ClaimState:
    """What claim_issue decides on: the caller, the issue, the project's cap and live count.

    ``live_count`` counts the project's live leases, not counting any lease on this issue.
    """

    caller: SessionState | None
    view: IssueView
    wip_limit: int
    live_count: int
    rules: ProjectRules | None = None  # None: only ``wip_limit`` configured
    #: Unreleased leases in the project (this issue's aside) of the caller and of each waiter
    #: in the line, by session; loaded only when the project has a per-agent limit.
    agent_held: Mapping[str, int] = field(default_factory=dict)
    line: Sequence[waits.Waiter] = ()  # the issue's waiting line, FIFO

    @property
    def project_rules(self) -> ProjectRules:
        return self.rules if self.rules is not None else ProjectRules(self.wip_limit)


@dataclass(frozen=True, slots=True)
class ReleaseState:
    """What release_issue decides on: the caller, the issue's unreleased lease, its line."""

    caller: SessionState | None
    lease: LeaseState | None
    free: IssueLine | None = None  # the line to hand off to, if anyone waits


@dataclass(frozen=True, slots=True)
class VerifyState:
    """What verify_hold decides on: the caller and the issue as seen now."""

    caller: SessionState | None
    view: IssueView


@dataclass(frozen=True, slots=True)
class Grant:
    """A lease a work-queue pull takes: its token and the events that take it (none if held)."""

    fencing_token: int
    events: list[StreamEvent] = field(default_factory=list)


def decide_configure_project(state: None, cmd: ConfigureProject, ctx: Context) -> Decision:
    """Set a project's WIP limit, lock delay and per-agent limit (admin; checked before)."""
    d = Draft()
    event = ProjectConfigured(
        project=cmd.project,
        wip_limit=cmd.wip_limit,
        lock_delay_seconds=cmd.lock_delay_seconds or UNSET,
        agent_wip_limit=UNSET if cmd.agent_wip_limit is None else cmd.agent_wip_limit,
    )
    d.add(streams.project(cmd.project), event)
    d.result = {"project": cmd.project, "wip_limit": cmd.wip_limit}
    if cmd.lock_delay_seconds:
        d.result["lock_delay_seconds"] = cmd.lock_delay_seconds
    if cmd.agent_wip_limit is not None:
        d.result["agent_wip_limit"] = cmd.agent_wip_limit
    return d.decided()


def _check_project(view: IssueView, project: str) -> None:
    if view.registry is not None and view.registry.project != project:
        raise errors.invalid(
            "project", f"issue {view.issue!r} belongs to project {view.registry.project!r}, not {project!r}"
        )


def _release(
    lease: LeaseState, reason: ReleaseReason, by: str | None = None, ended_at_us: int | None = None
) -> StreamEvent:
    event = LeaseReleased(
        issue=lease.issue,
        session_id=lease.session_id,
        reason=reason,
        fencing_token=lease.fencing_token,
        by_session_id=by,
        ended_at_us=UNSET if ended_at_us is None else ended_at_us,
        project=lease.project,
    )
    return streams.issue(lease.issue), event


def _grant(view: IssueView, project: str, me: SessionState) -> tuple[int, StreamEvent]:
    """The grant and its fencing token, which exceeds every earlier grant of the issue."""
    token = (view.registry.last_fencing_token if view.registry else 0) + 1
    event = LeaseGranted(
        project=project, issue=view.issue, session_id=me.session_id, actor_key=me.actor_key, fencing_token=token
    )
    return token, (streams.issue(view.issue), event)


def stale_end_us(view: IssueView, ctx: Context) -> int:
    """When a stale holder's lease counts as ended: its last sign of life + TTL (docs/protocol.md#lock-delay)."""
    seen = view.holder.last_seen_us if view.holder is not None else ctx.now_us
    ended = view.holder.ended_us if view.holder is not None else None
    return min(ended if ended is not None else seen + ctx.ttl_seconds * 1_000_000, ctx.now_us)


def delay_from(view: IssueView, ctx: Context) -> DelayFrom | None:
    """Where the lock delay counts from: a stale lease still in place, else the last involuntary end."""
    if view.lease is not None:
        return DelayFrom(stale_end_us(view, ctx), view.lease.session_id)
    reg = view.registry
    if reg is None or reg.delay_from_us is None or reg.delay_session_id is None:
        return None
    return DelayFrom(reg.delay_from_us, reg.delay_session_id)


def _ended_at(state: ClaimState, at_us: int) -> int | None:
    """``ended_at_us`` of an involuntary release: recorded only where a lock delay reads it."""
    return at_us if state.project_rules.lock_delay_seconds > 0 else None


def free_line(
    view: IssueView, project: str, state: ClaimState, line: Sequence[waits.Waiter], delay: DelayFrom | None
) -> IssueLine:
    """The issue as a hand-off sees it once its lease is gone."""
    reg = view.registry
    return IssueLine(
        issue=view.issue,
        project=project,
        last_fencing_token=reg.last_fencing_token if reg else 0,
        handoff_note=reg.handoff_note if reg else None,
        rules=state.project_rules,
        live_count=state.live_count,
        agent_held=state.agent_held,
        delay=delay,
        line=line,
    )


def _wait(
    d: Draft,
    state: ClaimState,
    cmd: ClaimIssue,
    me: SessionState,
    line: Sequence[waits.Waiter],
    holder: str | None,
    refusal: errors.DomainError,
    ctx: Context,
) -> Decision:
    """Ask to join the issue's line behind ``refusal`` (docs/protocol.md#waiting), or refuse without waiting."""
    if not cmd.wait:
        if d.events:
            d.error = refusal
            return d.decided()
        raise refusal
    started = WaitStarted(
        kind="issue",
        key=cmd.issue,
        session_id=me.session_id,
        actor_key=me.actor_key,
        project=cmd.project,
        issue=cmd.issue,
    )
    return waits.asks_to_join(d, started, refusal, [holder] if holder else [], line)


def decide_claim_issue(state: ClaimState, cmd: ClaimIssue, ctx: Context) -> Decision:
    """claim_issue in docs/protocol.md#claim_issue-in-order, with its line, lock delay and per-agent limit.

    Waiters ahead of the caller are served first: when the issue is free or reclaimable, the
    first live waiter admitted now is handed it (the caller then finds it held).
    """
    view = state.view
    me = require_live(state.caller, cmd.session_id, ctx)
    _check_project(view, cmd.project)
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    es = effective_state(view, me.session_id, ctx, caller_declares=me.working_on == view.issue)
    lease = view.lease
    if es.state == "self_is_holder" and lease is not None:
        d.result = {"issue": cmd.issue, "fencing_token": lease.fencing_token, "project": lease.project}
        return d.decided()
    forced = cmd.force and ctx.caller.role in ("human", "admin")
    line = list(state.line)
    if es.state in ("human_held", "held") and not forced:
        refusal = (
            refusals.human_held(cmd.issue, es.holder)
            if es.state == "human_held"
            else refusals.issue_held(cmd.issue, es.holder)
        )
        return _wait(d, state, cmd, me, line, (es.holder or {}).get("session_id"), refusal, ctx)
    reclaimable = lease is not None and es.state == "reclaimable"
    mine = next((i for i, w in enumerate(line) if w.session_id == me.session_id), len(line))
    if line[:mine] and not forced:
        trial = Draft()
        if reclaimable and lease is not None:
            trial.events.append(
                _release(lease, "expired", by=me.session_id, ended_at_us=_ended_at(state, stale_end_us(view, ctx)))
            )
        w = hand_off_issue(
            trial,
            free_line(view, cmd.project, state, line[:mine], delay_from(view, ctx)),
            Claimant(me.session_id, me.actor_key),
            ctx,
        )
        if w is not None:
            d.events += trial.events
            rest = [x for x in line if x.session_id != w.session_id and waits.waiter_live(x, ctx)]
            holder = holder_view(w.session, w.session_id, w.actor_key, True)
            return _wait(d, state, cmd, me, rest, w.session_id, refusals.issue_held(cmd.issue, holder), ctx)
        d.events += [(stream, e) for stream, e in trial.events if not isinstance(e, LeaseReleased)]
    if not forced:
        until = lock_delay_until(state.project_rules, delay_from(view, ctx), me.session_id)
        if until is not None and ctx.now_us < until:
            raise delayed(cmd.issue, es.holder, until)
    if not check_caps(
        d,
        cmd.project,
        cmd.issue,
        me.session_id,
        me.actor_key,
        state.project_rules,
        state.live_count,
        state.agent_held.get(me.session_id, 0),
    ):
        return d.decided()
    reclaimed_from = None
    if lease is not None:
        reason: ReleaseReason = "expired" if es.state == "reclaimable" else "superseded"
        ended_at = _ended_at(state, stale_end_us(view, ctx) if reason == "expired" else ctx.now_us)
        d.events.append(_release(lease, reason, by=me.session_id, ended_at_us=ended_at))
        if reason == "expired":
            reclaimed_from = {
                "session_id": lease.session_id,
                "actor_key": lease.actor_key,
                "handoff_note": view.registry.handoff_note if view.registry else None,
            }
        d.result = {"superseded": es.holder} if reason == "superseded" else {}
    token, granted = _grant(view, cmd.project, me)
    d.events.append(granted)
    if lease is not None and reason == "superseded" and lease.session_id not in (None, me.session_id):
        _tell_superseded(d, cmd.issue, lease.session_id, Claimant(me.session_id, me.actor_key), token)
    d.result = {
        **(d.result or {}),
        "issue": cmd.issue,
        "project": cmd.project,
        "fencing_token": token,
        "handoff_note": view.registry.handoff_note if view.registry else None,
    }
    if reclaimed_from is not None:
        d.result["reclaimed_from"] = reclaimed_from
    return d.decided()


def _tell_superseded(d: Draft, issue: str, holder: str, me: Claimant, token: int) -> None:
    """A forced takeover is told to the one who loses it, on its own channel (as a forced
    claim_files is; docs/protocol.md#claim_issue-in-order)."""
    post(
        d,
        agent_channel(holder),
        me,
        f"Your lease on issue {issue} was taken over with force by session {me.session_id} ({me.actor_key}), "
        f"now its holder with fencing token {token}: stop working on it, do not push or publish.",
    )


def grant_for_work(
    view: IssueView,
    me: SessionState,
    project: str,
    wip_limit: int,
    live_count: Callable[[], int],
    ctx: Context,
    *,
    recovered: bool = False,
) -> Grant | None:
    """The lease a work-queue pull takes on the item's issue, if it is takeable now.

    The caller's own lease is kept (no events); a ``free`` issue is granted while the
    project is under its cap. Selection never hands out an issue that is not free (a guard
    point, docs/protocol.md#concepts): a stale holder's lease is reclaimable only by ``claim_issue``'s explicit
    takeover, so such an item is skipped — unless ``recovered``, i.e. the stale-worker
    recovery of this very pull released that lease (the worker's own item went back to the
    queue), which leaves the issue free: its release is then recorded as ``expired`` here.
    Otherwise None: a pull skips the item, never refuses and never records a WipCapDenied.
    ``live_count`` counts the project's live leases (not this issue's), asked only if needed.
    """
    if view.registry is not None and view.registry.project != project:
        return None
    es = effective_state(view, me.session_id, ctx)
    if es.state == "self_is_holder" and view.lease is not None:
        return Grant(view.lease.fencing_token)
    takeable = es.state == "free" or (es.state == "reclaimable" and recovered)
    if not takeable or live_count() >= wip_limit:
        return None
    events = [] if view.lease is None else [_release(view.lease, "expired", by=me.session_id)]
    token, granted = _grant(view, project, me)
    return Grant(token, [*events, granted])


def decide_release_issue(state: ReleaseState, cmd: ReleaseIssue, ctx: Context) -> Decision:
    """release_issue: only the holder may release (NOT_HOLDER otherwise)."""
    me = require_not_ended(state.caller, cmd.session_id)
    lease = state.lease
    if lease is None or lease.session_id != me.session_id:
        raise refusals.not_issue_holder(cmd.issue, cmd.session_id, lease.session_id if lease else None)
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    d.events.append(_release(lease, cmd.reason))
    d.result = {"issue": cmd.issue, "reason": cmd.reason, "fencing_token": lease.fencing_token}
    free = state.free
    if free is not None:
        w = hand_off_issue(d, free, Claimant(me.session_id, me.actor_key), ctx)
        d.result["handed_off_to"] = None if w is None else w.session_id
    return d.decided()


def decide_verify_hold(state: VerifyState, cmd: VerifyHold, ctx: Context) -> Decision:
    """The publish gate: refuse only on a high-confidence conflict; appends nothing."""
    me = require_not_ended(state.caller, cmd.session_id)
    view = state.view
    lease = view.lease
    mine = lease is not None and lease.session_id == me.session_id
    if cmd.fencing_token is not None and not (mine and lease is not None and lease.fencing_token == cmd.fencing_token):
        raise refusals.token_not_current(cmd.issue, cmd.fencing_token, lease.fencing_token if lease else None)
    if not me.stable:
        return Decision(
            result={
                "ok": True,
                "enforced": False,
                "effective_state": "not_evaluated",
                "reason": "actor-identity-unstable-advisory-only",
            }
        )
    es = effective_state(view, me.session_id, ctx, caller_declares=me.working_on == view.issue)
    durable_conflict = es.state in ("reclaimable", "human_held") or (
        es.state == "held" and es.reason == "assignment_fresh_other"
    )
    if durable_conflict:
        raise refusals.durably_held(cmd.issue, es.state, es.reason, es.holder)
    return Decision(result={"ok": True, "enforced": True, "effective_state": es.state, "reason": es.reason})
