"""The queue's reads ahead: a PostgreSQL batch reads its pulls and transitions at once.

Once a batch holds the guards of its pulls' projects (or of the projects of its start and
finish items), it reads what each reads next in one statement: a pull's project rules,
its project's suspects, its session and the first page of ready items; a transition's
item, locked, its project's rules and suspects and its session. A queue command that
writes a project's items first forgets the reads made under that project's guard
(``rows_ahead.forget_under``): items are written by their ids, which name no project.

Every test runs on both backends: SQLite decides the same commands without reading
ahead, so each answer is checked against what serial decisions give; the statement counts
are PostgreSQL's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sqlalchemy import text
from tests.contract.test_group_commit import (
    _gone_quiet,
    _register,
    _sixteen_agents,
    encoded,
    execute,
    stat,
    statements_sent,
)

from eventcoord.service import Outcome, Service

#: Parts of the statements the reads ahead send (one each per batch).
_PULLS_AHEAD = "AS a(ws, project, sid, queued, mine, n)"
_TRANSITIONS_AHEAD = "AS a(ws, item, sid, n)"
_ITEM_GUARDS_AHEAD = "AS w(workspace, item)"
#: A pull's own read of its first page, and a transition's own read of its item.
_ONE_PULLS_PAGE = "AS ready UNION ALL"
_ONE_ITEM_READ = "FROM work_items WHERE work_items.item_id ="


def _result(answer: Any) -> Any:
    assert isinstance(answer, Outcome) and answer.status == 200, answer
    return json.loads(encoded(answer))["result"]


async def _enqueue(service: Service, project: str, priority: int = 0) -> str:
    body = {"type": "enqueue_work", "project": project, "priority": priority}
    return str(_result(await execute(service, body))["item_id"])


async def test_pulls_and_finishes_in_many_projects_send_a_statement_or_two_per_batch(store: Any, backend: str) -> None:
    """16 agents, each pulling from a project of its own, then finishing what it pulled:
    each batch locks the guards once, reads ahead once, and sends nothing per command
    until its writes at the end."""
    service, sids = await _sixteen_agents(store, backend)
    read_before, served_before = stat("reads_ahead"), stat("reads_ahead_served")
    wanted = {}
    for i in range(16):
        await _enqueue(service, f"Q{i}", priority=0)
        wanted[i] = await _enqueue(service, f"Q{i}", priority=5)  # pulled first
    with statements_sent() as pulls_sent:
        pulled = await asyncio.gather(
            *(
                execute(service, {"type": "claim_next_work", "session_id": s, "project": f"Q{i}"})
                for i, s in enumerate(sids)
            )
        )
    assert [_result(a)["item"]["item_id"] for a in pulled] == [wanted[i] for i in range(16)]
    with statements_sent() as finishes_sent:
        finished = await asyncio.gather(
            *(
                execute(service, {"type": "finish_work", "session_id": s, "item_id": wanted[i], "outcome": "cancelled"})
                for i, s in enumerate(sids)
            )
        )
    assert [_result(a)["status"] for a in finished] == ["cancelled"] * 16
    # The first command may be a batch of its own (it reads for itself): the other 15 are
    # read ahead in one statement, and none of them reads its page or item again.
    assert sum(_PULLS_AHEAD in q for q in pulls_sent) == 1, pulls_sent
    assert sum(_ONE_PULLS_PAGE in q and _PULLS_AHEAD not in q for q in pulls_sent) <= 1, pulls_sent
    assert sum(_ITEM_GUARDS_AHEAD in q for q in finishes_sent) == 1, finishes_sent
    assert sum(_TRANSITIONS_AHEAD in q for q in finishes_sent) == 1, finishes_sent
    # per batch: BEGIN, clock, the guards, the reads ahead, the writes by kind, the end,
    # COMMIT; the lone first command's six or so. Was 3-4 per command.
    assert len(pulls_sent) <= 18, pulls_sent
    assert len(finishes_sent) <= 18, finishes_sent
    # the store counts them (/metrics): 15 or 16 of each kind read ahead, and every one served
    read, served = stat("reads_ahead") - read_before, stat("reads_ahead_served") - served_before
    assert 30 <= read <= 32 and served == read, (read, served)
    statuses = await store.query(
        lambda conn: conn.execute(text("SELECT status, count(*) FROM work_items GROUP BY status")).all()
    )
    assert sorted(statuses) == [("cancelled", 16), ("queued", 16)]


async def test_pulls_of_one_project_in_one_batch_take_different_items_in_pull_order(store: Any) -> None:
    """Eight pulls from one project read the same first page ahead: the first one's claim
    must forget the others' reads (its write names the item, not the project), so each
    takes the next item, and the project's guard serialises them as on SQLite."""
    service = Service(store)
    sids = [await _register(service, f"a{i}") for i in range(8)]
    items = [await _enqueue(service, "One", priority=10 - i) for i in range(10)]
    # another project's pull, so that even a lone first command leaves two reads ahead
    other = await _register(service, "other")
    await _enqueue(service, "Two")
    with statements_sent() as sent:
        answers = await asyncio.gather(
            execute(service, {"type": "claim_next_work", "session_id": other, "project": "Two"}),
            *(execute(service, {"type": "claim_next_work", "session_id": s, "project": "One"}) for s in sids),
        )
    taken = [_result(a)["item"]["item_id"] for a in answers[1:]]
    assert taken == items[:8], taken  # in the order sent: the batch decides them in turn
    if store.dialect == "postgresql":  # the path meant was taken
        assert any(_PULLS_AHEAD in q for q in sent), sent
    claimed = await store.query(
        lambda conn: conn.execute(text("SELECT count(*) FROM work_items WHERE status = 'claimed'")).scalar()
    )
    assert claimed == 9


async def test_a_start_earlier_in_the_batch_is_seen_by_the_finish_read_ahead(store: Any) -> None:
    """A start and a finish of one item in one batch: the finish's item read ahead (claimed)
    is forgotten by the start's write of it, so the finish sees it running and may finish
    it ``done`` (from ``claimed`` only ``cancelled`` is allowed)."""
    service = Service(store)
    worker, other = await _register(service, "worker"), await _register(service, "other")
    item = await _enqueue(service, "P")
    second = await _enqueue(service, "R")
    for sid, project in ((worker, "P"), (other, "R")):
        _result(await execute(service, {"type": "claim_next_work", "session_id": sid, "project": project}))
    with statements_sent() as sent:
        started, finished, elsewhere = await asyncio.gather(
            execute(service, {"type": "start_work", "session_id": worker, "item_id": item}),
            execute(service, {"type": "finish_work", "session_id": worker, "item_id": item, "outcome": "done"}),
            execute(service, {"type": "start_work", "session_id": other, "item_id": second}),
        )
    assert _result(started)["status"] == "running"
    assert _result(finished)["status"] == "done"
    assert _result(elsewhere)["status"] == "running"
    if store.dialect == "postgresql":
        assert sum(_TRANSITIONS_AHEAD in q for q in sent) == 1, sent
        # the finish read its item again (locked): its read ahead was forgotten
        assert sum(_ONE_ITEM_READ in q for q in sent) >= 1, sent


async def test_a_pull_read_ahead_recovers_a_stale_worker_s_item_first(store: Any) -> None:
    """The project's suspects come with the pull's read ahead: a stale worker's claimed
    item (of the highest priority) is re-queued and pulled again by the live agent."""
    service = Service(store)
    stale, puller, other = [await _register(service, name) for name in ("stale", "puller", "other")]
    first = await _enqueue(service, "P", priority=9)
    later = await _enqueue(service, "P", priority=1)
    await _enqueue(service, "R")
    held = _result(await execute(service, {"type": "claim_next_work", "session_id": stale, "project": "P"}))
    assert held["item"]["item_id"] == first
    await store.transact(_gone_quiet(stale))
    with statements_sent() as sent:
        pulled, elsewhere = await asyncio.gather(
            execute(service, {"type": "claim_next_work", "session_id": puller, "project": "P"}),
            execute(service, {"type": "claim_next_work", "session_id": other, "project": "R"}),
        )
    assert _result(pulled)["item"]["item_id"] == first  # recovered, then pulled before ``later``
    assert _result(elsewhere)["item"] is not None
    if store.dialect == "postgresql":
        assert sum(_PULLS_AHEAD in q for q in sent) == 1, sent
    rows = await store.query(
        lambda conn: conn.execute(
            text("SELECT item_id, status, session_id FROM work_items WHERE project = 'P' ORDER BY priority DESC")
        ).all()
    )
    assert rows == [(first, "claimed", puller), (later, "queued", None)]
    ledger = await store.query(
        lambda conn: conn.execute(
            text("SELECT action FROM work_ledger WHERE item_id = :i ORDER BY position"), {"i": first}
        ).all()
    )
    assert [a for (a,) in ledger] == ["enqueued", "claimed", "requeued", "claimed"]


async def test_a_pull_read_ahead_sees_what_a_finish_before_it_in_the_batch_re_queued(store: Any) -> None:
    """A finish in the batch recovers a stale worker's item (re-queues it) before a pull of
    the same project: the pull must take that item (its first page read ahead, from before
    the re-queue, no longer holds), as it would decided alone."""
    service = Service(store)
    stale, b, c, puller, d = [await _register(service, name) for name in ("stale", "b", "c", "puller", "d")]
    lost = await _enqueue(service, "P", priority=9)
    finishing = await _enqueue(service, "P", priority=5)
    await _enqueue(service, "P", priority=1)
    starting = await _enqueue(service, "R")
    await _enqueue(service, "R")
    for sid, project in ((stale, "P"), (b, "P"), (c, "R")):
        _result(await execute(service, {"type": "claim_next_work", "session_id": sid, "project": project}))
    await store.transact(_gone_quiet(stale))
    with statements_sent() as sent:
        answers = await asyncio.gather(
            execute(service, {"type": "finish_work", "session_id": b, "item_id": finishing, "outcome": "cancelled"}),
            execute(service, {"type": "start_work", "session_id": c, "item_id": starting}),
            execute(service, {"type": "claim_next_work", "session_id": puller, "project": "P"}),
            execute(service, {"type": "claim_next_work", "session_id": d, "project": "R"}),
        )
    finished, started, pulled, elsewhere = (_result(a) for a in answers)
    assert finished["status"] == "cancelled" and started["status"] == "running"
    assert pulled["item"]["item_id"] == lost  # re-queued by the finish's recovery, then pulled
    assert elsewhere["item"] is not None
    if store.dialect == "postgresql":  # the transitions read ahead; the pull of P read for itself
        assert sum(_TRANSITIONS_AHEAD in q for q in sent) == 1, sent
        assert sum(_ONE_PULLS_PAGE in q and _PULLS_AHEAD not in q for q in sent) >= 1, sent


async def test_a_pull_read_ahead_sees_an_item_enqueued_before_it_in_the_batch(store: Any) -> None:
    """An enqueue (which reads nothing ahead) before a pull of its project in one batch:
    the pull's first page, read ahead before the enqueue, no longer holds (the enqueue
    forgets the reads under the project's guard), and the new item, first in pull order,
    is the one pulled."""
    service = Service(store)
    puller, other = await _register(service, "puller"), await _register(service, "other")
    await _enqueue(service, "P", priority=1)
    await _enqueue(service, "R")
    with statements_sent() as sent:
        enqueued, pulled, elsewhere = await asyncio.gather(
            execute(service, {"type": "enqueue_work", "project": "P", "priority": 9}),
            execute(service, {"type": "claim_next_work", "session_id": puller, "project": "P"}),
            execute(service, {"type": "claim_next_work", "session_id": other, "project": "R"}),
        )
    assert _result(pulled)["item"]["item_id"] == _result(enqueued)["item_id"]
    assert _result(elsewhere)["item"] is not None
    if store.dialect == "postgresql":  # both pulls read ahead, the one of P read again
        assert sum(_PULLS_AHEAD in q for q in sent) == 1, sent
        assert sum(_ONE_PULLS_PAGE in q and _PULLS_AHEAD not in q for q in sent) == 1, sent


async def test_only_the_first_queue_command_under_a_guard_is_read_ahead(store: Any, backend: str) -> None:
    """Each queue command forgets the reads made under its project's guard, so a batch
    reads ahead only the first under each guard: four pulls and two finishes of one
    project, and a pull of another, read ahead two pulls (one statement), no transition."""
    service, sids = await _sixteen_agents(store, backend)
    items = [await _enqueue(service, "P", priority=9 - i) for i in range(8)]
    await _enqueue(service, "R")
    for sid in sids[:2]:
        _result(await execute(service, {"type": "claim_next_work", "session_id": sid, "project": "P"}))
    with statements_sent() as sent:
        answers = await asyncio.gather(
            *(execute(service, {"type": "claim_next_work", "session_id": s, "project": "P"}) for s in sids[2:6]),
            *(
                execute(service, {"type": "finish_work", "session_id": s, "item_id": i, "outcome": "cancelled"})
                for s, i in zip(sids[:2], items[:2], strict=True)
            ),
            execute(service, {"type": "claim_next_work", "session_id": sids[6], "project": "R"}),
        )
    results = [_result(a) for a in answers]
    assert [r["item"]["item_id"] for r in results[:4]] == items[2:6]
    assert [r["status"] for r in results[4:6]] == ["cancelled"] * 2
    reads = [q for q in sent if _PULLS_AHEAD in q]
    assert len(reads) == 1, sent
    assert not any(_TRANSITIONS_AHEAD in q for q in sent), sent


async def test_a_stale_worker_s_heartbeat_earlier_in_the_batch_keeps_its_item_from_a_pull_read_ahead(
    store: Any,
) -> None:
    """A fast pass carries a heartbeat's write (to its end, or until something reads that
    row), and the pulls' reads ahead still serve meanwhile: a sign of life of another
    session only makes a suspect live. A stale worker that heartbeats before a pull of its
    project in the batch is live again: the pull must not recover its item, and takes the
    next one."""
    service = Service(store)
    worker, puller, other = [await _register(service, name) for name in ("worker", "puller", "other")]
    held = await _enqueue(service, "P", priority=9)
    nxt = await _enqueue(service, "P", priority=1)
    await _enqueue(service, "R")
    _result(await execute(service, {"type": "claim_next_work", "session_id": worker, "project": "P"}))
    await store.transact(_gone_quiet(worker))
    with statements_sent() as sent:
        beat, pulled, elsewhere = await asyncio.gather(
            execute(service, {"type": "heartbeat_agent", "session_id": worker}),
            execute(service, {"type": "claim_next_work", "session_id": puller, "project": "P"}),
            execute(service, {"type": "claim_next_work", "session_id": other, "project": "R"}),
        )
    _result(beat)
    assert _result(pulled)["item"]["item_id"] == nxt  # the worker is live again: its item stays
    assert _result(elsewhere)["item"] is not None
    rows = await store.query(
        lambda conn: conn.execute(text("SELECT item_id, status, session_id FROM work_items WHERE project = 'P'")).all()
    )
    assert sorted(rows) == sorted([(held, "claimed", worker), (nxt, "claimed", puller)])
    if store.dialect == "postgresql":
        # Both read ahead; the pull of P used its read although the heartbeat was carried
        # (the worker's row is written, then read locked, before it counts as a suspect).
        # That write forgets every other read of sessions: the pull of R reads again.
        assert sum(_PULLS_AHEAD in q for q in sent) == 1, sent
        assert sum(_ONE_PULLS_PAGE in q and _PULLS_AHEAD not in q for q in sent) == 1, sent


async def test_a_puller_s_own_heartbeat_earlier_in_the_batch_is_seen_by_its_pull(store: Any) -> None:
    """A session gone quiet heartbeats, then pulls, in one batch: its session row read
    ahead (from before the heartbeat, which the batch carries) must not serve, or the pull
    would find it not live."""
    service = Service(store)
    puller, other = await _register(service, "puller"), await _register(service, "other")
    item = await _enqueue(service, "P")
    await _enqueue(service, "R")
    await store.transact(_gone_quiet(puller))
    beat, pulled, elsewhere = await asyncio.gather(
        execute(service, {"type": "heartbeat_agent", "session_id": puller}),
        execute(service, {"type": "claim_next_work", "session_id": puller, "project": "P"}),
        execute(service, {"type": "claim_next_work", "session_id": other, "project": "R"}),
    )
    _result(beat)
    assert _result(pulled)["item"]["item_id"] == item
    assert _result(elsewhere)["item"] is not None
