"""Who holds each queued item's issue, as the read model keeps it (0017_queue_held).

A pull never takes an item on an issue another session holds, live or stale. The read
model marks each queued item with the session that holds its issue (``work_items.held_by``:
a grant sets it on the issue's queued items, a release clears it, an item enqueued or
re-queued reads it from the lease), and the indexes a pull walks leave out the items others
hold: it reads the ready items no one holds and its own. These tests drive the real stores
through the service: random claims, releases, pulls, finishes, supersedes and recoveries
checked against the leases after every command and against a model of the pull, then a
rebuild; the rows a pull walks behind items others hold; the migration that marks a queue
that had them.
"""

from __future__ import annotations

import asyncio
import json
import random
import zlib
from typing import Any

import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.ext.asyncio import create_async_engine
from tests.contract.test_group_commit import _gone_quiet, encoded, execute
from tests.contract.test_plans import _literal
from tests.contract.test_queue_ready import at

from eventcoord import projections
from eventcoord.errors import DomainError
from eventcoord.history.scratch import Scratch
from eventcoord.projections import tables
from eventcoord.projections.queue import held_key, live_key
from eventcoord.projections.tables import work_items
from eventcoord.reads import queue as queue_reads
from eventcoord.service import Outcome, Service
from eventcoord.store.prepared import _Pg

#: Every item with who holds it in the read model and, if it is queued, who holds its
#: issue's lease (an item not queued is held by no one).
_HELD = text(
    "SELECT w.item_id, w.held_by, CASE WHEN w.status = 'queued' THEN (SELECT l.session_id FROM leases l"
    " WHERE l.workspace = w.workspace AND l.issue = w.issue AND l.released_us IS NULL) END"
    " FROM work_items w ORDER BY w.item_id"
)


async def _send(service: Service, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = await execute(service, body)
    if isinstance(answer, DomainError):  # refused without an event (not the holder, …)
        return answer.status, {"code": answer.code}
    assert isinstance(answer, Outcome), (body, answer)
    decoded: dict[str, Any] = json.loads(encoded(answer))
    return answer.status, decoded.get("result") or decoded


async def _ok(service: Service, body: dict[str, Any]) -> dict[str, Any]:
    status, result = await _send(service, body)
    assert status == 200, (body, result)
    return result


async def _held(store: Any) -> list[tuple[str, str | None, str | None]]:
    rows: list[Any] = await store.query(lambda conn: conn.execute(_HELD).all())
    return [tuple(r) for r in rows]


def _expected_pull(conn: Connection, me: str) -> str | None:
    """The model of a pull from P with no stale work to recover, no cap met, no blockers or
    paths: the first queued item in pull order on no issue, or on one that no one else holds."""
    rows = conn.execute(
        text(
            "SELECT w.item_id, (SELECT l.session_id FROM leases l WHERE l.workspace = w.workspace"
            " AND l.issue = w.issue AND l.released_us IS NULL) FROM work_items w"
            " WHERE w.project = 'P' AND w.status = 'queued' ORDER BY w.priority DESC, w.enqueued_position"
        )
    ).all()
    return next((item for item, holder in rows if holder is None or holder == me), None)


def _stale_work(conn: Connection, stale: set[str]) -> bool:
    """Whether a stale session works on an item of P (a pull would recover it first)."""
    active = conn.execute(
        text("SELECT session_id FROM work_items WHERE project = 'P' AND status IN ('claimed', 'running')")
    ).scalars()
    return any(sid in stale for sid in active)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_held_by_follows_the_leases_through_random_commands_and_a_rebuild_agrees(store: Any, seed: int) -> None:
    rnd = random.Random(seed)
    service = Service(store)
    await _ok(service, {"type": "configure_project", "project": "P", "wip_limit": 1000})
    agents = [(await _ok(service, {"type": "register_agent", "actor": f"a{i}"}))["session_id"] for i in range(3)]
    stale: set[str] = set()
    issues = [f"I-{i}" for i in range(6)]
    seen = {"held": 0, "pulls checked": 0, "pulled past held": 0, "recovered": 0, "at once": 0}

    def any_command(me: str) -> dict[str, Any]:
        """A claim, release, enqueue or pull, for a round sent at once (a batch on PostgreSQL)."""
        issue = rnd.choice(issues)
        return rnd.choice(
            [
                {"type": "claim_issue", "session_id": me, "project": "P", "issue": issue},
                {"type": "release_issue", "session_id": me, "issue": issue},
                {"type": "enqueue_work", "project": "P", "issue": rnd.choice([issue, None])},
                {"type": "claim_next_work", "session_id": me, "project": "P"},
            ]
        )

    for step in range(160):
        if step % 16 == 15:  # every live agent twice, at once: their writes share a batch
            bodies = [any_command(a) for a in agents for _ in range(2)]
            await asyncio.gather(*(_send(service, b) for b in bodies))
            seen["at once"] += len(bodies)
        me = rnd.choice(agents)
        op = rnd.choices(("enqueue", "claim", "release", "pull", "finish", "quiet"), (5, 3, 2, 4, 3, 1))[0]
        if op == "enqueue":
            issue = rnd.choice([*issues, None])
            await _ok(service, {"type": "enqueue_work", "project": "P", "priority": rnd.randrange(3), "issue": issue})
        elif op == "claim":
            await _send(service, {"type": "claim_issue", "session_id": me, "project": "P", "issue": rnd.choice(issues)})
        elif op == "release":
            await _send(service, {"type": "release_issue", "session_id": me, "issue": rnd.choice(issues)})
        elif op == "pull":
            expected = None
            checked = not await store.query(lambda conn: _stale_work(conn, stale))
            if checked:
                expected = await store.query(lambda conn, me=me: _expected_pull(conn, me))
            got = (await _ok(service, {"type": "claim_next_work", "session_id": me, "project": "P"}))["item"]
            if checked:
                assert (got and got["item_id"]) == expected, (step, got, expected)
                seen["pulls checked"] += 1
                held_ahead = [r for r in await _held(store) if r[1] is not None and r[1] != me]
                seen["pulled past held"] += bool(got and held_ahead)
            else:
                seen["recovered"] += 1
        elif op == "finish":
            working = (work_items.c.session_id == me) & work_items.c.status.in_(("claimed", "running"))
            query = select(work_items.c.item_id, work_items.c.status).where(working)
            mine = await store.query(lambda conn, query=query: conn.execute(query).all())
            if mine:
                item, status = mine[0]
                if status == "claimed":
                    await _ok(service, {"type": "start_work", "session_id": me, "item_id": item})
                outcome = rnd.choice(("done", "failed", "cancelled"))
                await _ok(service, {"type": "finish_work", "session_id": me, "item_id": item, "outcome": outcome})
        else:  # the agent goes quiet, holding what it holds; a new one takes its place
            await store.transact(_gone_quiet(me))
            stale.add(me)
            agents[agents.index(me)] = (await _ok(service, {"type": "register_agent", "actor": f"n{step}"}))[
                "session_id"
            ]
        rows = await _held(store)
        assert [(item, holder) for item, holder, _ in rows] == [(item, lease) for item, _, lease in rows], (step, op)
        seen["held"] += sum(r[1] is not None for r in rows)

    assert seen["held"] and seen["pulls checked"] >= 10 and seen["pulled past held"], seen
    # quiet holders' leases were taken over (superseded or expired) or recovered by pulls
    reasons = text("SELECT count(*) FROM leases WHERE release_reason IN ('expired', 'superseded')")
    taken_over = await store.query(lambda conn: conn.execute(reasons).scalar())
    assert seen["recovered"] or taken_over, (seen, taken_over)

    # The replay of the log marks every item exactly as the commands did.
    before = await store.query(lambda conn: conn.execute(select(work_items).order_by(work_items.c.item_id)).all())
    await store.transact(lambda conn: projections.rebuild(conn))
    after = await store.query(lambda conn: conn.execute(select(work_items).order_by(work_items.c.item_id)).all())
    assert after == before


async def _ops(store: Any, statement: Any, params: dict[str, Any]) -> int:
    """How many rows of work_items a page reads: PostgreSQL's EXPLAIN ANALYZE of it (rows each
    scan returned and removed), SQLite's virtual machine steps (no per-scan counts there)."""

    def run(conn: Connection) -> int:
        if conn.dialect.name == "postgresql":
            pg = _Pg(statement.statement("postgresql"))
            conn.exec_driver_sql(f"PREPARE page_probe AS {pg.sql}")
            args = ", ".join(_literal(a) for a in pg.args(params))
            plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE page_probe({args})").scalar()
            conn.exec_driver_sql("DEALLOCATE page_probe")
            walked, stack = 0, [(json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]]
            while stack:
                node = stack.pop()
                if node.get("Relation Name") == "work_items":
                    walked += node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                stack.extend(node.get("Plans", ()))
            return walked
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        raw = conn.connection.driver_connection
        raw.set_progress_handler(step, 1)
        try:
            conn.execute(statement.statement("sqlite"), params).all()
        finally:
            raw.set_progress_handler(None, 1)
        return steps[0]

    ops: int = await store.transact(run)
    return ops


async def test_a_pull_walks_none_of_the_items_on_issues_others_hold(store: Any) -> None:
    """The first page of a pull from a project with 200 items on issues another session holds
    ahead of the puller's own and a free one reads what it reads in a project with none of
    them. Before 0017 it walked all 200, the database passing each after a probe of its
    issue's lease."""
    service = Service(store)
    other, me = [(await _ok(service, {"type": "register_agent", "actor": a}))["session_id"] for a in ("other", "me")]
    for project in ("P", "Q"):
        await _ok(service, {"type": "configure_project", "project": project, "wip_limit": 1000})
        await _ok(service, {"type": "claim_issue", "session_id": me, "project": project, "issue": f"{project}-mine"})
    for i in range(200):  # P only: items on issues the other holds, ahead of everything
        await _ok(service, {"type": "claim_issue", "session_id": other, "project": "P", "issue": f"H-{i}"})
        await _ok(service, {"type": "enqueue_work", "project": "P", "issue": f"H-{i}", "priority": 2})
    for project in ("P", "Q"):
        await _ok(service, {"type": "enqueue_work", "project": project, "issue": f"{project}-mine", "priority": 1})
        await _ok(service, {"type": "enqueue_work", "project": project})

    def page(project: str) -> dict[str, Any]:
        ws = "default"
        return {"ws": ws, "project": project, "key": live_key(ws, project, "queued"), "me": me, "page": 4}

    params = {p: {**page(p), "mine": held_key("default", p, me)} for p in ("P", "Q")}
    behind, alone = [await _ops(store, queue_reads._FIRST_PAGE, params[p]) for p in ("P", "Q")]
    # (SQLite's steps may differ by a level of the index; PostgreSQL's counts are rows: the
    # two it returns, no more, where a walk of every queued item read 205 in both projects)
    assert behind - alone <= 20, (behind, alone)
    if store.dialect == "postgresql":
        assert behind == alone == 2, (behind, alone)
    # and the pull takes the caller's own item, then the free one
    for _ in range(2):
        got = (await _ok(service, {"type": "claim_next_work", "session_id": me, "project": "P"}))["item"]
        assert got["issue"] in ("P-mine", None), got


async def test_the_migration_marks_the_queued_items_of_held_issues(db_url: str) -> None:
    """0017 sets ``held_by`` on the queued items whose issue has an unreleased lease."""
    engine = create_async_engine(db_url)

    items = [
        ("q-held", "queued", "H"),
        ("q-held-2", "queued", "H"),
        ("q-released", "queued", "R"),
        ("q-none", "queued", None),
        ("claimed-held", "claimed", "H"),
        ("q-elsewhere", "queued", "E"),  # the lease on E is in another workspace
    ]
    leases = [
        (1, "default", "H", "s-1", None),
        (2, "default", "R", "s-2", 5),
        (3, "other", "E", "s-3", None),
    ]
    try:
        async with engine.begin() as conn:
            await conn.run_sync(at("head"))  # SQLite starts empty; PostgreSQL's copy is at head
            await conn.run_sync(at("0016_queue_ready", down=True))
            await conn.execute(
                text(
                    "INSERT INTO work_items (item_id, workspace, project, issue, priority, blocked_by, paths, status,"
                    " enqueued_position, enqueued_us, updated_us, attempts)"
                    " VALUES (:item, 'default', 'P', :issue, 0, '[]', '[]', :status, :n, 1, 1, 0)"
                ),
                [{"item": i, "status": s, "issue": issue, "n": n} for n, (i, s, issue) in enumerate(items)],
            )
            await conn.execute(
                text(
                    "INSERT INTO leases (lease_id, workspace, issue, project, session_id, actor_key, fencing_token,"
                    " granted_us, released_us) VALUES (:id, :ws, :issue, 'P', :sid, 'a', 1, 1, :released)"
                ),
                [{"id": i, "ws": ws, "issue": iss, "sid": sid, "released": rel} for i, ws, iss, sid, rel in leases],
            )
            await conn.run_sync(at("head"))
            held = dict((await conn.execute(text("SELECT item_id, held_by FROM work_items"))).all())
            await conn.run_sync(at("0016_queue_ready", down=True))  # and back down, then up again
            await conn.run_sync(at("head"))
            again = dict((await conn.execute(text("SELECT item_id, held_by FROM work_items"))).all())
    finally:
        await engine.dispose()
    expected = {"q-held": "s-1", "q-held-2": "s-1", "q-released": None, "q-none": None}
    assert held == {**expected, "claimed-held": None, "q-elsewhere": None}
    assert again == held


async def test_read_models_restored_from_a_snapshot_without_marks_get_them_from_the_leases(store: Any) -> None:
    """A snapshot written before 0017 has no ``held_by``: rows restored from it (a rebuild
    after an archive, a history scratch) are marked from the restored leases."""
    service = Service(store)
    other = (await _ok(service, {"type": "register_agent", "actor": "other"}))["session_id"]
    await _ok(service, {"type": "claim_issue", "session_id": other, "project": "P", "issue": "H"})
    held = (await _ok(service, {"type": "enqueue_work", "project": "P", "issue": "H"}))["item_id"]
    free = (await _ok(service, {"type": "enqueue_work", "project": "P", "issue": "F"}))["item_id"]
    marks = {held: other, free: None}

    def rows_of(conn: Connection, table: Any) -> list[list[Any]]:
        return [list(r) for r in conn.execute(select(table))]

    old = await store.query(lambda conn: {t.name: rows_of(conn, t) for t in (work_items, tables.leases)})
    at_held = [c.name for c in work_items.columns].index("held_by")
    assert {r[0]: r[at_held] for r in old["work_items"]} == marks
    for row in old["work_items"]:  # as a snapshot written before the column loads
        row[at_held] = None
    head = await store.head()
    await store.transact(lambda conn: projections.rebuild(conn, base_position=head, base_rows=old))
    query = select(work_items.c.item_id, work_items.c.held_by)
    assert dict(await store.query(lambda conn: conn.execute(query).all())) == marks

    # A scratch loads the snapshot's chunks, each without the column.
    scratch = Scratch(head, None, 3600, None, [work_items.name])
    try:
        chunks = {
            "work_items": [zlib.compress(json.dumps([r[:at_held] for r in old["work_items"]]).encode())],
            "leases": [zlib.compress(json.dumps(old["leases"]).encode())],
        }
        scratch.load(chunks)
        with scratch.engine.connect() as conn:
            assert dict(conn.execute(query).all()) == marks
    finally:
        scratch.close()
