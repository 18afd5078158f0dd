"""claim_next_work: the next eligible item, in priority then age order.

An item is skipped while blocked, while one of its paths overlaps a present exclusive
claim of someone else, or while its issue is not ``free`` (a stale holder's lease is left
to ``claim_issue``'s explicit takeover) or the project is at its cap (no ``WipCapDenied``).
Items without an issue take no lease.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from typing import Any

import msgspec

from eventcoord.commands import ClaimNextWork
from eventcoord.context import Context, Decision, Draft
from eventcoord.domain import streams
from eventcoord.domain.issues import Grant, grant_for_work
from eventcoord.domain.paths import DECISION_STEPS, Work, overlaps_within
from eventcoord.domain.queue.recovery import recover
from eventcoord.domain.queue.state import ClaimNextState, FileClaimView, ItemState, QueuedItems, WorkReads
from eventcoord.domain.sessions import SessionState, require_live
from eventcoord.events import WorkClaimed


def blockers_done(item: ItemState, statuses: Mapping[str, str]) -> bool:
    """Every blocker of ``item`` has finished with outcome ``done``."""
    return all(statuses.get(b) == "done" for b in item.blocked_by)


def blocking_path(
    item: ItemState, claims: Iterable[FileClaimView], session_id: str, work: Work | None = None
) -> str | None:
    """A declared path overlapping a present exclusive claim of someone else, if any.

    The checks spend ``work`` (the pull's): a path still undecided when they run out counts
    as blocked, the careful answer (the item waits for a later pull).
    """
    work = work if work is not None else Work(DECISION_STEPS)
    others = [c for c in claims if c.session_id != session_id and (c.session_id is None or c.live)]
    for path in item.paths:
        for claim in others:
            if overlaps_within(path, claim.path, work) is not False:
                return path
    return None


def claimed(item: ItemState, me: SessionState, fencing_token: int | None) -> WorkClaimed:
    """The claim of ``item`` by ``me``."""
    return WorkClaimed(
        item_id=item.item_id,
        project=item.project,
        issue=item.issue,
        session_id=me.session_id,
        actor_key=me.actor_key,
        host=me.host,
        fencing_token=fencing_token,
    )


def item_view(
    item: ItemState, payload: Any, status: str, session_id: str | None, fencing_token: int | None
) -> dict[str, Any]:
    """The item as ``claim_next_work`` answers it."""
    return {
        "item_id": item.item_id,
        "project": item.project,
        "issue": item.issue,
        "priority": item.priority,
        "status": status,
        "payload": payload,
        "blocked_by": list(item.blocked_by),
        "paths": list(item.paths),
        "session_id": session_id,
        "fencing_token": fencing_token,
    }


def _select(
    candidates: Iterable[ItemState],
    queued: QueuedItems,
    reads: WorkReads,
    me: SessionState,
    wip_limit: int,
    ctx: Context,
    recovered: Collection[str] = (),
) -> tuple[ItemState, Grant | None] | None:
    """The first candidate the caller may take now, with the lease it takes (if it has an issue).

    Only a ``free`` issue is taken (or the caller's own lease kept); ``recovered`` names the
    issues whose stale lease this pull's recovery released, which are free once it commits.
    """
    statuses: dict[str, str] = {}
    # Once a free issue (one without a lease) met the cap, every free issue does: the
    # count leaves out only a lease on the issue itself, and a free one has none. From
    # then on an item on an issue can only be taken to keep the caller's own lease, or to
    # take one this pull's recovery released: every other one is skipped unread, and the
    # queue is narrowed to those and the items without an issue. So a pull at the cap reads
    # what it could take, not six statements per item queued ahead.
    mine: frozenset[str] | None = None
    work = Work(DECISION_STEPS)  # every candidate's overlap checks together
    for item in candidates:
        if mine is not None and item.issue is not None and item.issue not in mine:
            continue
        unknown = [b for b in item.blocked_by if b not in statuses]
        if unknown:
            statuses.update(reads.statuses(unknown))
        if not blockers_done(item, statuses):
            continue
        if item.paths and (
            work.exhausted  # past the pull's steps: an item with paths waits for a later pull, unread
            or blocking_path(item, reads.exclusive_claims(item.paths), me.session_id, work) is not None
        ):
            continue
        if item.issue is None:
            return item, None
        view = reads.issue(item.issue)
        counted: list[int] = []
        grant = grant_for_work(
            view,
            me,
            item.project,
            wip_limit,
            partial(_count, counted, reads.live_leases, item.issue),
            ctx,
            recovered=item.issue in recovered,
        )
        if grant is not None:
            return item, grant
        if mine is None and view.lease is None and counted and counted[0] >= wip_limit:
            mine = frozenset(reads.held_issues(me.session_id)) | frozenset(recovered)
            queued.narrow(mine)
    return None


def _count(counted: list[int], live_leases: Callable[[str], int], issue: str) -> int:
    """``live_leases(issue)``, noted in ``counted``."""
    n = live_leases(issue)
    counted.append(n)
    return n


def decide_claim_next_work(state: ClaimNextState, cmd: ClaimNextWork, ctx: Context) -> Decision:
    """Pull the next eligible item (recovering stale work first), or answer ``item: null``."""
    me = require_live(state.session, cmd.session_id, ctx)
    recovery = recover(state.reads.stale_work(me.session_id), me.session_id)
    queued = state.reads.queued(me.session_id, recovery.released.keys())
    candidates = heapq.merge(sorted(recovery.items.values(), key=lambda i: i.order), queued, key=lambda i: i.order)
    chosen = _select(candidates, queued, state.reads, me, state.wip_limit, ctx, recovery.released.keys())
    d = Draft(session_id=me.session_id, actor_key=me.actor_key)
    if chosen is None:
        d.events = list(recovery.events)
        d.result = {"item": None}
        return d.decided()
    item, grant = chosen
    token = grant.fencing_token if grant is not None else None
    # A lease the recovery just released and the grant takes again is reclaimed in one step.
    d.events = recovery.reclaiming(item.issue if grant is not None and grant.events else None)
    d.events += grant.events if grant is not None else []
    d.add(streams.work(item.item_id), claimed(item, me, token))
    payload = None if item.payload is None else msgspec.json.decode(item.payload)
    d.result = {"item": item_view(item, payload, "claimed", me.session_id, token)}
    return d.decided()
