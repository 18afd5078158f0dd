"""Which queued items a pull may take, as the read model keeps it (0016_queue_ready).

An item is blocked until every one of its ``blocked_by`` finished ``done``. The read model
counts, per item, the blockers it still waits on (``work_items.waiting_on``) and notes whom
each blocker blocks (``work_blockers``); a pull reads only the items that wait on nothing.
These tests drive the real stores through the service: random dependency graphs pulled
and finished against a model of the rule, the counts after a rebuild, the migration that
fills them in for a queue that already had blocked items, and snapshots written before.
"""

from __future__ import annotations

import asyncio
import json
import random
import zlib
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, select, text
from sqlalchemy.ext.asyncio import create_async_engine
from tests.contract.test_group_commit import encoded, execute

from eventcoord import projections
from eventcoord.history.snapshots import table_rows
from eventcoord.projections.tables import work_blockers, work_items
from eventcoord.service import Outcome, Service
from eventcoord.store.base import migrations_path


async def _ok(service: Service, body: dict[str, Any]) -> dict[str, Any]:
    answer = await execute(service, body)
    assert isinstance(answer, Outcome) and answer.status == 200, (body, answer)
    result: dict[str, Any] = json.loads(encoded(answer))["result"]
    return result


class _Model:
    """The rule, kept apart from the read model: items in pull order, their blockers, outcomes."""

    def __init__(self) -> None:
        self.order: list[tuple[int, int, str]] = []  # (-priority, enqueue number, item)
        self.blockers: dict[str, list[str]] = {}
        self.status: dict[str, str] = {}

    def enqueued(self, item: str, priority: int, blockers: list[str]) -> None:
        self.order.append((-priority, len(self.order), item))
        self.order.sort()
        self.blockers[item] = blockers
        self.status[item] = "queued"

    def waiting_on(self, item: str) -> int:
        return sum(self.status[b] != "done" for b in self.blockers[item])

    def next(self) -> str | None:
        return next(
            (i for _, _, i in self.order if self.status[i] == "queued" and self.waiting_on(i) == 0),
            None,
        )


async def _read_model(store: Any) -> tuple[dict[str, int], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    def read(conn: Connection) -> tuple[dict[str, int], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        items = [tuple(r) for r in conn.execute(select(work_items).order_by(work_items.c.item_id))]
        edges = [tuple(r) for r in conn.execute(select(work_blockers).order_by(*work_blockers.primary_key.columns))]
        waiting = {r[0]: r[1] for r in conn.execute(select(work_items.c.item_id, work_items.c.waiting_on))}
        return waiting, items, edges

    result: tuple[dict[str, int], list[tuple[Any, ...]], list[tuple[Any, ...]]] = await store.query(read)
    return result


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_pulls_follow_the_blockers_through_random_graphs_and_a_rebuild_agrees(store: Any, seed: int) -> None:
    rnd = random.Random(seed)
    service, model = Service(store), _Model()
    worker = (await _ok(service, {"type": "register_agent", "actor": "worker"}))["session_id"]

    async def enqueue() -> None:
        known = list(model.status)
        blockers = rnd.sample(known, k=min(len(known), rnd.choice((0, 0, 1, 1, 2, 3))))
        priority = rnd.randrange(3)
        body = {"type": "enqueue_work", "project": "P", "priority": priority, "blocked_by": blockers}
        model.enqueued((await _ok(service, body))["item_id"], priority, blockers)

    for _ in range(25):
        await enqueue()
    pulled = 0
    while True:
        expected = model.next()
        got = (await _ok(service, {"type": "claim_next_work", "session_id": worker, "project": "P"}))["item"]
        assert (got and got["item_id"]) == expected, (pulled, model.status)
        if expected is None:
            break
        pulled += 1
        model.status[expected] = outcome = rnd.choice(("done", "done", "done", "failed"))
        await _ok(service, {"type": "start_work", "session_id": worker, "item_id": expected})
        await _ok(service, {"type": "finish_work", "session_id": worker, "item_id": expected, "outcome": outcome})
        if rnd.random() < 0.3:  # new work arrives, blocked by finished and unfinished items alike
            await enqueue()
        if rnd.random() < 0.1:  # an admin cancels a queued item (its dependents wait for ever)
            queued = [i for i, s in model.status.items() if s == "queued"]
            if queued:
                item = rnd.choice(queued)
                model.status[item] = "cancelled"
                await _ok(service, {"type": "finish_work", "item_id": item, "outcome": "cancelled"})
    assert pulled >= 5
    waiting, items, edges = await _read_model(store)
    assert {i: n for i, n in waiting.items() if model.status[i] == "queued"} == {
        i: model.waiting_on(i) for i, s in model.status.items() if s == "queued"
    }
    assert any(n > 0 for n in waiting.values())  # some wait for ever (a failed or cancelled blocker)
    # a blocker's rows go when it finishes: those left name unfinished blockers only
    assert {e[1] for e in edges} <= {i for i, s in model.status.items() if s == "queued"}

    # The replay of the log fills both tables exactly as the commands did.
    await store.transact(lambda conn: projections.rebuild(conn))
    assert (await _read_model(store))[1:] == (items, edges)


async def test_an_item_blocked_by_finished_items_waits_only_on_those_not_done(store: Any) -> None:
    service = Service(store)
    worker = (await _ok(service, {"type": "register_agent", "actor": "worker"}))["session_id"]
    done, failed, open_ = [(await _ok(service, {"type": "enqueue_work", "project": "B"}))["item_id"] for _ in range(3)]
    for item, outcome in ((done, "done"), (failed, "failed")):
        got = (await _ok(service, {"type": "claim_next_work", "session_id": worker, "project": "B"}))["item"]
        assert got["item_id"] == item
        await _ok(service, {"type": "start_work", "session_id": worker, "item_id": item})
        await _ok(service, {"type": "finish_work", "session_id": worker, "item_id": item, "outcome": outcome})
    ready = (await _ok(service, {"type": "enqueue_work", "project": "P", "blocked_by": [done]}))["item_id"]
    waits = (await _ok(service, {"type": "enqueue_work", "project": "P", "blocked_by": [done, failed, open_]}))[
        "item_id"
    ]
    waiting, _, edges = await _read_model(store)
    assert waiting[ready] == 0 and waiting[waits] == 2
    # only a blocker that may still finish is noted: the open one
    assert [(e[1], e[2]) for e in edges] == [(open_, waits)]


def at(revision: str, down: bool = False) -> Any:
    """A ``run_sync`` step that migrates the connection's database up (or down) to ``revision``."""

    def run(conn: Connection) -> None:
        cfg = Config()
        cfg.set_main_option("script_location", migrations_path())
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)

    return run


async def test_the_migration_counts_the_blockers_of_a_queue_that_had_blocked_items(db_url: str) -> None:
    """0016 fills in ``waiting_on`` and ``work_blockers`` for the items queued before it."""
    engine = create_async_engine(db_url)

    def item(item_id: str, status: str, blocked_by: list[str]) -> dict[str, Any]:
        return {
            "item_id": item_id,
            "ws": "default",
            "status": status,
            "blocked_by": json.dumps(blocked_by),
            "position": len(item_id) * 1000 + sum(map(ord, item_id)),
        }

    rows = [
        item("done", "done", []),
        item("failed", "failed", []),
        item("open", "queued", []),
        item("running", "running", []),
        item("a", "queued", ["done"]),
        item("b", "queued", ["done", "failed", "open", "running"]),
        item("c", "claimed", ["done"]),
        item("d", "cancelled", ["open", "done"]),  # cancelled while blocked: a replay still counts
    ]
    try:
        async with engine.begin() as conn:
            await conn.run_sync(at("head"))  # SQLite starts empty; PostgreSQL's copy is at head
            await conn.run_sync(at("0015_queue_at_cap", down=True))
            await conn.execute(
                text(
                    "INSERT INTO work_items (item_id, workspace, project, priority, blocked_by, paths, status,"
                    " enqueued_position, enqueued_us, updated_us, attempts)"
                    " VALUES (:item_id, :ws, 'P', 0, :blocked_by, '[]', :status, :position, 1, 1, 0)"
                ),
                rows,
            )
            await conn.run_sync(at("head"))
            waiting = dict((await conn.execute(text("SELECT item_id, waiting_on FROM work_items"))).all())
            edges = sorted((await conn.execute(text("SELECT blocker_id, item_id FROM work_blockers"))).all())
    finally:
        await engine.dispose()
    assert waiting == {"done": 0, "failed": 0, "open": 0, "running": 0, "a": 0, "b": 3, "c": 0, "d": 1}
    assert [tuple(e) for e in edges] == [("open", "b"), ("open", "d"), ("running", "b")]


def test_a_snapshot_written_before_a_column_was_added_loads_with_its_default() -> None:
    row = ["w-1", "default", "P", None, 0, None, "[]", "[]", "queued"] + [None] * 4 + [7, 1, 1, None, 0]
    assert len(row) == len(work_items.columns) - 2  # written before 0016 added waiting_on, 0017 held_by
    old = zlib.compress(json.dumps([row]).encode())
    assert table_rows(work_items, old) == [[*row, 0, None]]  # (held_by: nullable, no default)
    since_0016 = zlib.compress(json.dumps([[*row, 2]]).encode())
    assert table_rows(work_items, since_0016) == [[*row, 2, None]]
    now = zlib.compress(json.dumps([[*row, 2, "s-1"]]).encode())
    assert table_rows(work_items, now) == [[*row, 2, "s-1"]]


@pytest.mark.postgres
async def test_a_blocker_finishing_in_another_project_as_an_item_is_enqueued_behind_it(store: Any, db_url: str) -> None:
    """Two replicas: one finishes blockers (project P) while the other enqueues items blocked
    by them (project Q, whose guard is another). Each item must end up waiting on nothing:
    the enqueue reads its blockers share-locked, so none finishes between its count and its
    commit (without the lock a count-down could miss the new item, which then waited for
    ever)."""
    from eventcoord.store import open_store

    other = open_store(db_url)
    await other.start()
    try:
        finisher, enqueuer = Service(store), Service(other)
        worker = (await _ok(finisher, {"type": "register_agent", "actor": "worker"}))["session_id"]
        blockers = []
        for _ in range(60):
            item = (await _ok(finisher, {"type": "enqueue_work", "project": "P"}))["item_id"]
            await _ok(finisher, {"type": "claim_next_work", "session_id": worker, "project": "P"})
            await _ok(finisher, {"type": "start_work", "session_id": worker, "item_id": item})
            blockers.append(item)

        async def finish(item: str) -> None:
            await _ok(finisher, {"type": "finish_work", "session_id": worker, "item_id": item})

        async def enqueue(item: str) -> str:
            return str((await _ok(enqueuer, {"type": "enqueue_work", "project": "Q", "blocked_by": [item]}))["item_id"])

        results = await asyncio.gather(*(f(b) for b in blockers for f in (finish, enqueue)))
        behind = [r for r in results if isinstance(r, str)]
        waiting, _, edges = await _read_model(store)
        assert [waiting[i] for i in behind] == [0] * len(behind)
        assert edges == []
    finally:
        await other.close()
