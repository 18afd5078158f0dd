"""start_work and finish_work: an item's moves after it was claimed, and its lease's end."""

from __future__ import annotations

from eventcoord import errors
from eventcoord.commands import FinishWork, StartWork
from eventcoord.context import Context, Decision, Draft, StreamEvent
from eventcoord.domain import refusals, streams
from eventcoord.domain.handoff import hand_off_issue
from eventcoord.domain.queue.recovery import Recovery, recover
from eventcoord.domain.queue.state import ACTIVE, ItemState, TransitionState, WorkReads
from eventcoord.domain.sessions import Claimant, require_not_ended
from eventcoord.events import LeaseReleased, ReleaseReason, WorkFinished, WorkStarted


def _check_holder(item: ItemState, session_id: str | None, admin: bool) -> None:
    if admin or (session_id is not None and item.session_id == session_id):
        return
    raise refusals.not_item_holder(item.item_id, session_id, item.session_id)


def _current(state: TransitionState, caller: str | None) -> tuple[ItemState, Recovery, WorkReads]:
    """The item as it stands after the recovery of stale work (locked), the recovery, the reads."""
    item, reads = state.item, state.reads
    assert item is not None and reads is not None
    recovery = recover(reads.stale_work(caller), caller)
    current = recovery.items.get(item.item_id) or reads.locked_item(item.item_id) or item
    return current, recovery, reads


def decide_start_work(state: TransitionState, cmd: StartWork, ctx: Context) -> Decision:
    """``claimed → running``, by the holder or an admin."""
    if state.item is None:
        raise errors.item_not_found(cmd.item_id)
    me = require_not_ended(state.session, cmd.session_id)
    item, recovery, _ = _current(state, me.session_id)
    d = Draft(events=list(recovery.events), session_id=me.session_id, actor_key=me.actor_key)
    if item.status != "claimed":
        raise refusals.invalid_transition(item.item_id, item.status, "running")
    _check_holder(item, me.session_id, ctx.caller.role == "admin")
    d.add(streams.work(item.item_id), WorkStarted(item_id=item.item_id, session_id=me.session_id))
    d.result = {"item_id": item.item_id, "status": "running"}
    return d.decided()


def finish_release_reason(outcome: str) -> ReleaseReason:
    """The reason the item's issue lease is released with when it ends."""
    return "completed" if outcome == "done" else "released"


def decide_finish_work(state: TransitionState, cmd: FinishWork, ctx: Context) -> Decision:
    """End an item: ``running → any outcome``; ``claimed``/``queued`` → ``cancelled`` only.

    The worker's lease on the item's issue is released with it, unless another of its
    active items names the same issue.
    """
    admin = ctx.caller.role == "admin"
    if cmd.session_id is None and not admin:
        raise errors.forbidden("only an admin may finish work without a session", {"item_id": cmd.item_id})
    if state.item is None:
        raise errors.item_not_found(cmd.item_id)
    me = require_not_ended(state.session, cmd.session_id) if cmd.session_id is not None else None
    sid = me.session_id if me else None
    item, recovery, reads = _current(state, sid)
    d = Draft(events=list(recovery.events), session_id=sid, actor_key=me.actor_key if me else None)
    if item.status == "queued" and cmd.outcome == "cancelled":
        if not admin:
            raise errors.forbidden(
                "only an admin may cancel a queued work item", {"item_id": item.item_id, "status": item.status}
            )
    elif item.status == "running" or (item.status == "claimed" and cmd.outcome == "cancelled"):
        _check_holder(item, sid, admin)
    else:
        raise refusals.invalid_transition(item.item_id, item.status, cmd.outcome)
    d.add(streams.work(item.item_id), WorkFinished(item_id=item.item_id, session_id=sid, outcome=cmd.outcome))
    d.result = {"item_id": item.item_id, "status": cmd.outcome}
    if item.issue is not None and item.status in ACTIVE and item.session_id is not None:
        released = _release_item_lease(item, reads, cmd.outcome, sid)
        if released is not None:
            d.events.append(released)
            free = reads.issue_line(item.issue)
            if free is not None:
                hand_off_issue(d, free, Claimant(sid, d.actor_key or "token:admin"), ctx)
    return d.decided()


def _release_item_lease(item: ItemState, reads: WorkReads, outcome: str, by: str | None) -> StreamEvent | None:
    """The release of the worker's lease on the item's issue, unless another of its items needs it."""
    assert item.issue is not None
    lease = reads.lease(item.issue)
    if lease is None or lease.session_id != item.session_id or reads.other_active_items(item):
        return None
    event = LeaseReleased(
        issue=item.issue,
        session_id=lease.session_id,
        reason=finish_release_reason(outcome),
        fencing_token=lease.fencing_token,
        by_session_id=by if by != lease.session_id else None,
        project=lease.project,
    )
    return streams.issue(item.issue), event
