"""The work queue: enqueue, stale-worker recovery, selection, transitions.

Pure decisions over the state a handler loaded; what selection reads as it goes (queued
items page by page, blockers, claims, issues) it asks of :class:`WorkReads`, which the
handler implements (locking what it reads). The rules are docs/protocol.md#queue-rules;
beyond them: a transition checks the status first, then the holder; a blocker that failed
or was cancelled keeps its item blocked; session-less claims always count against declared
paths; an item without an issue takes no lease, so the WIP cap never holds it back.
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
