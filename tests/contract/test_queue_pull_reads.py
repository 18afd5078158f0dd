"""A pull reads the queue a page at a time, not a few statements per item queued ahead.

* At its project's WIP cap: every queued item on a free issue is refused by the cap the
  first one met, so after it a pull skips them unread (only an item the caller's own lease
  covers, or one its recovery freed, could still be taken) and narrows the rest of the queue
  to those and the items without an issue. Before: six statements per item (~1,800 for 300
  queued ahead), the project's guard held all the while.
* Items waiting on blockers are not read at all: the pages hold ready items only (the read
  model counts each item's unfinished blockers, 0016_queue_ready). Before: a page's
  blockers' statuses in one statement, and before that one statement per blocked item.
* Items whose paths someone else claims: the claims on their paths are read for a whole
  page at once. Before: three statements per item.

Counted on the real stores: each statement the pull sends to PostgreSQL (through asyncpg or
SQLAlchemy) or SQLite (the writer's trace callback).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text
from tests.contract.test_group_commit import (
    _gone_quiet,
    _register,
    _sixteen_agents,
    encoded,
    execute,
    statements_sent,
)

from eventcoord.service import Outcome, Service


@contextlib.contextmanager
def statements(store: Any) -> Iterator[list[str]]:
    """Every statement the store's writer runs meanwhile (one round trip each on PostgreSQL)."""
    if store.dialect == "postgresql":
        # asyncpg's own calls, and what SQLAlchemy runs (it prepares and fetches, which
        # ``statements_sent`` does not see)
        engine = store._writer_engine.sync_engine

        def executed(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            sent.append(statement)

        with statements_sent() as sent:
            event.listen(engine, "before_cursor_execute", executed)
            try:
                yield sent
            finally:
                event.remove(engine, "before_cursor_execute", executed)
        return
    sent: list[str] = []
    raw = store._conn.connection.driver_connection  # the SQLite writer's own connection
    raw.set_trace_callback(sent.append)
    try:
        yield sent
    finally:
        raw.set_trace_callback(None)


async def _ok(service: Service, body: dict[str, Any]) -> dict[str, Any]:
    answer = await execute(service, body)
    assert isinstance(answer, Outcome) and answer.status == 200, answer
    result: dict[str, Any] = json.loads(encoded(answer))["result"]
    return result


class _AtCap:
    """Three agents hold project P's cap of 3; a fourth pulls."""

    def __init__(self, store: Any) -> None:
        self.store, self.service, self.queued = store, Service(store), 0

    async def start(self) -> None:
        self.sids = [
            (await _ok(self.service, {"type": "register_agent", "actor": f"a{i}"}))["session_id"] for i in range(4)
        ]
        for i, sid in enumerate(self.sids[:3]):
            await _ok(self.service, {"type": "claim_issue", "session_id": sid, "project": "P", "issue": f"P-held-{i}"})

    async def queue_on_issues(self, n: int) -> None:
        """``n`` more items on free issues, ahead of every item without one (a higher priority)."""
        for start in range(self.queued, self.queued + n, 50):
            await asyncio.gather(
                *(
                    _ok(self.service, {"type": "enqueue_work", "project": "P", "issue": f"P-{i}", "priority": 1})
                    for i in range(start, min(start + 50, self.queued + n))
                )
            )
        self.queued += n

    async def pull(self) -> int:
        """The statements of a pull by the fourth agent, which takes the item without an issue."""
        plain = (await _ok(self.service, {"type": "enqueue_work", "project": "P"}))["item_id"]
        with statements(self.store) as sent:
            got = await _ok(self.service, {"type": "claim_next_work", "session_id": self.sids[3], "project": "P"})
        assert got["item"]["item_id"] == plain, got  # the cap leaves only the item without an issue
        return len(sent)


async def test_a_pull_at_the_cap_does_not_read_the_queue_item_by_item(store: Any) -> None:
    cap = _AtCap(store)
    await cap.start()
    await cap.queue_on_issues(300)
    # The session, the stale workers, the first page, the first issue and the cap, the
    # caller's leases, one page of the items without an issue, the writes: a few dozen at
    # most (SQLite counts BEGIN and each projection's write), where reading every item
    # cost ~1,800.
    assert await cap.pull() <= 30


async def test_a_pull_at_the_cap_costs_the_same_with_30_or_300_items_ahead(store: Any) -> None:
    cap = _AtCap(store)
    await cap.start()
    await cap.queue_on_issues(30)
    with_30 = await cap.pull()
    await cap.queue_on_issues(270)
    assert await cap.pull() == with_30


async def _pull_behind(store: Any, ahead: list[dict[str, Any]], setup: list[dict[str, Any]]) -> int:
    """Statements of a pull that must pass the items ``ahead`` (priority 1) to take the one
    item behind them; ``setup`` runs first (as an admin; ``{sid}`` is a second agent)."""
    service = Service(store)
    me, other = [(await _ok(service, {"type": "register_agent", "actor": a}))["session_id"] for a in ("me", "other")]
    for body in setup:
        await _ok(service, {k: (other if v == "{sid}" else v) for k, v in body.items()})
    for start in range(0, len(ahead), 50):
        await asyncio.gather(*(_ok(service, {"type": "enqueue_work", **b}) for b in ahead[start : start + 50]))
    behind = (await _ok(service, {"type": "enqueue_work", "project": "P"}))["item_id"]
    with statements(store) as sent:
        got = await _ok(service, {"type": "claim_next_work", "session_id": me, "project": "P"})
    assert got["item"]["item_id"] == behind, got
    return len(sent)


async def test_a_pull_reads_none_of_the_items_waiting_on_blockers(store: Any) -> None:
    # A pull with nothing ahead of the item it takes ...
    alone = await _pull_behind(store, [], [])
    # ... and one behind 150 items, each blocked by an item of its own that is still queued
    # (in another project), and 30 whose blocker failed (they wait for ever)
    service = Service(store)
    blockers = [
        (await _ok(service, {"type": "enqueue_work", "project": "B", "priority": -1}))["item_id"] for _ in range(180)
    ]
    for item in blockers[150:]:
        await _ok(service, {"type": "finish_work", "item_id": item, "outcome": "cancelled"})
    ahead = [{"project": "P", "priority": 1, "blocked_by": [b]} for b in blockers]
    # The same statements: it reads the ready items only (0016_queue_ready). Before: four
    # pages of blocked items and four of their blockers' statuses (one per item before that).
    assert await _pull_behind(store, ahead, []) == alone


async def test_a_pull_reads_the_claims_on_a_page_of_items_paths_at_once(store: Any) -> None:
    # 150 items, each declaring a file another live agent claims exclusively
    claims = [
        {
            "type": "claim_files",
            "session_id": "{sid}",
            "issue": f"X-{k}",
            "paths": [f"src/m{i}.py" for i in range(k, k + 50)],
        }
        for k in range(0, 150, 50)
    ]
    ahead = [{"project": "P", "priority": 1, "paths": [f"src/m{i}.py"]} for i in range(150)]
    sent = await _pull_behind(store, ahead, claims)
    # Four pages, each one probe of its paths' claims and one read of their holders, where
    # each item took the workspace's share lock and read its own (462 on PostgreSQL, 766 on
    # SQLite). SQLite probes each path's range with a statement of its own (in process, a
    # few microseconds each: overlap_candidates), PostgreSQL a page's ranges in one.
    assert sent <= 35 + (len(ahead) if store.dialect == "sqlite" else 0), sent


async def test_a_pull_reads_none_of_the_items_on_issues_others_hold(store: Any) -> None:
    # A pull with nothing ahead of the item it takes ...
    alone = await _pull_behind(store, [], [])
    # ... and one behind 150 items on 150 issues another live agent holds (the cap raised so
    # that they fit): the database passes them as it walks the queue (0 rows of them come
    # back), where each cost three statements (its issue, its lease, its declarers: 620 /
    # 615 on SQLite / PostgreSQL), then one per page.
    setup: list[dict[str, Any]] = [{"type": "configure_project", "project": "P", "wip_limit": 1000}]
    setup += [{"type": "claim_issue", "session_id": "{sid}", "project": "P", "issue": f"H-{i}"} for i in range(150)]
    ahead = [{"project": "P", "priority": 1, "issue": f"H-{i}"} for i in range(150)]
    assert await _pull_behind(store, ahead, setup) == alone


async def test_a_pull_reads_its_session_and_its_project_s_stale_workers_in_one_statement(
    store: Any, backend: str
) -> None:
    """PostgreSQL: 16 pulls in 16 projects, one batch. Each sends its guard with its rules,
    then its session with the stale workers (one statement, was two), then its first page."""
    service, sids = await _sixteen_agents(store, backend)
    for i in range(16):
        await _ok(service, {"type": "enqueue_work", "project": f"Q{i}"})
    with statements(store) as sent:
        got = await asyncio.gather(
            *(
                _ok(service, {"type": "claim_next_work", "session_id": s, "project": f"Q{i}"})
                for i, s in enumerate(sids)
            )
        )
    assert all(g["item"] is not None for g in got), got
    # three per pull; BEGIN, the clock, the end and COMMIT (and the first pull maybe alone)
    assert len(sent) <= 3 * len(sids) + 4 + 4, sent
    # A start and a finish read their session with the stale workers likewise (one statement,
    # was two: the workers were read on their own).
    items = [g["item"]["item_id"] for g in got]
    for kind, extra in (("start_work", {}), ("finish_work", {"outcome": "done"})):
        with statements(store) as sent:
            moved = await asyncio.gather(
                *(
                    _ok(service, {"type": kind, "session_id": s, "item_id": item, **extra})
                    for s, item in zip(sids, items, strict=True)
                )
            )
        assert all(m["status"] == ("running" if kind == "start_work" else "done") for m in moved), moved
        # PostgreSQL: a start four (its item, its guard, its session with the workers, its
        # item locked; its item's row and ledger line ride on the next command's item read:
        # 85 when the ledger read the session's actor first, 101 when the workers were read
        # alone), a finish five (its row and the items it unblocked in one write, sent before
        # the next item read: 101 when they were two), and the batch's four (and the first
        # command maybe alone).
        if store.dialect == "postgresql":
            assert len(sent) <= (4 if kind == "start_work" else 5) * len(sids) + 4 + 8, (kind, sent)


@pytest.mark.parametrize("kind", ["start_work", "finish_work"])
async def test_a_start_or_a_finish_first_recovers_the_items_of_its_project_s_stale_workers(
    store: Any, kind: str
) -> None:
    """A transition recovers its project's stale work first, as a pull does: it finds the
    stale workers with its session's read on PostgreSQL (``_session_locked``)."""
    service = Service(store)
    victim, worker = await _register(service, "victim"), await _register(service, "worker")
    for _ in range(2):
        await _ok(service, {"type": "enqueue_work", "project": "Q"})
    lost = (await _ok(service, {"type": "claim_next_work", "session_id": victim, "project": "Q"}))["item"]["item_id"]
    mine = (await _ok(service, {"type": "claim_next_work", "session_id": worker, "project": "Q"}))["item"]["item_id"]
    if kind == "finish_work":  # (started while the victim was live: nothing to recover then)
        await _ok(service, {"type": "start_work", "session_id": worker, "item_id": mine})
    await store.transact(_gone_quiet(victim))
    body = {"type": kind, "session_id": worker, "item_id": mine}
    if kind == "finish_work":
        body["outcome"] = "done"
    answer = await execute(service, body)
    assert isinstance(answer, Outcome) and answer.status == 200, answer
    assert "WorkRequeued" in [e.type for e in answer.events], answer.events
    statuses = await store.query(lambda conn: dict(conn.execute(text("SELECT item_id, status FROM work_items")).all()))
    assert statuses[lost] == "queued", statuses
