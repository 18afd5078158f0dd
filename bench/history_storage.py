"""Storage of the log: bytes per event on disk on both backends, and a fleet's growth per day.

Registers ``--sessions`` agents through the real pipeline (``Service.execute``), then sends
``--events`` heartbeats (the dominant event of a fleet) in concurrent waves, and measures
what the log grew by: on SQLite the database file after a full checkpoint, on PostgreSQL
``pg_total_relation_size('events')`` (heap, TOAST and every index, the 0004_history ones
included); then what the hash chain (``event_hashes``) adds once chained. Prints
bytes/event and the growth per day of 10,000 agents heartbeating every
30 s (28.8 million events a day).

    .venv/bin/python bench/history_storage.py --events 20000
    .venv/bin/python bench/history_storage.py --pg postgresql+asyncpg://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import uuid
from typing import Any

from eventcoord.codec import decode_command
from eventcoord.context import Caller
from eventcoord.history.chainer import Chainer
from eventcoord.service import Service
from eventcoord.store import open_store

FLEET_EVENTS_PER_DAY = 10_000 * (86_400 // 30)
OPERATOR = Caller("default", "admin", operator=True)


async def fill(url: str, sessions: int, events: int, measure: Any) -> tuple[float, float]:
    store = open_store(url)
    await store.start()
    await store.migrate()
    try:
        service = Service(store)

        async def send(body: dict[str, Any]) -> dict[str, Any]:
            out = await service.execute(OPERATOR, decode_command(json.dumps(body).encode()))
            return out.result or {}

        sids = [
            (await send({"type": "register_agent", "actor": f"agent-{i}", "host": "ci-runner-7"}))["session_id"]
            for i in range(sessions)
        ]
        before = await measure(store)
        before_head = await store.head()
        sent = 0
        while sent < events:
            wave = min(len(sids), events - sent)
            await asyncio.gather(*(send({"type": "heartbeat_agent", "session_id": s}) for s in sids[:wave]))
            sent += wave
        after = await measure(store)
        # The hash chain beside the log (event_hashes): what the chainer adds once it caught up.
        await Chainer(store).catch_up()
        chained = await measure(store)
        return (after - before) / events, (chained - after) / (before_head + events)
    finally:
        await store.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--pg", help="a PostgreSQL server URL: a scratch database is created there")
    args = ap.parse_args()
    results: dict[str, tuple[float, float]] = {}

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.db")

        async def sqlite_size(store: Any) -> int:
            await store.query(lambda c: c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").all())
            return os.path.getsize(path) + (os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0)

        results["sqlite"] = await fill(f"sqlite+aiosqlite:///{path}", args.sessions, args.events, sqlite_size)

    if args.pg:
        import asyncpg

        admin = args.pg.replace("postgresql+asyncpg://", "postgresql://")
        name = f"ec_storage_{uuid.uuid4().hex[:8]}"
        conn = await asyncpg.connect(admin)
        await conn.execute(f'CREATE DATABASE "{name}"')
        await conn.close()
        try:

            async def pg_size(store: Any) -> int:
                sql = "SELECT pg_total_relation_size('events') + pg_total_relation_size('event_hashes')"
                return int(await store.query(lambda c: c.exec_driver_sql(sql).scalar_one()))

            results["postgresql"] = await fill(
                args.pg.rsplit("/", 1)[0] + "/" + name, args.sessions, args.events, pg_size
            )
        finally:
            conn = await asyncpg.connect(admin)
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await conn.close()

    for backend, (per, chain) in results.items():
        day = per * FLEET_EVENTS_PER_DAY
        print(
            f"{backend}: {per:.0f} bytes/event (heartbeats); 10,000 agents every 30 s = {FLEET_EVENTS_PER_DAY:,} "
            f"events/day = {day / 1e9:.2f} GB/day; the hash chain adds {chain:.0f} bytes/event "
            f"({chain * FLEET_EVENTS_PER_DAY / 1e9:.2f} GB/day)"
        )


if __name__ == "__main__":
    asyncio.run(main())
