"""Stale-worker recovery: the work of workers no longer live goes back to the queue.

Any queue command on a project first re-queues the items of its stale non-human workers
(``worker_stale``), releasing their leases (``expired``) unless the pull that follows takes
the same issue, which then reclaims it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eventcoord.context import Context, StreamEvent
from eventcoord.domain import streams
from eventcoord.domain.queue.state import ACTIVE, ItemState, StaleWork
from eventcoord.domain.sessions import SessionState
from eventcoord.events import LeaseReleased, WorkRequeued


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
        item.item_id,
        item.project,
        item.issue,
        item.priority,
        "queued",
        None,
        None,
        item.blocked_by,
        item.paths,
        item.payload,
        item.enqueued_position,
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
            expired = LeaseReleased(
                issue=item.issue,
                session_id=lease.session_id,
                reason="expired",
                fencing_token=lease.fencing_token,
                by_session_id=caller,
                project=lease.project,
            )
            events.append((streams.issue(item.issue), expired))
    return Recovery(events, items, released)
