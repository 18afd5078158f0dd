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

from eventcoord.domain.queue.enqueue import check_blockers, check_issue_project, decide_enqueue_work
from eventcoord.domain.queue.recovery import Recovery, recover, requeued, stale_items
from eventcoord.domain.queue.selection import (
    blockers_done,
    blocking_path,
    claimed,
    decide_claim_next_work,
    item_view,
)
from eventcoord.domain.queue.state import (
    ACTIVE,
    ClaimNextState,
    EnqueueState,
    FileClaimView,
    ItemState,
    QueuedItems,
    StaleWork,
    TransitionState,
    WorkReads,
)
from eventcoord.domain.queue.transitions import (
    decide_finish_work,
    decide_start_work,
    finish_release_reason,
)

__all__ = [
    "ACTIVE",
    "ClaimNextState",
    "EnqueueState",
    "FileClaimView",
    "ItemState",
    "QueuedItems",
    "Recovery",
    "StaleWork",
    "TransitionState",
    "WorkReads",
    "blockers_done",
    "blocking_path",
    "check_blockers",
    "check_issue_project",
    "claimed",
    "decide_claim_next_work",
    "decide_enqueue_work",
    "decide_finish_work",
    "decide_start_work",
    "finish_release_reason",
    "item_view",
    "recover",
    "requeued",
    "stale_items",
]
