"""The queue's stale workers, found among the sessions that work on something.

Every queue command on a project first re-queues the items of its stale non-human
workers. It used to find them by walking the project's every item in work and probing
each one's session, so a pull cost more with every agent at work (3,000 items in work: six
times the cost of ten). The read model now counts, on each session, the items it works
on (``sessions.active_items``, kept by the sessions projection), and the stale workers are a
range of ``ix_sessions_stale_workers``, which holds only the non-human sessions that work
on something (0018_stale_workers). These tests hold the count to a recount of the items
through every way an item enters or leaves work, serially and in concurrent batches, and
the recovery to what it was: a stale worker's item goes back, a live worker's, a stale
human's and another project's stay. Both backends.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Any

import pytest
from sqlalchemy import Connection, func, select, text
from tests.contract.test_group_commit import _gone_quiet, _register, appender, encoded, execute, statements_sent
from tests.contract.test_rebuild import assert_rebuild_equals_live

from eventcoord import projections
from eventcoord.errors import DomainError
from eventcoord.history.scratch import Scratch
from eventcoord.projections.tables import sessions, work_items
from eventcoord.service import Outcome, Service


def _result(answer: Outcome | DomainError) -> Any:
    assert isinstance(answer, Outcome) and answer.status == 200, answer
    return json.loads(encoded(answer))["result"]


async def _send(service: Service, body: dict[str, Any]) -> Any:
    return _result(await execute(service, body))


async def _counts(store: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Each session's kept count of items in work (those above 0), and a recount of the items."""

    def read(conn: Connection) -> tuple[dict[str, int], dict[str, int]]:
        kept = {s: n for s, n in conn.execute(select(sessions.c.session_id, sessions.c.active_items)) if n}
        in_work = work_items.c.status.in_(("claimed", "running"))
        counted = select(work_items.c.session_id, func.count()).where(in_work).group_by(work_items.c.session_id)
        return kept, {s: n for s, n in conn.execute(counted)}

    return await store.query(read)


async def _assert_counted(store: Any, step: str) -> dict[str, int]:
    kept, counted = await _counts(store)
    assert kept == counted, (step, kept, counted)
    return kept


async def test_every_way_an_item_enters_or_leaves_work_keeps_its_worker_s_count(store: Any) -> None:
    """A pull adds one to its worker; a start changes nothing; a finish by the worker, an
    admin's finish of another's item, a recovery's re-queue and an end's re-queue each take
    one from the item's worker; an admin's cancel of a queued item takes none. After each,
    the kept counts equal a recount of the items in work, and a replay counts the same.
    Fails when a finish takes nothing (or takes from its finisher rather than the item's worker)."""
    service = Service(store)
    a, b, c = [await _register(service, name) for name in ("a", "b", "c")]
    items = [(await _send(service, {"type": "enqueue_work", "project": "P"}))["item_id"] for _ in range(8)]

    pulled = (await _send(service, {"type": "claim_next_work", "session_id": a, "project": "P"}))["item"]
    assert (await _assert_counted(store, "a pulled")) == {a: 1}
    await _send(service, {"type": "start_work", "session_id": a, "item_id": pulled["item_id"]})
    await _assert_counted(store, "a started")
    await _send(service, {"type": "finish_work", "session_id": a, "item_id": pulled["item_id"], "outcome": "done"})
    assert (await _assert_counted(store, "a finished")) == {}

    # an admin (no session) finishes b's item: b loses it, though b did not finish it
    taken = (await _send(service, {"type": "claim_next_work", "session_id": b, "project": "P"}))["item"]
    await _send(service, {"type": "claim_next_work", "session_id": b, "project": "P"})
    assert (await _assert_counted(store, "b pulled two")) == {b: 2}
    await _send(service, {"type": "finish_work", "item_id": taken["item_id"], "outcome": "cancelled"})
    assert (await _assert_counted(store, "an admin cancelled b's")) == {b: 1}

    # an admin cancels a queued item: no one worked on it
    await _send(service, {"type": "finish_work", "item_id": items[-1], "outcome": "cancelled"})
    assert (await _assert_counted(store, "an admin cancelled a queued item")) == {b: 1}

    # b goes quiet: c's pull re-queues b's item (and takes an item itself)
    await store.transact(_gone_quiet(b))
    await _send(service, {"type": "claim_next_work", "session_id": c, "project": "P"})
    assert (await _assert_counted(store, "c recovered b's")) == {c: 1}

    # c ends: its item goes back
    await _send(service, {"type": "claim_next_work", "session_id": c, "project": "P"})
    assert (await _assert_counted(store, "c pulled again")) == {c: 2}
    await _send(service, {"type": "end_agent", "session_id": c})
    assert (await _assert_counted(store, "c ended")) == {}
    # a replay of the log counts the same (only the counts: ``_gone_quiet`` wrote a last
    # sign of life no event holds)
    kept = await _counts(store)
    await store.transact(projections.rebuild, retry=False)
    assert await _counts(store) == kept


async def test_concurrent_pulls_and_finishes_keep_every_count(store: Any) -> None:
    """Sixteen agents pull at once, then pull and heartbeat at once, then finish at once,
    then pull, are finished by an admin and end at once: in a PostgreSQL batch the counts
    are carried to its end statement (several changes of one session summed there, and
    written with the carried heartbeats). Each round, the counts equal a recount."""
    service = Service(store)
    sids = [await _register(service, f"w{i}") for i in range(16)]
    for i in range(40):
        await _send(service, {"type": "enqueue_work", "project": f"P{i % 2}"})

    async def pull(sid: str, project: str) -> str:
        got = await _send(service, {"type": "claim_next_work", "session_id": sid, "project": project})
        return str(got["item"]["item_id"])

    first = await asyncio.gather(*(pull(s, f"P{i % 2}") for i, s in enumerate(sids)))
    # with a heartbeat of each in the same batches: on PostgreSQL the counts and the carried
    # heartbeats are one UPDATE of each row
    beats = [_send(service, {"type": "heartbeat_agent", "session_id": s}) for s in sids]
    second = (await asyncio.gather(*(pull(s, f"P{(i + 1) % 2}") for i, s in enumerate(sids)), *beats))[:16]
    assert (await _assert_counted(store, "two pulls each")) == dict.fromkeys(sids, 2)

    def heartbeats(conn: Connection) -> dict[str, int]:
        return {sid: n for sid, n in conn.execute(select(sessions.c.session_id, sessions.c.heartbeats))}

    assert await store.query(heartbeats) == dict.fromkeys(sids, 1)
    with statements_sent() as sent:
        await asyncio.gather(
            *(
                _send(service, {"type": "finish_work", "session_id": s, "item_id": item, "outcome": "cancelled"})
                for s, item in zip(sids, first, strict=True)
            )
        )
    assert (await _assert_counted(store, "one finished each")) == dict.fromkeys(sids, 1)
    if store.dialect == "postgresql":  # no statement of their own: the counts ride on the end statements
        counting = [q for q in sent if "active_items" in q and "store_head" not in q and "ARRAY(SELECT" not in q]
        assert counting == [], counting
    # an item of each pulled, a finish by an admin and an end, all at once
    third = await asyncio.gather(*(pull(s, f"P{i % 2}") for i, s in enumerate(sids[:8])))
    await asyncio.gather(
        *(_send(service, {"type": "finish_work", "item_id": item, "outcome": "cancelled"}) for item in second[:8]),
        *(_send(service, {"type": "end_agent", "session_id": s}) for s in sids[8:]),
    )
    assert (await _assert_counted(store, "admins' finishes and ends")) == dict.fromkeys(sids[:8], 1)
    assert len(set(third)) == 8
    await assert_rebuild_equals_live(store)


async def test_a_pull_recovers_the_stale_worker_among_many_live_ones(store: Any) -> None:
    """Forty live agents work on items of P; a stale agent works on one of P, another on one
    of R, and a stale human on one of P. A pull from P re-queues the stale agent's item of P
    only: the live workers', the human's and R's stay with their workers."""
    service = Service(store)
    live = [await _register(service, f"live{i}") for i in range(40)]
    stale, elsewhere, puller = [await _register(service, name) for name in ("stale", "elsewhere", "puller")]
    human = _result(await execute(service, {"type": "register_agent", "actor": "person", "kind": "human"}))
    human = human["session_id"]
    for _ in range(44):
        await _send(service, {"type": "enqueue_work", "project": "P"})
    await _send(service, {"type": "enqueue_work", "project": "R"})
    held: dict[str, str] = {}
    for sid in [*live, stale, human]:
        held[sid] = (await _send(service, {"type": "claim_next_work", "session_id": sid, "project": "P"}))["item"][
            "item_id"
        ]
    held[elsewhere] = (await _send(service, {"type": "claim_next_work", "session_id": elsewhere, "project": "R"}))[
        "item"
    ]["item_id"]
    for sid in (stale, elsewhere, human):
        await store.transact(_gone_quiet(sid))

    got = await _send(service, {"type": "claim_next_work", "session_id": puller, "project": "P"})

    def workers(conn: Connection) -> dict[str, tuple[str, str | None]]:
        rows = conn.execute(text("SELECT item_id, status, session_id FROM work_items"))
        return {item: (status, sid) for item, status, sid in rows}

    now = await store.query(workers)
    for sid in [*live, elsewhere, human]:
        assert now[held[sid]][1] == sid, (sid, now[held[sid]])
    assert now[held[stale]][1] in (None, puller), now[held[stale]]  # re-queued (and maybe taken by the pull)
    assert got["item"] is not None
    kept = await _assert_counted(store, "after the recovery")
    assert stale not in kept and kept[human] == 1 and kept[elsewhere] == 1


async def test_the_stale_workers_read_passes_no_live_worker(store: Any, backend: str) -> None:
    """The read of a project's stale workers (``_SUSPECTS``) reads the range of stale
    workers in ``ix_sessions_stale_workers``: with 300 live workers at work in the project,
    PostgreSQL's index scan returns the one stale worker's row alone, and SQLite's plan
    searches the index by the workspace and a range of last signs of life."""
    from eventcoord.reads import queue as queue_reads

    service = Service(store)
    live = [await _register(service, f"live{i}") for i in range(300)]
    stale = await _register(service, "stale")
    for _ in range(301):
        await _send(service, {"type": "enqueue_work", "project": "P"})
    for sid in [*live, stale]:
        await _send(service, {"type": "claim_next_work", "session_id": sid, "project": "P"})
    await store.transact(_gone_quiet(stale))

    def cutoff(conn: Connection) -> int:
        now = conn.execute(select(func.max(sessions.c.last_seen_us))).scalar_one()
        return int(now) - 60_000_000  # a minute before the last sign of life: only ``stale`` is older

    params = {"ws": "default", "project": "P", "cutoff": await store.query(cutoff)}
    assert await store.query(lambda conn: [r[0] for r in queue_reads._SUSPECTS.rows(conn, params)]) == [stale]
    sql = str(queue_reads._SUSPECTS.statement(backend))
    if backend == "postgresql":
        explain = "EXPLAIN (ANALYZE, COSTS OFF) " + sql.replace("CAST(:ws AS text)", "'default'")
        explain = explain.replace("CAST(:project AS text)", "'P'").replace(
            "CAST(:cutoff AS bigint)", str(params["cutoff"])
        )
        plan = "\n".join(r[0] for r in await store.query(lambda conn: conn.exec_driver_sql(explain).all()))
        scan = next(line for line in plan.splitlines() if "ix_sessions_stale_workers" in line)
        assert "actual" in scan and "rows=1 " in scan, plan
    else:
        plan = "\n".join(
            str(r[-1])
            for r in await store.query(lambda conn: conn.execute(text("EXPLAIN QUERY PLAN " + sql), params).all())
        )
        assert "USING INDEX ix_sessions_stale_workers (workspace=? AND last_seen_us<?)" in plan, plan


async def test_a_careful_pass_keeps_the_counts_as_a_fast_one_does(store: Any) -> None:
    """After a pass is rolled back, a PostgreSQL writer runs its next batches with a
    savepoint per command, and they carry nothing: each command writes its counts itself,
    and a finish reads its item's worker from ``session_work``. Pulls, an admin's finish of
    another's item, a worker's finish and an end, in those batches: the counts equal a
    recount after each (fails when a finish whose worker the batch did not see takes nothing)."""
    service = Service(store)
    a, b = [await _register(service, name) for name in ("a", "b")]
    for _ in range(6):
        await _send(service, {"type": "enqueue_work", "project": "P"})
    # a refusal after a write rolls its pass back: the batches after it are careful
    with pytest.raises(DomainError):
        await store.transact(appender("careful", refuse=True))
    if store.dialect == "postgresql":
        assert store._careful > 0  # (the next batches run with savepoints)

    async def pull(sid: str) -> str:
        got = await _send(service, {"type": "claim_next_work", "session_id": sid, "project": "P"})
        return str(got["item"]["item_id"])

    mine, theirs, more = await asyncio.gather(pull(a), pull(b), pull(b))
    assert (await _assert_counted(store, "careful pulls")) == {a: 1, b: 2}
    await asyncio.gather(
        _send(service, {"type": "finish_work", "item_id": theirs, "outcome": "cancelled"}),
        _send(service, {"type": "finish_work", "session_id": a, "item_id": mine, "outcome": "cancelled"}),
    )
    assert (await _assert_counted(store, "careful finishes")) == {b: 1}
    await _send(service, {"type": "end_agent", "session_id": b})
    assert (await _assert_counted(store, "careful end")) == {}
    if store.dialect == "postgresql":
        assert store._careful > 0, "the commands above ran in careful batches"
    assert more


async def test_read_models_restored_from_a_snapshot_without_counts_get_them_from_its_work_items(store: Any) -> None:
    """A snapshot written before 0018 has no ``session_work`` rows and no counts. Restored by
    a whole rebuild, by a rebuild of the sessions projection alone (whose ``work_items`` is
    at the log's head, not the snapshot's) and by a history scratch, each counts the items
    the snapshot had in work, and the events after it move the counts on from there.
    Fails when the sessions-only rebuild counts from the live table, or when a scratch
    does not count at all."""
    service = Service(store)
    a, b = [await _register(service, name) for name in ("a", "b")]
    for _ in range(4):
        await _send(service, {"type": "enqueue_work", "project": "P"})
    first = (await _send(service, {"type": "claim_next_work", "session_id": a, "project": "P"}))["item"]
    await _send(service, {"type": "claim_next_work", "session_id": a, "project": "P"})
    await _send(service, {"type": "claim_next_work", "session_id": b, "project": "P"})
    at_snapshot = await _assert_counted(store, "before the snapshot")
    assert at_snapshot == {a: 2, b: 1}

    def rows_of(conn: Connection) -> dict[str, list[list[Any]]]:
        return {t.name: [list(r) for r in conn.execute(select(t))] for t in projections.READ_MODEL_TABLES}

    old = await store.query(rows_of)
    old["session_work"] = []  # as a snapshot written before 0018 loads
    at_count = [c.name for c in sessions.columns].index("active_items")
    for row in old["sessions"]:
        row[at_count] = 0
    base = await store.head()

    # after the snapshot: a finishes the item it pulled first, b pulls one more
    await _send(service, {"type": "finish_work", "session_id": a, "item_id": first["item_id"], "outcome": "cancelled"})
    await _send(service, {"type": "claim_next_work", "session_id": b, "project": "P"})
    live = await _assert_counted(store, "after the snapshot")
    assert live == {a: 1, b: 2}

    for only in (None, "sessions"):
        await store.transact(
            lambda conn, only=only: projections.rebuild(conn, only=only, base_position=base, base_rows=old)
        )
        assert (await _assert_counted(store, f"rebuilt ({only or 'all'})")) == live

    # A scratch loads the snapshot's chunks, sessions without the count, and no session_work.
    scratch = Scratch(base, None, 3600, None, None)
    try:
        chunks = {
            name: [zlib.compress(json.dumps([r[:at_count] if name == "sessions" else r for r in rows]).encode())]
            for name, rows in old.items()
            if rows
        }
        scratch.load(chunks)
        with scratch.engine.connect() as conn:
            kept = {s: n for s, n in conn.execute(select(sessions.c.session_id, sessions.c.active_items)) if n}
            worked = dict(conn.execute(text("SELECT item_id, session_id FROM session_work")).all())
        assert kept == at_snapshot
        assert sorted(worked.values()) == sorted([a, a, b])
    finally:
        scratch.close()
