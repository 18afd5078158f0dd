"""Hand-off (docs/protocol.md#waiting): when a resource frees, its first live waiter that
could take it now gets it, in the same decision, with every rule a direct claim obeys.

Each function appends to the decision that freed the resource: ``WaitAbandoned`` for the
stale waiters it passed, the grant (``handed_off: true``) and a message on the waiter's
channel ``agent:<session_id>``. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from msgspec import UNSET

from eventcoord.context import Context, Draft
from eventcoord.domain import streams
from eventcoord.domain.admission import DelayFrom, ProjectRules, admits, lock_delay_until
from eventcoord.domain.files import ClaimRow, holder_is_live
from eventcoord.domain.messages import agent_channel, post
from eventcoord.domain.paths import DECISION_STEPS, Work, overlaps_within
from eventcoord.domain.sessions import Claimant, SessionState
from eventcoord.domain.waits import Waiter, abandoned, waiter_live
from eventcoord.events import FileClaimReleased, FilesClaimed, LeaseGranted, NamedLeaseAcquired

DEFAULT_LEASE_TTL_SECONDS = 30


@dataclass(frozen=True, slots=True)
class IssueLine:
    """An issue being freed: its line and what admission reads."""

    issue: str
    project: str
    last_fencing_token: int
    handoff_note: str | None
    rules: ProjectRules
    live_count: int  # live leases of the project, not counting this issue's
    #: Unreleased leases in the project of each live waiter (loaded only when the project
    #: has a per-agent limit; a session not named holds none).
    agent_held: Mapping[str, int]
    delay: DelayFrom | None
    line: Sequence[Waiter]


def _drop(d: Draft, w: Waiter, by: Claimant) -> None:
    reason = "ended" if w.session is None or w.session.ended_us is not None else "stale"
    d.events.append(abandoned(w, reason, by.session_id))


def hand_off_issue(d: Draft, free: IssueLine, by: Claimant, ctx: Context) -> Waiter | None:
    """Grant a freed issue to its first live waiter admitted now; returns that waiter."""
    for w in free.line:
        if not waiter_live(w, ctx):
            _drop(d, w, by)
            continue
        why = admits(
            free.rules,
            free.live_count,
            free.agent_held.get(w.session_id, 0),
            lock_delay_until(free.rules, free.delay, w.session_id),
            ctx,
        )
        if why == "cap":
            return None  # the project is full: nobody in the line may take it now
        if why is not None:
            continue
        token = free.last_fencing_token + 1
        granted = LeaseGranted(
            project=free.project,
            issue=free.issue,
            session_id=w.session_id,
            actor_key=w.actor_key,
            fencing_token=token,
            handed_off=True,
        )
        d.add(streams.issue(free.issue), granted)
        note = f" Handoff note: {free.handoff_note}" if free.handoff_note else ""
        post(
            d,
            agent_channel(w.session_id),
            by,
            f"Issue {free.issue} is yours now (waited in line; fencing token {token}).{note}",
        )
        return w
    return None


@dataclass(frozen=True, slots=True)
class LeaseLine:
    """A named lease slot being freed: its line, last token and how many slots are free."""

    name: str
    last_fencing_token: int
    free_slots: int
    capacity: int
    line: Sequence[Waiter]


def hand_off_lease(d: Draft, free: LeaseLine, by: Claimant, ctx: Context) -> list[Waiter]:
    """Grant free slots of a named lease to the first live waiters, one slot each."""
    granted: list[Waiter] = []
    token = free.last_fencing_token
    for w in free.line:
        if len(granted) >= free.free_slots:
            break
        if not waiter_live(w, ctx):
            _drop(d, w, by)
            continue
        token += 1
        ttl = w.ttl_seconds or DEFAULT_LEASE_TTL_SECONDS
        d.add(
            streams.named_lease(free.name),
            NamedLeaseAcquired(
                name=free.name,
                session_id=w.session_id,
                actor_key=w.actor_key,
                fencing_token=token,
                ttl_seconds=ttl,
                expires_at_us=ctx.now_us + ttl * 1_000_000,
                handed_off=True,
                capacity=free.capacity if free.capacity > 1 else UNSET,
            ),
        )
        post(
            d,
            agent_channel(w.session_id),
            by,
            f"Lease {free.name} is yours now (waited in line; fencing token {token}, {ttl} s).",
        )
        granted.append(w)
    return granted


def hand_off_files(
    d: Draft,
    line: Sequence[Waiter],
    held: Sequence[ClaimRow],
    holders: dict[str, SessionState],
    by: Claimant,
    ctx: Context,
    work: Work | None = None,
) -> list[Waiter]:
    """Grant each live files waiter, in line order, whose paths no live claim now blocks.

    ``held``: the unreleased claims that could overlap the waiters' paths, without those the
    freeing decision released. A stale holder's claim is released (``expired``) for the
    waiter, as a direct claim would; each grant is held against the later waiters. The
    overlap checks spend ``work`` (the deciding command's; else a decision's steps): once
    they run out, the hand-off stops at the waiter it was checking, which keeps its place
    with everyone behind it and is told to claim again (docs/protocol.md#waiting).
    """
    work = work if work is not None else Work(DECISION_STEPS)
    held = list(held)
    granted: list[Waiter] = []
    for w in line:
        if not waiter_live(w, ctx):
            _drop(d, w, by)
            continue
        blocking: list[ClaimRow] = []
        expired: list[ClaimRow] = []
        for path in w.paths:
            for h in held:
                if (h.issue == w.issue and h.session_id == w.session_id) or not (w.exclusive or h.exclusive):
                    continue
                if overlaps_within(path, h.path, work) is False:
                    continue
                (blocking if holder_is_live(h, holders, ctx) else expired).append(h)
        if work.exhausted:  # undecided: neither granted nor passed over; told to look itself
            post(
                d,
                agent_channel(w.session_id),
                by,
                f"Files {', '.join(w.paths)} for issue {w.issue or w.key} may be free: the hand-off ran out of its "
                f"steps before deciding your wait (you keep your place); send claim_files again to take them.",
            )
            break
        if blocking:
            continue
        for h in dict.fromkeys(expired):
            d.add(
                streams.files(h.issue),
                FileClaimReleased(
                    issue=h.issue,
                    session_id=h.session_id,
                    paths=[h.path],
                    reason="expired",
                    by_session_id=by.session_id,
                ),
            )
            held.remove(h)
        issue = w.issue or w.key
        d.add(
            streams.files(issue),
            FilesClaimed(
                issue=issue,
                session_id=w.session_id,
                actor_key=w.actor_key,
                paths=list(w.paths),
                exclusive=w.exclusive,
                handed_off=True,
            ),
        )
        post(
            d,
            agent_channel(w.session_id),
            by,
            f"Files {', '.join(w.paths)} for issue {issue} are yours now (waited in line).",
        )
        held += [ClaimRow(0, i, issue, w.session_id, w.actor_key, p, w.exclusive) for i, p in enumerate(w.paths)]
        if w.session is not None:
            holders[w.session_id] = w.session
        granted.append(w)
    return granted


@dataclass(frozen=True, slots=True)
class Freed:
    """Everything one decision frees at once (end_agent): the lines to serve, the own wait."""

    issues: Sequence[IssueLine] = ()
    leases: Sequence[LeaseLine] = ()
    files_line: Sequence[Waiter] = ()
    files_held: Sequence[ClaimRow] = ()
    files_holders: dict[str, SessionState] | None = None
    own_wait: Waiter | None = None
    #: The steps of overlap checks left to the decision (choosing the files line spent some).
    work: Work | None = None


def hand_off_freed(d: Draft, freed: Freed, by: Claimant, ctx: Context) -> None:
    """Serve every line a decision freed, then drop the deciding session's own wait."""
    for issue in freed.issues:
        hand_off_issue(d, issue, by, ctx)
    for lease in freed.leases:
        hand_off_lease(d, lease, by, ctx)
    if freed.files_line:
        hand_off_files(d, freed.files_line, freed.files_held, dict(freed.files_holders or {}), by, ctx, freed.work)
    if freed.own_wait is not None:
        d.events.append(abandoned(freed.own_wait, "ended", by.session_id))
