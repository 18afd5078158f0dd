"""Handlers of the work queue: load what enqueue, claim_next_work, start and finish read
(``reads/queue.py``: the project's guard, the caller's session, the item, locked), decide."""

from __future__ import annotations

from sqlalchemy import Connection

from eventcoord.commands import ClaimNextWork, EnqueueWork, FinishWork, StartWork
from eventcoord.context import Context, Decision
from eventcoord.domain import queue as domain
from eventcoord.reads import queue as reads


def enqueue_work(conn: Connection, ctx: Context, cmd: EnqueueWork) -> Decision:
    return domain.decide_enqueue_work(reads.enqueue_state(conn, ctx, cmd), cmd, ctx)


def claim_next_work(conn: Connection, ctx: Context, cmd: ClaimNextWork) -> Decision:
    return domain.decide_claim_next_work(reads.pull_state(conn, ctx, cmd), cmd, ctx)


def start_work(conn: Connection, ctx: Context, cmd: StartWork) -> Decision:
    return domain.decide_start_work(reads.transition_state(conn, ctx, cmd.item_id, cmd.session_id), cmd, ctx)


def finish_work(conn: Connection, ctx: Context, cmd: FinishWork) -> Decision:
    state = reads.transition_state(conn, ctx, cmd.item_id, cmd.session_id)
    reads.lock_other_worker(conn, ctx, state, cmd.session_id)  # an admin's finish of another's item
    return domain.decide_finish_work(state, cmd, ctx)
