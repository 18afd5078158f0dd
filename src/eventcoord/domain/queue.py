"""The work queue: enqueue, stale-worker recovery, selection, transitions.

Pure decisions over the state a handler loaded; what selection reads as it goes (queued
items page by page, blockers, claims, issues) it asks of :class:`WorkReads`, which the
handler implements (locking what it reads). Rules decided here (SPEC §1, §5, p24):

* Lifecycle ``queued → claimed → running → done | failed | oom_killed | cancelled``.
  ``start_work`` moves ``claimed → running``; ``finish_work`` ends a ``running`` item with
  any outcome. ``cancelled`` may also end an item that never started: a ``claimed`` one
  (its holder or an admin) or a ``queued`` one (an admin only, else 403 FORBIDDEN). Any
  other move is 409 ``INVALID_TRANSITION`` ``{item_id, status, wanted}``; the status is
  checked first, then the holder: only the claiming session or an admin token moves a
  claimed/running item on (409 ``NOT_HOLDER``).
* ``blocked_by`` names items that must already exist in the workspace (422
  ``VALIDATION`` on ``blocked_by[i]``); an item is eligible once every blocker is
  ``done`` (a blocker that failed or was cancelled keeps it blocked).
* Declared ``paths`` are normalised like file claims (422 ``VALIDATION`` on ``paths[i]``);
  an item is skipped while one of them overlaps a live exclusive file claim of another
  session (session-less claims always count).
* Any queue command on a project first re-queues the items of its stale non-human
  workers (``worker_stale``), releasing their leases (``expired``) unless the pull that
  follows takes the same issue, which then reclaims it.
* Selection: higher priority first, then the oldest; an item is skipped while blocked, or
  while its issue is not takeable or the project is at its cap (no ``WipCapDenied``).
* Items without an issue take no lease, so the WIP cap (which counts issue leases) does
  not hold them back; their ``fencing_token`` is null.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import msgspec

from eventcoord import errors
from eventcoord.commands import ClaimNextWork, EnqueueWork, FinishWork, StartWork
from eventcoord.context import Context, Decision, StreamEvent
from eventcoord.domain import streams
from eventcoord.domain.files import normalise_paths
from eventcoord.domain.issues import Grant, IssueView, LeaseState, grant_for_work
from eventcoord.domain.paths import overlaps
from eventcoord.domain.sessions import SessionState, require_live, require_not_ended
from eventcoord.events import (
    LeaseReleased,
    ReleaseReason,
    WorkClaimed,
    WorkEnqueued,
    WorkFinished,
    WorkRequeued,
    WorkStarted,
)

ACTIVE = ("claimed", "running")


@dataclass(frozen=True, slots=True)
class ItemState:
    """One work item as the read model holds it (``payload`` is its JSON text)."""

    item_id: str
    project: str
    issue: str | None
    priority: int
    status: str
    session_id: str | None
    fencing_token: int | None
    blocked_by: tuple[str, ...]
    paths: tuple[str, ...]
    payload: str | None
    enqueued_position: int

    @property
    def order(self) -> tuple[int, int]:
        """Selection order: higher priority first, then the oldest."""
        return (-self.priority, self.enqueued_position)


@dataclass(frozen=True, slots=True)
class FileClaimView:
    """An unreleased exclusive file claim and whether its holder counts as present."""

    path: str
    session_id: str | None
    live: bool


@dataclass(frozen=True, slots=True)
class StaleWork:
    """A project's items whose non-human workers are no longer live, and their issues' leases.

    ``items`` are :func:`stale_items` (in selection order); ``leases`` the unreleased lease
    of each of their issues, as loaded (and locked) before the decision.
    """

    items: Sequence[ItemState] = ()
    leases: Mapping[str, LeaseState | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Recovery:
    """The re-queue of stale work, decided: its events and the items as they now stand."""

    events: list[StreamEvent]
    items: dict[str, ItemState]
    #: The issues whose lease the recovery released, with the index of that release.
    released: dict[str, int]

    def reclaiming(self, issue: str | None) -> list[StreamEvent]:
        """The events, less the release of ``issue``'s lease (a grant reclaims it instead)."""
        index = self.released.get(issue) if issue is not None else None
        return list(self.events) if index is None else self.events[:index] + self.events[index + 1 :]


class WorkReads(Protocol):
    """What queue decisions read as they go; the handler loads (and locks) each on demand."""

    def stale_work(self, caller: str | None) -> StaleWork:
        """The project's stale work (its items, workers and leases locked)."""

    def locked_item(self, item_id: str) -> ItemState | None:
        """The item, its row locked."""

    def queued(self) -> Iterable[ItemState]:
        """The project's queued items in selection order (rows others lock are skipped)."""

    def statuses(self, item_ids: list[str]) -> Mapping[str, str]:
        """The status of each of these items."""

    def exclusive_claims(self) -> list[FileClaimView]:
        """The workspace's unreleased exclusive file claims, with their holders' liveness."""

    def issue(self, issue: str) -> IssueView:
        """The issue as effective state sees it, its lease locked."""

    def live_leases(self, issue: str) -> int:
        """The project's live leases, not counting any lease on ``issue``."""

    def lease(self, issue: str) -> LeaseState | None:
        """The issue's unreleased lease, locked."""

    def other_active_items(self, item: ItemState) -> int:
        """How many other claimed/running items of ``item``'s worker name its issue."""


@dataclass(frozen=True, slots=True)
class EnqueueState:
    """What enqueue_work decides on; the project is locked."""

    existing: Sequence[str]  # which of the command's blockers exist in this workspace
    issue_project: str | None  # the project the command's issue belongs to, if any yet
    reads: WorkReads


@dataclass(frozen=True, slots=True)
class ClaimNextState:
    """What claim_next_work decides on: the caller (locked), the cap; the rest via ``reads``."""

    session: SessionState | None
    wip_limit: int
    reads: WorkReads


@dataclass(frozen=True, slots=True)
class TransitionState:
    """What start_work and finish_work decide on: the item, the caller's session (locked).

    ``item`` is None when it is not an item of this workspace (then nothing else is
    loaded); ``session`` is None when it is unknown or none was named (an admin).
    """

    item: ItemState | None
    session: SessionState | None
    reads: WorkReads | None = None


# --- enqueue ---------------------------------------------------------------------------


def check_blockers(blocked_by: Sequence[str], existing: Iterable[str]) -> list[str]:
    """The blockers, deduplicated; each must be an item of this workspace."""
    known = set(existing)
    out: list[str] = []
    for i, item_id in enumerate(blocked_by):
        if item_id not in known:
            raise errors.invalid(f"blocked_by[{i}]", f"no work item {item_id!r} in this workspace")
        if item_id not in out:
            out.append(item_id)
    return out


def check_issue_project(issue: str | None, project: str, issue_project: str | None) -> None:
    """An issue belongs to the project named at its first claim (SPEC §5)."""
    if issue is not None and issue_project is not None and issue_project != project:
        raise errors.invalid("issue", f"issue {issue!r} belongs to project {issue_project!r}, not {project!r}")


def decide_enqueue_work(state: EnqueueState, cmd: EnqueueWork, ctx: Context) -> Decision:
    """Add an item to the queue (after re-queueing the project's stale work)."""
    paths = normalise_paths(cmd.paths)
    blockers = check_blockers(cmd.blocked_by, state.existing)
    check_issue_project(cmd.issue, cmd.project, state.issue_project)
    d = Decision(events=list(recover(state.reads.stale_work(None), None).events))
    item_id = ctx.make_id("w")
    enqueued = WorkEnqueued(
        item_id=item_id, project=cmd.project, issue=cmd.issue, priority=cmd.priority, payload=cmd.payload, blocked_by=blockers, paths=paths
    )
    d.add(streams.work(item_id), enqueued)
    d.result = {"item_id": item_id}
    return d


# --- stale-worker recovery -------------------------------------------------------------


def stale_items(
    items: Iterable[ItemState], workers: Mapping[str, SessionState], ctx: Context, exclude: str | None
) -> list[ItemState]:
    """Claimed or running items whose non-human worker is no longer live, in selection order.

    The calling session is never stale: its own command is a sign of life.
    """
    out: list[ItemState] = []
    for item in items:
        if item.status not in ACTIVE or item.session_id is None or item.session_id == exclude:
            continue
        worker = workers.get(item.session_id)
        if worker is None or worker.kind == "human":
            continue
        if not ctx.is_live(worker.last_seen_us, worker.ended_us):
            out.append(item)
    return sorted(out, key=lambda i: i.order)


def requeued(item: ItemState, reason: str) -> tuple[WorkRequeued, ItemState]:
    """The re-queue event and the item as it stands afterwards."""
    event = WorkRequeued(item_id=item.item_id, session_id=item.session_id, reason=reason)
    after = ItemState(
        item.item_id, item.project, item.issue, item.priority, "queued", None, None,
        item.blocked_by, item.paths, item.payload, item.enqueued_position,
    )
    return event, after


def recover(stale: StaleWork, caller: str | None) -> Recovery:
    """Re-queue stale work (``worker_stale``); a lease its worker still holds is ``expired``."""
    events: list[StreamEvent] = []
    items: dict[str, ItemState] = {}
    released: dict[str, int] = {}
    for item in stale.items:
        event, after = requeued(item, "worker_stale")
        events.append((streams.work(item.item_id), event))
        items[item.item_id] = after
        if item.issue is None or item.issue in released:
            continue
        lease = stale.leases.get(item.issue)
        if lease is not None and lease.session_id == item.session_id:
            released[item.issue] = len(events)
            expired = LeaseReleased(issue=item.issue, session_id=lease.session_id, reason="expired", fencing_token=lease.fencing_token, by_session_id=caller)
            events.append((streams.issue(item.issue), expired))
    return Recovery(events, items, released)


# --- selection -------------------------------------------------------------------------


def blockers_done(item: ItemState, statuses: Mapping[str, str]) -> bool:
    """Every blocker of ``item`` has finished with outcome ``done``."""
    return all(statuses.get(b) == "done" for b in item.blocked_by)


def blocking_path(item: ItemState, claims: Iterable[FileClaimView], session_id: str) -> str | None:
    """A declared path overlapping a present exclusive claim of someone else, if any."""
    others = [c for c in claims if c.session_id != session_id and (c.session_id is None or c.live)]
    for path in item.paths:
        for claim in others:
            if overlaps(path, claim.path):
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


def item_view(item: ItemState, payload: Any, status: str, session_id: str | None, fencing_token: int | None) -> dict[str, Any]:
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
    candidates: Iterable[ItemState], reads: WorkReads, me: SessionState, wip_limit: int, ctx: Context
) -> tuple[ItemState, Grant | None] | None:
    """The first candidate the caller may take now, with the lease it takes (if it has an issue)."""
    statuses: dict[str, str] = {}
    claims: list[FileClaimView] | None = None
    for item in candidates:
        unknown = [b for b in item.blocked_by if b not in statuses]
        if unknown:
            statuses.update(reads.statuses(unknown))
        if not blockers_done(item, statuses):
            continue
        if item.paths:
            claims = reads.exclusive_claims() if claims is None else claims
            if blocking_path(item, claims, me.session_id) is not None:
                continue
        if item.issue is None:
            return item, None
        grant = grant_for_work(reads.issue(item.issue), me, item.project, wip_limit, partial(reads.live_leases, item.issue), ctx)
        if grant is not None:
            return item, grant
    return None


def decide_claim_next_work(state: ClaimNextState, cmd: ClaimNextWork, ctx: Context) -> Decision:
    """Pull the next eligible item (recovering stale work first), or answer ``item: null``."""
    me = require_live(state.session, cmd.session_id, ctx)
    recovery = recover(state.reads.stale_work(me.session_id), me.session_id)
    candidates = heapq.merge(sorted(recovery.items.values(), key=lambda i: i.order), state.reads.queued(), key=lambda i: i.order)
    chosen = _select(candidates, state.reads, me, state.wip_limit, ctx)
    d = Decision(session_id=me.session_id, actor_key=me.actor_key)
    if chosen is None:
        d.events = list(recovery.events)
        d.result = {"item": None}
        return d
    item, grant = chosen
    token = grant.fencing_token if grant is not None else None
    # A lease the recovery just released and the grant takes again is reclaimed in one step.
    d.events = recovery.reclaiming(item.issue if grant is not None and grant.events else None)
    d.events += grant.events if grant is not None else []
    d.add(streams.work(item.item_id), claimed(item, me, token))
    payload = None if item.payload is None else msgspec.json.decode(item.payload)
    d.result = {"item": item_view(item, payload, "claimed", me.session_id, token)}
    return d


# --- transitions -----------------------------------------------------------------------


def _check_holder(item: ItemState, session_id: str | None, admin: bool) -> None:
    if admin or (session_id is not None and item.session_id == session_id):
        return
    raise errors.not_item_holder(item.item_id, session_id, item.session_id)


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
    d = Decision(events=list(recovery.events), session_id=me.session_id, actor_key=me.actor_key)
    if item.status != "claimed":
        raise errors.invalid_transition(item.item_id, item.status, "running")
    _check_holder(item, me.session_id, ctx.caller.role == "admin")
    d.add(streams.work(item.item_id), WorkStarted(item_id=item.item_id, session_id=me.session_id))
    d.result = {"item_id": item.item_id, "status": "running"}
    return d


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
    d = Decision(events=list(recovery.events), session_id=sid, actor_key=me.actor_key if me else None)
    if item.status == "queued" and cmd.outcome == "cancelled":
        if not admin:
            raise errors.forbidden("only an admin may cancel a queued work item", {"item_id": item.item_id, "status": item.status})
    elif item.status == "running" or (item.status == "claimed" and cmd.outcome == "cancelled"):
        _check_holder(item, sid, admin)
    else:
        raise errors.invalid_transition(item.item_id, item.status, cmd.outcome)
    d.add(streams.work(item.item_id), WorkFinished(item_id=item.item_id, session_id=sid, outcome=cmd.outcome))
    d.result = {"item_id": item.item_id, "status": cmd.outcome}
    if item.issue is not None and item.status in ACTIVE and item.session_id is not None:
        released = _release_item_lease(item, reads, cmd.outcome, sid)
        if released is not None:
            d.events.append(released)
    return d


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
    )
    return streams.issue(item.issue), event
