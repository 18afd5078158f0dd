"""History from the command line against real databases (docs/protocol.md#history): ``rebuild --check`` and
``--projection``, ``export`` + ``replay`` of a long mixed workload, ``archive``.

Workloads run through the real pipeline (``Service.execute``) on the backend under test;
the subcommands run as the installed ``eventcoord`` script.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sqlalchemy import update
from tests.contract.test_history import WORKSPACES, Recorder, as_json, reads
from tests.contract.test_rebuild import AGENT, HUMAN, Driver, scripted_day
from tests.helpers import run_cli

from eventcoord.errors import DomainError
from eventcoord.history import chain
from eventcoord.history.asof import History
from eventcoord.history.check import read_rows
from eventcoord.history.logreads import Filters, page
from eventcoord.projections.tables import READ_MODEL_TABLES, sessions
from eventcoord.store import log, open_store
from eventcoord.store.base import EventStore


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[EventStore]:
    store = open_store(url)
    await store.start()
    await store.migrate()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def other_db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A second empty database on the same backend (the replay target)."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/replayed.db"
        return
    from tests.conftest import _db_url_for, _pg_exec

    name = f"ec_r_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_exec(f'CREATE DATABASE "{name}"'))
    try:
        yield _db_url_for(name)
    finally:
        asyncio.run(_pg_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def busy_week(d: Driver, rounds: int = 400, seed: int = 7) -> None:
    """The scripted day, then many rounds of claims, releases, reclaims, conflicts, forces and queue traffic."""
    await scripted_day(d)
    rng = random.Random(seed)
    await d.send({"type": "configure_project", "project": "L", "wip_limit": 50})
    agents = [await d.register(AGENT, actor=f"bot-{i}") for i in range(5)]
    human = await d.register(HUMAN, actor="hugo", kind="human")
    for _ in range(rounds):
        sid = rng.choice(agents)
        issue = f"L-{rng.randrange(8)}"
        path = f"src/{rng.choice(['api', 'core', 'ui'])}/{rng.randrange(4)}.py"
        op = rng.randrange(9)
        if op == 0:
            await d.send({"type": "claim_issue", "session_id": sid, "project": "L", "issue": issue}, AGENT)
        elif op == 1:
            await d.send({"type": "release_issue", "session_id": sid, "issue": issue}, AGENT)
        elif op == 2:
            await d.send({"type": "claim_files", "session_id": sid, "issue": issue, "paths": [path]}, AGENT)
        elif op == 3:
            await d.send({"type": "release_files", "session_id": sid, "issue": issue}, AGENT)
        elif op == 4:
            await d.send(
                {"type": "claim_files", "session_id": human, "issue": issue, "paths": [path], "force": True}, HUMAN
            )
        elif op == 5:
            await d.send({"type": "enqueue_work", "project": "L", "issue": issue, "priority": rng.randrange(3)})
        elif op == 6:
            got = await d.send({"type": "claim_next_work", "session_id": sid, "project": "L"}, AGENT)
            if got and got.get("item"):
                item = got["item"]["item_id"]
                await d.send({"type": "start_work", "session_id": sid, "item_id": item}, AGENT)
                if rng.random() < 0.7:
                    await d.send({"type": "finish_work", "session_id": sid, "item_id": item, "outcome": "done"}, AGENT)
        elif op == 7:  # a person takes over, and mostly gives it back
            await d.send(
                {"type": "claim_issue", "session_id": human, "project": "L", "issue": issue, "force": True}, HUMAN
            )
            if rng.random() < 0.8:
                await d.send({"type": "release_issue", "session_id": human, "issue": issue}, HUMAN)
        else:
            await d.send({"type": "heartbeat_agent", "session_id": sid}, AGENT)


async def every_read(store: EventStore) -> dict[str, Any]:
    """Every read model row, every read of every workspace, and the log's pages."""

    def take(c: Any) -> dict[str, Any]:
        return {
            "rows": as_json(read_rows(c, READ_MODEL_TABLES)),
            "reads": {ws: {name: as_json(fn(c)) for name, fn in reads(ws).items()} for ws in WORKSPACES},
            # As /v1/events answers them: with their hashes (docs/protocol.md#the-hash-chain).
            "events": {ws: as_json(chain.with_hashes(c, log.read_wire(c, 0, 100000, ws))) for ws in WORKSPACES},
            "head": log.head(c),
        }

    return await store.query(take)


async def as_of_reads(store: EventStore, positions: list[int]) -> dict[int, Any]:
    history = History(store)
    try:
        out: dict[int, Any] = {}
        for p in positions:
            out[p] = {}
            for ws in WORKSPACES:
                for name, fn in reads(ws).items():
                    got, moment = await history.read(ws, str(p), fn)
                    out[p][f"{ws} {name}"] = (as_json(got), moment.at)
        return out
    finally:
        history.close()


def cli(*args: str) -> Any:
    done = run_cli(*args, timeout=300)
    return done


async def test_rebuild_check_finds_a_tampered_row_and_projection_rebuild_repairs_it(db_url: str) -> None:
    async with opened(db_url) as store:
        await scripted_day(Driver(store))
    ok = cli("rebuild", "--check", "--db", db_url)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().endswith(")") and "equals a rebuild" in ok.stdout

    async with opened(db_url) as store:

        def tamper(c: Any) -> None:
            c.execute(update(sessions).where(sessions.c.actor_key.like("%alice%")).values(host="tampered"))

        await store.transact(tamper)
    bad = cli("rebuild", "--check", "--db", db_url)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    rows = [json.loads(line) for line in bad.stdout.splitlines()]
    assert rows and {r["table"] for r in rows} == {"sessions"}
    assert all(r["live"]["host"] == "tampered" and r["rebuilt"]["host"] != "tampered" for r in rows)
    assert "rows differ" in bad.stderr and "Traceback" not in bad.stderr
    # Another projection's check does not see it; rebuilding just sessions repairs it.
    assert cli("rebuild", "--check", "--projection", "leases", "--db", db_url).returncode == 0
    fixed = cli("rebuild", "--projection", "sessions", "--db", db_url)
    assert fixed.returncode == 0 and "read model sessions" in fixed.stdout, fixed.stderr
    assert cli("rebuild", "--check", "--db", db_url).returncode == 0
    unknown = cli("rebuild", "--projection", "nope", "--db", db_url)
    assert unknown.returncode == 2 and "unknown projection" in unknown.stderr


async def test_export_then_replay_answers_every_read_identically(
    db_url: str, other_db_url: str, tmp_path: Path
) -> None:
    async with opened(db_url) as store:
        await busy_week(Driver(store))
        before = await every_read(store)
        positions = [*sorted(random.Random(1).sample(range(1, before["head"] + 1), 12)), before["head"]]
        then = await as_of_reads(store, positions)
    assert before["head"] > 300
    out = tmp_path / "log.jsonl"
    done = cli("export", "--db", db_url, "--out", str(out))
    assert done.returncode == 0, done.stderr
    lines = out.read_bytes().splitlines()
    assert len(lines) == before["head"]
    # The lines are exactly the /v1/events objects.
    assert [json.loads(x) for x in lines if json.loads(x)["metadata"]["workspace"] == "default"] == before["events"][
        "default"
    ]

    replayed = cli("replay", str(out), "--db", other_db_url)
    assert replayed.returncode == 0, replayed.stderr
    async with opened(other_db_url) as store:
        assert await every_read(store) == before
        assert await as_of_reads(store, positions) == then
    again = cli("replay", str(out), "--db", other_db_url)
    assert again.returncode == 1 and "not empty" in again.stderr

    # Filters and CSV.
    csv_out = tmp_path / "hb.csv"
    assert (
        cli(
            "export",
            "--db",
            db_url,
            "--format",
            "csv",
            "--type",
            "AgentHeartbeat",
            "--workspace",
            "default",
            "--out",
            str(csv_out),
        ).returncode
        == 0
    )
    rows = csv_out.read_text().splitlines()
    assert rows[0] == "position,stream,version,type,recorded_at,data,metadata,hash"
    assert len(rows) - 1 == sum(1 for e in before["events"]["default"] if e["type"] == "AgentHeartbeat")
    window = cli("export", "--db", db_url, "--after", "10", "--until-position", "20")
    assert [json.loads(x)["position"] for x in window.stdout.splitlines()] == list(range(11, 21))


async def test_archive_keeps_rebuild_and_as_of_and_replay_restores_everything(
    db_url: str, other_db_url: str, tmp_path: Path
) -> None:
    async with opened(db_url) as store:
        d = Recorder(store)
        await busy_week(d, rounds=150)
        head = await store.head()
    before = head // 2
    archive = tmp_path / "old.jsonl.gz"
    done = cli("archive", "--db", db_url, "--before", str(before), "--out", str(archive))
    assert done.returncode == 0, done.stderr
    with gzip.open(archive) as f:
        assert [json.loads(x)["position"] for x in f] == list(range(1, before))
    assert cli("archive", "--db", db_url, "--before", str(before), "--out", str(tmp_path / "x.gz")).returncode == 1

    # Rebuild and its check start from the archive's snapshot.
    assert cli("rebuild", "--check", "--db", db_url).returncode == 0
    assert cli("rebuild", "--db", db_url).returncode == 0
    assert cli("rebuild", "--check", "--db", db_url).returncode == 0

    async with opened(db_url) as store:
        history = History(store)
        try:
            for position, expected in sorted(d.seen.items()):
                for ws in WORKSPACES:
                    for name, fn in reads(ws).items():
                        if position >= before - 1:
                            got, _ = await history.read(ws, str(position), fn)
                            assert as_json(got) == expected[ws][name], (position, ws, name)
                        else:
                            with pytest.raises(DomainError) as e:
                                await history.read(ws, str(position), fn)
                            assert e.value.code == "ARCHIVED" and str(archive) in e.value.message
            with pytest.raises(DomainError) as e:  # a time before the archive's end, too
                await history.read("default", "2000-01-01T00:00:00Z", reads("default")["leases"])
            assert e.value.code == "ARCHIVED"
        finally:
            history.close()
        with pytest.raises(DomainError) as e:
            await store.query(lambda c: page(c, 0, 10, "default", Filters()))
        assert e.value.code == "ARCHIVED" and e.value.details["archive"] == str(archive)
        assert (await store.query(lambda c: page(c, before - 1, 10, "default", Filters())))[0].position >= before
        # Commands still decide after the archive; the log goes on.
        extra = Driver(store)
        sid = await extra.register(actor="late")
        await extra.send({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-77"})
        final = await every_read(store)
    assert cli("rebuild", "--check", "--db", db_url).returncode == 0

    live = tmp_path / "live.jsonl"
    assert cli("export", "--db", db_url, "--out", str(live)).returncode == 0
    restored = cli("replay", str(archive), str(live), "--db", other_db_url)
    assert restored.returncode == 0, restored.stderr
    async with opened(other_db_url) as store:
        got = await every_read(store)
    assert got["rows"] == final["rows"] and got["reads"] == final["reads"] and got["head"] == final["head"]
    assert msgspec.json.encode(got["events"]["default"][-1]) == msgspec.json.encode(final["events"]["default"][-1])
