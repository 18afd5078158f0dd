"""The tamper-evident log on real databases (docs/protocol.md#the-hash-chain).

``/v1/events`` of a real server carries hashes that the formula, recomputed here, gives;
an export replays into an empty store; every tampering of an export is refused by ``replay``
(exit 1, one line naming the position, nothing written); ``rebuild --check`` finds a
tampered stored event or hash; migration 0021 chains a store made before it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import msgspec
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import create_async_engine
from tests.contract.test_rebuild import Driver, scripted_day
from tests.e2e.test_history_cli import cli, opened, other_db_url  # noqa: F401 (a fixture)
from tests.helpers import Api, ServerProcess

from eventcoord.history import chain
from eventcoord.history.chainer import Chainer
from eventcoord.store import log
from eventcoord.store.base import migrations_path
from eventcoord.store.schema import event_hashes, events


def formula(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event with ``hash`` as the protocol says, computed here without eventcoord."""
    prev = ""
    out = []
    for o in objs:
        body = {k: v for k, v in o.items() if k != "hash"}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        prev = hashlib.sha256((prev + canonical).encode("utf-8")).hexdigest()
        out.append({**body, "hash": prev})
    return out


async def stored_chain(url: str) -> dict[int, str]:
    async with opened(url) as store:
        return await store.query(lambda c: {int(p): str(h) for p, h in c.execute(select(event_hashes))})


def _chain_children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"eventcoord.history.chain_process" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
    return found


async def test_events_carry_the_formulas_hashes_before_and_after_they_are_chained(
    api: Api, server: ServerProcess, db_url: str
) -> None:
    sid = await api.register(actor="zoë ☃", host="hôte")  # canonical JSON keeps UTF-8 as it is
    await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": "P-1"})
    await api.ok({"type": "claim_files", "session_id": sid, "issue": "P-1", "paths": ["src/é.py"]})
    await api.ok({"type": "post_message", "session_id": sid, "channel": "project:P", "body": 'a "quoted"\nline\t✓'})
    await api.ok({"type": "enqueue_work", "project": "P", "issue": "P-2", "payload": {"x": 1.5, "big": 1e16}})
    await api.ok({"type": "release_issue", "session_id": sid, "issue": "P-1"})
    head = await api.head()
    first = await api.events()
    assert [e["position"] for e in first] == list(range(1, head + 1))
    assert first == formula(first)  # every hash is the formula's, whether chained yet or not
    # The chainer stores the same links; a page then reads them from the store.
    deadline = time.monotonic() + 30
    while max(await stored_chain(db_url) or {0: ""}) < head:  # the chainer reaching the head
        assert time.monotonic() < deadline, "the chainer did not reach the head within 30 s"
        await asyncio.sleep(0.05)
    assert await api.events() == first
    stored = await stored_chain(db_url)
    assert {p: stored[p] for p in range(1, head + 1)} == {e["position"]: e["hash"] for e in first}
    # The chainer runs in a child process of the server, not on the commands' interpreter.
    assert _chain_children(server.proc.pid), "the server started no chainer process"
    # A filtered page carries the same hashes.
    grants = (await api.get("/v1/events", type="LeaseGranted"))["events"]
    assert grants == [e for e in first if e["type"] == "LeaseGranted"]


async def _day(url: str) -> None:
    async with opened(url) as store:
        await scripted_day(Driver(store))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write(path: Path, objs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs))
    return path


def _index(objs: list[dict[str, Any]], type_: str) -> int:
    return next(i for i, o in enumerate(objs) if o["type"] == type_)


async def _empty(url: str) -> bool:
    """Nothing written: no events table, or an empty one."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:

            def look(c: Any) -> bool:
                try:
                    return c.execute(select(func.count()).select_from(events)).scalar_one() == 0
                except Exception:
                    return True  # no table: not even the schema was written

            return await conn.run_sync(look)
    finally:
        await engine.dispose()


async def test_replay_refuses_every_tampering_with_one_line_and_writes_nothing(
    db_url: str,
    other_db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    await _day(db_url)
    out = tmp_path / "exported.jsonl"
    assert cli("export", "--db", db_url, "--out", str(out)).returncode == 0
    exported = _lines(out)
    assert exported == formula(exported)
    verified = cli("verify", str(out))
    assert verified.returncode == 0 and exported[-1]["hash"] in verified.stdout, verified.stderr

    g = _index(exported, "LeaseGranted")
    r = _index(exported, "LeaseReleased")

    def edited(i: int, rechain: bool, **change: Any) -> list[dict[str, Any]]:
        objs = [dict(o) for o in exported]
        for key, value in change.items():
            objs[i][key] = {**objs[i][key], **value} if isinstance(value, dict) else value
        return formula(objs) if rechain else objs

    cases = {
        "fencing token, hashes kept": (edited(g, False, data={"fencing_token": 9}), g, "chain breaks"),
        "fencing token, rechained": (edited(g, True, data={"fencing_token": 9}), g, "fencing token 9"),
        "moved workspace, hashes kept": (edited(g, False, metadata={"workspace": "teamB"}), g, "chain breaks"),
        "moved workspace, rechained": (edited(g, True, metadata={"workspace": "teamB"}), g, "'teamB'"),
        "ghost session": (edited(g, True, data={"session_id": "s-never"}), g, "never registered"),
        "release never granted": (edited(r, True, data={"issue": "P-404"}), r, "never granted"),
        "unknown type": (edited(5, True, type="AgentVanished"), 5, "unknown event type 'AgentVanished'"),
    }
    for name, (objs, i, why) in cases.items():
        bad = _write(tmp_path / f"{name.replace(' ', '_').replace(',', '')}.jsonl", objs)
        for command in (("replay", str(bad), "--db", other_db_url), ("verify", str(bad))):
            done = cli(*command)
            assert done.returncode == 1, (name, done.stdout, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in done.stderr, (name, done.stderr)
            assert f"position {exported[i]['position']}:" in lines[0] and why in lines[0], (name, lines[0])
        assert await _empty(other_db_url), name

    # An export made before events carried hashes: refused, unless said so (all else is checked).
    bare = _write(tmp_path / "bare.jsonl", [{k: v for k, v in o.items() if k != "hash"} for o in exported])
    no = cli("verify", str(bare))
    assert no.returncode == 1 and "position 1: has no hash" in no.stderr, no.stderr
    assert cli("verify", "--unchained", str(bare)).returncode == 0

    # The untouched export replays, with its chain, into the same (still empty) target.
    replayed = cli("replay", str(out), "--db", other_db_url)
    assert replayed.returncode == 0, replayed.stderr
    assert await stored_chain(other_db_url) == {o["position"]: o["hash"] for o in exported}
    again = tmp_path / "again.jsonl"
    assert cli("export", "--db", other_db_url, "--out", str(again)).returncode == 0
    assert _lines(again) == exported
    assert cli("rebuild", "--check", "--db", other_db_url).returncode == 0


async def test_rebuild_check_finds_a_tampered_stored_event_or_hash(db_url: str) -> None:
    async with opened(db_url) as store:
        await scripted_day(Driver(store))
        await Chainer(store).catch_up()
        head = await store.head()
    ok = cli("rebuild", "--check", "--db", db_url)
    assert ok.returncode == 0 and f"the hash chain holds ({head} events)" in ok.stdout, ok.stdout + ok.stderr

    async with opened(db_url) as store:
        original = await store.query(
            lambda c: c.execute(select(event_hashes.c.hash).where(event_hashes.c.position == 7)).scalar_one()
        )

        def set_hash(value: str) -> Any:
            return lambda c: c.execute(update(event_hashes).where(event_hashes.c.position == 7).values(hash=value))

        await store.write_aside(set_hash("0" * 64))
    bad = cli("rebuild", "--check", "--db", db_url)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert json.loads(bad.stdout.splitlines()[-1])["chain"]["position"] == 7
    assert "hash chain breaks at position 7" in bad.stderr and "Traceback" not in bad.stderr

    async with opened(db_url) as store:
        await store.write_aside(set_hash(original))

        def tamper_event(c: Any) -> None:
            if c.dialect.name == "postgresql":  # past the log's immutability trigger, as an intruder would be
                c.exec_driver_sql("SET LOCAL session_replication_role = replica")
            row = c.execute(select(events.c.data).where(events.c.position == 12)).scalar_one()
            c.execute(
                update(events).where(events.c.position == 12).values(data=json.dumps({**json.loads(row), "x": 1}))
            )

        await store.write_aside(tamper_event)
    worse = cli("rebuild", "--check", "--db", db_url)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    found = [json.loads(x) for x in worse.stdout.splitlines() if x.startswith('{"chain"')]
    assert found == [{"chain": {"position": 12, "reason": found[0]["chain"]["reason"]}}]
    assert "position 12" in worse.stderr


async def test_migration_chains_a_store_made_before_it(db_url: str) -> None:
    await _day(db_url)
    engine = create_async_engine(db_url)

    def alembic(c: Any, how: str, revision: str) -> None:
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", migrations_path())
        cfg.attributes["connection"] = c
        getattr(command, how)(cfg, revision)

    try:
        async with engine.begin() as conn:  # back to the store as 0020 left it, events and all
            await conn.run_sync(alembic, "downgrade", "0020_harness_beats")
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: set(c.dialect.get_table_names(c)))
            assert "event_hashes" not in names
            assert (await conn.execute(text("SELECT count(*) FROM events"))).scalar_one() > 50
        async with engine.begin() as conn:
            await conn.run_sync(alembic, "upgrade", "head")
    finally:
        await engine.dispose()
    async with opened(db_url) as store:
        page = await store.query(lambda c: chain.with_hashes(c, log.read_wire(c, 0, 100000)))
        head = await store.head()
    objs = [json.loads(msgspec.json.encode(e)) for e in page]
    stored = await stored_chain(db_url)
    assert sorted(stored) == list(range(1, head + 1))
    assert {o["position"]: o["hash"] for o in formula(objs)} == stored
