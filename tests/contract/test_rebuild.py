"""A rebuild from position 0 equals the live read models exactly, on both backends (docs/protocol.md#events).

Commands go through the real pipeline (``Service.execute``) on the store under test; then
every read-model table is snapshotted, ``projections.rebuild`` replays the whole log in one
transaction, and the tables must come back row for row.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from typing import Any

import pytest
from sqlalchemy import Connection, select, update

from eventcoord import projections
from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.errors import DomainError
from eventcoord.projections.tables import READ_MODEL_TABLES, sessions
from eventcoord.service import Service
from eventcoord.store import dbclock, open_store
from eventcoord.store.schema import settings

OPERATOR = Caller("default", "admin", operator=True)
HUMAN = Caller("default", "human")
AGENT = Caller("default", "agent")
TEAM_B = Caller("teamB", "admin")


class Driver:
    """Sends commands through the service and remembers what happened."""

    def __init__(self, store: Any) -> None:
        self.service = Service(store)
        self.store = store
        self.sent: dict[str, int] = {}
        self.refused: dict[str, int] = {}

    async def send(self, body: dict[str, Any], caller: Caller = OPERATOR) -> dict[str, Any] | None:
        """The command's result, or None when it was refused."""
        cmd = decode_command(json.dumps(body).encode())
        try:
            outcome = await self.service.execute(caller, cmd)
        except DomainError as e:
            self.refused[e.code] = self.refused.get(e.code, 0) + 1
            return None
        if outcome.refusal is not None:  # a denial that is also a fact (WipCapDenied, ClaimConflict)
            code = outcome.refusal.code
            self.refused[code] = self.refused.get(code, 0) + 1
            return None
        self.sent[body["type"]] = self.sent.get(body["type"], 0) + 1
        result: dict[str, Any] = outcome.result or {}
        return result

    async def register(self, caller: Caller = OPERATOR, **fields: Any) -> str:
        result = await self.send({"type": "register_agent", **fields}, caller)
        assert result is not None
        sid: str = result["session_id"]
        return sid

    async def set_ttl(self, seconds: int) -> None:
        def run(conn: Connection) -> None:
            conn.execute(update(settings).where(settings.c.key == "ttl_seconds").values(value=str(seconds)))
            dbclock.forget_ttl(conn)  # the next command decides with it, not the cached one

        await self.store.transact(run)

    async def advance_clock(self, seconds: float) -> None:
        """Move the database clock ``seconds`` forward (the test clock, on in this process)."""
        dbclock.enable_test_clock()
        await self.store.transact(lambda conn: dbclock.advance(conn, seconds))


def snapshot(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every read-model table, ordered by its primary key."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in READ_MODEL_TABLES:
        pk = list(table.primary_key.columns)
        assert pk, f"{table.name} needs a primary key to be compared"
        out[table.name] = [tuple(row) for row in conn.execute(select(table).order_by(*pk))]
    return out


async def assert_rebuild_equals_live(store: Any) -> dict[str, list[tuple[Any, ...]]]:
    live = await store.query(snapshot)
    head = await store.head()
    applied = await store.transact(projections.rebuild, retry=False)
    assert applied == head
    rebuilt = await store.query(snapshot)
    for table in READ_MODEL_TABLES:
        assert rebuilt[table.name] == live[table.name], f"read model {table.name} differs after rebuild"
    # A second rebuild changes nothing either.
    await store.transact(projections.rebuild, retry=False)
    assert await store.query(snapshot) == live
    return live


async def scripted_day(d: Driver) -> None:
    """A realistic mix of every tier's commands, including refusals, ends and staleness."""
    await d.send({"type": "configure_project", "project": "P", "wip_limit": 2})
    await d.send({"type": "configure_project", "project": "Q", "wip_limit": 1})
    await d.send({"type": "configure_project", "project": "P", "wip_limit": 3})
    a = await d.register(actor="alice", host="ws-1", working_on="P-9")
    b = await d.register(AGENT, runtime="claude-code", runtime_session_id="thread-1", host="laptop")
    c = await d.register(AGENT, process_ancestry="abc123", host="ci")
    u = await d.register(AGENT)
    h = await d.register(HUMAN, actor="hannah", kind="human")
    x = await d.register(TEAM_B, actor="xavier")

    await d.send({"type": "heartbeat_agent", "session_id": a})
    await d.send({"type": "heartbeat_agent", "session_id": b, "working_on": "P-2"})
    await d.send({"type": "heartbeat_agent", "session_id": b, "working_on": None})
    await d.send({"type": "heartbeat_agent", "session_id": c, "working_on": "P-7", "handoff_note": "halfway\n\tthere"})

    # Leases, the WIP cap, a human holder, a forced supersede, releases.
    await d.send({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})
    await d.send({"type": "claim_issue", "session_id": a, "project": "P", "issue": "P-1"})  # holder: no-op
    await d.send({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-2"}, AGENT)
    await d.send({"type": "claim_issue", "session_id": h, "project": "P", "issue": "P-3"}, HUMAN)
    await d.send({"type": "claim_issue", "session_id": c, "project": "P", "issue": "P-4"}, AGENT)  # cap
    await d.send({"type": "claim_issue", "session_id": c, "project": "P", "issue": "P-1"}, AGENT)  # held
    await d.send({"type": "claim_issue", "session_id": u, "project": "Q", "issue": "Q-1"}, AGENT)
    await d.send({"type": "claim_issue", "session_id": c, "project": "Q", "issue": "Q-2"}, AGENT)  # cap 1
    await d.send({"type": "heartbeat_agent", "session_id": b, "handoff_note": "P-2: tests written"}, AGENT)
    await d.send({"type": "claim_issue", "session_id": h, "project": "P", "issue": "P-2", "force": True}, HUMAN)
    await d.send({"type": "release_issue", "session_id": a, "issue": "P-1", "reason": "completed"})
    await d.send({"type": "claim_issue", "session_id": c, "project": "P", "issue": "P-1"}, AGENT)
    await d.send({"type": "verify_hold", "session_id": c, "issue": "P-1"}, AGENT)
    await d.send({"type": "claim_issue", "session_id": x, "project": "P", "issue": "P-1"}, TEAM_B)

    # File claims: overlap, conflicts, force, release.
    await d.send({"type": "claim_files", "session_id": a, "issue": "P-9", "paths": ["src/app/", "README.md"]})
    await d.send({"type": "claim_files", "session_id": c, "issue": "P-1", "paths": ["src/app/main.py"]}, AGENT)
    await d.send(
        {"type": "claim_files", "session_id": c, "issue": "P-1", "paths": ["docs/*.md", "./tests//x.py"]}, AGENT
    )
    await d.send(
        {"type": "claim_files", "session_id": h, "issue": "P-3", "paths": ["src/**/*.py"], "force": True}, HUMAN
    )
    await d.send({"type": "claim_files", "issue": "P-3", "paths": ["ops/"]}, HUMAN)  # no session
    await d.send({"type": "claim_files", "session_id": u, "issue": "Q-1", "paths": ["lib/"], "exclusive": False}, AGENT)
    await d.send({"type": "release_files", "session_id": c, "issue": "P-1", "paths": ["docs/*.md"]}, AGENT)
    await d.send({"type": "claim_files", "session_id": x, "issue": "P-1", "paths": ["src/"]}, TEAM_B)

    # Messages.
    await d.send({"type": "post_message", "session_id": a, "channel": "issue:P-1", "body": "ping\n\tP-1"})
    await d.send({"type": "post_message", "channel": "project:P", "body": "standup"})
    await d.send({"type": "post_message", "session_id": c, "channel": f"agent:{a}", "body": "hi"}, AGENT)

    # The work queue (its own project, so the cap of P does not starve it).
    await d.send({"type": "configure_project", "project": "W", "wip_limit": 5})
    first = await d.send(
        {"type": "enqueue_work", "project": "W", "issue": "W-1", "priority": 5, "payload": {"k": [1, 2]}}
    )
    await d.send({"type": "enqueue_work", "project": "W", "priority": 1})
    await d.send(
        {"type": "enqueue_work", "project": "W", "issue": "W-3", "blocked_by": [first["item_id"]] if first else []}
    )
    claimed = await d.send({"type": "claim_next_work", "session_id": u, "project": "W"}, AGENT)
    assert claimed is not None and claimed["item"] is not None and claimed["item"]["issue"] == "W-1"
    item = claimed["item"]
    await d.send({"type": "start_work", "session_id": u, "item_id": item["item_id"]}, AGENT)
    await d.send({"type": "finish_work", "session_id": u, "item_id": item["item_id"], "outcome": "done"}, AGENT)
    await d.send({"type": "finish_work", "session_id": u, "item_id": item["item_id"]}, AGENT)  # wrong status
    second = await d.send({"type": "claim_next_work", "session_id": c, "project": "W"}, AGENT)
    assert second is not None and second["item"] is not None
    await d.send({"type": "start_work", "session_id": c, "item_id": second["item"]["item_id"]}, AGENT)

    # Named leases.
    await d.send({"type": "acquire_lease", "session_id": a, "name": "dispatcher", "ttl_seconds": 60})
    await d.send({"type": "acquire_lease", "session_id": b, "name": "dispatcher"}, AGENT)  # held
    await d.send({"type": "renew_lease", "session_id": a, "name": "dispatcher", "ttl_seconds": 90})
    await d.send({"type": "acquire_lease", "session_id": c, "name": "janitor"}, AGENT)
    await d.send({"type": "release_lease", "session_id": c, "name": "janitor"}, AGENT)

    # End a session: it releases everything it held, with its handoff note.
    await d.send({"type": "end_agent", "session_id": b, "handoff_note": "bye: see P-2 notes"}, AGENT)
    await d.send({"type": "heartbeat_agent", "session_id": b}, AGENT)  # ended: refused
    await d.send({"type": "end_agent", "session_id": u, "handoff_note": "worker out"}, AGENT)

    # Staleness: a short TTL lets the next claims reclaim expired holders.
    await d.set_ttl(1)
    await d.advance_clock(1.2)
    fresh = await d.register(AGENT, actor="fresh")
    await d.send({"type": "claim_issue", "session_id": fresh, "project": "P", "issue": "P-1"}, AGENT)  # reclaim
    await d.send({"type": "claim_files", "session_id": fresh, "issue": "P-1", "paths": ["src/app/main.py"]}, AGENT)
    await d.send({"type": "claim_next_work", "session_id": fresh, "project": "W"}, AGENT)  # re-queues c's
    await d.send({"type": "acquire_lease", "session_id": fresh, "name": "dispatcher"}, AGENT)
    await d.send({"type": "heartbeat_agent", "session_id": a, "working_on": "P-1"})  # revives
    await d.send({"type": "verify_hold", "session_id": a, "issue": "P-1"})
    await d.send({"type": "claim_issue", "session_id": c, "project": "P", "issue": "P-3"}, AGENT)  # human held
    await d.set_ttl(120)


async def test_rebuild_after_a_scripted_day_equals_the_live_read_models(store: Any) -> None:
    d = Driver(store)
    await scripted_day(d)
    live = await assert_rebuild_equals_live(store)
    assert len(live["sessions"]) == 7
    assert d.sent["register_agent"] == 7 and d.sent["heartbeat_agent"] >= 4 and d.sent["end_agent"] == 2
    assert d.refused.get("SESSION_NOT_LIVE", 0) >= 1
    ended_at = sessions.c.keys().index("ended_us")
    assert len([row for row in live["sessions"] if row[ended_at] is not None]) == 2


async def test_rebuild_leaves_every_index_it_found(store: Any) -> None:
    # On SQLite the indexes no applier uses are dropped while it replays and built at the end.
    await scripted_day(Driver(store))

    def indexes(conn: Connection) -> set[tuple[str, str]]:
        if conn.dialect.name == "sqlite":
            sql = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        else:
            sql = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        return {(str(n), str(d)) for n, d in conn.exec_driver_sql(sql)}

    before = await store.query(indexes)
    assert {n for n, _ in before} >= projections.tables.REPLAY_FREE_INDEXES
    await store.transact(projections.rebuild, retry=False)
    assert await store.query(indexes) == before
    await assert_rebuild_equals_live(store)


async def test_service_keeps_deciding_on_rebuilt_read_models(store: Any) -> None:
    d = Driver(store)
    a = await d.register(actor="a")
    b = await d.register(actor="b")
    await d.send({"type": "end_agent", "session_id": b})
    await d.send({"type": "heartbeat_agent", "session_id": a, "working_on": "P-1"})
    await store.transact(projections.rebuild, retry=False)
    with pytest.raises(DomainError) as e:
        await d.service.execute(
            OPERATOR, decode_command(json.dumps({"type": "heartbeat_agent", "session_id": b}).encode())
        )
    assert e.value.code == "SESSION_NOT_LIVE"
    assert await d.send({"type": "heartbeat_agent", "session_id": a}) is not None
    rows = await store.query(lambda c: c.execute(select(sessions)).mappings().all())
    by_id = {r["session_id"]: r for r in rows}
    assert by_id[a]["working_on"] == "P-1" and by_id[a]["heartbeats"] == 2 and by_id[a]["ended_us"] is None
    assert by_id[b]["ended_us"] is not None


ISSUES = ["P-1", "P-2", "P-3", "Q-1", "Q-2"]
PATHS = ["src/", "src/a.py", "src/**/*.py", "docs/*.md", "README.md", "lib/x/", "*"]
CHANNELS = ["issue:P-1", "project:P", "issue:Q-1"]


async def random_day(d: Driver, rng: random.Random, steps: int) -> None:
    """Random commands over few issues, paths and sessions, so they collide often."""
    callers = [OPERATOR, HUMAN, AGENT, TEAM_B]
    known: dict[str, tuple[str, Caller]] = {}
    items: list[tuple[str, Caller]] = []
    for _ in range(steps):
        caller = rng.choice(callers)
        mine = [sid for sid, (_, c) in known.items() if c.workspace == caller.workspace]
        if not mine or rng.random() < 0.1:
            kind = "human" if caller.role in ("human", "admin") and rng.random() < 0.2 else "agent"
            sid = await d.register(caller, actor=f"actor-{rng.randrange(5)}", kind=kind)
            known[sid] = (kind, caller)
            continue
        sid = rng.choice(mine)
        issue = rng.choice(ISSUES)
        project = issue.split("-")[0]
        roll = rng.randrange(14)
        body: dict[str, Any]
        if roll == 0:
            body = {"type": "heartbeat_agent", "session_id": sid}
            if rng.random() < 0.5:
                body["working_on"] = rng.choice([None, issue])
            if rng.random() < 0.3:
                body["handoff_note"] = f"note {rng.randrange(100)}\n"
        elif roll == 1:
            body = {"type": "end_agent", "session_id": sid, "handoff_note": rng.choice([None, "done"])}
        elif roll in (2, 3):
            body = {
                "type": "claim_issue",
                "session_id": sid,
                "project": project,
                "issue": issue,
                "force": rng.random() < 0.2,
            }
        elif roll == 4:
            body = {
                "type": "release_issue",
                "session_id": sid,
                "issue": issue,
                "reason": rng.choice(["released", "completed"]),
            }
        elif roll in (5, 6):
            paths = rng.sample(PATHS, rng.randrange(1, 3))
            body = {
                "type": "claim_files",
                "session_id": sid,
                "issue": issue,
                "paths": paths,
                "force": rng.random() < 0.2,
            }
        elif roll == 7:
            body = {"type": "release_files", "session_id": sid, "issue": issue}
        elif roll == 8:
            body = {"type": "post_message", "session_id": sid, "channel": rng.choice(CHANNELS), "body": "m\x00sg"}
        elif roll == 9:
            body = {
                "type": "enqueue_work",
                "project": project,
                "issue": rng.choice([None, issue]),
                "priority": rng.randrange(3),
            }
        elif roll == 10:
            result = await d.send({"type": "claim_next_work", "session_id": sid, "project": project}, caller)
            if result and result.get("item"):
                items.append((result["item"]["item_id"], caller))
            continue
        elif roll == 11 and items:
            item_id, item_caller = rng.choice(items)
            body = rng.choice(
                [
                    {"type": "start_work", "session_id": sid, "item_id": item_id},
                    {
                        "type": "finish_work",
                        "session_id": sid,
                        "item_id": item_id,
                        "outcome": rng.choice(["done", "failed"]),
                    },
                ]
            )
            caller = item_caller
        elif roll == 12:
            body = {
                "type": rng.choice(["acquire_lease", "renew_lease", "release_lease"]),
                "session_id": sid,
                "name": "leader",
            }
        else:
            body = {"type": "configure_project", "project": project, "wip_limit": rng.randrange(0, 4)}
            caller = OPERATOR if caller.workspace == "default" else TEAM_B
        await d.send(body, caller)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_rebuild_after_random_commands_equals_the_live_read_models(store: Any, seed: int) -> None:
    d = Driver(store)
    await random_day(d, random.Random(seed), 250)
    await assert_rebuild_equals_live(store)
    assert d.sent.get("register_agent", 0) >= 1 and sum(d.sent.values()) > 50


async def test_rebuild_of_an_empty_store_is_empty(store: Any) -> None:
    live = await assert_rebuild_equals_live(store)
    assert all(rows == [] for rows in live.values())


@pytest.mark.parametrize("concurrent", ["register", "heartbeat"])
async def test_a_rebuild_while_commands_commit_still_equals_live(
    store: Any, db_url: str, concurrent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command sent during a rebuild (by another server, say) is neither lost nor refused.

    A hook pauses the rebuild just before it first reads the log, and meanwhile another
    store on the same database runs a command. On SQLite that writer waits for the
    rebuild's write lock; on PostgreSQL it runs beside the rebuild's transaction.
    """
    d = Driver(store)
    sids = [await d.register(actor=f"before-{i}") for i in range(3)]
    body = (
        {"type": "register_agent", "actor": "late"}
        if concurrent == "register"
        else {"type": "heartbeat_agent", "session_id": sids[0]}
    )
    answers: list[Any] = []

    def command_elsewhere() -> None:
        async def go() -> None:
            other = open_store(db_url)
            await other.start()
            try:
                answers.append(await Service(other).execute(OPERATOR, decode_command(json.dumps(body).encode())))
            except DomainError as e:
                answers.append(e)
            finally:
                await other.close()

        asyncio.run(go())

    elsewhere = threading.Thread(target=command_elsewhere)
    fired: list[bool] = []

    read_recorded = projections.log.read_recorded

    def pause_before_reading_the_log(conn: Connection, after: int, limit: int) -> Any:
        if not fired:
            fired.append(True)
            elsewhere.start()
            elsewhere.join(timeout=3)  # it may wait for the rebuild to commit: fine
        return read_recorded(conn, after, limit)

    def rebuild(conn: Connection) -> int:
        return projections.rebuild(conn)

    # The rebuild reads the log on the driver (no SQLAlchemy event fires): pause at its read.
    monkeypatch.setattr(projections.log, "read_recorded", pause_before_reading_the_log)
    try:
        await store.transact(rebuild, retry=False)
    finally:
        await asyncio.to_thread(elsewhere.join)
    assert fired
    [answer] = answers
    assert not isinstance(answer, DomainError), f"{answer.code}: {answer.message}"
    assert answer.status == 200
    live = await assert_rebuild_equals_live(store)
    assert len(live["sessions"]) == (4 if concurrent == "register" else 3)
